"""Run EnvPool's own tests with ``import envpool`` resolving to ``envhive.envpool``.

Collected only with ``ENVHIVE_ENVPOOL_SUITE=envhive`` (``.ci/run``); ``ENVHIVE_ENVPOOL_SUITE=real``
runs them on EnvPool itself instead: that is how the lists below were made (README.md). Every test here that passes on EnvPool 1.2.5 on this machine passes on
envhive, except:

* ``INTERNALS``: tests of EnvPool's C++ internals (skipped on both).
* ``NOT_HERE``: tests that fail on EnvPool 1.2.5 itself on this machine (skipped on both, with
  EnvPool's own reason); re-check with ``ENVHIVE_ENVPOOL_SUITE=real`` on another machine.
* ``REFUSED``: tests that send what envhive refuses on purpose (an action outside the action
  space): ``xfail(strict=True)``, so a change of either side is noticed.

Families EnvPool itself cannot make here (Procgen without the system's Qt 5) are skipped with
EnvPool's own import error, on both.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

MODE = os.environ.get("ENVHIVE_ENVPOOL_SUITE", "")
REAL = MODE == "real"

if MODE not in ("real", "envhive") or importlib.util.find_spec("envpool") is None:
    # Minutes of work (README.md): run by .ci/run, not by the default suite; and it compares
    # with EnvPool's own behaviour, so it needs envpool.
    collect_ignore_glob = ["*_test.py", "*_utils.py"]
elif not REAL:
    import envhive.envpool

    envhive.envpool.install()

REFUSED = {
    "api_test.py::_GymSyncTest::test_lowlevel_step":
        "sends random actions 0..5 to Breakout-v5, whose action space is Discrete(4): EnvPool 1.2.5 "
        "takes them unchecked, envhive refuses an action outside the space (ActionError)",
}
INTERNALS = {
    "atari_envpool_test.py::_AtariEnvPoolTest::test_raw_envpool":
        "drives EnvPool's C++ class _AtariEnvPool directly",
}
NOT_HERE = {
    "api_test.py::_SpecTest::test_invalid_batch_size":
        "EnvPool 1.2.5's AtariEnvSpec aborts the process on batch_size > num_envs here",
    "make_test.py::_MakeTest::test_render_smoke":
        "EnvPool 1.2.5 crashes rendering MuJoCo (Ant-v5) here: no OpenGL context",
    "mujoco_render_test.py": "EnvPool 1.2.5 crashes rendering MuJoCo here: no OpenGL context",
    "mujoco_gym_align_test.py": "EnvPool 1.2.5's wheel reports no qpos0/qvel0 infos (KeyError: 'qpos0')",
    "mujoco_gym_pixel_observation_test.py::MujocoGymPixelObservationTest::test_all_gym_tasks_align_with_render_for_three_steps":
        "EnvPool 1.2.5 crashes rendering MuJoCo here: no OpenGL context",
    "mujoco_gym_pixel_observation_test.py::MujocoGymPixelObservationTest::test_frame_stack_rolls_in_channel_dimension":
        "EnvPool 1.2.5 crashes rendering MuJoCo here: no OpenGL context",
    "mujoco_gym_pixel_observation_test.py::MujocoGymPixelObservationTest::test_pixel_envs_preserve_task_info_fields":
        "EnvPool 1.2.5 crashes rendering MuJoCo here: no OpenGL context",
}


def _procgen_error() -> str | None:
    """EnvPool's own error when it cannot run Procgen here (no Qt 5), else ``None``."""
    from envhive.envs.envpool._real import envpool_module, real_envpool

    envpool_module()
    with real_envpool():
        try:
            importlib.import_module("envpool.procgen.procgen_envpool")
        except ImportError as err:
            return f"EnvPool cannot run Procgen here: {err}"
    return None


def pytest_collection_modifyitems(config, items):
    procgen: list[str | None] = []
    for item in items:
        key = f"{item.path.name}::{item.nodeid.split('::', 1)[1]}" if "::" in item.nodeid else item.path.name
        for table, mark in ((INTERNALS, pytest.mark.skip), (NOT_HERE, pytest.mark.skip)):
            why = table.get(key) or table.get(item.path.name)
            if why:
                item.add_marker(mark(reason=why))
        if not REAL and key in REFUSED:
            item.add_marker(pytest.mark.xfail(reason=REFUSED[key], strict=True))
        if item.name == "test_make_procgen":
            if not procgen:
                procgen.append(_procgen_error())
            if procgen[0]:
                item.add_marker(pytest.mark.skip(reason=procgen[0]))
