"""``envhive.envpool``: EnvPool's Python API over envhive's pools, item by item of issue 38's
list (1-8), each against EnvPool 1.2.5 itself where it is installed.

envhive's own engines serve Atari, classic control and MuJoCo gym v5 here (no envpool needed
for those tests); the rest run on EnvPool's engine.
"""

from __future__ import annotations

import dm_env
import gymnasium as gym
import numpy as np
import pytest

import envhive.envpool as envpool
from envhive.envpool._errors import EnvPoolActionError, EnvPoolAssertionError


def _real():
    """EnvPool itself (skip without it)."""
    pytest.importorskip("envpool")
    from envhive.envs.envpool._real import envpool_module

    return envpool_module()


# -- 1. spaces of one env ------------------------------------------------------------------------
def test_action_and_observation_space_are_one_envs():
    env = envpool.make_gym("Pong-v5", num_envs=4)
    try:
        assert env.action_space == gym.spaces.Discrete(6)
        assert env.observation_space.shape == (4, 84, 84)
        assert env.single_action_space is env.action_space
        assert env.single_observation_space is env.observation_space
        assert env.num_envs == 4
    finally:
        env.close()


# -- 2. the pool is a gymnasium.Env / dm_env.Environment ---------------------------------------
def test_the_pool_is_a_gymnasium_env_and_wrappers_take_it():
    env = envpool.make_gymnasium("CartPole-v1", num_envs=3, seed=0)
    assert isinstance(env, gym.Env) and isinstance(env, gym.vector.VectorEnv)
    wrapped = gym.Wrapper(env)
    obs, info = wrapped.reset()
    obs, rew, term, trunc, info = wrapped.step(np.zeros(3, np.int32))
    assert obs.shape == (3, 4) and rew.shape == (3,)
    norm = gym.wrappers.vector.NormalizeObservation(env)
    obs, _ = norm.reset()
    assert obs.shape == (3, 4)
    wrapped.close()


def test_the_dm_pool_is_a_dm_env_environment():
    env = envpool.make_dm("CartPole-v1", num_envs=2)
    try:
        assert isinstance(env, dm_env.Environment)
        assert env.action_spec().num_values == 2
    finally:
        env.close()


# -- 3. specs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["Pong-v5", "CartPole-v1", "Acrobot-v1", "Pendulum-v1", "HalfCheetah-v5"])
def test_spec_keys_and_config_equal_envpools(task):
    ep = _real()
    ours, theirs = envpool.make_spec(task, num_envs=3), ep.make_spec(task, num_envs=3)
    assert type(ours).__name__ == type(theirs).__name__
    assert ours._config_keys == list(type(theirs)._config_keys)
    c0, c1 = ours.config, theirs.config
    assert {k: getattr(c0, k) for k in c0._fields} == {k: getattr(c1, k) for k in c1._fields}
    assert list(ours.action_array_spec) == list(theirs.action_array_spec)
    assert ours.reward_threshold == theirs.reward_threshold
    if task in ("Pong-v5", "CartPole-v1", "Acrobot-v1", "Pendulum-v1"):
        mine = [k for k in ours.state_array_spec if k != "info:ram"]
        assert mine == [k for k in theirs.state_array_spec if k != "info:ram"]
        for key in mine:
            assert ours.state_array_spec[key].dtype == theirs.state_array_spec[key].dtype, key
            assert ours.state_array_spec[key].shape == list(theirs.state_array_spec[key].shape), key


def test_family_spec_classes_and_gen_config():
    from envhive.envpool.atari import AtariEnvSpec
    from envhive.envpool.mujoco.gym import GymAntEnvSpec

    config = AtariEnvSpec.gen_config(task="breakout", num_envs=2, batch_size=1)
    spec = AtariEnvSpec(config)
    assert spec.config.task == "breakout" and spec.action_space.n == 4
    with pytest.raises(ValueError):
        AtariEnvSpec(AtariEnvSpec.gen_config(task="pong", num_envs=4, batch_size=5))
    assert GymAntEnvSpec.gen_config().frame_skip == 5


def test_config_dict_and_dm_specs():
    env = envpool.make_dm("Pong-v5", num_envs=2, stack_num=2)
    try:
        assert env.config["stack_num"] == 2 and env.config["num_envs"] == 2
        obs_spec = env.observation_spec()
        assert obs_spec.obs.shape == (2, 84, 84) and obs_spec.obs.dtype == np.uint8
        assert env.spec.config.stack_num == 2
    finally:
        env.close()


# -- 4. infos -----------------------------------------------------------------------------------
def test_atari_infos_as_envpool_gives_them():
    env = envpool.make_gym("Breakout-v5", num_envs=3)
    try:
        _, info = env.reset()
        for got in (info, env.step(np.ones(3, np.int32))[-1]):
            assert list(got) == ["env_id", "players", "lives", "reward", "terminated", "ram", "elapsed_step"]
            assert got["ram"].dtype == np.uint8 and got["ram"].shape == (3, 128)
            assert got["env_id"].dtype == np.int32 and got["players"]["env_id"].tolist() == [0, 1, 2]
            assert got["lives"].tolist() == [5, 5, 5] and got["terminated"].dtype == np.int32
            assert not any(k.startswith("_") for k in got)
        assert got["elapsed_step"].tolist() == [1, 1, 1]
    finally:
        env.close()


def test_atari_ram_and_rendered_screens_equal_envpools_step_for_step():
    """EnvPool's ``ram`` info (key order, dtype, shape) and the values: frames, RAM and
    rendered screens of both envs, every step of Breakout with episodic life (life losses and
    the resets after them, each with EnvPool's random no-ops), on envhive's native engine."""
    from envhive.executors import NativeExecutor

    ep = _real()
    runs = []
    for mod in (ep, envpool):
        env = mod.make_gym("Breakout-v5", num_envs=2, seed=0, episodic_life=True,
                           render_mode="rgb_array")
        try:
            if mod is envpool:
                assert isinstance(env.pool.executor, NativeExecutor)
            obs, info = env.reset()
            rec, ends = [(list(info), obs, info["ram"].copy(), env.render(env_ids=[0, 1]))], 0
            for t in range(120):
                obs, _, term, trunc, info = env.step(np.array([(t * 5) % 4, (t * 3 + 1) % 4], np.int32))
                ends += int((term | trunc).sum())
                rec.append((list(info), obs, info["ram"].copy(), env.render(env_ids=[0, 1])))
            runs.append((rec, ends))
        finally:
            env.close()
    (want, ends), (got, _) = runs
    assert ends >= 3  # life losses ended episodes: the RAM after resets was compared too
    for t, (a, b) in enumerate(zip(want, got)):
        assert a[0] == b[0], t
        assert b[2].dtype == a[2].dtype == np.uint8 and b[2].shape == a[2].shape == (2, 128)
        assert b[3].shape == a[3].shape == (2, 210, 160, 3) and b[3].dtype == a[3].dtype
        for k, what in ((1, "frames"), (2, "ram"), (3, "render")):
            np.testing.assert_array_equal(b[k], a[k], err_msg=f"step {t}: {what}")


def test_elapsed_step_is_counted_for_engines_without_it():
    env = envpool.make_gym("CartPole-v1", num_envs=2, max_episode_steps=3)
    try:
        assert env.reset()[1]["elapsed_step"].tolist() == [0, 0]
        seen = [env.step(np.zeros(2, np.int32))[-1]["elapsed_step"].tolist() for _ in range(4)]
        assert seen == [[1, 1], [2, 2], [3, 3], [0, 0]]
    finally:
        env.close()


def test_acrobot_state_is_its_joint_angles():
    env = envpool.make_gym("Acrobot-v1", num_envs=2, seed=3)
    try:
        env.reset()
        for _ in range(20):
            obs, *_, info = env.step(np.ones(2, np.int32))
        angles = info["state"]
        assert angles.dtype == np.float32 and angles.shape == (2, 2)
        np.testing.assert_allclose(np.cos(angles[:, 0]), obs[:, 0], atol=1e-6)
        np.testing.assert_allclose(np.sin(angles[:, 1]), obs[:, 3], atol=1e-6)
    finally:
        env.close()


# -- 5. partial and implicit ops ----------------------------------------------------------------
def test_step_with_env_ids_returns_those_envs_in_order():
    env = envpool.make_gym("CartPole-v1", num_envs=5, seed=0)
    try:
        env.reset()
        obs, rew, term, trunc, info = env.step(np.zeros(2, np.int32), env_id=np.array([3, 1]))
        assert info["env_id"].tolist() == [3, 1] and obs.shape == (2, 4)
        obs, info = env.reset(np.array([4, 0]))
        assert info["env_id"].tolist() == [4, 0] and info["elapsed_step"].tolist() == [0, 0]
        info = env.step(np.zeros(5, np.int32))[-1]
        assert info["elapsed_step"].tolist() == [1, 2, 1, 2, 1]
    finally:
        env.close()


def test_a_step_before_the_first_reset_resets_as_envpool_does():
    ep = _real()
    env = envpool.make_gym("CartPole-v1", num_envs=3, seed=0)
    ref = ep.make_gym("CartPole-v1", num_envs=3, seed=0)
    fresh = envpool.make_gym("CartPole-v1", num_envs=3, seed=0)
    try:
        mine, theirs = env.step(np.zeros(3, np.int32)), ref.step(np.zeros(3, np.int32))
        assert mine[1].tolist() == theirs[1].tolist() == [0.0, 0.0, 0.0]
        assert mine[-1]["elapsed_step"].tolist() == theirs[-1]["elapsed_step"].tolist() == [0, 0, 0]
        assert not mine[2].any() and not mine[3].any()
        np.testing.assert_array_equal(mine[0], fresh.reset()[0])  # the first reset's observation
    finally:
        env.close(), ref.close(), fresh.close()


def test_async_send_recv_with_batch_size():
    env = envpool.make_gym("Pong-v5", num_envs=6, batch_size=2, seed=0)
    try:
        assert env.is_async
        env.async_reset()
        last = {}
        for _ in range(12):  # each env's transitions come one after the other, none lost
            obs, rew, term, trunc, info = env.recv()
            assert obs.shape[0] == 2 and len(set(info["env_id"].tolist())) == 2
            for i, step in zip(info["env_id"].tolist(), info["elapsed_step"].tolist()):
                assert step == last.get(i, -1) + 1
                last[i] = step
            env.send(np.zeros(2, np.int32), info["env_id"])
    finally:
        env.close()


# -- 6. the dm API -----------------------------------------------------------------------------
def test_dm_timesteps_carry_envpools_state():
    env = envpool.make_dm("Pong-v5", num_envs=2)
    try:
        env.async_reset()
        ts = env.recv()
        assert isinstance(ts, dm_env.TimeStep) and ts.first().all()
        assert ts.reward.dtype == np.float32 and ts.discount.dtype == np.float32
        assert ts.observation.obs.shape == (2, 4, 84, 84)
        assert ts.observation.lives.dtype == np.int32 and ts.observation.env_id.tolist() == [0, 1]
        assert ts.observation.players.env_id.tolist() == [0, 1]
        ts = env.step(np.zeros(2, np.int32))
        assert ts.mid().all()
    finally:
        env.close()


@pytest.mark.parametrize("executor", [None, "serial", "process"])
def test_atari_episodes_equal_envpools_for_the_same_seed(executor):
    """EnvPool's seeding (a seed seeds ALE and the std::mt19937 of the random no-op counts):
    the same frames, rewards and ends as EnvPool for the same seed, over many short episodes
    (a no-op count drawn at each reset) with sticky actions (ALE's generator), on the native
    engine and on the executors that run envhive's Python ``AtariEnv``."""
    ep = _real()
    kw = {"num_envs": 3, "seed": 11, "max_episode_steps": 30, "repeat_action_probability": 0.25}
    extra = {} if executor is None else {"executor": executor}
    env, ref = envpool.make_gym("Pong-v5", **kw, **extra), ep.make_gym("Pong-v5", **kw)
    rng = np.random.default_rng(1)
    ends = 0
    try:
        np.testing.assert_array_equal(env.reset()[0], ref.reset()[0])
        for t in range(130):
            act = rng.integers(0, 6, 3).astype(np.int32)
            got, want = env.step(act), ref.step(act)
            for k, what in ((0, "frames"), (1, "rewards"), (2, "terminated"), (3, "truncated")):
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"step {t}: {what}")
            ends += int((got[2] | got[3]).sum())
    finally:
        env.close(), ref.close()
    assert ends >= 9, "too few resets: the no-op draws were hardly compared"


def test_zero_discount_on_life_loss_matches_envpool_step_for_step():
    """envhive's Atari equals EnvPool frame for frame (its random no-ops included); the dm
    discounts then agree, 0.0 wherever a life was lost."""
    ep = _real()
    kw = {"num_envs": 2, "zero_discount_on_life_loss": True, "seed": 0}
    env, ref = envpool.make_dm("Breakout-v5", **kw), ep.make_dm("Breakout-v5", **kw)
    rng = np.random.default_rng(0)
    zeros = 0
    try:
        a, b = env.reset(), ref.reset()
        np.testing.assert_array_equal(a.observation.obs, b.observation.obs)
        for _ in range(400):
            act = rng.integers(0, 4, 2).astype(np.int32)
            a, b = env.step(act), ref.step(act)
            np.testing.assert_array_equal(a.observation.obs, b.observation.obs)
            np.testing.assert_array_equal(a.observation.lives, b.observation.lives)
            np.testing.assert_array_equal(a.discount, b.discount)
            np.testing.assert_array_equal(a.step_type, b.step_type)
            zeros += int((a.discount == 0).sum())
    finally:
        env.close(), ref.close()
    assert zeros, "no life was lost: the case tests nothing"


# -- 7. dtypes and values ----------------------------------------------------------------------
def test_dtypes_and_actions():
    env = envpool.make_gym("Pong-v5", num_envs=2)
    try:
        env.reset()
        rew = env.step(np.ones(2))[1]  # float actions for a Discrete space are cast
        assert rew.dtype == np.float32
        env.step({"env_id": np.arange(2, dtype=np.int32), "players.env_id": np.arange(2, dtype=np.int32),
                  "action": np.ones(2, np.int32)})
        assert len(env) == 2 and not env.is_async and env.all_env_ids.dtype == np.int32
    finally:
        env.close()
    env = envpool.make_gym("Pong-v5", num_envs=2)
    try:
        with pytest.raises(RuntimeError, match="Expected dtype int32"):
            env.send({"env_id": np.arange(2), "players.env_id": np.arange(2), "action": np.ones(2, int)})
        assert issubclass(EnvPoolActionError, RuntimeError)
    finally:
        env.close()


def test_seeds_beyond_int32_and_unknown_ids_are_assertions():
    with pytest.raises(AssertionError, match="int32"):
        envpool.make_gym("Pong-v5", seed=2**31)
    with pytest.raises(EnvPoolAssertionError, match="not supported"):
        envpool.make_gym("Pong-v9")
    with pytest.raises(TypeError):
        envpool.make("Pong-v5")  # env_type is required, as in EnvPool


def test_default_seed_is_42():
    env, ref = envpool.make_gym("CartPole-v1", num_envs=2), envpool.make_gym("CartPole-v1", num_envs=2, seed=42)
    try:
        assert env.config["seed"] == 42
        np.testing.assert_array_equal(env.reset()[0], ref.reset()[0])
    finally:
        env.close(), ref.close()


def test_reset_seed_is_ignored_with_a_warning():
    env = envpool.make_gym("CartPole-v1", num_envs=2)
    try:
        with pytest.warns(UserWarning, match="ignored"):
            env.reset(seed=3)
        with pytest.warns(UserWarning):
            env.seed(1)
    finally:
        env.close()


# -- 8. render -----------------------------------------------------------------------------------
def test_render_frames_of_envs():
    env = envpool.make_gym("CartPole-v1", num_envs=2, render_mode="rgb_array", seed=0)
    try:
        env.reset()
        assert env.render().shape == (1, 400, 600, 3)
        frames = env.render(env_ids=[0, 1])
        assert frames.shape == (2, 400, 600, 3) and frames.dtype == np.uint8
        np.testing.assert_array_equal(env.render(env_ids=1)[0], frames[1])
    finally:
        env.close()
    env = envpool.make_gym("Pong-v5", num_envs=1, render_mode="rgb_array")
    try:
        env.reset()
        assert env.render().shape == (1, 210, 160, 3)
    finally:
        env.close()
    env = envpool.make_gym("CartPole-v1", num_envs=1)
    try:
        with pytest.raises(RuntimeError, match="render_mode"):
            env.render()
    finally:
        env.close()


# -- executors and EnvPool's engine ------------------------------------------------------------
@pytest.mark.parametrize("executor", ["thread", "process"])
def test_any_executor_gives_the_native_engines_results(executor):
    def run(ex):
        env = envpool.make_gym("CartPole-v1", num_envs=3, seed=1, max_episode_steps=5, executor=ex)
        try:
            out = [env.reset()[0]]
            for _ in range(8):
                out.append(env.step(np.ones(3, np.int32))[0])
            return out
        finally:
            env.close()

    for a, b in zip(run(None), run(executor)):
        np.testing.assert_array_equal(a, b)


def test_ids_envhive_lacks_run_on_envpools_engine_as_envpool_itself():
    ep = _real()
    env, ref = envpool.make_gym("Taxi-v3", num_envs=3, seed=5), ep.make_gym("Taxi-v3", num_envs=3, seed=5)
    try:
        assert env.spec._route.engine_id == "envpool/Taxi-v3"
        np.testing.assert_array_equal(env.reset()[0], ref.reset()[0])
        for t in range(30):
            act = np.full(3, t % 6, np.int32)
            a, b = env.step(act), ref.step(act)
            for x, y in zip(a[:4], b[:4]):
                np.testing.assert_array_equal(x, y)
    finally:
        env.close(), ref.close()


def test_multi_player_rows_as_envpool_lays_them_out():
    ep = _real()
    env, ref = envpool.make_gym("TicTacToe-v1", num_envs=2), ep.make_gym("TicTacToe-v1", num_envs=2)
    try:
        (a, ia), (b, ib) = env.reset(), ref.reset()
        assert a.shape == b.shape == (4, 3, 3, 2)
        assert ia["players"]["env_id"].tolist() == sorted(ib["players"]["env_id"].tolist())
        assert env.action_space == ref.action_space
    finally:
        env.close(), ref.close()


def test_options_envhive_lacks_go_to_envpools_engine():
    _real()
    spec = envpool.make_spec("HalfCheetah-v5", frame_stack=4)
    assert spec._route.envpool and spec.observation_space.shape == (4, 17)
    assert envpool.make_spec("HalfCheetah-v5", ctrl_cost_weight=0.2)._route.engine_id == "envhive/HalfCheetah-v5"


def test_install_makes_import_envpool_resolve_here():
    envpool.install()
    try:
        import envpool as aliased
        import envpool.atari.registration as reg

        assert aliased is envpool and "pong" in reg.atari_game_list
    finally:
        envpool.uninstall()
