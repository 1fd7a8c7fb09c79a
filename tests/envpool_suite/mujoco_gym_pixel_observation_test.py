# Copyright 2026 Garena Online Private Limited
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""Tests for native Gym MuJoCo pixel observations."""

from absl.testing import absltest

from envpool.python.glfw_context import preload_windows_gl_dlls

preload_windows_gl_dlls(strict=True)

import envpool.mujoco.gym.registration  # noqa: F401
from envpool_suite.pixel_observation_test_utils import (
    assert_frame_stack_rolls_in_channel_dimension,
    assert_make_spec_exposes_bchw_pixel_specs,
    assert_pixel_env_preserves_gym_info_fields,
    assert_tasks_align_with_render_for_three_steps,
)

_IMPORT_PATH = "envpool.mujoco.gym"


class MujocoGymPixelObservationTest(absltest.TestCase):
    """Pixel-observation tests for Gym MuJoCo tasks."""

    def test_make_spec_exposes_bchw_pixel_specs(self) -> None:
        """`make_spec` should expose channel-first pixel observations."""
        assert_make_spec_exposes_bchw_pixel_specs(self, _IMPORT_PATH)

    def test_frame_stack_rolls_in_channel_dimension(self) -> None:
        """Frame stacking should shift along the channel dimension."""
        assert_frame_stack_rolls_in_channel_dimension(self, _IMPORT_PATH)

    def test_pixel_envs_preserve_task_info_fields(self) -> None:
        """Pixel Gym envs should keep task-specific info specs and values."""
        assert_pixel_env_preserves_gym_info_fields(self)

    def test_all_gym_tasks_align_with_render_for_three_steps(self) -> None:
        """All Gym MuJoCo tasks should match `render()` for reset + 3 steps."""
        assert_tasks_align_with_render_for_three_steps(self, _IMPORT_PATH)


if __name__ == "__main__":
    absltest.main()
