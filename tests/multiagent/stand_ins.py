"""A stand-in for a MeltingPot substrate: a dm_env whose specs and time steps are player lists."""

from __future__ import annotations

import dm_env
import numpy as np
from dm_env import specs


class FakeSubstrate(dm_env.Environment):
    """``num_players`` players; observation ``{"RGB": (4, 4, 3) uint8, "STEP": float64}`` each,
    actions ``DiscreteArray(8)`` each; reward of player ``p`` is ``action + p``; the episode is
    LAST (discount 1.0: a truncation, as MeltingPot's time limit) after ``length`` steps.
    ``seed(s)`` fixes the next episodes' pixels."""

    def __init__(self, num_players: int = 3, length: int = 4) -> None:
        self.n, self.length = num_players, length
        self.rng = np.random.default_rng()
        self.t = 0
        self.base = 0

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def observation_spec(self):
        one = {"RGB": specs.Array((4, 4, 3), np.uint8, name="RGB"),
               "STEP": specs.Array((), np.float64, name="STEP"),
               "WORLD.TEXT": specs.Array((), object, name="WORLD.TEXT")}
        return [dict(one) for _ in range(self.n)]

    def action_spec(self):
        return [specs.DiscreteArray(8, name="action") for _ in range(self.n)]

    def _obs(self):
        return [{"RGB": np.full((4, 4, 3), (self.base + p) % 256, np.uint8), "STEP": float(self.t),
                 "WORLD.TEXT": "ignored"} for p in range(self.n)]

    def reset(self):
        self.t, self.base = 0, int(self.rng.integers(0, 200))
        return dm_env.restart(self._obs())

    def step(self, actions):
        self.t += 1
        rewards = np.array([float(int(a) + p) for p, a in enumerate(actions)])
        if self.t >= self.length:
            return dm_env.truncation(rewards, self._obs())
        return dm_env.transition(rewards, self._obs())
