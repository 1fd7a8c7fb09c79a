"""A one-agent multi-agent env on the front ends without an agent axis (issue 41, finding 7).

A pool of one-agent envs is exactly what a single-agent front end takes: its rows are the
agent's observations, actions, rewards and infos, with the env's flags
(``frontends/_flat.OneAgent``). Each front end is compared with gymnasium's ``SyncVectorEnv``
over the same env seen as a single-agent gymnasium env (``solo.SoloGym``).
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envhive
from envhive.errors import ConfigError
from envhive.testing import TagTeamEnv, assert_same_transcript, transcript
from tests.multiagent.solo import SoloGym, Vanishing, solo, solo_long

SOURCES = {"terminates": solo, "truncates": solo_long, "vanishes": Vanishing}
MODES = {"next_step": gym.vector.AutoresetMode.NEXT_STEP, "same_step": gym.vector.AutoresetMode.SAME_STEP}


def _actions(t: int) -> np.ndarray:
    return np.array([t % 2, 1, (t // 2) % 2], np.int64)


def _without_active(rec: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """A transcript without envhive's ``active`` info (every row has one; the reference, a
    single-agent env, has none)."""
    out = []
    for call in rec:
        info = dict(call[-1])
        info.pop("active")
        assert info.pop("_active").all()
        out.append((*call[:-1], info))
    return out


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
def test_gymnasium_front_end_equals_the_single_agent_env(source: str, mode: str, executor: str) -> None:
    make = SOURCES[source]
    ref = gym.vector.SyncVectorEnv([functools.partial(SoloGym, make)] * 3, autoreset_mode=MODES[mode])
    want = transcript(ref, 16, _actions, seed=5)
    ref.close()
    with envhive.make(make, 3, executor=executor, autoreset=mode) as env:
        assert env.single_observation_space == ref.single_observation_space
        assert env.single_action_space == ref.single_action_space
        got = transcript(env, 16, _actions, seed=5)
    ended = sum(int((call[2] | call[3]).sum()) for call in got[1:])
    assert ended >= 3  # episodes ended (and were reset) along the way
    assert_same_transcript(_without_active(got), want)


def test_the_env_flags_not_the_agents() -> None:
    """An agent that leaves without a flag of its own ends its env: the row says terminated
    (an agent's own flags would say nothing, and autoreset would reset a row that never
    ended), its observation is padding and ``active`` is False."""
    with envhive.make(Vanishing, 2, executor="serial") as env:
        env.reset(seed=0)
        for _ in range(2):
            obs, rew, term, trunc, info = env.step(np.zeros(2, np.int64))
            assert not term.any() and info["active"].all() and (info["t"] > 0).all()
        obs, rew, term, trunc, info = env.step(np.zeros(2, np.int64))
        assert term.all() and not trunc.any() and not info["active"].any()
        assert (obs == 0).all() and (rew == 0).all()
        obs, rew, term, trunc, info = env.step(np.zeros(2, np.int64))  # next_step: the reset
        assert not term.any() and info["active"].all() and obs[:, 0].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_dm_env_front_end(executor: str) -> None:
    pytest.importorskip("dm_env")
    with envhive.make(solo, 2, api="dm_env", executor=executor, seed=1) as env:
        ts = env.reset()
        assert ts.observation.shape == (2, 4) and ts.step_type.tolist() == [0, 0]
        kinds = []
        for _ in range(8):
            ts = env.step(np.ones(2, np.int64))
            kinds.append(ts.step_type.tolist())
        for i in range(2):  # the agent dies (LAST) by step 6, the next step is FIRST (a reset)
            last = [k[i] for k in kinds].index(2)
            assert kinds[last + 1][i] == 0


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_sb3_front_end(executor: str) -> None:
    pytest.importorskip("stable_baselines3")
    env = envhive.make(solo_long, 2, api="sb3", executor=executor, seed=0)
    assert env.reset().shape == (2, 4)
    for _ in range(7):
        obs, rew, done, infos = env.step(np.ones(2, np.int64))
    assert done.all() and all(info["TimeLimit.truncated"] for info in infos)
    assert [i["terminal_observation"][2] for i in infos] == [7, 7]  # step 7's obs
    assert obs[:, 2].tolist() == [0, 0]  # the reset's
    env.close()


def test_torchrl_front_end() -> None:
    pytest.importorskip("torchrl")
    from torchrl.envs.utils import check_env_specs

    env = envhive.make(solo, 2, api="torchrl", seed=0)
    check_env_specs(env)
    td = env.rollout(12, break_when_any_done=False)
    assert td["observation"].shape == (2, 12, 4)
    term = td["next", "terminated"].squeeze(-1)
    assert term.any(dim=1).all()  # each env's agent died
    # The step after an end starts a new episode (step 0), nothing crosses it.
    obs = td["observation"]
    ended = term[:, :-1]
    assert (obs[:, 1:][ended][:, 2] == 0).all()
    env.close()


@pytest.mark.parametrize("api", ["gymnasium", "dm_env", "torchrl", "sb3"])
def test_several_agents_are_refused_with_a_message_that_holds(api: str) -> None:
    if api in ("torchrl", "sb3"):
        pytest.importorskip({"torchrl": "torchrl", "sb3": "stable_baselines3"}[api])
    with pytest.raises(ConfigError) as info:
        envhive.make(TagTeamEnv, 2, api=api)
    text = str(info.value)
    assert f"api={api!r} takes one agent per env, but these envs have 3 agents ['a0', 'a1', 'a2']" in text
    assert "agent_layout='flat'" in text
    with pytest.raises(ConfigError, match="2 agents"):
        envhive.make(lambda: TagTeamEnv(agents=("a0", "a1")), 1, api=api)
