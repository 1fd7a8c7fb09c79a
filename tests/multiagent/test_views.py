"""Front ends of a multi-agent pool: the PettingZoo ParallelEnv view and the flattened view."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import envhive
from envhive.errors import ConfigError
from envhive.testing import TagTeamEnv

pz_test = pytest.importorskip("pettingzoo.test")


@pytest.mark.parametrize("num_envs", [1, 3])
@pytest.mark.parametrize("executor", ["serial", "process"])
def test_pettingzoo_api_test(num_envs, executor):
    env = envhive.make(TagTeamEnv, num_envs=num_envs, api="pettingzoo", executor=executor)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PettingZoo's test warns where the API is bent
        pz_test.parallel_api_test(env, num_cycles=30)
    env.close()


def test_pettingzoo_seed_test():
    pz_test.parallel_seed_test(lambda: envhive.make(TagTeamEnv, num_envs=2, api="pettingzoo"))


def test_pettingzoo_view_of_pettingzoo_env():
    rps = pytest.importorskip("pettingzoo.classic.rps_v2")
    env = envhive.make(rps.parallel_env, num_envs=2, api="pettingzoo", executor="process")
    pz_test.parallel_api_test(env, num_cycles=20)
    assert env.possible_agents == ["0/player_0", "0/player_1", "1/player_0", "1/player_1"]
    env.close()


def test_pettingzoo_view_rows():
    """One env: the view is the env itself (its agent ids, its rows, dead agents leave)."""
    ref, env = TagTeamEnv(), envhive.make(TagTeamEnv, num_envs=1, api="pettingzoo")
    want, got = ref.reset(seed=4), env.reset(seed=4)
    assert {a: o.tolist() for a, o in want[0].items()} == {a: o.tolist() for a, o in got[0].items()}
    while ref.agents:
        acts = {a: 1 for a in ref.agents}
        want, got = ref.step(acts), env.step(acts)
        assert {a: o.tolist() for a, o in want[0].items()} == {a: o.tolist() for a, o in got[0].items()}
        assert want[1:4] == got[1:4] and env.agents == ref.agents
    assert env.step({}) == ({}, {}, {}, {}, {})
    env.close()


def test_pettingzoo_view_refuses_autoreset():
    with pytest.raises(ConfigError, match="autoreset"):
        envhive.make(TagTeamEnv, num_envs=2, api="pettingzoo", autoreset="same_step")


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_flat_view_is_the_pools_rows(mode):
    """agent_layout='flat': rows are (env, agent) pairs, each the pool's own row, with masks
    and EnvPool's players.env_id / players.id."""
    pool = envhive.make(TagTeamEnv, num_envs=2, seed=3, autoreset=mode, api="pool")
    flat = envhive.make(TagTeamEnv, num_envs=2, seed=3, autoreset=mode, agent_layout="flat")
    assert flat.single_observation_space.shape == (4,) and flat.num_envs == 6
    b = pool.reset()
    obs, info = flat.reset()
    rng = np.random.default_rng(0)
    for _ in range(10):
        assert obs.tolist() == b.obs.reshape(6, 4).tolist()
        assert info["active"].tolist() == b.agents.active.ravel().tolist()
        assert info["players.env_id"].tolist() == [0, 0, 0, 1, 1, 1]
        assert info["players.id"].tolist() == [0, 1, 2, 0, 1, 2]
        acts = rng.integers(0, 3, (2, 3))
        b = pool.step(acts)
        obs, rew, term, trunc, info = flat.step(acts.ravel())
        assert rew.tolist() == b.reward.ravel().tolist()
        assert term.tolist() == b.agents.terminated.ravel().tolist()
        assert trunc.tolist() == b.agents.truncated.ravel().tolist()
        if b.has_final is not None:
            finals = info["final_obs"]
            for row in np.flatnonzero(info["_final_obs"]):
                assert finals[row].tolist() == b.final_obs[row // 3, row % 3].tolist()
    pool.close()
    flat.close()


def test_flat_view_async_whole_envs():
    env = envhive.make(TagTeamEnv, num_envs=3, batch_size=1, agent_layout="flat", executor="thread",
                       seed=0)
    env.async_reset()
    seen = set()
    for _ in range(3):
        obs, rew, term, trunc, info = env.recv()
        assert obs.shape == (3, 4)
        seen.add(int(info["env_id"][0]) // 3)
    assert seen == {0, 1, 2}
    env.send(np.zeros(3, np.int64), env_id=[3, 4, 5])
    obs, *_, info = env.recv()
    assert info["env_id"].tolist() == [3, 4, 5]
    with pytest.raises(ConfigError, match="whole envs"):
        env.send(np.zeros(2, np.int64), env_id=[0, 1])
    assert env.call("state")[4].tolist() == env.call("state")[5].tolist()
    env.close()


def test_flat_view_with_sb3():
    pytest.importorskip("stable_baselines3")
    env = envhive.make(TagTeamEnv, num_envs=2, api="sb3", agent_layout="flat", seed=0)
    assert env.reset().shape == (6, 4)
    _, rew, done, infos = env.step(np.zeros(6, np.int64))
    assert rew.shape == (6,) and [i["players.id"] for i in infos] == [0, 1, 2, 0, 1, 2]
    env.close()


def test_flat_view_needs_one_space():
    from envhive._agents import AgentEnv

    class Mixed(AgentEnv):
        def __init__(self):
            from gymnasium import spaces

            self._init_agents(["x", "y"])
            self.agent_observation_spaces = (spaces.Box(0, 1, (2,)), spaces.Box(0, 1, (3,)))
            self.agent_action_spaces = (spaces.Discrete(2), spaces.Discrete(2))
            self.observation_space = spaces.Tuple(self.agent_observation_spaces)
            self.action_space = spaces.MultiDiscrete([2, 2])

    with pytest.raises(ConfigError, match="one observation and one action space"):
        envhive.make(Mixed, num_envs=1, agent_layout="flat")


def test_flat_view_with_torchrl():
    pytest.importorskip("torchrl")
    with pytest.raises(ConfigError, match="agent_layout='flat'"):
        envhive.make(TagTeamEnv, num_envs=2, api="torchrl")
    env = envhive.make(TagTeamEnv, num_envs=2, api="torchrl", agent_layout="flat", seed=0)
    td = env.rollout(12, break_when_any_done=False)
    assert td.batch_size == (6, 12)
    obs, nxt = td["observation"], td["next", "observation"]
    term = td["next", "terminated"].squeeze(-1)
    # Agent a0 (rows 0 and 3) dies at step 3 + tag % 3, mid-episode: TorchRL asks to reset
    # its row, which must not cut the other agents' episode (agents reset with their env).
    assert term[[0, 3]].any()
    live = (obs[..., 2] > 0) & (nxt[..., 2] > 0)  # both steps inside one episode
    assert (nxt[..., 2][live] == obs[..., 2][live] + 1).all()
    assert (nxt[..., 0][live] == obs[..., 0][live]).all()  # same episode tag: nothing crossed
    a1 = nxt[1, :, 2].tolist()
    assert a1[:7] == [1, 2, 3, 4, 5, 6, 7]  # a1 runs its whole episode though a0 died
    env.close()


@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
@pytest.mark.parametrize("actions, message", [
    ({"0/a0": 1, "1/a0": 1, "1/a1": 1}, r"no action for live agents '0/a1' \(env 0\)"),
    ({"0/a0": 1, "0/a1": 1, "1/a0": 1, "1/a1": 1, "zzz": 1}, r"agents that do not exist: 'zzz'"),
    ({}, r"no action for live agents '0/a0', '0/a1' \(env 0\), '1/a0', '1/a1' \(env 1\)"),
])
def test_pettingzoo_view_refuses_actions_that_leave_out_or_invent_agents(executor, actions, message):
    """A live agent without an action, a key that is no agent, or no actions at all: an
    ActionError naming them (and their envs), nothing stepped, the view usable after; the
    idle action fills in only when asked for (issue 41, finding 8)."""
    env = envhive.make(TagTeamEnv, num_envs=2, api="pettingzoo", executor=executor)
    ref = [TagTeamEnv(), TagTeamEnv()]
    env.reset(seed=3)
    for i, r in enumerate(ref):
        r.reset(seed=3 + i)
    before = [s.tolist() for s in env.state()]
    with pytest.raises(envhive.ActionError, match=message) as info:
        env.step(actions)
    assert "nothing was stepped" in str(info.value)
    assert [s.tolist() for s in env.state()] == before  # nothing stepped
    obs, rew, *_ = env.step({a: 1 for a in env.agents})  # and the view goes on
    want = [r.step({a: 1 for a in r.agents}) for r in ref]
    assert rew == {f"{i}/{a}": x for i, w in enumerate(want) for a, x in w[1].items()}
    if "zzz" in actions:  # unknown agents are refused whatever missing_actions says
        env.missing_actions = "idle"
        with pytest.raises(envhive.ActionError, match="'zzz'"):
            env.step(actions)
    else:  # asked for: agents left out act with the idle action (a seeded sample of their space)
        env.missing_actions = "idle"
        space = gym.spaces.Discrete(3)
        space.seed(0)
        idle = int(space.sample())
        assert idle != 1
        obs, *_ = env.step({k: 1 for k in actions})
        acted = {a: int(o[3]) % 10 for a, o in obs.items() if a.endswith(("a0", "a1"))}
        assert acted == {a: 1 if a in actions else idle for a in acted}
    with pytest.raises(ConfigError, match="missing_actions"):
        env.missing_actions = "fill"
    env.close()


def test_pettingzoo_view_refuses_actions_that_are_not_a_dict():
    env = envhive.make(TagTeamEnv, num_envs=1, api="pettingzoo")
    env.reset(seed=0)
    with pytest.raises(envhive.ActionTypeError, match="expected a dict of actions by agent, got list"):
        env.step([1, 1])
    env.close()
