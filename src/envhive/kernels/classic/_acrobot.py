"""Acrobot-v1 as a kernel: gymnasium's ``AcrobotEnv`` dynamics (RK4 step), compiled and batched.

The arithmetic follows gymnasium's ``_dsdt``, ``rk4``, ``wrap`` and ``bound`` operation by
operation (constant products folded in the same left-to-right order, ``x**2`` with the C
library's ``pow`` as numpy does), so that trajectories match gymnasium's bit for bit.

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envhive/Acrobot-v1", num_envs=2, seed=0)
    >>> obs, info = env.reset()
    >>> obs, rew, term, trunc, info = env.step(np.array([0, 2]))
    >>> obs.shape, rew.tolist(), term.tolist()
    ((2, 6), [-1.0, -1.0], [False, False])
    >>> env.close()
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from envhive.engines._columns import column_index
from envhive.engines._compiled import square as _square
from envhive.engines._jit import jit
from envhive.errors import ConfigError
from envhive.kernels._kernel import Kernel

__all__ = ["AcrobotKernel"]

_DT = 0.2
_L1 = 1.0  # LINK_LENGTH_1
_M1 = 1.0  # LINK_MASS_1
_M2 = 1.0  # LINK_MASS_2
_LC1 = 0.5  # LINK_COM_POS_1
_LC2 = 0.5  # LINK_COM_POS_2
_I1 = _I2 = 1.0  # LINK_MOI
_G = 9.8
_PI = math.pi
_MAX_VEL_1 = 4 * _PI
_MAX_VEL_2 = 9 * _PI
# Constant sub-products of _dsdt, evaluated as Python evaluates gymnasium's expressions.
_D1_A = _M1 * _LC1**2
_D1_B = _L1**2 + _LC2**2
_D1_C = 2 * _L1 * _LC2
_D2_A = _LC2**2
_D2_B = _L1 * _LC2
_PHI2_K = _M2 * _LC2 * _G
_PHI1_A = -_M2 * _L1 * _LC2
_PHI1_B = 2 * _M2 * _L1 * _LC2
_PHI1_C = (_M1 * _LC1 + _M2 * _L1) * _G
_BOOK_K = _M2 * _L1 * _LC2
_DEN_A = _M2 * _LC2**2 + _I2
_HALF_PI = _PI / 2.0  # pi / 2.0 and pi / 2 alike
# rk4 over t = [0, dt]
_H = _DT - 0
_H2 = _H / 2.0
_H6 = _H / 6.0
_WRAP = _PI - (-_PI)

_BOOK, _NIPS = 0.0, 1.0
_VARIANTS = {"book": _BOOK, "nips": _NIPS}
#: The columns of ``params``: ``variant`` is ``book_or_nips`` as a number (_VARIANTS).
PARAMS = ("variant",)
_VARIANT = column_index(PARAMS)["variant"]


@jit(nogil=True, inline="always")
def _dsdt(nips, a, theta1, theta2, dtheta1, dtheta2):  # pragma: no cover - compiled
    """gymnasium's ``AcrobotEnv._dsdt``: (ddtheta1, ddtheta2)."""
    cos2 = math.cos(theta2)
    sin2 = math.sin(theta2)
    d1 = _D1_A + _M2 * (_D1_B + _D1_C * cos2) + _I1 + _I2
    d2 = _M2 * (_D2_A + _D2_B * cos2) + _I2
    phi2 = _PHI2_K * math.cos(theta1 + theta2 - _HALF_PI)
    phi1 = (
        _PHI1_A * _square(dtheta2) * sin2
        - _PHI1_B * dtheta2 * dtheta1 * sin2
        + _PHI1_C * math.cos(theta1 - _HALF_PI)
        + phi2
    )
    if nips:
        ddtheta2 = (a + d2 / d1 * phi1 - phi2) / (_DEN_A - _square(d2) / d1)
    else:
        ddtheta2 = (a + d2 / d1 * phi1 - _BOOK_K * _square(dtheta1) * sin2 - phi2) / (
            _DEN_A - _square(d2) / d1
        )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return ddtheta1, ddtheta2


@jit(nogil=True, inline="always")
def _observe(state, obs):  # pragma: no cover - compiled
    obs[0] = math.cos(state[0])
    obs[1] = math.sin(state[0])
    obs[2] = math.cos(state[1])
    obs[3] = math.sin(state[1])
    obs[4] = state[2]
    obs[5] = state[3]


@jit(nogil=True, inline="always")
def _step_one(params, state, actions, i, obs):  # pragma: no cover - compiled
    nips = params[_VARIANT] != _BOOK
    a = np.float64(np.int64(actions[i]) - 1)  # AVAIL_TORQUE[a]: -1.0, 0.0, +1
    y0, y1, y2, y3 = state[0], state[1], state[2], state[3]
    # rk4(self._dsdt, s_augmented, [0, dt]): one step; the torque's derivative is 0.0.
    k1a, k1b = y2, y3
    k1c, k1d = _dsdt(nips, a, y0, y1, y2, y3)
    s0, s1, s2, s3 = y0 + _H2 * k1a, y1 + _H2 * k1b, y2 + _H2 * k1c, y3 + _H2 * k1d
    k2a, k2b = s2, s3
    k2c, k2d = _dsdt(nips, a, s0, s1, s2, s3)
    s0, s1, s2, s3 = y0 + _H2 * k2a, y1 + _H2 * k2b, y2 + _H2 * k2c, y3 + _H2 * k2d
    k3a, k3b = s2, s3
    k3c, k3d = _dsdt(nips, a, s0, s1, s2, s3)
    s0, s1, s2, s3 = y0 + _H * k3a, y1 + _H * k3b, y2 + _H * k3c, y3 + _H * k3d
    k4a, k4b = s2, s3
    k4c, k4d = _dsdt(nips, a, s0, s1, s2, s3)
    n0 = y0 + _H6 * (k1a + 2 * k2a + 2 * k3a + k4a)
    n1 = y1 + _H6 * (k1b + 2 * k2b + 2 * k3b + k4b)
    n2 = y2 + _H6 * (k1c + 2 * k2c + 2 * k3c + k4c)
    n3 = y3 + _H6 * (k1d + 2 * k2d + 2 * k3d + k4d)
    # wrap(x, -pi, pi)
    while n0 > _PI:
        n0 = n0 - _WRAP
    while n0 < -_PI:
        n0 = n0 + _WRAP
    while n1 > _PI:
        n1 = n1 - _WRAP
    while n1 < -_PI:
        n1 = n1 + _WRAP
    # bound(x, -M, M) = min(max(x, -M), M)
    n2 = min(max(n2, -_MAX_VEL_1), _MAX_VEL_1)
    n3 = min(max(n3, -_MAX_VEL_2), _MAX_VEL_2)
    state[0], state[1], state[2], state[3] = n0, n1, n2, n3
    _observe(state, obs)
    terminated = -math.cos(n0) - math.cos(n1 + n0) > 1.0
    return (0.0 if terminated else -1.0), terminated


@jit(nogil=True, inline="always")
def _reset_one(params, state, noise, obs):  # pragma: no cover - compiled
    for j in range(4):
        state[j] = noise[j]  # float32 values (see AcrobotKernel.draw)
    _observe(state, obs)


@jit(nogil=True, inline="always")
def _valid_one(params, actions, i):  # pragma: no cover - compiled
    a = actions[i]
    return a >= 0 and a <= 2


class AcrobotKernel(Kernel):
    """gymnasium's ``Acrobot-v1`` (actions 0, 1, 2: torque -1, 0, +1), batched.

    State: ``(theta1, theta2, dtheta1, dtheta2)``. ``AcrobotEnv`` has no constructor keywords;
    its class-level options are covered as follows:

    * ``book_or_nips`` (``"book"``, the default, or ``"nips"``): a keyword here;
    * ``torque_noise_max`` is 0: noise would draw from the env's generator at every step,
      which the kernel's per-reset draws do not reproduce;
    * ``dt``, the link lengths, masses, centres of mass and moments of inertia, and the
      velocity limits are gymnasium's defaults, fixed.

    Reset options (``low``, ``high``) are not supported.

    Examples:
        >>> k = AcrobotKernel(2, book_or_nips="nips")
        >>> k.action_space, k.max_episode_steps, k.params.tolist()
        (Discrete(3), 500, [1.0])
    """

    id = "envhive/Acrobot-v1"
    gym_id = "Acrobot-v1"
    state_dim = 4
    noise_dim = 4
    uniform_bounds = ((-0.1,) * 4, (0.1,) * 4, True)  # draw() below, compiled
    default_max_episode_steps = 500
    defaults = {"book_or_nips": "book"}
    param_names = PARAMS

    @classmethod
    def pack_params(cls, config: dict[str, Any]) -> np.ndarray:
        variant = config["book_or_nips"]
        if variant not in _VARIANTS:
            raise ConfigError(
                f"{cls.id}: book_or_nips: expected 'book' or 'nips', got {variant!r}"
            )
        return cls.packed({"variant": _VARIANTS[variant]})

    @classmethod
    def spaces(cls, config: dict[str, Any]) -> tuple[gym.Space, gym.Space]:
        high = np.array([1.0, 1.0, 1.0, 1.0, _MAX_VEL_1, _MAX_VEL_2], dtype=np.float32)
        return gym.spaces.Box(low=-high, high=high, dtype=np.float32), gym.spaces.Discrete(3)

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return rng.uniform(low=-0.1, high=0.1, size=(count, 4)).astype(np.float32)

    @classmethod
    def compiled(cls) -> tuple[Any, Any, Any]:
        return _step_one, _reset_one, _valid_one
