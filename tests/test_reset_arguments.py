"""What an env's ``reset`` is called with: ``seed=`` only when there is a seed, ``options=``
only when there are options (a non-empty dict, ``reset_mask`` taken out), as SB3's DummyVecEnv
calls it; nothing at all for an autoreset. The same on every executor and every front end, so
an env whose ``reset`` takes no ``options`` (older and hand-written envs) works everywhere
until it is given some.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import envhive
from envhive.executors import available_executors

pytestmark = pytest.mark.timeout(300)

EXECUTORS = available_executors()


class KwargsEnv(gym.Env):
    """Reports the keywords its ``reset`` got (``info["got"]``); episodes last 2 steps."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 10, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, **kwargs):
        self.t = 0
        return np.zeros(1, np.float32), {"got": repr(sorted(kwargs.items()))}

    def step(self, action):
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, self.t >= 2, False, {}


class BareEnv(gym.Env):
    """A ``reset`` with no parameters at all (older envs); episodes last 2 steps."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 10, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, self.t >= 2, False, {}


def got(info, n=2):
    return [str(g) for g in info["got"][:n]]


@pytest.mark.parametrize("name", EXECUTORS)
def test_reset_gets_seed_and_options_only_when_given(name):
    env = envhive.make(KwargsEnv, 2, executor=name)
    assert got(env.reset()[1]) == ["[]"] * 2
    assert got(env.reset(seed=3)[1]) == ["[('seed', 3)]", "[('seed', 4)]"]
    assert got(env.reset(options={"level": 1})[1]) == ["[('options', {'level': 1})]"] * 2
    assert got(env.reset(seed=[5, None], options={"a": 0})[1]) == [
        "[('options', {'a': 0}), ('seed', 5)]", "[('options', {'a': 0})]"]
    assert got(env.reset(options={})[1]) == ["[]"] * 2  # no options: none passed
    info = env.reset(options={"reset_mask": np.array([False, True])})[1]
    assert info["_got"].tolist() == [False, True] and str(info["got"][1]) == "[]"
    env.close()


@pytest.mark.parametrize("name", EXECUTORS)
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_autoresets_and_make_seed(name, mode):
    env = envhive.make(KwargsEnv, 2, executor=name, autoreset=mode, seed=7)
    assert got(env.reset()[1]) == ["[('seed', 7)]", "[('seed', 8)]"]  # make's seed: first reset
    for _ in range(3):
        _, _, term, _, info = env.step(np.zeros(2, np.int64))
        if "got" in info:  # the autoreset's reset info
            assert set(got(info)) == {"[]"}
    env.close()


@pytest.mark.parametrize("name", EXECUTORS)
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_env_without_reset_parameters_works(name, mode):
    env = envhive.make(BareEnv, 2, executor=name, autoreset=mode)
    env.reset()
    for t in range(5):
        if mode == "disabled" and t % 2 == 0 and t:
            env.reset(options={"reset_mask": np.array([True, True])})
        env.step(np.zeros(2, np.int64))
    env.close()


def test_env_without_reset_parameters_on_dm_env():
    pytest.importorskip("dm_env")
    env = envhive.make(BareEnv, 2, api="dm_env")
    env.reset()
    for _ in range(5):
        env.step(np.zeros(2, np.int64))
    env.close()


def test_env_without_reset_parameters_on_torchrl():
    """TorchRL's rollout resets ended envs with a mask (``options={"reset_mask": ...}``)."""
    pytest.importorskip("torchrl")
    env = envhive.make(BareEnv, 2, api="torchrl")
    out = env.rollout(6, break_when_any_done=False)
    assert out["next", "done"].sum() >= 4
    env.close()
