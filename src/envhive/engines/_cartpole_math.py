"""CartPole's physics, written once: gymnasium's ``CartPoleEnv`` constants and Euler step, as
plain arithmetic that works on floats and on tensors alike.

The numba kernel (``kernels/classic/_cartpole.py``) compiles :func:`euler_step` with
``numba.njit`` for one env; the torch batched env (``envs/torch/_cartpole.py``) calls it on
whole tensors. Both keep gymnasium's order of operations, which is what makes their numbers
gymnasium's. No numba or torch here: each caller brings its own ``cos``/``sin``.

Examples:
    >>> import math
    >>> x, x_dot, theta, theta_dot = euler_step(0.0, 0.0, 0.01, 0.0, FORCE_MAG, math.cos(0.01), math.sin(0.01))
    >>> round(theta_dot, 6)
    -0.289511
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["euler_step", "GRAVITY", "MASSCART", "MASSPOLE", "TOTAL_MASS", "LENGTH",
           "POLEMASS_LENGTH", "FORCE_MAG", "TAU", "THETA_THRESHOLD", "X_THRESHOLD"]

GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSPOLE + MASSCART
LENGTH = 0.5  # half the pole's length
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4


def euler_step(x: Any, x_dot: Any, theta: Any, theta_dot: Any, force: Any, costheta: Any,
               sintheta: Any) -> tuple[Any, Any, Any, Any]:
    """One Euler step (gymnasium's default integrator); ``costheta``/``sintheta`` of ``theta``."""
    temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / TOTAL_MASS)
    )
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    x = x + TAU * x_dot
    x_dot = x_dot + TAU * xacc
    theta = theta + TAU * theta_dot
    theta_dot = theta_dot + TAU * thetaacc
    return x, x_dot, theta, theta_dot
