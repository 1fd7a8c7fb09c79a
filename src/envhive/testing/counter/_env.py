"""The counter in Python: the reference env of envhive's test family for the threaded core.

Rule for rule what ``_counter.h`` computes (see there): the serial, thread and process
executors run this class for ``envhive/Counter-v0``, the native executor runs the C++ game, and
the tests hold the two equal (a differential test of the C++ op rule against ``envhive._ops``).

Examples:
    >>> env = CounterEnv(size=8)
    >>> obs, info = env.reset(seed=3)
    >>> obs.tolist(), info
    ([5, 1, 0, 5], {'steps': np.int32(0), 'distance': np.float64(4.0)})
    >>> obs, reward, terminated, truncated, info = env.step(0)
    >>> obs.tolist(), reward, terminated
    ([4, 1, 1, 5], -0.01, False)
"""

from __future__ import annotations

import os
import time
from typing import Any

import gymnasium as gym
import numpy as np

from envhive.errors import ActionError, ConfigError, ResetNeededError

__all__ = ["CounterEnv", "splitmix64", "OPTIONS"]

_MASK = 2**64 - 1
#: The counter's options and defaults.
OPTIONS = {"size": 16, "limit": 50, "busy_us": 0, "sleep_us": 0, "reset_loop": 0}


def splitmix64(state: int) -> tuple[int, int]:
    """``(new state, output)``: one draw of splitmix64.

    Examples:
        >>> splitmix64(0)[1] == 0xE220A8397B1DCDAF
        True
    """
    state = (state + 0x9E3779B97F4A7C15) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


def check_options(options: dict[str, Any]) -> dict[str, int]:
    """The counter's options, checked (unknown names and bad values are ``ConfigError``)."""
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise ConfigError(f"envhive/Counter-v0: unknown options {sorted(unknown)}; expected {sorted(OPTIONS)}")
    out = {**OPTIONS, **options}
    for name, value in out.items():
        low = 2 if name == "size" else 0
        high = 2**63 - 1 if name == "reset_loop" else 2**31 - 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low or value > high:
            raise ConfigError(f"envhive/Counter-v0: {name}: expected an int in {low}..{high}, got {value!r}")
    return out


class CounterEnv(gym.Env):
    """The counter (see the module docstring); keywords: :data:`OPTIONS`."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, **options: Any) -> None:
        o = self.options = check_options(options)
        self.observation_space = gym.spaces.Box(0, 2**31 - 1, (4,), np.int32)
        self.action_space = gym.spaces.Discrete(3)
        self._rng = int.from_bytes(os.urandom(8), "little")  # until a reset brings a seed
        self._size, self._limit = o["size"], o["limit"]
        self._pos = self._target = self._steps = self._start = 0
        self._started = False

    def _next(self) -> int:
        self._rng, out = splitmix64(self._rng)
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self._rng = seed % 2**64
        size = self._size
        self._start = self._next() % size
        self._target = (self._start + 1 + self._next() % (size - 1)) % size
        self._pos, self._steps = self._start, 0
        for _ in range(self.options["reset_loop"]):
            pass
        self._started = True
        return self._obs(), self._info()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self._started:
            raise ResetNeededError("envhive/Counter-v0: reset() before step()")
        if not isinstance(action, (int, np.integer)) or not 0 <= action <= 2:
            raise ActionError(f"envhive/Counter-v0: action {action!r} is outside Discrete(3)")
        o = self.options
        if o["busy_us"]:
            end = time.thread_time() + o["busy_us"] / 1e6
            while time.thread_time() < end:
                pass
        if o["sleep_us"]:
            time.sleep(o["sleep_us"] / 1e6)
        self._pos = min(max(self._pos + int(action) - 1, 0), self._size - 1)
        self._steps += 1
        terminated = self._pos == self._target
        truncated = self._limit > 0 and self._steps >= self._limit
        return self._obs(), 1.0 if terminated else -0.01, terminated, truncated, self._info()

    def _obs(self) -> np.ndarray:
        return np.array([self._pos, self._target, self._steps, self._start], np.int32)

    def _info(self) -> dict[str, Any]:
        return {"steps": np.int32(self._steps), "distance": np.float64(abs(self._pos - self._target))}
