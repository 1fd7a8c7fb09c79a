"""The agent axis: per-agent rows, masks and episode semantics on every executor and mode.

Run on envhive.testing.TagTeamEnv (a PettingZoo-style parallel env whose agent a0 dies
mid-episode and a2 joins after step 2; every observation says [tag, episode, step, agent]),
and on PettingZoo's own rps_v2 when pettingzoo is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import envhive
from envhive._buffers import Buffers, BufferSpec
from envhive.errors import ConfigError, EnvWorkerError
from envhive.testing import TagTeamEnv

EXECUTORS = ("serial", "thread", "process")
MODES = ("next_step", "same_step", "disabled")


def _run(executor: str, mode: str, steps: int = 14, n: int = 3):
    """A pool's rows over ``steps`` calls (disabled: ended envs reset by mask)."""
    pool = envhive.make(TagTeamEnv, num_envs=n, executor=executor, autoreset=mode, seed=11,
                        num_workers=2 if executor != "serial" else None, api="pool")
    rng = np.random.default_rng(0)
    rows = [pool.reset()]
    for _ in range(steps):
        last = rows[-1]
        ended = last.terminated | last.truncated
        if mode == "disabled" and ended.any():
            rows.append(pool.reset(options={"reset_mask": ended}))
        else:
            rows.append(pool.step(rng.integers(0, 3, (n, 3))))
    pool.close()
    return rows


def _flat(rows):
    return [(b.obs.tolist(), b.reward.tolist(), b.op.tolist(), b.terminated.tolist(),
             b.truncated.tolist(), b.agents.terminated.tolist(), b.agents.truncated.tolist(),
             b.agents.active.tolist(), None if b.final_obs is None else b.final_obs.tolist(),
             None if b.has_final is None else b.has_final.tolist()) for b in rows]


@pytest.mark.parametrize("mode", MODES)
def test_same_rows_on_every_executor(mode):
    """Determinism by seed: every executor gives serial's rows, agent by agent."""
    want = _flat(_run("serial", mode))
    for executor in EXECUTORS[1:]:
        assert _flat(_run(executor, mode)) == want, executor


@pytest.mark.parametrize("mode", MODES)
def test_masks_and_no_crossing_transitions(mode):
    rows = _run("serial", mode, steps=16)
    saw_death = saw_join = saw_end = False
    for prev, b in zip(rows, rows[1:]):
        tag, step = b.obs[..., 0], b.obs[..., 2]
        for i in range(3):
            act = b.agents.active[i]
            # Inactive rows are padding: zero obs, reward 0, flags False (a same_step row that
            # ended and reset keeps the step's rewards and flags with the reset's mask).
            assert not b.obs[i][~act].any()
            if b.has_final is None or not b.has_final[i]:
                assert not b.reward[i][~act].any()
                assert not (b.agents.terminated[i] | b.agents.truncated[i])[~act].any()
            else:  # every agent that acted is done at its env's end
                acted = prev.agents.active[i]
                assert (b.agents.terminated[i] | b.agents.truncated[i])[acted].all()
            if b.op[i] in (0, 2):  # a step: every active agent's row continues prev's episode...
                final = b.has_final is not None and b.has_final[i]
                seen = b.final_obs[i] if final else b.obs[i]
                for k in np.flatnonzero(act if not final else prev.agents.active[i]):
                    if prev.agents.active[i, k]:
                        assert seen[k, 0] == prev.obs[i, k, 0] and seen[k, 2] == prev.obs[i, k, 2] + 1
                    else:  # ...or is an agent joining: a first observation, reward 0
                        saw_join = True
                        assert seen[k, 3] == 19 and b.reward[i, k] == 0
                if final:  # same_step: the reset obs starts a new episode for every agent
                    assert (step[i][b.agents.active[i]] == 0).all()
            if b.op[i] == 1:
                assert (step[i][act] == 0).all() and not b.reward[i].any()
                assert (tag[i][act] == tag[i][act][0]).all()
            a0_died = b.agents.terminated[i, 0] and not (b.terminated[i] or b.truncated[i])
            if a0_died and b.op[i] in (0, 2):
                saw_death = True
            prev_reset = prev.has_final is not None and prev.has_final[i]
            if prev.agents.terminated[i, 0] and b.op[i] in (0, 2) and not prev_reset:
                assert not b.agents.active[i, 0] and b.reward[i, 0] == 0  # dead: masked
            if b.terminated[i] or b.truncated[i]:
                saw_end = True
                # The env's end: every agent in it is done (none looks alive).
                live = b.agents.active[i] & ~(b.agents.terminated[i] | b.agents.truncated[i])
                assert not (live.any() and b.op[i] != 2)
    assert saw_death and saw_join and saw_end


def test_time_limit_truncates_every_agent():
    env = envhive.make(lambda: TagTeamEnv(length=50), num_envs=2, max_episode_steps=2, api="pool")
    env.reset(seed=0)
    env.step(np.zeros((2, 3), np.int64))
    b = env.step(np.zeros((2, 3), np.int64))
    assert b.truncated.all() and not b.terminated.any()
    assert (b.agents.truncated == b.agents.active).all()
    env.close()


def test_buffer_spec_agent_axis():
    from gymnasium import spaces

    spec = BufferSpec(2, spaces.Box(0, 1, (3, 2)), spaces.MultiDiscrete([2] * 3), agents=("a", "b", "c"))
    assert spec.reward_shape == (3,)
    b = Buffers.allocate(spec)
    assert b.agent_terminated.shape == b.active.shape == (2, 3)
    assert b.rows(True, False)[5].active is not b.active
    one = Buffers.allocate(BufferSpec(2, spaces.Box(0, 1, (2,)), spaces.Discrete(2)))
    assert one.active is None and one.rows(False, False)[5] is None
    with pytest.raises(ConfigError, match="reward_shape"):
        BufferSpec(2, spaces.Box(0, 1, (2,)), spaces.Discrete(2), agents=("a", "b"), reward_shape=(3,))


def test_recv_gathers_agent_rows():
    pool = envhive.make(TagTeamEnv, num_envs=4, batch_size=2, executor="thread", seed=0, api="pool")
    pool.async_reset()
    got = [pool.recv(), pool.recv()]
    ids = np.concatenate([b.env_ids for b in got])
    assert sorted(ids.tolist()) == [0, 1, 2, 3]
    for b in got:
        assert b.agents.active.tolist() == [[True, True, False]] * 2
    pool.close()


def test_wrong_reward_shape_is_the_envs_error():
    from envhive._agents import AgentEnv

    class Short(AgentEnv):
        def __init__(self):
            from gymnasium import spaces

            self._init_agents(["x", "y"])
            self.observation_space = spaces.Box(0, 1, (2, 1))
            self.action_space = spaces.MultiDiscrete([2, 2])

        def reset(self, *, seed=None, options=None):
            self.active[:] = True
            return np.zeros((2, 1), np.float32), {}

        def step(self, action):
            return np.zeros((2, 1), np.float32), 1.0, False, False, {}  # one reward, not two

    pool = envhive.make(Short, num_envs=2, executor="serial", api="pool")
    pool.reset()
    with pytest.raises(EnvWorkerError, match="one reward per agent"):
        pool.step(np.zeros((2, 2), np.int64))
    pool.close()


@pytest.mark.parametrize("api", ["gymnasium", "dm_env", "sb3"])
def test_front_ends_without_an_agent_axis_refuse(api):
    if api == "sb3":
        pytest.importorskip("stable_baselines3")
    with pytest.raises(ConfigError, match="agent_layout='flat'"):
        envhive.make(TagTeamEnv, num_envs=2, api=api)


def test_mixed_agents_refused():
    with pytest.raises(envhive.errors.SpaceMismatchError):
        envhive.make([TagTeamEnv, lambda: envhive.testing.CountingEnv()], executor="serial", api="pool")


def test_auto_measures_a_parallel_env_as_a_worker_builds_it():
    """executor='auto' probes one env built as workers build it (agent axis included)."""
    env = envhive.make(TagTeamEnv, num_envs=2, agent_layout="flat")
    assert "raised" not in repr(env) and "(auto)" in repr(env)
    env.close()


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_worker_restart_ends_every_agent(mode):
    """A rebuilt worker's envs lose their episode: the row is truncated for every agent in it
    (none looks alive past its env's end)."""
    import os
    import signal

    from envhive.executors import ProcessExecutor
    from tests.process.test_process_faults import alive, wait_until

    ex = ProcessExecutor(2, on_worker_failure="restart")
    pool = envhive.make(TagTeamEnv, num_envs=4, executor=ex, autoreset=mode, api="pool")
    pool.reset(seed=0)
    pool.step(np.ones((4, 3), np.int64))
    old = ex.worker_pids()
    os.kill(old[0], signal.SIGKILL)
    wait_until(lambda: not alive(old[0]))
    b = pool.step(np.ones((4, 3), np.int64))
    assert b.truncated.tolist() == [True, True, False, False]
    assert (b.agents.truncated[:2] == b.agents.active[:2]).all() and b.agents.active[:2].any()
    assert not b.agents.terminated[:2].any() and not b.agents.truncated[2:].any()
    pool.close()
