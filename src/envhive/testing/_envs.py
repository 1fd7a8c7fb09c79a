"""Scripted envs whose every output can be predicted."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["CountingEnv", "ZooEnv", "SPACE_ZOO"]


class CountingEnv(gym.Env):
    """An env whose observation is ``[tag, episode, step, last_action]`` (int64).

    Episode ``e`` lasts ``pattern[e % len(pattern)][0]`` steps and then ends with
    ``pattern[...][1]``, ``"term"`` (terminated) or ``"trunc"`` (truncated). The reward of a
    step is ``step + 1000 * episode`` (of the step's new state), so rewards are traceable too.
    ``tag`` is the ``tag`` argument (the env's identity), or the seed of the first seeded reset.
    Actions must be in ``Discrete(n_actions)``: anything else raises, which catches misrouted or
    mis-cast actions.

    Args:
        pattern: ``[(length, "term" | "trunc"), ...]``, cycled over episodes.
        tag: identity reported in ``obs[0]``; ``None`` uses the first reset seed.
        n_actions: size of the action space.
        with_info: put ``{"episode": e, "step": s}`` in every info.

    Examples:
        >>> env = CountingEnv(pattern=[(1, "trunc")], tag=7)
        >>> env.reset()[0].tolist()
        [7, 0, 0, -1]
        >>> obs, rew, term, trunc, info = env.step(1)
        >>> obs.tolist(), rew, term, trunc
        ([7, 0, 1, 1], 1.0, False, True)
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        pattern: Sequence[tuple[int, str]] = ((5, "term"),),
        tag: int | None = None,
        n_actions: int = 3,
        with_info: bool = True,
    ) -> None:
        if not pattern or any(n < 1 or kind not in ("term", "trunc") for n, kind in pattern):
            raise ValueError(f"pattern: expected [(length >= 1, 'term'|'trunc'), ...], got {pattern!r}")
        self.pattern = list(pattern)
        self.tag = tag
        self.with_info = with_info
        self.observation_space = spaces.Box(-1, 2**40, (4,), np.int64)
        self.action_space = spaces.Discrete(n_actions)
        self.episode = -1
        self.t = 0
        self._done = True

    def _obs(self, action: int) -> np.ndarray:
        return np.array([self.tag if self.tag is not None else -1, self.episode, self.t, action], np.int64)

    def _info(self) -> dict[str, Any]:
        return {"episode": self.episode, "step": self.t} if self.with_info else {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self.tag is None and seed is not None:
            self.tag = seed
        self.episode += 1
        self.t = 0
        self._done = False
        return self._obs(-1), self._info()

    def step(self, action: Any):
        if self._done:
            raise RuntimeError("CountingEnv.step() called on an ended episode without reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        self.t += 1
        length, kind = self.pattern[self.episode % len(self.pattern)]
        ended = self.t >= length
        self._done = ended
        reward = float(self.t + 1000 * self.episode)
        return self._obs(int(action)), reward, ended and kind == "term", ended and kind == "trunc", self._info()


SPACE_ZOO: dict[str, gym.Space] = {
    "box": spaces.Box(-2.0, 2.0, (3,), np.float32),
    "image": spaces.Box(0, 255, (4, 4, 3), np.uint8),
    "discrete": spaces.Discrete(5, start=-2),
    "multidiscrete": spaces.MultiDiscrete([3, 4]),
    "multibinary": spaces.MultiBinary(4),
    "dict": spaces.Dict(
        {
            "pos": spaces.Box(-1.0, 1.0, (2,), np.float64),
            "nested": spaces.Tuple((spaces.Discrete(3), spaces.MultiBinary(2))),
        }
    ),
    "tuple": spaces.Tuple((spaces.Box(0.0, 1.0, (2,), np.float32), spaces.Discrete(4))),
    "text": spaces.Text(max_length=6),
}


class ZooEnv(gym.Env):
    """Deterministic observations from any space; episodes end on a seeded schedule.

    Observations are samples of ``observation_space`` from a generator seeded at reset;
    ``reward`` is the step number; episodes last between 1 and ``max_len`` steps and end as
    terminated or truncated, both drawn from the seeded generator. Actions are checked against
    ``action_space`` (a wrong one raises).

    Examples:
        >>> env = ZooEnv(SPACE_ZOO["dict"], SPACE_ZOO["discrete"])
        >>> obs, info = env.reset(seed=3)
        >>> sorted(obs)
        ['nested', 'pos']
    """

    metadata = {"render_modes": []}

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, max_len: int = 6) -> None:
        # Own copies: _sample seeds the observation space, and envs sharing one space object
        # would interleave their draws when they run concurrently (thread executor).
        self.observation_space = copy.deepcopy(observation_space)
        self.action_space = copy.deepcopy(action_space)
        self.max_len = max_len
        self._t = 0
        self._len = 0
        self._term = False

    def _sample(self) -> Any:
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        return self.observation_space.sample()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        self._len = int(self.np_random.integers(1, self.max_len + 1))
        self._term = bool(self.np_random.integers(2))
        return self._sample(), {"len": self._len}

    def step(self, action: Any):
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        self._t += 1
        ended = self._t >= self._len
        info = {"t": self._t} if self._t % 2 else {}
        return self._sample(), float(self._t), ended and self._term, ended and not self._term, info
