"""Example env factories for ``envhive check package.module:factory``: good ones and bad ones.

A factory is a zero-argument callable returning a ``gymnasium.Env``. ``envhive check``
imports it and says, one line per check, whether the pool can run it:

.. code-block:: text

    envhive check envhive.testing.factories:cartpole      # passes every check
    envhive check envhive.testing.factories:unseeded      # FAIL: reset ignores the seed
    envhive check envhive.testing.factories:unpicklable   # FAIL: cannot reach a worker process

Examples:
    >>> env = cartpole()
    >>> env.reset(seed=0)[0].shape
    (4,)
    >>> a, b = unseeded(), unseeded()
    >>> bool((a.reset(seed=0)[0] == b.reset(seed=0)[0]).all())
    False
"""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envhive.testing._envs import CountingEnv

__all__ = ["cartpole", "unseeded", "unpicklable", "old_api", "UnseededEnv"]


def cartpole() -> gym.Env:
    """gymnasium's CartPole-v1: passes every check."""
    return gym.make("CartPole-v1")


class UnseededEnv(gym.Env):
    """Draws its observations from fresh OS entropy: ``reset(seed=...)`` changes nothing."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (3,), np.float64)
        self.action_space = spaces.Discrete(2)
        self._rng = np.random.default_rng()
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)  # seeds self.np_random, which this env never uses
        self._t = 0
        return self._rng.uniform(-1, 1, 3), {}

    def step(self, action: Any):
        self._t += 1
        return self._rng.uniform(-1, 1, 3), 1.0, False, self._t >= 10, {}


def unseeded() -> gym.Env:
    """An env whose ``reset`` ignores the seed: fails the seeding checks."""
    return UnseededEnv()


class _LockedFactory:
    """A factory holding a lock: neither pickle nor cloudpickle can serialize it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self) -> gym.Env:
        with self._lock:
            return gym.make("CartPole-v1")


#: A factory object that cannot be pickled: fails the "picklable" and "worker process" checks.
unpicklable = _LockedFactory()


class _OldApiEnv(CountingEnv):
    """gym < 0.26's step API: ``(obs, reward, done, info)``."""

    def step(self, action: Any):  # type: ignore[override]
        obs, reward, term, trunc, info = super().step(action)
        return obs, reward, term or trunc, info


def old_api() -> gym.Env:
    """An env whose ``step`` returns gym's old 4-tuple: fails the "step API" check."""
    return _OldApiEnv()
