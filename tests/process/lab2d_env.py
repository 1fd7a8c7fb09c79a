"""A small gymnasium adapter over dmlab2d's Lab2d: a real C++ env that cannot be pickled."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Lab2dEnv(gym.Env):
    """dmlab2d level as a gymnasium env: obs = WORLD.RGB, actions = MultiDiscrete over its specs."""

    metadata = {"render_modes": []}

    def __init__(self, level: str = "commons_harvest") -> None:
        import dmlab2d
        import dmlab2d.runfiles_helper

        self._lab = dmlab2d.Lab2d(dmlab2d.runfiles_helper.find(), {"levelName": level})
        self._env = dmlab2d.Environment(self._lab, ["WORLD.RGB"], seed=0)
        self._dmlab2d = dmlab2d
        rgb = self._env.observation_spec()["WORLD.RGB"]
        self.observation_space = spaces.Box(0, 255, rgb.shape, np.uint8)
        specs = self._env.action_spec()
        self._names = sorted(specs)
        self._low = np.array([int(specs[k].minimum) for k in self._names])
        high = np.array([int(specs[k].maximum) for k in self._names])
        self.action_space = spaces.MultiDiscrete(high - self._low + 1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._env = self._dmlab2d.Environment(self._lab, ["WORLD.RGB"], seed=seed)
        ts = self._env.reset()
        return np.asarray(ts.observation["WORLD.RGB"]), {}

    def step(self, action):
        act = {k: int(a) + int(lo) for k, a, lo in zip(self._names, action, self._low)}
        ts = self._env.step(act)
        reward = float(ts.reward or 0.0)
        return np.asarray(ts.observation["WORLD.RGB"]), reward, bool(ts.last()), False, {}
