"""CartPole-v1 as a kernel: gymnasium's ``CartPoleEnv`` dynamics, compiled and batched.

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envhive/CartPole-v1", num_envs=4, seed=0)
    >>> obs, info = env.reset()
    >>> obs, rew, term, trunc, info = env.step(np.ones(4, dtype=np.int64))
    >>> obs.shape, rew.tolist()
    ((4, 4), [1.0, 1.0, 1.0, 1.0])
    >>> env.close()
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from envhive.engines._cartpole_math import FORCE_MAG, THETA_THRESHOLD, X_THRESHOLD, euler_step
from envhive.engines._columns import column_index
from envhive.engines._jit import jit
from envhive.kernels._kernel import Kernel

__all__ = ["CartPoleKernel"]

_FORCE_MAG = FORCE_MAG
_THETA_THRESHOLD = THETA_THRESHOLD
_X_THRESHOLD = X_THRESHOLD
_euler_step = jit(nogil=True, inline="always")(euler_step)  # the one physics, compiled

#: The columns of ``params`` (the keywords gymnasium's env takes).
PARAMS = ("sutton_barto_reward",)
_SUTTON_BARTO = column_index(PARAMS)["sutton_barto_reward"]


@jit(nogil=True, inline="always")
def _step_one(params, state, actions, i, obs):  # pragma: no cover - compiled
    sutton_barto = params[_SUTTON_BARTO] != 0.0
    x, x_dot, theta, theta_dot = state[0], state[1], state[2], state[3]
    force = _FORCE_MAG if actions[i] == 1 else -_FORCE_MAG
    x, x_dot, theta, theta_dot = _euler_step(
        x, x_dot, theta, theta_dot, force, math.cos(theta), math.sin(theta)
    )
    state[0], state[1], state[2], state[3] = x, x_dot, theta, theta_dot
    obs[0], obs[1], obs[2], obs[3] = x, x_dot, theta, theta_dot
    terminated = (
        x < -_X_THRESHOLD or x > _X_THRESHOLD or theta < -_THETA_THRESHOLD or theta > _THETA_THRESHOLD
    )
    if sutton_barto:
        reward = -1.0 if terminated else 0.0
    else:
        reward = 1.0
    return reward, terminated


@jit(nogil=True, inline="always")
def _reset_one(params, state, noise, obs):  # pragma: no cover - compiled
    for j in range(4):
        state[j] = noise[j]
        obs[j] = noise[j]


@jit(nogil=True, inline="always")
def _valid_one(params, actions, i):  # pragma: no cover - compiled
    a = actions[i]
    return a == 0 or a == 1


class CartPoleKernel(Kernel):
    """gymnasium's ``CartPole-v1`` (Euler integrator), batched.

    Keywords: ``sutton_barto_reward`` (as gymnasium's). The reward after termination is
    gymnasium's reward on the terminating step; envhive never steps an ended episode.

    Examples:
        >>> k = CartPoleKernel(2, sutton_barto_reward=True)
        >>> k.action_space, k.max_episode_steps
        (Discrete(2), 500)
    """

    id = "envhive/CartPole-v1"
    gym_id = "CartPole-v1"
    state_dim = 4
    noise_dim = 4
    uniform_bounds = ((-0.05,) * 4, (0.05,) * 4, False)  # draw() below, compiled
    default_max_episode_steps = 500
    defaults = {"sutton_barto_reward": False}
    param_names = PARAMS

    @classmethod
    def spaces(cls, config: dict[str, Any]) -> tuple[gym.Space, gym.Space]:
        high = np.array(
            [_X_THRESHOLD * 2, np.inf, _THETA_THRESHOLD * 2, np.inf], dtype=np.float32
        )
        return gym.spaces.Box(-high, high, dtype=np.float32), gym.spaces.Discrete(2)

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return rng.uniform(low=-0.05, high=0.05, size=(count, 4))

    @classmethod
    def compiled(cls) -> tuple[Any, Any, Any]:
        return _step_one, _reset_one, _valid_one
