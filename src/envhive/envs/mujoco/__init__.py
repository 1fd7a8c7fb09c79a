"""Fast MuJoCo locomotion envs, step-for-step identical to gymnasium's v5 envs.

Each class is a ``gymnasium.Env`` written on the ``mujoco`` package directly (not on
gymnasium's ``MujocoEnv``): same XML asset (loaded from gymnasium's assets directory), same
constructor arguments and defaults, same spaces, and bit-identical observations, rewards,
terminations and infos for the same actions, and the same reset state for the same
``reset(seed=...)``. The differences:

* much less Python per step (cached ``MjData`` views, a preallocated observation buffer, no
  numpy wrapper functions), which matters when many envs share one interpreter;
* the time limit of gymnasium's registration is built in (``max_episode_steps``, ``None``
  disables it), so no ``TimeLimit``/``OrderEnforcing``/``PassiveEnvChecker`` wrappers are
  needed. Stepping before the first reset is not detected;
* rendering: ``render_mode=None`` or ``"rgb_array"`` only (``mujoco.Renderer``, needs an
  OpenGL backend such as ``MUJOCO_GL=egl``); the envs are not ``EzPickle``.

``ENV_CLASSES`` maps gymnasium ids to classes and ``MAX_EPISODE_STEPS`` gives each id's
default time limit. The family owns its native engine (``_native.py``), factory
(``_factory.py``), registration (``_family.py``, the ``"mujoco"`` engine kind) and the one
loader of ``libmujoco`` (``_libmujoco.py``).

Examples:
    >>> from envhive.envs.mujoco import ENV_CLASSES, MAX_EPISODE_STEPS
    >>> env = ENV_CLASSES["Ant-v5"]()
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, obs.dtype, env.action_space.dtype
    ((105,), dtype('float64'), dtype('float32'))
    >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    >>> sorted(MAX_EPISODE_STEPS.items())[-1]
    ('Walker2d-v5', 1000)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envhive._extras import lazy_exports

if TYPE_CHECKING:
    from envhive.envs.mujoco._ant import AntEnv
    from envhive.envs.mujoco._base import MujocoEnv
    from envhive.envs.mujoco._humanoid import HumanoidEnv
    from envhive.envs.mujoco._pendulum import InvertedDoublePendulumEnv, InvertedPendulumEnv
    from envhive.envs.mujoco._planar import HalfCheetahEnv, HopperEnv, SwimmerEnv, Walker2dEnv
    from envhive.envs.mujoco._reacher import ReacherEnv

    #: gymnasium id -> class.
    ENV_CLASSES: dict[str, type[MujocoEnv]]

__all__ = [
    "AntEnv",
    "ENV_CLASSES",
    "HalfCheetahEnv",
    "HopperEnv",
    "HumanoidEnv",
    "InvertedDoublePendulumEnv",
    "InvertedPendulumEnv",
    "MAX_EPISODE_STEPS",
    "MujocoEnv",
    "ReacherEnv",
    "SwimmerEnv",
    "Walker2dEnv",
]

#: Where each class lives: imported on first use, so importing this package imports no mujoco
#: (the engine registry imports its ``_family`` module at every start).
_MODULES = {
    "AntEnv": "_ant", "MujocoEnv": "_base", "HumanoidEnv": "_humanoid",
    "InvertedDoublePendulumEnv": "_pendulum", "InvertedPendulumEnv": "_pendulum",
    "HalfCheetahEnv": "_planar", "HopperEnv": "_planar", "SwimmerEnv": "_planar",
    "Walker2dEnv": "_planar", "ReacherEnv": "_reacher",
}
_class, __dir__ = lazy_exports(__name__, {c: f"{__name__}.{m}:{c}" for c, m in _MODULES.items()})


def __getattr__(name: str) -> Any:
    if name != "ENV_CLASSES":
        return _class(name)
    classes = {f"{cls[:-3]}-v5": _class(cls) for cls in sorted(_MODULES) if cls != "MujocoEnv"}
    globals()["ENV_CLASSES"] = classes
    return classes


# gymnasium's registration (gymnasium/envs/__init__.py); each class also defaults to it.
MAX_EPISODE_STEPS: dict[str, int] = {
    "Ant-v5": 1000,
    "HalfCheetah-v5": 1000,
    "Hopper-v5": 1000,
    "Humanoid-v5": 1000,
    "InvertedDoublePendulum-v5": 1000,
    "InvertedPendulum-v5": 1000,
    "Reacher-v5": 50,
    "Swimmer-v5": 1000,
    "Walker2d-v5": 1000,
}
