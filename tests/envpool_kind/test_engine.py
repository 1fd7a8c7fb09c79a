"""EnvPool's engines as the ``"envpool"`` engine kind: ``envhive.make("envpool/<id>")``.

What is proved here, for a sample of families (classic control, a toy-text, MiniGrid with a
Dict observation, DeepMind Control): the native engine equals EnvPool itself for the same seed
step for step (autoresets included), every executor equals the native engine in every
autoreset mode, partial resets and async ``send``/``recv`` keep every env's episode, seeds
follow the documented rule, and multi-player ids run on the agent axis.
"""

from __future__ import annotations

import numpy as np
import pytest

import envhive
from envhive.errors import ConfigError, EnvWorkerError, UnexpectedKeywordError
from envhive.testing import assert_same_transcript, transcript

envpool = pytest.importorskip("envpool")

# (id, env_kwargs, steps): short time limits force autoresets within a few steps.
CASES = [
    ("CartPole-v1", {"max_episode_steps": 7}, 20),
    ("Taxi-v3", {"max_episode_steps": 5}, 12),
    ("MiniGrid-Empty-5x5-v0", {"max_episode_steps": 4}, 10),
    ("CheetahRun-v1", {"max_episode_steps": 3}, 8),
]


def _actions(space, n, seed=0):
    rng = np.random.default_rng(seed)
    if hasattr(space, "n"):
        return lambda t: rng.integers(0, int(space.n), n)
    return lambda t: rng.uniform(space.low, space.high, (n, *space.shape)).astype(space.dtype)


def _envpool_run(task, kwargs, n, steps, seed, actions):
    """EnvPool itself (gymnasium API): obs, reward, flags, elapsed_step per step."""
    env = envpool.make_gymnasium(task, num_envs=n, seed=seed, **kwargs)
    try:
        obs, info = env.reset()
        out = [(obs, np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), info["elapsed_step"])]
        for t in range(steps):
            a = actions(t)
            dtype = env.spec.action_array_spec["action"].dtype
            obs, rew, term, trunc, info = env.step(np.asarray(a, dtype))
            out.append((obs, rew, term, trunc, info["elapsed_step"]))
        return out
    finally:
        env.close()


def _leaves(obs):
    return [obs[k] for k in sorted(obs)] if isinstance(obs, dict) else [obs]


@pytest.mark.parametrize("task,kwargs,steps", CASES, ids=[c[0] for c in CASES])
def test_native_engine_equals_envpool_for_the_same_seed(task, kwargs, steps):
    n = 3
    env = envhive.make(f"envpool/{task}", n, env_kwargs=kwargs, seed=11)
    assert env.executor == "native"
    actions = _actions(env.single_action_space, n)
    try:
        ours = [env.reset()]
        for t in range(steps):
            ours.append(env.step(actions(t)))
    finally:
        env.close()
    theirs = _envpool_run(task, kwargs, n, steps, 11, _actions(env.single_action_space, n))
    assert any(o[3].any() for o in ours[1:]), "no time limit hit: the case tests no autoreset"
    for t, (mine, ref) in enumerate(zip(ours, theirs)):
        for a, b in zip(_leaves(mine[0]), _leaves(ref[0])):
            np.testing.assert_array_equal(a, b, err_msg=f"obs at call {t}")
        if t:
            np.testing.assert_array_equal(mine[1], ref[1].astype(np.float64), err_msg=f"reward at {t}")
            np.testing.assert_array_equal(mine[2], ref[2], err_msg=f"terminated at {t}")
            np.testing.assert_array_equal(mine[3], ref[3], err_msg=f"truncated at {t}")
        info = mine[-1] if t else mine[1]
        np.testing.assert_array_equal(info["elapsed_step"], ref[4], err_msg=f"elapsed_step at {t}")


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
def test_every_executor_equals_the_native_engine(mode, executor):
    task, kwargs, steps = "CartPole-v1", {"max_episode_steps": 6}, 15
    n = 3

    def run(ex):
        env = envhive.make(f"envpool/{task}", n, env_kwargs=kwargs, executor=ex, autoreset=mode)
        try:
            if mode != "disabled":
                return transcript(env, steps, _actions(env.single_action_space, n), seed=[3, 4, 5])
            rec = transcript(env, 5, _actions(env.single_action_space, n), seed=[3, 4, 5])
            mask = np.array([True, False, True])
            rec.append(env.reset(options={"reset_mask": mask}))  # unseeded: see the seed tests
            return rec
        finally:
            env.close()

    assert_same_transcript(run("native"), run(executor))


def test_same_step_keeps_the_terminal_observation():
    n = 2
    env = envhive.make("envpool/CartPole-v1", n, env_kwargs={"max_episode_steps": 3}, autoreset="same_step", seed=0)
    ref = envhive.make("envpool/CartPole-v1", n, env_kwargs={"max_episode_steps": 3}, seed=0)
    try:
        env.reset(), ref.reset()
        a = np.zeros(n, np.int64)
        for _ in range(2):
            env.step(a), ref.step(a)
        obs, rew, term, trunc, info = env.step(a)
        last = ref.step(a)
        first = ref.step(a)
        assert trunc.all() and last[3].all()
        np.testing.assert_array_equal(np.stack(info["final_obs"]), last[0])
        np.testing.assert_array_equal(obs, first[0])  # the reset observation
        np.testing.assert_array_equal(rew, last[1])  # the step's reward
        np.testing.assert_array_equal(info["final_info"]["elapsed_step"], [3, 3])
        np.testing.assert_array_equal(info["elapsed_step"], [0, 0])
    finally:
        env.close(), ref.close()


def test_partial_reset_resets_only_the_masked_envs():
    n = 4
    env = envhive.make("envpool/CartPole-v1", n, seed=0)
    try:
        env.reset()
        for _ in range(3):
            env.step(np.ones(n, np.int64))
        before = env.step(np.ones(n, np.int64))
        mask = np.array([False, True, False, True])
        obs, info = env.reset(options={"reset_mask": mask})
        np.testing.assert_array_equal(info["elapsed_step"][mask], [0, 0])
        np.testing.assert_array_equal(obs[~mask], before[0][~mask])
        after = env.step(np.ones(n, np.int64))
        np.testing.assert_array_equal(after[4]["elapsed_step"], [5, 1, 5, 1])
    finally:
        env.close()


def test_async_send_recv_keeps_every_episode():
    """batch_size < num_envs: every env's transitions equal a sync run of the same seeds."""
    n, k, steps = 6, 2, 12
    kwargs = {"max_episode_steps": 4}
    sync = envhive.make("envpool/CartPole-v1", n, env_kwargs=kwargs, seed=0)
    try:
        obs, info = sync.reset()
        per_env = {i: [obs[i]] for i in range(n)}
        for _ in range(steps):
            obs = sync.step(np.ones(n, np.int64))[0]
            for i in range(n):
                per_env[i].append(obs[i])
    finally:
        sync.close()
    env = envhive.make("envpool/CartPole-v1", n, env_kwargs=kwargs, seed=0, batch_size=k)
    got = {i: [] for i in range(n)}
    try:
        env.async_reset()
        while min(len(v) for v in got.values()) < steps + 1:
            obs, _, _, _, info = env.recv()
            ids = info["env_id"]
            for row, i in enumerate(ids.tolist()):
                got[i].append(obs[row])
            env.send(np.ones(len(ids), np.int64), ids)
    finally:
        env.close()
    for i in range(n):
        np.testing.assert_array_equal(np.stack(got[i][: steps + 1]), np.stack(per_env[i]))


def test_a_seeded_reset_of_every_env_rebuilds_the_pool():
    env = envhive.make("envpool/CartPole-v1", 3)
    try:
        a, _ = env.reset(seed=5)
        env.step(np.ones(3, np.int64))
        b, _ = env.reset(seed=5)
        c, _ = env.reset(seed=6)
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)
        # make(seed=s) gives env i the seed s + i, as envpool.make(seed=s) does
        ref = envpool.make_gymnasium("CartPole-v1", num_envs=3, seed=5)
        np.testing.assert_array_equal(a, ref.reset()[0])
        ref.close()
    finally:
        env.close()


def test_a_seeded_reset_of_some_envs_while_others_run_is_refused():
    """On the native engine (one EnvPool pool): the other executors run one pool per env and
    honour it (docs/envpool.md, "Seeds")."""
    env = envhive.make("envpool/CartPole-v1", 3, seed=0)
    try:
        env.reset()
        env.step(np.ones(3, np.int64))
        with pytest.raises(EnvWorkerError, match="EnvPool seeds each env once") as info:
            env.reset(seed=[7, None, None], options={"reset_mask": np.array([True, False, False])})
        assert info.value.env_id == 0
        obs, _ = env.reset()  # an unseeded reset of every env works
        assert obs.shape == (3, 4)
    finally:
        env.close()


def test_seeds_beyond_int32_are_refused():
    env = envhive.make("envpool/CartPole-v1", 2)
    try:
        with pytest.raises(EnvWorkerError, match="int32 seeds"):
            env.reset(seed=2**31)
    finally:
        env.close()


def test_reset_options_are_refused():
    env = envhive.make("envpool/CartPole-v1", 2, seed=0)
    try:
        with pytest.raises(EnvWorkerError, match="reset options"):
            env.reset(options={"difficulty": 1})
    finally:
        env.close()


def test_bad_keywords_are_refused_at_make():
    with pytest.raises(UnexpectedKeywordError, match="max_episode_step"):
        envhive.make("envpool/CartPole-v1", 2, env_kwargs={"max_episode_step": 3})
    with pytest.raises(ConfigError, match="envhive's to decide"):
        envhive.make("envpool/CartPole-v1", 2, env_kwargs={"num_envs": 3})


def test_render_through_the_engine():
    env = envhive.make("envpool/CartPole-v1", 2, env_kwargs={"render_mode": "rgb_array"}, seed=0)
    try:
        env.reset()
        frames = env.render()
        assert len(frames) == 2 and frames[0].shape == (400, 600, 3) and frames[0].dtype == np.uint8
        single = envhive.make("envpool/CartPole-v1", 1, env_kwargs={"render_mode": "rgb_array"},
                              executor="serial", seed=0)
        single.reset()
        np.testing.assert_array_equal(single.render()[0], frames[0])
        single.close()
    finally:
        env.close()


def test_multi_player_ids_run_on_the_agent_axis():
    """pgx's TicTacToe: two players per env, one row each on the agent axis."""
    def run(executor):
        pool = envhive.make("envpool/TicTacToe-v1", 2, api="pool", executor=executor, seed=0)
        try:
            b = pool.reset()
            assert pool.agents == ("player_0", "player_1")
            assert b.obs.shape == (2, 2, 3, 3, 2) and b.agents.active.all()
            rows = [b]
            for t in range(6):
                rows.append(pool.step(np.full((2, 2), t % 9, np.int64)))
            return [(r.obs.copy(), r.reward.copy(), r.terminated.copy(), r.agents.active.copy()) for r in rows]
        finally:
            pool.close()

    native, serial = run("native"), run("serial")
    for a, b in zip(native, serial):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert native[1][1].shape == (2, 2)


def test_torchrl_and_sb3_front_ends_take_envpool_engines():
    pytest.importorskip("stable_baselines3")
    env = envhive.make("envpool/CartPole-v1", 2, api="sb3", seed=0)
    try:
        obs = env.reset()
        obs, rew, done, infos = env.step(np.zeros(2, np.int64))
        assert obs.shape == (2, 4) and rew.tolist() == [1.0, 1.0]
    finally:
        env.close()
