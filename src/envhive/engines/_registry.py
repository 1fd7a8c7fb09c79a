"""The one registry of compiled ids: every env envhive steps in compiled code, and its engine.

Adding a compiled env means adding one entry to :data:`_COMPILED` (after writing its kernel
class or MuJoCo family): ``envhive.make``, ``envhive.list_envs``, gymnasium's registration,
``executor="auto"`` and the native MuJoCo engine's family lookup all read it from here.
Entries name their classes as ``"module:attr"`` strings, imported on first use: kernels need
numba, which is slow to import, and most programs use a few ids.

Two engines:

* ``"kernel"``: a classic-control :class:`~envhive.kernels.Kernel` subclass (the whole batch
  in arrays), driven by ``KernelEngine``; on other executors each env is a ``KernelEnv``;
* ``"mujoco"``: an envhive MuJoCo env class and its compiled *family* (the env's step in
  numba), driven by ``MujocoEngine``; on other executors the env class runs as it is.

Examples:
    >>> compiled_env("envhive/Ant-v5").family
    'envhive.envs.mujoco._families:AntFamily'
    >>> "envhive/CartPole-v1" in compiled_ids("kernel")
    True
    >>> compiled_env("CartPole-v1") is None
    True
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["CompiledEnv", "compiled_ids", "compiled_env", "family_of", "load_entry_point"]

EngineKind = Literal["kernel", "mujoco", "torch"]


@dataclass(frozen=True)
class CompiledEnv:
    """One compiled id.

    Attributes:
        id: the id given to ``envhive.make`` (``"envhive/CartPole-v1"``).
        engine: ``"kernel"`` or ``"mujoco"`` (see the module docstring).
        entry_point: ``"module:attr"`` of the kernel class (``"kernel"``) or of the env class
            (``"mujoco"``).
        family: ``"module:attr"`` of the MuJoCo family (``"mujoco"`` only).

    Examples:
        >>> CompiledEnv("envhive/X-v0", "kernel", "pkg.mod:XKernel").family is None
        True
    """

    id: str
    engine: EngineKind
    entry_point: str
    family: str | None = None


def _kernel(id: str, entry_point: str) -> CompiledEnv:
    return CompiledEnv(f"envhive/{id}", "kernel", f"envhive.kernels.classic.{entry_point}")


def _mujoco(id: str, env_cls: str, family: str) -> CompiledEnv:
    return CompiledEnv(
        f"envhive/{id}", "mujoco", f"envhive.envs.mujoco:{env_cls}", f"envhive.envs.mujoco.{family}"
    )


_COMPILED: dict[str, CompiledEnv] = {
    e.id: e
    for e in (
        _kernel("CartPole-v1", "_cartpole:CartPoleKernel"),
        _kernel("Pendulum-v1", "_pendulum:PendulumKernel"),
        _kernel("MountainCar-v0", "_mountain_car:MountainCarKernel"),
        _kernel("MountainCarContinuous-v0", "_mountain_car:MountainCarContinuousKernel"),
        _kernel("Acrobot-v1", "_acrobot:AcrobotKernel"),
        CompiledEnv("envhive/TorchCartPole-v1", "torch", "envhive.envs.torch:TorchCartPole"),
        CompiledEnv("envhive/TorchPendulum-v1", "torch", "envhive.envs.torch:TorchPendulum"),
        _mujoco("Ant-v5", "AntEnv", "_families:AntFamily"),
        _mujoco("HalfCheetah-v5", "HalfCheetahEnv", "_families:HalfCheetahFamily"),
        _mujoco("Hopper-v5", "HopperEnv", "_families:HopperFamily"),
        _mujoco("Swimmer-v5", "SwimmerEnv", "_families:SwimmerFamily"),
        _mujoco("Walker2d-v5", "Walker2dEnv", "_families:Walker2dFamily"),
        _mujoco("InvertedPendulum-v5", "InvertedPendulumEnv", "_families_small:InvertedPendulumFamily"),
        _mujoco(
            "InvertedDoublePendulum-v5", "InvertedDoublePendulumEnv",
            "_families_small:InvertedDoublePendulumFamily",
        ),
        _mujoco("Reacher-v5", "ReacherEnv", "_families_small:ReacherFamily"),
    )
}


def compiled_ids(engine: EngineKind | None = None) -> list[str]:
    """The compiled ids (of one engine kind, or all), sorted.

    Examples:
        >>> compiled_ids("mujoco")[:2]
        ['envhive/Ant-v5', 'envhive/HalfCheetah-v5']
    """
    return sorted(i for i, e in _COMPILED.items() if engine is None or e.engine == engine)


def compiled_env(env_id: str) -> CompiledEnv | None:
    """The registration of ``env_id``, or ``None`` if envhive does not compile it.

    Examples:
        >>> compiled_env("envhive/CartPole-v1").entry_point
        'envhive.kernels.classic._cartpole:CartPoleKernel'
    """
    return _COMPILED.get(env_id)


def load_entry_point(entry_point: str) -> Any:
    """Import ``"module:attr"`` and return the attribute.

    Examples:
        >>> load_entry_point("envhive.engines._registry:CompiledEnv") is CompiledEnv
        True
    """
    module, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module), attr)


_FAMILIES: dict[Any, Any] = {}


def family_of(env_cls: Any) -> Any | None:
    """The compiled MuJoCo family registered for exactly ``env_cls``, or ``None``.

    Examples:
        >>> from envhive.envs.mujoco import HalfCheetahEnv, HumanoidEnv
        >>> family_of(HalfCheetahEnv).__name__, family_of(HumanoidEnv)
        ('HalfCheetahFamily', None)
    """
    if not _FAMILIES:
        for e in _COMPILED.values():
            if e.engine == "mujoco" and e.family is not None:
                _FAMILIES[load_entry_point(e.entry_point)] = e.family
    family = _FAMILIES.get(env_cls)
    return None if family is None else load_entry_point(family)
