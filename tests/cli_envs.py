"""Envs that fail in each way ``envhive check ENV_ID`` must report in one line (tests/test_cli.py).

They live in a module (not in the test) so that worker processes import them by name.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import gymnasium as gym
import numpy as np


class GoodEnv(gym.Env):
    """Two float observations, two actions, episodes of 5 steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), {}

    def step(self, action: Any):
        self.t += 1
        return np.full(2, self.t / 10, np.float32), 1.0, self.t >= 5, False, {}


class RaisesInInit(GoodEnv):
    def __init__(self) -> None:
        raise ValueError("no such level: 'maze-9'")


class RaisesInReset(GoodEnv):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        raise RuntimeError("the reset exploded")


class RaisesInStep(GoodEnv):
    def step(self, action: Any):
        if self.t == 2:
            raise RuntimeError("the step exploded")
        return super().step(action)


class RaisesInWorkers(GoodEnv):
    """Fine in the caller's process, raises in a worker process (a process-only failure)."""

    def step(self, action: Any):
        if multiprocessing.parent_process() is not None:
            raise OSError("no display in a worker")
        return super().step(action)
