"""A scripted multi-agent env (PettingZoo's parallel API, without pettingzoo) for tests."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["TagTeamEnv"]


class TagTeamEnv:
    """A parallel multi-agent env whose rows are predictable: agents die, join and end.

    Agents ``a0``, ``a1``, ``a2``. ``a0`` and ``a1`` start; ``a2`` joins after step
    ``join_at``; ``a0`` terminates at step ``3 + tag % 3`` (it dies mid-episode); the others
    are truncated at step ``length``, which ends the episode. An agent's observation is
    ``[tag, episode, step, 10 * agent + last action]`` (int64), its reward ``step + 100 * agent``;
    ``tag`` is drawn from the reset seed (``np_random``), so every row says which episode, step
    and agent it belongs to, and a transition crossing an episode boundary is visible.
    Actions are ``Discrete(3)``; an action for an agent that is not alive raises.
    ``agents`` keeps some of the three (``("a0",)``: a one-agent env whose agent dies at step
    ``3 + tag % 3``); the kept ones behave as above.

    Examples:
        >>> env = TagTeamEnv()
        >>> obs, infos = env.reset(seed=0)
        >>> sorted(obs), env.agents
        (['a0', 'a1'], ['a0', 'a1'])
    """

    metadata = {"render_modes": [], "name": "tag_team_v0"}

    ALL = ("a0", "a1", "a2")

    def __init__(self, join_at: int = 2, length: int = 7, agents: Sequence[str] = ALL) -> None:
        if not agents or not set(agents) <= set(self.ALL):
            raise ValueError(f"agents: expected some of {self.ALL}, got {agents!r}")
        self.possible_agents = [a for a in self.ALL if a in agents]
        self.agents: list[str] = []
        self.join_at, self.length = join_at, length
        self.render_mode = None
        self.np_random = np.random.default_rng()
        self.episode, self.t, self.tag = -1, 0, 0

    @functools.cache  # noqa: B019 - PettingZoo wants one space object per agent
    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-1, 2**40, (4,), np.int64)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(3)

    def _obs(self, agent: str, action: int) -> np.ndarray:
        k = self.ALL.index(agent)
        return np.array([self.tag, self.episode, self.t, 10 * k + action], np.int64)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.tag = int(self.np_random.integers(0, 10**6))
        self.episode += 1
        self.t = 0
        self.agents = [a for a in ("a0", "a1") if a in self.possible_agents]
        return {a: self._obs(a, -1) for a in self.agents}, {a: {} for a in self.agents}

    def state(self) -> np.ndarray:
        return np.array([self.tag, self.episode, self.t], np.int64)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        for agent, action in actions.items():
            if agent not in self.agents or not 0 <= int(action) < 3:
                raise ValueError(f"bad action {action!r} for agent {agent!r} (alive: {self.agents})")
        self.t += 1
        acting = list(self.agents)
        obs = {a: self._obs(a, int(actions.get(a, 0))) for a in acting}
        rewards = {a: float(self.t + 100 * self.ALL.index(a)) for a in acting}
        dies = self.t == 3 + self.tag % 3
        terms = {a: a == "a0" and dies for a in acting}
        truncs = {a: self.t >= self.length and not terms[a] for a in acting}
        self.agents = [a for a in acting if not (terms[a] or truncs[a])]
        if self.t == self.join_at and self.t < self.length and "a2" in self.possible_agents:
            self.agents.append("a2")
            obs["a2"] = self._obs("a2", -1)
            rewards["a2"], terms["a2"], truncs["a2"] = 0.0, False, False
        infos = {a: {"t": self.t} for a in obs}
        return obs, rewards, terms, truncs, infos

    def close(self) -> None:
        pass
