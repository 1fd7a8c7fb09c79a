"""The native executor and kernel ids: same results on every executor, errors, registration.

Alignment with gymnasium's reference envs is in test_alignment.py; this file checks that a
kernel id means the same thing whichever executor runs it (native, serial, thread, process),
whatever the autoreset mode, sync or async, and that misuse is refused without stepping.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envhive
from envhive.engines import compiled_ids
from envhive.executors import available_executors
from envhive.testing import assert_same_transcript

KERNEL_IDS = compiled_ids("kernel")
MODES = ["next_step", "same_step", "disabled"]
N = 5


def _actions(env: Any, rng: np.random.Generator, n: int) -> np.ndarray:
    space = env.single_action_space
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, size=n)
    return rng.uniform(space.low, space.high, size=(n, *space.shape)).astype(np.float32)


def _script(env: Any, steps: int = 120) -> list[tuple[Any, ...]]:
    """Seeded reset, steps (resetting ended envs in disabled mode), a seeded partial reset."""
    rng = np.random.default_rng(0)
    out: list[tuple[Any, ...]] = []
    obs, info = env.reset(seed=11)
    out.append((obs.copy(), info))
    disabled = env.metadata["autoreset_mode"] is gym.vector.AutoresetMode.DISABLED
    for t in range(steps):
        obs, rew, term, trunc, info = env.step(_actions(env, rng, N))
        out.append((obs.copy(), rew.copy(), term.copy(), trunc.copy(), info))
        ended = term | trunc
        if disabled and ended.any():
            obs, info = env.reset(options={"reset_mask": ended})
            out.append(("masked", obs.copy(), info))
        if t == steps // 2:
            mask = np.zeros(N, bool)
            mask[[1, 3]] = True
            obs, info = env.reset(seed=[0, 99, 0, 7, 0], options={"reset_mask": mask})
            out.append(("seeded mask", obs.copy(), info))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("env_id", KERNEL_IDS)
def test_every_executor_gives_the_native_results(env_id: str, mode: str) -> None:
    with envhive.make(env_id, N, executor="native", autoreset=mode, max_episode_steps=40) as env:
        reference = _script(env)
    for executor in available_executors():
        if executor == "process" and (mode != "next_step" or env_id != KERNEL_IDS[0]):
            continue  # process workers compile the kernel again: one case is enough
        with envhive.make(env_id, N, executor=executor, autoreset=mode, max_episode_steps=40) as env:
            assert_same_transcript(_script(env), reference)


@pytest.mark.parametrize("env_id", KERNEL_IDS)
def test_inline_step_matches_general_path(env_id: str) -> None:
    """The pool's inline step (step_all) and the send/recv path give identical results."""
    for mode in MODES:
        with envhive.make(env_id, N, autoreset=mode, max_episode_steps=30) as fast:
            a = _script(fast)
        with envhive.make(env_id, N, autoreset=mode, max_episode_steps=30) as slow:
            slow._pool._paths = slow._pool._paths.without("inline")
            b = _script(slow)
        assert_same_transcript(a, b)


def _per_env_sync(env_id: str, steps: int) -> list[list[Any]]:
    with envhive.make(env_id, N, seed=3) as env:
        obs, _ = env.reset()
        rows: list[list[Any]] = [[obs[i].tolist()] for i in range(N)]
        for t in range(steps):
            a = np.full(N, t % 2) if env_id.endswith("CartPole-v1") else np.zeros((N, *env.single_action_space.shape), np.float32)
            obs, rew, term, trunc, _ = env.step(a)
            for i in range(N):
                rows[i].append((obs[i].tolist(), float(rew[i]), bool(term[i]), bool(trunc[i])))
    return rows


def test_seeding_is_independent_of_batch_order() -> None:
    """Async, in a shuffled order and batch_size 2, each env's trajectory is the sync one."""
    env_id, steps = "envhive/CartPole-v1", 60
    want = _per_env_sync(env_id, steps)
    rng = np.random.default_rng(5)
    rows: list[list[Any]] = [[] for _ in range(N)]
    with envhive.make(env_id, N, seed=3, batch_size=2) as env:
        env.async_reset(rng.permutation(N))
        while True:
            try:
                obs, rew, term, trunc, info = env.recv()
            except envhive.NothingPendingError:
                break
            ids = info["env_id"].tolist()
            for k, i in enumerate(ids):
                if rows[i]:
                    rows[i].append((obs[k].tolist(), float(rew[k]), bool(term[k]), bool(trunc[k])))
                else:
                    rows[i].append(obs[k].tolist())
            todo = [i for i in rng.permutation(ids).tolist() if len(rows[i]) <= steps]
            if todo:
                # the action for env i's t-th step is t % 2, as in the sync run
                env.send(np.array([(len(rows[i]) - 1) % 2 for i in todo]), np.array(todo))
    for i in range(N):
        assert len(rows[i]) > steps // 2
        assert rows[i] == want[i][: len(rows[i])], f"env {i}"


# ---------------------------------------------------------------- errors


def test_bad_actions_are_refused_and_nothing_steps() -> None:
    with envhive.make("envhive/CartPole-v1", 4, seed=0) as env:
        obs, _ = env.reset()
        state = env.call("state")
        for bad, where in (
            (np.array([0, 1, 2, 0]), "env 2"),
            (np.array([0, -1, 1, 0]), "env 1"),
            (np.array([0.0, 1.0, 0.0, 1.0]), "integer"),
            (np.array([0, 1, 0]), "shape"),
            ([0, 1, 0, 7], "env 3"),
        ):
            with pytest.raises(envhive.ActionError, match=where):
                env.step(bad)
            assert env.env_steps == 0
            np.testing.assert_array_equal(env.call("state"), state)
        obs2, *_ = env.step(np.zeros(4, np.int64))
        assert env.env_steps == 4


def test_bad_box_actions_name_the_env() -> None:
    with envhive.make("envhive/CartPole-v1", 2, seed=0) as env:
        env.reset()
        with pytest.raises(envhive.ActionError, match="env 1"):
            env.step(np.array([1, 5], dtype=np.uint8))


def test_native_refuses_other_envs() -> None:
    with pytest.raises(envhive.ConfigError, match="native executor runs envhive's compiled envs"):
        envhive.make("CartPole-v1", 2, executor="native")


def test_unknown_kernel_keyword() -> None:
    with pytest.raises(envhive.ConfigError, match="unknown keyword"):
        envhive.make("envhive/CartPole-v1", 2, env_kwargs={"gravity": 3.0})


def test_reset_options_are_refused() -> None:
    with envhive.make("envhive/CartPole-v1", 2) as env:
        with pytest.raises(envhive.EnvWorkerError, match="reset options"):
            env.reset(options={"low": -0.1})
        obs, _ = env.reset()  # still usable
        assert obs.shape == (2, 4)


def test_set_attr_is_refused_and_call_reads_state() -> None:
    with envhive.make("envhive/CartPole-v1", 3, seed=1) as env:
        env.reset()
        assert env.call("max_episode_steps") == (500, 500, 500)
        assert np.asarray(env.call("state")).shape == (3, 4)
        with pytest.raises(envhive.ConfigError, match="set_attr"):
            env.set_attr("gravity", 1.0)
        with pytest.raises(envhive.ConfigError, match="no per-env objects"):
            env.call("render")


def test_time_limit_override() -> None:
    with envhive.make("envhive/CartPole-v1", 2, seed=0, max_episode_steps=3, autoreset="disabled") as env:
        env.reset()
        flags = []
        for _ in range(3):
            _, _, term, trunc, _ = env.step(np.array([0, 1]))
            flags.append(trunc.tolist())
        assert flags[:2] == [[False, False], [False, False]] and flags[2] == [True, True]


def test_auto_picks_native_for_kernel_ids() -> None:
    with envhive.make("envhive/CartPole-v1", 2) as env:
        assert env.executor == "native" and "native (auto)" in repr(env)
    with envhive.make("CartPole-v1", 2) as env:
        assert env.executor == "serial" and "serial (auto)" in repr(env)


# ---------------------------------------------------------------- gymnasium registration


def test_gymnasium_make_vec_returns_an_envhive_pool() -> None:
    env = gym.make_vec("envhive/CartPole-v1", num_envs=3, executor="serial", sutton_barto_reward=True)
    try:
        assert isinstance(env, envhive.VectorEnv) and env.num_envs == 3
        env.reset(seed=0)
        _, rew, *_ = env.step(np.zeros(3, np.int64))
        assert rew.tolist() == [0.0, 0.0, 0.0]  # Sutton-Barto reward reached the kernel
    finally:
        env.close()


def test_gymnasium_make_single_env_matches_gymnasium() -> None:
    ours, theirs = gym.make("envhive/CartPole-v1"), gym.make("CartPole-v1")
    o1, _ = ours.reset(seed=4)
    o2, _ = theirs.reset(seed=4)
    np.testing.assert_array_equal(o1, o2)
    for t in range(50):
        a = t % 2
        r1, r2 = ours.step(a), theirs.step(a)
        np.testing.assert_array_equal(r1[0], r2[0])
        assert r1[1:4] == r2[1:4]
        if r1[2] or r1[3]:
            break


def test_auto_picks_native_or_threads_for_mujoco_ids() -> None:
    pytest.importorskip("mujoco")
    for n in (1, 2, 8):  # compiled families: native at any size
        for eid in ("envhive/Ant-v5", "envhive/HalfCheetah-v5"):
            with envhive.make(eid, n) as env:
                assert env.executor == "native" and "(auto)" in repr(env)
    with envhive.make("envhive/Humanoid-v5", 2) as env:
        assert env.executor == "thread" and "(auto)" in repr(env)
    with envhive.make("envhive/Humanoid-v5", 1) as env:
        assert env.executor == "serial"  # one env: nothing to run in parallel


def test_unusual_action_dtypes_take_the_general_path() -> None:
    """float16 (which compiled kernels do not take) works and equals float32 actions."""
    a16 = np.array([[0.5], [-1.0]], np.float16)
    with envhive.make("envhive/Pendulum-v1", 2, seed=0) as x, envhive.make("envhive/Pendulum-v1", 2, seed=0) as y:
        x.reset()
        y.reset()
        for _ in range(3):
            rx, ry = x.step(a16), y.step(a16.astype(np.float32))
            np.testing.assert_array_equal(rx[0], ry[0])
            np.testing.assert_array_equal(rx[1], ry[1])


def test_generators_are_made_on_first_reset_only() -> None:
    """Building a pool makes no per-env generator: a seeded first reset would discard them."""
    with envhive.make("envhive/CartPole-v1", 6, batch_size=2) as env:
        kernel = env._pool.executor._engine.kernel
        assert not kernel._has_rng.any()  # a generator: numpy's, or compiled in _words
        env.async_reset(np.array([1, 4]), seed=10)
        env.recv()
        assert kernel._has_rng.tolist() == [False, True, False, False, True, False]
        env.async_reset(np.array([0, 2, 3, 5]))  # unseeded: fresh entropy, as gymnasium
        env.recv(), env.recv()
        assert kernel._has_rng.all()


@pytest.mark.parametrize("executor", ["native", "serial"])
def test_unseeded_first_reset_draws_fresh_entropy(executor: str) -> None:
    with envhive.make("envhive/CartPole-v1", 3, executor=executor) as a, envhive.make("envhive/CartPole-v1", 3, executor=executor) as b:
        oa, _ = a.reset()
        ob, _ = b.reset()
        assert np.abs(oa).max() <= 0.05 and not np.array_equal(oa, ob)
        for _ in range(600):  # ~60 episodes each: past the first stock (32) of every env
            a.step(np.ones(3, np.int64))


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_kernel_steps_never_build_per_env_infos(mode: str) -> None:
    """Kernels have no infos: their inline steps must not fall into the per-env info path
    (64 Python dicts per step), even on steps that reset envs."""
    with envhive.make("envhive/CartPole-v1", 16, autoreset=mode, seed=0) as env:
        env.reset()

        def refuse(*args: object, **kwargs: object) -> None:
            raise AssertionError("per-env infos built for a kernel step")

        env._pool._books.keep_inline = refuse  # type: ignore[method-assign]
        ends = 0
        for t in range(300):
            _, _, term, trunc, info = env.step(np.full(16, t % 2, np.int64))
            ends += int((term | trunc).sum())
            if mode == "same_step" and (term | trunc).any():
                assert info["_final_obs"].tolist() == (term | trunc).tolist()
        assert ends > 16
