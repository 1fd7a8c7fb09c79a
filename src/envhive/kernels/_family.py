"""The ``"kernel"`` engine kind: envhive's classic-control kernels, registered on import.

The engine registry (``envhive.engines``) imports this module on its first lookup. It names
its code as ``"module:attr"`` strings, so importing it imports no numba.

Examples:
    >>> from envhive.engines import compiled_env
    >>> compiled_env("envhive/Acrobot-v1").entry_point
    'envhive.kernels.classic._acrobot:AcrobotKernel'
"""

from __future__ import annotations

from envhive.engines import CompiledEnv, EngineKind, register_kind

__all__: list[str] = []

_IDS = (
    ("CartPole-v1", "_cartpole:CartPoleKernel"),
    ("Pendulum-v1", "_pendulum:PendulumKernel"),
    ("MountainCar-v0", "_mountain_car:MountainCarKernel"),
    ("MountainCarContinuous-v0", "_mountain_car:MountainCarContinuousKernel"),
    ("Acrobot-v1", "_acrobot:AcrobotKernel"),
)

register_kind(
    EngineKind("kernel", "envhive.kernels._adapter:kernel_factory", "numba",
               peers="envhive.kernels._adapter:bench_peers"),
    [CompiledEnv(f"envhive/{id}", "kernel", f"envhive.kernels.classic.{entry}") for id, entry in _IDS],
)
