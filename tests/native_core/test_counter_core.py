"""envhive's threaded batch core, proved on its test family, the counter (``envhive.testing.counter``).

The counter's C++ game runs on the native executor (the core's op rule, threads, rings, epoch,
discard, fork, Ctrl-C), its Python twin ``CounterEnv`` on the serial executor (``EnvRunner`` and
``envhive._ops``): every transcript must be equal, in every autoreset mode, with any number of
runners, sync and async. That makes this a differential test of the C++ op rule against the
Python definition. Then the life cycle: Ctrl-C inside a long op and a discard (the next reset
is a fresh pool's), a forked child, close with an op that would never end, the threads gone.
"""

from __future__ import annotations

import gc
import os
import signal
import threading

import numpy as np
import pytest

import envhive
from envhive.errors import ConfigError, EnvWorkerError, ResetNeededError
from envhive.executors import NativeExecutor
from envhive.testing import assert_same_transcript, transcript
from tests.forks import exit_code_of

counter = pytest.importorskip("envhive.testing.counter")
if counter._engine._counter is None:
    pytest.skip("the counter's C++ module is not built (no C++ compiler)", allow_module_level=True)

pytestmark = pytest.mark.timeout(300)

ID = "envhive/Counter-v0"
OPTIONS = {"size": 6, "limit": 9}  # episodes end both ways (target reached, time limit) quickly


def acts(n: int):
    return lambda t: np.array([(t * 7 + 3 * i + t // 5) % 3 for i in range(n)], np.int64)


def make(executor, n: int, mode: str = "next_step", **kw):
    return envhive.make(ID, num_envs=n, executor=executor, autoreset=mode, env_kwargs=dict(OPTIONS), **kw)


def engine_of(env):
    return env._pool.executor._engine


def _each_env_needs_a_reset(env) -> None:
    """Every env refuses a step until it is reset (its op was cut short), stepping nothing."""
    for i in range(env.num_envs):
        with pytest.raises(ResetNeededError):
            env.send(np.array([env.single_action_space.sample()]), np.array([i]))


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
@pytest.mark.parametrize(("n", "runners"), [(1, 1), (5, 1), (5, 2), (7, 3)])
def test_native_equals_the_python_reference_in_every_mode(mode, n, runners):
    runs = []
    for executor in ("serial", NativeExecutor(runners)):
        env = make(executor, n, mode)
        seeds = [11 * i + 3 for i in range(n)]
        if mode == "disabled":
            from envhive._cli_check import disabled_transcript

            env.reset(seed=seeds)
            rec = disabled_transcript(env, [acts(n)(t) for t in range(60)])
        else:
            rec = transcript(env, 60, acts(n), seed=seeds)
        env.close()
        runs.append(rec)
    assert_same_transcript(*runs)
    ended = sum(int((r[2] | r[3]).sum()) for r in runs[0][1:] if len(r) == 5)
    assert ended >= 3  # episodes ended: resets, final observations and final infos compared


def per_env(executor, n: int, batch_size: int, mode: str, rows: int = 12) -> dict[int, list]:
    """Each env's own sequence of rows received (obs, reward, flags, infos, final obs), actions a
    function of the env and its own step count: independent of which envs finish first."""
    env = make(executor, n, mode, batch_size=batch_size, seed=5)
    seqs: dict[int, list] = {i: [] for i in range(n)}
    env.async_reset()
    for _ in range(100 * rows):
        if min(len(s) for s in seqs.values()) >= rows:
            break
        obs, rew, term, trunc, info = env.recv()
        ids = info["env_id"]
        for k, i in enumerate(ids.tolist()):
            final = (info["final_obs"][k].tolist(), int(info["final_info"]["steps"][k])) \
                if info.get("_final_obs", np.zeros(len(ids), bool))[k] else None
            seqs[i].append((obs[k].tolist(), float(rew[k]), bool(term[k]), bool(trunc[k]),
                            int(info["steps"][k]), float(info["distance"][k]), final))
        env.send(np.array([(len(seqs[i]) * 5 + i) % 3 for i in ids.tolist()]), ids)
    env.close()
    return seqs


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
@pytest.mark.parametrize(("runners", "batch_size"), [(2, 2), (3, 1), (1, 3)])
def test_async_send_recv_gives_each_env_the_reference_sequence(mode, runners, batch_size):
    ref = per_env("serial", 5, 5, mode)
    got = per_env(NativeExecutor(runners), 5, batch_size, mode)
    for i in range(5):
        assert got[i][:12] == ref[i][:12], i
    assert any(row[-1] is not None for s in got.values() for row in s[:12]) or mode == "next_step"


def test_a_slow_step_runs_beside_the_caller():
    """An async send returns while the ops run (each sleeps 50 ms), and recv hands them over."""
    env = envhive.make(ID, num_envs=4, executor=NativeExecutor(2), env_kwargs={"sleep_us": 50_000},
                       batch_size=4, seed=0)
    try:
        env.reset()
        env.send(np.full(4, 2))
        assert env.pool.pending
        obs, *_ = env.recv()
        assert obs[:, 2].tolist() == [1, 1, 1, 1]
    finally:
        env.close()


@pytest.fixture
def ctrl_c_raises():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _same_as_fresh(env, n: int, options: dict) -> None:
    """A seeded reset and five steps equal a serial pool's (of counters with ``options``)."""
    ref = envhive.make(ID, num_envs=n, executor="serial", env_kwargs=options)
    try:
        np.testing.assert_array_equal(env.reset(seed=21)[0], ref.reset(seed=21)[0])
        for t in range(5):
            a = acts(n)(t)
            got, want = env.step(a), ref.step(a)
            for x, y in zip(got[:4], want[:4]):
                np.testing.assert_array_equal(x, y)
    finally:
        ref.close()


@pytest.mark.usefixtures("ctrl_c_raises")
@pytest.mark.parametrize("runners", [1, 2])
def test_real_ctrl_c_inside_a_sync_step_discards_and_the_next_reset_is_fresh(runners):
    """Steps that sleep 100 ms each: the SIGINT lands inside the one C call of a sync step (the
    caller waiting, or running an op itself); the pool discards the ops in flight, and its next
    reset and steps are a fresh pool's."""
    env = envhive.make(ID, num_envs=4, executor=NativeExecutor(runners), env_kwargs={"sleep_us": 100_000}, seed=0)
    env.reset()
    timer = threading.Timer(0.15, os.kill, (os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        timer.start()  # inside: the SIGINT may land at once on a loaded machine
        for _ in range(50):  # 50 x 400 ms of sleep at most: the interrupt comes first
            env.step(np.full(4, 2))
    timer.join()
    _same_as_fresh(env, 4, {"sleep_us": 100_000})
    env.close()


@pytest.mark.parametrize("runners", [1, 3])
def test_a_discard_mid_async_call_then_reset_is_fresh(runners):
    """What a Ctrl-C between send and recv does (``Pool.raised_around``): queued ops never run,
    running ones stop at their next check, the next reset and steps are a fresh pool's."""
    env = envhive.make(ID, num_envs=4, executor=NativeExecutor(runners), env_kwargs={"busy_us": 2000},
                       batch_size=2, seed=0)
    try:
        env.async_reset()
        env.recv()
        env.send(np.zeros(2, np.int64), np.array([0, 1]))
        env._pool.raised_around(KeyboardInterrupt())
        assert not env.pool.pending
        _same_as_fresh(env, 4, {"busy_us": 2000})
    finally:
        env.close()


ENDLESS = {"reset_loop": 2**62}  # a reset that never ends by itself


@pytest.mark.usefixtures("ctrl_c_raises")
@pytest.mark.parametrize(("runners", "batch_size"), [(1, None), (2, None), (2, 2)])
def test_real_ctrl_c_inside_an_endless_op_comes_through(runners, batch_size):
    """The reset loop checks for a stop; the caller looks for Ctrl-C while it waits and while it
    runs an op itself: the interrupt comes through (the op would never end), the ops are
    discarded, and close() returns with every thread joined."""
    before = _threads()
    env = envhive.make(ID, num_envs=4, executor=NativeExecutor(runners), env_kwargs=ENDLESS, seed=0,
                       batch_size=batch_size)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        timer.start()  # inside: the SIGINT may land at once on a loaded machine
        if batch_size is None:
            env.reset()
        else:
            env.async_reset()
            env.recv()
    timer.join()
    assert not env.pool.pending
    _each_env_needs_a_reset(env)
    env.close()
    assert _threads() == before


def test_close_with_endless_ops_in_flight_returns_and_joins_the_threads():
    gc.collect()
    before = _threads()
    env = envhive.make(ID, num_envs=6, executor=NativeExecutor(3), env_kwargs=ENDLESS, batch_size=2)
    assert _threads() == before + 2
    env.async_reset()  # two threads start endless resets; four wait on the ring
    env.close()
    assert _threads() == before


def test_garbage_collection_joins_the_threads_with_ops_in_flight():
    gc.collect()
    before = _threads()
    env = envhive.make(ID, num_envs=4, executor=NativeExecutor(2), env_kwargs=ENDLESS, batch_size=2)
    env.async_reset()
    del env
    gc.collect()
    assert _threads() == before


def test_a_forked_child_runs_the_ops_itself_and_closes_alone():
    """A child forked from a process holding a pool has none of its threads: its caller runs
    every op, sync and async, and its close joins nothing; the parent goes on."""
    env = make(NativeExecutor(3), 4, batch_size=2)
    env.reset(seed=1)
    ref = make("serial", 4)
    ref.reset(seed=1)
    want = ref.step(np.full(4, 2))[0]
    ref.close()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            got = env.step(np.full(4, 2))[0]
            env.async_reset()
            env.recv()
            env.recv()
            env.close()
            code = 0 if np.array_equal(got, want) else 2
        finally:
            os._exit(code)
    assert exit_code_of(pid) == 0
    np.testing.assert_array_equal(env.step(np.full(4, 2))[0], want)
    env.close()


def test_an_action_the_game_refuses_is_that_envs_action_error_and_the_rest_go_on():
    from envhive._ops import STEP

    env = make("native", 4, batch_size=4)
    env.reset(seed=0)
    engine = engine_of(env)
    b = engine._ob
    b.ops[:] = STEP
    b.actions[:] = [0, 7, 2, 1]  # past the pool's check: the game's own refuses env 1's
    engine.start(np.arange(4, dtype=np.int64), None)
    out = engine.collect(4)
    assert sorted(out.env_ids) == [0, 2, 3] and list(out.errors) == [1]
    assert out.errors[1].cause_type == "ActionError" and "outside Discrete(3)" in str(out.errors[1])
    env.close()


def test_bad_actions_and_calls_are_refused_before_anything_runs():
    env = envhive.make(ID, num_envs=2, executor="native", env_kwargs={"size": 64, "limit": 0})
    env.reset(seed=0)
    stay = np.ones(2, np.int64)  # no episode ends: every row steps
    before = env.step(stay)[4]["steps"].copy()
    with pytest.raises(envhive.ActionError):
        env.step(np.array([1, 3]))
    np.testing.assert_array_equal(env.step(stay)[4]["steps"], before + 1)
    assert list(env.call("action_space")) == [env.single_action_space] * 2
    with pytest.raises(ConfigError, match="C\\+\\+ worker threads"):
        env.call("_pos")
    with pytest.raises(ConfigError):
        env.set_attr("size", [1, 2])
    with pytest.raises(EnvWorkerError, match="reset options"):
        env.reset(options={"anything": 1})
    env.close()


def test_bad_options_are_config_errors_at_make():
    with pytest.raises(ConfigError, match="size"):
        envhive.make(ID, num_envs=2, executor="native", env_kwargs={"size": 1})
    with pytest.raises(ConfigError, match="unknown options"):
        envhive.make(ID, num_envs=2, executor="serial", env_kwargs={"sise": 4})


def test_the_batch_refuses_re_entry_and_use_after_close():
    env = make("native", 2)
    games = engine_of(env)._games
    env.close()
    with pytest.raises(ValueError, match="closed"):
        games.start(np.zeros(1, np.int64))
    games.close()  # twice: harmless


def _batch(n: int = 2, threads: int = 1):
    from envhive._ops import RESET, RESET_REWARD, STEP, STEP_RESET

    config = {"op_step": STEP, "op_reset": RESET, "op_step_reset": STEP_RESET, "reset_reward": float(RESET_REWARD),
              "size": 8, "limit": 0, "busy_us": 0, "sleep_us": 0, "reset_loop": 0}
    return counter._engine._counter.Batch(np.arange(n, dtype=np.int64), config, threads)


def _columns(n: int = 2) -> dict:
    infos = tuple(np.zeros(n, d) for _ in range(3) for d in (np.int32, np.float64))
    return {"obs": np.zeros((n, 4), np.int32), "final_obs": None, "reward": np.zeros(n), "terminated": np.zeros(n, bool),
            "truncated": np.zeros(n, bool), "ops": np.zeros(n, np.int8), "actions": np.zeros(n, np.int64),
            "reseed": np.zeros(n, np.int64), "has_reseed": np.zeros(n, bool), "reset_after": np.zeros(n, bool),
            "failed": np.zeros(n, bool), "infos": infos}


@pytest.mark.parametrize("change, error, match", [
    ({"obs": None}, KeyError, "obs is missing"),
    ({"reward": np.zeros(1)}, ValueError, "reward holds 8 bytes, needs 16"),
    ({"infos": (np.zeros(2, np.int32),)}, ValueError, "infos: a tuple of 6 arrays"),
    ({"ops": np.zeros(4, np.int8)[::2]}, ValueError, "contiguous"),
])
def test_bind_checks_every_column(change, error, match):
    batch = _batch()
    columns = {**_columns(), **change}
    columns = {k: v for k, v in columns.items() if v is not None or k == "final_obs"}
    with pytest.raises(error, match=match):
        batch.bind(columns)
    batch.close()


def test_the_batch_refuses_misuse_with_errors():
    batch = _batch()
    with pytest.raises(ValueError, match="bind"):
        batch.run(np.zeros(1, np.int64), np.zeros(2, np.int64))
    columns = _columns()
    batch.bind(columns)
    with pytest.raises(IndexError, match="env id 5 is outside 0..1"):
        batch.start(np.array([5], np.int64))
    with pytest.raises(ValueError, match="out"):
        batch.collect(1, np.zeros(1, np.int64))  # shorter than num_envs
    columns["ops"][:] = 1  # RESET
    batch.start(np.arange(2, dtype=np.int64))
    with pytest.raises(RuntimeError, match="in flight"):
        batch.run(np.arange(2, dtype=np.int64), np.zeros(2, np.int64))
    assert batch.collect(2, np.zeros(2, np.int64)) == 2
    with pytest.raises(ValueError, match="num_threads"):
        counter._engine._counter.Batch(np.arange(2, dtype=np.int64), {}, -1)
    with pytest.raises(ValueError, match="needs op_step"):
        counter._engine._counter.Batch(np.arange(2, dtype=np.int64), {}, 0)
    batch.close()


def test_the_glue_declares_field_sizes_and_refuses_render_for_a_game_without_it():
    """``info_fields`` gives each field's bytes per env (the Python side's column shapes); a
    game that declares no render has ``render_bytes`` 0 and ``render`` raises."""
    module = counter._engine._counter
    assert module.info_fields() == [("steps", "int32", 4), ("distance", "float64", 8)]
    env = make(NativeExecutor(2), 2)
    try:
        env.reset(seed=0)
        games = engine_of(env)._games
        assert games.render_bytes == 0
        with pytest.raises(NotImplementedError, match="does not render"):
            games.render(0, np.zeros(4, np.uint8))
        with pytest.raises(ConfigError, match="render"):
            env.render()  # the pool's answer for an engine whose envs are out of reach
    finally:
        env.close()
