"""Where a multi-agent env's observations go: straight into the pool's row during an op
(one copy), into new arrays otherwise; and what counts as a built ParallelEnv."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envhive
from envhive.envs.multiagent import ParallelAgents, PlayersAgents, is_parallel_env
from envhive.testing import TagTeamEnv
from tests.multiagent.stand_ins import FakeSubstrate


def test_parallel_env_writes_into_obs_out():
    env = ParallelAgents(TagTeamEnv())
    row = np.full((3, 4), -7, np.int64)
    env.obs_out = row
    obs, _ = env.reset(seed=3)
    assert obs is row  # written in place: nothing left for the runner to copy
    assert row[2].tolist() == [0, 0, 0, 0]  # a2 has not joined: its padding is written too
    assert row[0, 1:3].tolist() == [0, 0] and row[0, 3] == -1
    obs, *_ = env.step(np.array([1, 2, 0]))
    assert obs is row and row[:2, 2].tolist() == [1, 1] and row[:2, 3].tolist() == [1, 12]


def test_players_env_writes_dict_rows_into_obs_out():
    env = PlayersAgents(FakeSubstrate(num_players=2))
    out = {"RGB": np.zeros((2, 4, 4, 3), np.uint8), "STEP": np.zeros(2)}
    env.obs_out = out
    env.reset(seed=1)
    obs, *_ = env.step(np.array([3, 4]))
    assert obs is out and out["STEP"].tolist() == [1.0, 1.0]
    assert int(out["RGB"][1, 0, 0, 0]) == (int(out["RGB"][0, 0, 0, 0]) + 1) % 256


def test_without_obs_out_every_result_is_a_new_array():
    env = ParallelAgents(TagTeamEnv())
    first, _ = env.reset(seed=3)
    kept = first.copy()
    second, *_ = env.step(np.array([1, 1, 1]))
    assert second is not first and np.array_equal(first, kept)


class _Keep(gym.Wrapper):  # type: ignore[type-arg]
    """Keeps every observation it passes on, as a frame stack would."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.seen: list[np.ndarray] = []

    def reset(self, **kw):
        obs, info = self.env.reset(**kw)
        self.seen.append(obs)
        return obs, info

    def step(self, action):
        out = self.env.step(action)
        self.seen.append(out[0])
        return out


def test_a_wrapped_env_keeps_its_own_observations():
    built: list[_Keep] = []

    def factory() -> _Keep:
        built.append(_Keep(ParallelAgents(TagTeamEnv())))
        return built[-1]

    pool = envhive.make(factory, num_envs=2, seed=5, executor="serial", autoreset="disabled",
                        api="pool")
    got = [pool.reset().obs.copy()]
    for _ in range(3):
        got.append(pool.step(np.ones((2, 3), np.int64)).obs.copy())
    pool.close()
    # What the wrapper kept is what the pool handed out: the pool's next op did not overwrite it.
    assert [s.tolist() for s in built[-1].seen] == [g[1].tolist() for g in got]


def test_a_misfit_observation_is_that_envs_error():
    class FloatObs(TagTeamEnv):
        def _obs(self, agent, action):
            return super()._obs(agent, action).astype(np.float64) + 0.5

    pool = envhive.make(lambda: ParallelAgents(FloatObs()), num_envs=2, executor="serial",
                        api="pool")
    with pytest.raises(envhive.errors.EnvWorkerError, match="float64"):
        pool.reset(seed=0)
    pool.close()


class ClassLevelAgents:
    """A ParallelEnv whose possible agents are a class attribute (a common way to write one)."""

    metadata = {"render_modes": []}
    possible_agents = ["x", "y"]

    def __init__(self) -> None:
        self.agents: list[str] = []

    def observation_space(self, agent):
        return gym.spaces.Discrete(4)

    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {a: 1 for a in self.agents}, {}

    def step(self, actions):
        obs = {a: int(actions[a]) + 2 for a in self.agents}
        return obs, {a: 1.0 for a in obs}, {a: False for a in obs}, {a: False for a in obs}, {}


def test_a_parallel_env_class_is_a_factory_not_an_instance():
    assert not is_parallel_env(ClassLevelAgents) and is_parallel_env(ClassLevelAgents())
    for factory in (ClassLevelAgents, lambda: ClassLevelAgents()):
        pool = envhive.make(factory, num_envs=2, executor="serial", api="pool")
        pool.reset(seed=0)
        assert pool.step(np.array([[0, 1], [1, 1]])).obs.tolist() == [[2, 3], [3, 3]]
        pool.close()
