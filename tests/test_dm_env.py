"""The dm_env front end, built from the pool's neutral Batch alone.

Differential: for the same seeded envs and actions, a dm_env front end and gymnasium's
``SyncVectorEnv`` (next_step) agree row by row: the observation and reward are gymnasium's,
the step type is FIRST exactly on rows whose previous step ended (gymnasium's reset rows) and
on the first reset, LAST exactly where gymnasium reports terminated or truncated, MID
elsewhere; the discount is 0.0 on termination and 1.0 on truncation and everywhere else.
Over every general executor and the native kernel, and through send/recv.
"""

from __future__ import annotations

import dm_env
import gymnasium as gym
import numpy as np
import pytest
from dm_env import specs
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import envhive
from envhive.executors import available_executors
from envhive.frontends import DmEnv, VectorEnv
from envhive.frontends._dm_env import spec_for
from envhive.testing import SPACE_ZOO, ZooEnv

N = 4


def cartpole(limit: int):
    return lambda: gym.make("CartPole-v1", max_episode_steps=limit)


@pytest.mark.parametrize("executor", [*available_executors(), "native"])
def test_dm_env_matches_gymnasium_next_step(executor: str) -> None:
    limit = 13  # truncations as well as terminations
    fns = [cartpole(limit)] * N
    ref = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.NEXT_STEP)
    if executor == "native":
        env = envhive.make("envhive/CartPole-v1", N, max_episode_steps=limit, api="dm_env",
                           executor="native")
    else:
        env = envhive.make(fns, api="dm_env", executor=executor)
    rng = np.random.default_rng(0)
    with env:
        assert isinstance(env, DmEnv)
        obs, _ = ref.reset(seed=7)
        ts = env.reset(seed=7)
        assert isinstance(ts, dm_env.TimeStep)
        np.testing.assert_array_equal(ts.observation, obs)
        assert ts.step_type.tolist() == [dm_env.StepType.FIRST] * N
        assert ts.reward.tolist() == [0.0] * N and ts.discount.tolist() == [1.0] * N
        ended = np.zeros(N, bool)
        seen = {"term": 0, "trunc": 0, "first": 0}
        for _ in range(120):
            act = rng.integers(0, 2, N)
            obs, rew, term, trunc, _ = ref.step(act)
            ts = env.step(act)
            np.testing.assert_array_equal(ts.observation, obs)
            np.testing.assert_array_equal(ts.reward, rew)
            want = np.where(ended, 0, np.where(term | trunc, 2, 1))
            np.testing.assert_array_equal(ts.step_type, want)
            np.testing.assert_array_equal(ts.discount, np.where(term, 0.0, 1.0))
            np.testing.assert_array_equal(ts.first(), ended)
            seen["term"] += int(term.sum())
            seen["trunc"] += int((trunc & ~term).sum())
            seen["first"] += int(ended.sum())
            ended = term | trunc
        assert all(seen.values()), seen  # every kind of row happened
    ref.close()


def test_timestep_methods_are_batched() -> None:
    with envhive.make("CartPole-v1", 2, seed=0, api="dm_env", max_episode_steps=2) as env:
        ts = env.reset()
        assert ts.first().tolist() == [True, True]
        env.step(np.zeros(2, np.int64))
        ts = env.step(np.zeros(2, np.int64))
        assert ts.last().tolist() == [True, True]
        assert ts.discount.tolist() == [1.0, 1.0]  # truncated: the next state still counts
        ts = env.step(np.zeros(2, np.int64))
        assert ts.first().tolist() == [True, True]


def test_send_recv_rows_and_env_ids() -> None:
    fns = [cartpole(7)] * N
    with envhive.make(fns, batch_size=2, seed=3, api="dm_env", executor="thread") as env:
        env.async_reset()
        seen_first: set[int] = set()
        last_rows = 0
        # Until every env's first row and some last rows came back: which envs finish first is
        # the scheduler's choice (a thread may wait a GIL switch interval before it runs its
        # share), so the count of rounds that takes is not fixed; the bound only stops a hang.
        for _ in range(100_000):
            ts, ids = env.recv()
            assert ts.observation.shape == (2, 4) and ids.shape == (2,)
            seen_first |= set(ids[ts.first()].tolist())
            last_rows += int(ts.last().sum())
            env.send(np.zeros(2, np.int64), ids)
            if seen_first == set(range(N)) and last_rows > 0:
                break
        assert seen_first == set(range(N)) and last_rows > 0


def test_disabled_mode_resets_chosen_envs() -> None:
    with envhive.make("CartPole-v1", 3, seed=0, api="dm_env", autoreset="disabled",
                      max_episode_steps=2) as env:
        env.reset()
        env.step(np.zeros(3, np.int64))
        ts = env.step(np.zeros(3, np.int64))
        assert ts.last().all()
        ts = env.reset(env_ids=[2, 1])
        assert ts.step_type.tolist() == [0, 0] and ts.observation.shape == (2, 4)
        with pytest.raises(envhive.ResetNeededError):
            env.step(np.zeros(3, np.int64))


def test_same_step_is_refused_clearly() -> None:
    with pytest.raises(envhive.ConfigError, match="same_step"):
        envhive.make("CartPole-v1", 2, api="dm_env", autoreset="same_step")


def test_unknown_api() -> None:
    with pytest.raises(envhive.ConfigError, match="api"):
        envhive.make("CartPole-v1", 2, api="dmenv")


def test_default_api_is_gymnasium() -> None:
    with envhive.make("CartPole-v1", 2) as env:
        assert isinstance(env, VectorEnv)


@pytest.mark.parametrize("key", [k for k in SPACE_ZOO if k not in ("text", "graph", "sequence", "oneof")])
def test_specs_validate_every_observation(key: str) -> None:
    space = SPACE_ZOO[key]
    with envhive.make(lambda: ZooEnv(space, spaces.Discrete(3)), 2, seed=1, api="dm_env") as env:
        spec = env.observation_spec()
        ts = env.reset()
        for _ in range(3):
            for row in range(2):
                _validate(spec, _row(ts.observation, row))
            ts = env.step(np.zeros(2, np.int64))
        assert env.action_spec() == specs.DiscreteArray(3, np.int64, "action")
        assert env.reward_spec().dtype == np.float64
        assert env.discount_spec().minimum == 0.0 and env.discount_spec().maximum == 1.0


def _row(tree, i):
    if isinstance(tree, dict):
        return {k: _row(v, i) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_row(v, i) for v in tree)
    return tree[i]


def _validate(spec, value):
    if isinstance(spec, dict):
        assert set(spec) == set(value)
        for k in spec:
            _validate(spec[k], value[k])
    elif isinstance(spec, tuple):
        for s, v in zip(spec, value):
            _validate(s, v)
    else:
        spec.validate(value)


def test_spec_kinds() -> None:
    assert spec_for(spaces.Discrete(3, start=2), "a") == specs.BoundedArray((), np.int64, 2, 4, "a")
    md = spec_for(spaces.MultiDiscrete([2, 5]), "m")
    assert md.minimum.tolist() == [0, 0] and md.maximum.tolist() == [1, 4]
    mb = spec_for(spaces.MultiBinary(3), "b")
    assert mb.shape == (3,) and mb.maximum == 1
    with pytest.raises(envhive.ConfigError, match="spec"):
        spec_for(spaces.Text(5), "t")


@pytest.mark.parametrize("executor", [*available_executors(), "native"])
@pytest.mark.parametrize("env_ids, words", [
    ([10], "expected ids in [0, 3), got [10]"),
    (["a"], "expected a 1-d array of int env ids"),
    ([0.7], "expected a 1-d array of int env ids"),  # used to reset env 0 silently
    ([1, 1], "each env may appear once"),
])
def test_dm_env_reset_checks_env_ids_as_send_does(executor: str, env_ids, words: str) -> None:
    env_id = "envhive/CartPole-v1" if executor == "native" else "CartPole-v1"
    with envhive.make(env_id, 3, executor=executor, api="dm_env", seed=0) as env:
        env.reset()
        env.step(np.zeros(3, np.int64))
        with pytest.raises(envhive.ConfigError) as info:
            env.reset(env_ids)
        assert words in str(info.value)
        with pytest.raises(envhive.ConfigError):  # send says the same
            env.send(np.zeros(1, np.int64), env_ids)
        ts = env.reset([2, 0])  # nothing was reset: the pool goes on
        assert ts.step_type.tolist() == [0, 0] and ts.observation.shape == (2, 4)
