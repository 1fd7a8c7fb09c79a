"""Classic-control kernels: gymnasium's CartPole, Pendulum, MountainCar(Continuous), Acrobot.

Examples:
    >>> from envhive.kernels.classic import CartPoleKernel
    >>> CartPoleKernel.id
    'envhive/CartPole-v1'
    >>> from envhive.kernels.classic import AcrobotKernel, PendulumKernel
    >>> PendulumKernel.gym_id, AcrobotKernel.default_max_episode_steps
    ('Pendulum-v1', 500)
"""

from envhive.kernels.classic._acrobot import AcrobotKernel
from envhive.kernels.classic._cartpole import CartPoleKernel
from envhive.kernels.classic._mountain_car import MountainCarContinuousKernel, MountainCarKernel
from envhive.kernels.classic._pendulum import PendulumKernel

__all__ = [
    "CartPoleKernel",
    "PendulumKernel",
    "MountainCarKernel",
    "MountainCarContinuousKernel",
    "AcrobotKernel",
]
