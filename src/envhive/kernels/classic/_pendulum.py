"""Pendulum-v1 as a kernel: gymnasium's ``PendulumEnv`` dynamics, compiled and batched.

The arithmetic follows gymnasium's line by line, including its float32 steps (the action is
float32, so ``0.001 * u**2`` and ``3.0 * u`` are float32 products under numpy's promotion
rules) and its ``x**2``, which numpy computes with the C library's ``pow``: that is not
always the correctly rounded ``x * x``, so the kernel calls the same ``pow`` (see
:data:`envhive.engines._compiled.HAVE_LIBM_POW`).

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envhive/Pendulum-v1", num_envs=2, seed=0)
    >>> obs, info = env.reset()
    >>> obs, rew, term, trunc, info = env.step(np.zeros((2, 1), dtype=np.float32))
    >>> obs.shape, obs.dtype.name, bool((rew <= 0).all()), term.tolist()
    ((2, 3), 'float32', True, [False, False])
    >>> env.close()
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from envhive.engines._columns import column_index
from envhive.engines._compiled import HAVE_LIBM_POW
from envhive.engines._compiled import square as _square
from envhive.engines._compiled import square32 as _square32
from envhive.engines._jit import jit
from envhive.kernels._kernel import Kernel

__all__ = ["PendulumKernel", "HAVE_LIBM_POW"]


# ---------------------------------------------------------------- Pendulum
_MAX_SPEED = 8.0
_MAX_TORQUE = 2.0
_DT = 0.05
_M = 1.0
_L = 1.0
_TWO_PI = 2 * np.pi
_TORQUE_GAIN = 3.0 / (_M * _L**2)  # float32 product with the float32 action
_DEFAULT_X = np.pi
_DEFAULT_Y = 1.0

#: The columns of ``params``.
PARAMS = ("g",)
_G = column_index(PARAMS)["g"]


@jit(nogil=True, inline="always")
def _observe(state, obs):  # pragma: no cover - compiled
    th = state[0]
    obs[0] = math.cos(th)
    obs[1] = math.sin(th)
    obs[2] = state[1]


@jit(nogil=True, inline="always")
def _step_one(params, state, actions, i, obs):  # pragma: no cover - compiled
    g = params[_G]
    th, thdot = state[0], state[1]
    # np.clip(u, -max_torque, max_torque)[0] on the float32 action: float32 bounds.
    u = np.float32(actions[i, 0])
    if u < np.float32(-_MAX_TORQUE):
        u = np.float32(-_MAX_TORQUE)
    elif u > np.float32(_MAX_TORQUE):
        u = np.float32(_MAX_TORQUE)
    # angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2), the last term in float32.
    norm = ((th + np.pi) % _TWO_PI) - np.pi
    effort = np.float32(np.float32(0.001) * _square32(u))
    costs = _square(norm) + 0.1 * _square(thdot) + np.float64(effort)
    push = np.float64(np.float32(np.float32(_TORQUE_GAIN) * u))
    newthdot = thdot + ((3 * g) / (2 * _L) * math.sin(th) + push) * _DT
    if newthdot < -_MAX_SPEED:
        newthdot = -_MAX_SPEED
    elif newthdot > _MAX_SPEED:
        newthdot = _MAX_SPEED
    newth = th + newthdot * _DT
    state[0], state[1] = newth, newthdot
    _observe(state, obs)
    return -costs, False


@jit(nogil=True, inline="always")
def _reset_one(params, state, noise, obs):  # pragma: no cover - compiled
    state[0], state[1] = noise[0], noise[1]
    _observe(state, obs)


@jit(nogil=True, inline="always")
def _valid_one(params, actions, i):  # pragma: no cover - compiled
    a = actions[i, 0]  # NaN fails both comparisons
    return a >= -_MAX_TORQUE and a <= _MAX_TORQUE


class PendulumKernel(Kernel):
    """gymnasium's ``Pendulum-v1``, batched.

    State: ``(theta, theta_dot)``; observation ``(cos theta, sin theta, theta_dot)``. Keywords:
    ``g`` (gravity, as gymnasium's). Reset options (``x_init``, ``y_init``) are not supported.
    The action is used as float32 (the action space's dtype), whatever the caller's dtype.

    Examples:
        >>> k = PendulumKernel(2, g=9.81)
        >>> k.action_space, k.max_episode_steps, k.params.tolist()
        (Box(-2.0, 2.0, (1,), float32), 200, [9.81])
    """

    id = "envhive/Pendulum-v1"
    gym_id = "Pendulum-v1"
    state_dim = 2
    noise_dim = 2
    uniform_bounds = ((-_DEFAULT_X, -_DEFAULT_Y), (_DEFAULT_X, _DEFAULT_Y), False)  # draw(), compiled
    default_max_episode_steps = 200
    defaults = {"g": 10.0}
    param_names = PARAMS

    @classmethod
    def spaces(cls, config: dict[str, Any]) -> tuple[gym.Space, gym.Space]:
        high = np.array([1.0, 1.0, _MAX_SPEED], dtype=np.float32)
        obs = gym.spaces.Box(low=-high, high=high, dtype=np.float32)
        act = gym.spaces.Box(low=-_MAX_TORQUE, high=_MAX_TORQUE, shape=(1,), dtype=np.float32)
        return obs, act

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        high = np.array([_DEFAULT_X, _DEFAULT_Y])
        return rng.uniform(low=-high, high=high, size=(count, 2))

    @classmethod
    def compiled(cls) -> tuple[Any, Any, Any]:
        return _step_one, _reset_one, _valid_one
