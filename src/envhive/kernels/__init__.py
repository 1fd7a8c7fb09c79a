"""Batched native kernels: envs whose state lives in arrays, stepped by numba-compiled code.

Use them through their ids (``envhive.make("envhive/CartPole-v1", num_envs=64)``), which run on
the ``native`` executor by default. The classes are exported for introspection and for writing
new kernel families (see ``docs/architecture.md``, "Kernels"). This family owns its engine
(``_engine.py``), factory (``_adapter.py``) and registration (``_family.py``, the ``"kernel"``
engine kind); its names are imported on first use, so importing the package imports no numba.

Examples:
    >>> from envhive.kernels import CartPoleKernel
    >>> CartPoleKernel.gym_id
    'CartPole-v1'
"""

from typing import TYPE_CHECKING

from envhive._extras import lazy_exports

if TYPE_CHECKING:
    from envhive.kernels._adapter import KernelEnv, KernelFactory
    from envhive.kernels._engine import KernelEngine
    from envhive.kernels._kernel import STOCK, Kernel, build_driver
    from envhive.kernels.classic import (
        AcrobotKernel,
        CartPoleKernel,
        MountainCarContinuousKernel,
        MountainCarKernel,
        PendulumKernel,
    )

__all__ = [
    "Kernel",
    "KernelEnv",
    "KernelFactory",
    "KernelEngine",
    "STOCK",
    "build_driver",
    "CartPoleKernel",
    "PendulumKernel",
    "MountainCarKernel",
    "MountainCarContinuousKernel",
    "AcrobotKernel",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Kernel": "envhive.kernels._kernel:Kernel",
    "STOCK": "envhive.kernels._kernel:STOCK",
    "build_driver": "envhive.kernels._kernel:build_driver",
    "KernelEnv": "envhive.kernels._adapter:KernelEnv",
    "KernelFactory": "envhive.kernels._adapter:KernelFactory",
    "KernelEngine": "envhive.kernels._engine:KernelEngine",
    **{name: f"envhive.kernels.classic:{name}" for name in __all__[6:]},  # the classic kernels
})
