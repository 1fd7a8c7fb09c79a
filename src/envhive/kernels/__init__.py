"""Batched native kernels: envs whose state lives in arrays, stepped by numba-compiled code.

Use them through their ids (``envhive.make("envhive/CartPole-v1", num_envs=64)``), which run on
the ``native`` executor by default. The classes are exported for introspection and for writing
new kernel families (see ``docs/architecture.md``, "Kernels").

Examples:
    >>> from envhive.kernels import CartPoleKernel
    >>> CartPoleKernel.gym_id
    'CartPole-v1'
"""

from envhive.kernels._adapter import KernelEnv, KernelFactory
from envhive.kernels._engine import KernelEngine
from envhive.kernels._kernel import STOCK, Kernel, build_driver
from envhive.kernels.classic._acrobot import AcrobotKernel
from envhive.kernels.classic._cartpole import CartPoleKernel
from envhive.kernels.classic._mountain_car import MountainCarContinuousKernel, MountainCarKernel
from envhive.kernels.classic._pendulum import PendulumKernel

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
