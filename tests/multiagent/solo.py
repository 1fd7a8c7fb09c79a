"""One-agent parallel envs for tests/multiagent/test_one_agent.py (a module, so that worker
processes import them by name), and a single-agent gymnasium env over one, the reference."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envhive.testing import TagTeamEnv


def solo() -> TagTeamEnv:
    """TagTeamEnv with its agent ``a0`` only: it dies at step ``3 + tag % 3`` (terminated)."""
    return TagTeamEnv(agents=("a0",))


def solo_long() -> TagTeamEnv:
    """TagTeamEnv with its agent ``a1`` only: truncated at step 7."""
    return TagTeamEnv(agents=("a1",))


class Vanishing:
    """A one-agent parallel env whose agent ``"a"`` leaves at step ``3 + episode % 2`` without a
    flag of its own (it is just no longer in the result, and ``agents`` is empty): the env's
    episode has ended, the agent's own flags say nothing."""

    metadata = {"render_modes": [], "name": "vanishing_v0"}
    possible_agents = ["a"]

    def __init__(self) -> None:
        self.agents: list[str] = []
        self.episode, self.t = -1, 0

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-1.0, 100.0, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(2)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        self.episode += 1
        self.t = 0
        self.agents = ["a"]
        return {"a": np.array([self.episode, 0], np.float32)}, {"a": {}}

    def step(self, actions: dict[str, Any]):
        self.t += 1
        if self.t >= 3 + self.episode % 2:
            self.agents = []
            return {}, {}, {}, {}, {}
        obs = {"a": np.array([self.episode, self.t], np.float32)}
        return obs, {"a": 1.0}, {"a": False}, {"a": False}, {"a": {"t": self.t}}


class SoloGym(gym.Env):
    """The single-agent gymnasium env a one-agent parallel env is: its agent's observation,
    reward and info; terminated/truncated when the episode ends (the agent's flag, or
    terminated when the agent is gone), a zero observation when it is gone."""

    def __init__(self, make: Any) -> None:
        self.par = make()
        (self.agent,) = self.par.possible_agents
        self.observation_space = self.par.observation_space(self.agent)
        self.action_space = self.par.action_space(self.agent)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, infos = self.par.reset(seed=seed, options=options)
        return obs[self.agent], dict(infos.get(self.agent, {}))

    def step(self, action: Any):
        obs, rew, term, trunc, infos = self.par.step({self.agent: action})
        if self.agent not in obs:
            return np.zeros(self.observation_space.shape, self.observation_space.dtype), 0.0, True, False, {}
        return (obs[self.agent], rew[self.agent], bool(term[self.agent]), bool(trunc[self.agent]),
                dict(infos.get(self.agent, {})))
