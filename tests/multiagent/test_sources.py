"""Multi-agent sources: dmlab2d substrates by id, PettingZoo's own envs, a MeltingPot stand-in."""

from __future__ import annotations

import numpy as np
import pytest

import envhive
from envhive.errors import ConfigError
from tests.multiagent.stand_ins import FakeSubstrate

dmlab2d = pytest.importorskip("dmlab2d")


def _actions(pool, rng, n):
    return np.stack([pool.action_space.sample() for _ in range(n)])


def _rollout(env_id, executor, players, steps=4, n=2, mode="next_step"):
    pool = envhive.make(env_id, num_envs=n, env_kwargs={"num_players": players}, executor=executor,
                        seed=3, api="pool", autoreset=mode)
    pool.action_space.seed(0)
    rows = [pool.reset()]
    for _ in range(steps):
        rows.append(pool.step(_actions(pool, None, n)))
    pool.close()
    return rows


@pytest.mark.parametrize("players", [1, 2, 7])
def test_commons_harvest_players(players):
    rows = _rollout("dmlab2d/commons_harvest", "serial", players, steps=3)
    b = rows[-1]
    assert b.obs["RGB"].shape == (2, players, 88, 88, 3) and b.obs["RGB"].dtype == np.uint8
    assert b.obs["POSITION"].shape == (2, players, 2)  # vector observations next to the pixels
    assert b.reward.shape == (2, players) and b.agents.active.all()
    assert b.obs["RGB"].any()


def test_substrate_same_on_every_executor():
    """Determinism by seed: the envs' rows are identical on serial, thread and process."""
    want = [(b.obs["RGB"].tobytes(), b.obs["POSITION"].tolist(), b.reward.tolist())
            for b in _rollout("dmlab2d/commons_harvest", "serial", 2)]
    for executor in ("thread", "process"):
        got = [(b.obs["RGB"].tobytes(), b.obs["POSITION"].tolist(), b.reward.tolist())
               for b in _rollout("dmlab2d/commons_harvest", executor, 2)]
        assert got == want, executor
    other = _rollout("dmlab2d/commons_harvest", "serial", 2)
    assert [b.obs["RGB"].tobytes() for b in other] == [w[0] for w in want]


def test_chase_eat_ends_and_resets_per_mode():
    """chase_eat (one player, WORLD observations) terminates in a few steps: same_step keeps
    the terminal observation of its player in final_obs, next_step resets on the next step."""
    for mode in ("same_step", "next_step"):
        pool = envhive.make("dmlab2d/chase_eat", num_envs=2, executor="serial", seed=0,
                            autoreset=mode, api="pool")
        assert pool.agents == ("player_0",)
        pool.reset()
        ends = 0
        for _ in range(30):
            b = pool.step(np.zeros((2, 1, 1), np.int64))
            ended = b.terminated | b.truncated
            ends += int(ended.sum())
            if mode == "same_step" and ended.any():
                assert b.has_final[ended].all() and b.agents.terminated[ended].all()
                assert b.final_obs["RGB"].shape[1:] == (1, 144, 144, 3)
        pool.close()
        assert ends > 0


def test_clean_up_builds_with_world_obs():
    pool = envhive.make("dmlab2d/clean_up", num_envs=1, executor="serial", api="pool",
                        env_kwargs={"num_players": 2, "world_obs": True})
    b = pool.reset(seed=0)
    assert b.obs["WORLD.RGB"].shape == (1, 2, 336, 480, 3) and "CONTRIB" in b.obs
    pool.close()


def test_built_lab2d_explains_the_factory_fix():
    from dmlab2d import runfiles_helper

    lab = dmlab2d.Lab2d(runfiles_helper.find(), {"levelName": "chase_eat"})
    with pytest.raises(ConfigError, match="pass a factory"):
        envhive.make(lab, num_envs=2, executor="process")
    from envhive.envs.multiagent import Lab2dPlayers, PlayersAgents

    env = Lab2dPlayers("chase_eat")
    with pytest.raises(ConfigError, match="cannot be serialized.*lambda: MyEnv"):
        envhive.make(lambda: PlayersAgents(env), num_envs=1, executor="process", num_workers=1)


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_meltingpot_stand_in(executor):
    """A dm_env of player lists (MeltingPot's layout) runs through the same path: players are
    agents, LAST with discount 1 truncates every one of them, same_step keeps their final obs."""
    pool = envhive.make(lambda: FakeSubstrate(3, length=2), num_envs=2, executor=executor,
                        autoreset="same_step", seed=5, api="pool")
    assert pool.agents == ("player_0", "player_1", "player_2")
    assert set(pool.observation_space.spaces) == {"RGB", "STEP"}  # objects are dropped
    first = pool.reset()
    b = pool.step(np.array([[1, 2, 3], [0, 0, 0]]))
    assert b.reward.tolist() == [[1.0, 3.0, 5.0], [0.0, 1.0, 2.0]]
    b = pool.step(np.zeros((2, 3), np.int64))
    assert b.truncated.all() and b.agents.truncated.all() and b.has_final.all()
    assert (b.final_obs["STEP"] == 2).all() and (b.obs["STEP"] == 0).all()
    again = envhive.make(lambda: FakeSubstrate(3, length=2), num_envs=2, executor="serial",
                         seed=5, api="pool")
    assert again.reset().obs["RGB"].tobytes() == first.obs["RGB"].tobytes()
    again.close()
    pool.close()


def test_pettingzoo_rps_on_process_matches_serial():
    rps = pytest.importorskip("pettingzoo.classic.rps_v2")
    outs = []
    for executor in ("serial", "process"):
        env = envhive.make(rps.parallel_env, num_envs=3, executor=executor, seed=1,
                           agent_layout="flat")
        env.action_space.seed(2)
        obs, info = env.reset()
        got = [obs.tolist()]
        for _ in range(6):
            obs, rew, term, trunc, info = env.step(env.action_space.sample())
            got.append((obs.tolist(), rew.tolist(), term.tolist(), trunc.tolist()))
        env.close()
        outs.append(got)
    assert outs[0] == outs[1]
