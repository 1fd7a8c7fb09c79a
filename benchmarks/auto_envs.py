"""Envs for ``benchmarks/bench_auto.py`` and ``envhive tune`` (``auto_envs:waiting``).

* ``waiting``: its step waits ~2 ms and uses almost no CPU, like an env that talks to an
  external simulator, a game server, a web service or a model API.
* ``cpu_bound``: a pure-Python step that computes for ~0.3 ms, holding the GIL.

Run from ``benchmarks/`` (``envhive tune auto_envs:waiting --num-envs 16``): the command puts
the current directory on the import path, as ``python -m`` would.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

WAIT_S = 2e-3
CPU_ITERS = 4000


class _Base(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (8,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self._t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.uniform(-1, 1, 8).astype(np.float32), {}

    def _result(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._t += 1
        obs = self.np_random.uniform(-1, 1, 8).astype(np.float32)
        return obs, float(action), False, self._t >= 200, {}


class WaitingEnv(_Base):
    """Waits ``WAIT_S`` per step (``time.sleep`` releases the GIL, as socket I/O does)."""

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        time.sleep(WAIT_S)
        return self._result(action)


class CpuBoundEnv(_Base):
    """Computes in pure Python for ~0.3 ms per step (holds the GIL)."""

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        x = 0
        for i in range(CPU_ITERS):
            x = (x * 31 + i) % 1000003
        return self._result(action + (x & 0))


def waiting() -> gym.Env:
    return WaitingEnv()


def cpu_bound() -> gym.Env:
    return CpuBoundEnv()
