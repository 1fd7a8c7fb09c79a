"""``render_mode="rgb_array"`` gives gymnasium's pixels, and gymnasium's env checker passes.

Rendering needs an OpenGL backend chosen before ``mujoco`` is imported, so the render
comparison runs in a subprocess with ``MUJOCO_GL=egl`` (or the ``MUJOCO_GL`` already set) and
is skipped when no backend works there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

mujoco = pytest.importorskip("mujoco")
if not hasattr(mujoco, "MjModel"):  # tests/mujoco itself, seen as a namespace package
    pytest.skip("mujoco is not installed", allow_module_level=True)

from gymnasium.utils.env_checker import check_env  # noqa: E402

from envhive.envs.mujoco import ENV_CLASSES  # noqa: E402

pytestmark = pytest.mark.timeout(300)

SCRIPT = textwrap.dedent(
    """
    import sys, warnings
    import numpy as np
    import gymnasium as gym
    warnings.simplefilter("ignore")
    try:
        import mujoco
        mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8).close()
    except Exception as e:
        print("NOGL", type(e).__name__, e)
        sys.exit(0)
    from envhive.envs.mujoco import ENV_CLASSES
    cases = [
        ("Ant-v5", {}),
        ("Hopper-v5", {}),
        ("Hopper-v5", {"camera_name": "track"}),
        ("Humanoid-v5", {"camera_id": 0}),
        ("Reacher-v5", {"width": 40, "height": 24}),
        ("InvertedDoublePendulum-v5", {}),
    ]
    for env_id, kwargs in cases:
        kwargs = {"width": 64, "height": 48, **kwargs}
        ours = ENV_CLASSES[env_id](render_mode="rgb_array", **kwargs)
        theirs = gym.make(env_id, render_mode="rgb_array", **kwargs).unwrapped
        ours.reset(seed=0)
        theirs.reset(seed=0)
        action = np.full(ours.action_space.shape, 0.3, np.float32)
        for i in range(3):
            ours.step(action)
            theirs.step(action)
            a, b = ours.render(), theirs.render()
            assert a.dtype == np.uint8 and a.shape == (kwargs["height"], kwargs["width"], 3), a.shape
            assert np.array_equal(a, b), (env_id, kwargs, i, np.abs(a.astype(int) - b).mean())
            assert a.std() > 0, (env_id, "blank image")
        ours.close()
        theirs.close()
    print("OK")
    """
)


def test_rgb_array_matches_gymnasium_pixels():
    env = dict(os.environ)
    env.setdefault("MUJOCO_GL", "egl")
    env["PYOPENGL_PLATFORM"] = env["MUJOCO_GL"] if env["MUJOCO_GL"] in ("egl", "osmesa") else ""
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    out = result.stdout.strip().splitlines()
    if out and out[-1].startswith("NOGL"):
        pytest.skip(f"no OpenGL backend for MUJOCO_GL={env['MUJOCO_GL']}: {out[-1]}")
    assert result.returncode == 0 and out and out[-1] == "OK", result.stdout + result.stderr


@pytest.mark.parametrize("env_id", sorted(ENV_CLASSES))
def test_gymnasium_env_checker(env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the same space warnings gymnasium's own envs get
        check_env(ENV_CLASSES[env_id](), skip_render_check=True)
