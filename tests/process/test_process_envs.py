"""Process executor: start methods, non-picklable envs, factories and object-typed spaces."""

from __future__ import annotations

import functools
import multiprocessing as mp
import pickle
import time

import numpy as np
import pytest

import envhive
from envhive.executors import ProcessExecutor
from envhive.testing import SPACE_ZOO, CountingEnv, ZooEnv, assert_same_transcript, transcript
from tests.bounded import LONG

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("method", [m for m in ("fork", "spawn", "forkserver") if m in mp.get_all_start_methods()])
def test_start_methods_match_serial(method):
    def factory():
        return CountingEnv(pattern=[(4, "term"), (3, "trunc")])

    rng = np.random.default_rng(0)
    acts = [rng.integers(0, 3, 5) for _ in range(40)]
    env = envhive.make(factory, 5, executor=ProcessExecutor(2, start_method=method), autoreset="same_step")
    ref = envhive.make(factory, 5, executor="serial", autoreset="same_step")
    assert_same_transcript(transcript(env, 40, lambda t: acts[t], seed=3), transcript(ref, 40, lambda t: acts[t], seed=3))
    assert method in repr(env)
    env.close()
    ref.close()


def test_default_start_method_is_documented_safe_choice():
    from envhive.executors import default_start_method

    assert default_start_method() in ("forkserver", "spawn")
    with pytest.raises(envhive.ConfigError, match="start_method"):
        ProcessExecutor(start_method="teleport")


def test_closures_and_lambdas_are_built_in_the_worker():
    scale = {"length": 3}  # captured by the closure, shipped with cloudpickle

    def make_env():
        return CountingEnv(pattern=[(scale["length"], "term")])

    env = envhive.make(make_env, 2, executor="process")
    env.reset(seed=0)
    for _ in range(3):
        obs, rew, term, trunc, info = env.step(np.zeros(2, np.int64))
    assert term.tolist() == [True, True]
    env.close()


def test_unserializable_factory_explains_the_fix():
    import threading

    lock = threading.Lock()  # cannot be pickled, even by cloudpickle

    def factory():
        with lock:
            return CountingEnv()

    with pytest.raises(envhive.ConfigError, match=r"cannot be serialized.*lambda: MyEnv"):
        envhive.make(factory, 2, executor="process")


def test_object_spaces_travel_between_processes():
    obs_space = SPACE_ZOO["dict"].__class__(
        {"text": SPACE_ZOO["text"], "box": SPACE_ZOO["box"]}
    )
    act_space = SPACE_ZOO["text"]

    def factory():
        return ZooEnv(obs_space, act_space)

    act_space.seed(0)
    acts = [[act_space.sample() for _ in range(3)] for _ in range(30)]
    for mode in ("next_step", "same_step"):
        env = envhive.make(factory, 3, executor=ProcessExecutor(2), autoreset=mode)
        ref = envhive.make(factory, 3, executor="serial", autoreset=mode)
        assert_same_transcript(transcript(env, 30, lambda t: acts[t], seed=1), transcript(ref, 30, lambda t: acts[t], seed=1))
        env.close()
        ref.close()


# ---------------------------------------------------------------- a real non-picklable env


def _lab2d_available() -> bool:
    try:
        import dmlab2d  # noqa: F401
    except ImportError:
        return False
    return True


needs_lab2d = pytest.mark.skipif(not _lab2d_available(), reason="dmlab2d is not installed")


@needs_lab2d
def test_lab2d_cannot_be_pickled_which_is_the_point():
    from tests.process.lab2d_env import Lab2dEnv

    env = Lab2dEnv("commons_harvest")
    with pytest.raises(TypeError, match="cannot pickle"):
        pickle.dumps(env)
    with pytest.raises(envhive.ConfigError, match="lambda"):
        envhive.make(env, 2, executor="process")  # an instance: refused with the fix


@needs_lab2d
def test_lab2d_runs_in_process_workers_identically_to_serial():
    from tests.process.lab2d_env import Lab2dEnv

    def factory():
        return Lab2dEnv("commons_harvest")

    env = envhive.make(factory, 2, executor=ProcessExecutor(2), max_episode_steps=25)
    ref = envhive.make(factory, 2, executor="serial", max_episode_steps=25)
    assert env.single_observation_space.shape == (208, 224, 3)
    env.action_space.seed(0)
    acts = [env.action_space.sample() for _ in range(30)]
    a = transcript(env, 30, lambda t: acts[t], seed=7)
    b = transcript(ref, 30, lambda t: acts[t], seed=7)
    assert_same_transcript(a, b)
    assert any(step[3].any() for step in a[1:])  # crossed an episode end (time limit)
    env.close()
    ref.close()


def test_executor_instance_serves_one_pool():
    ex = ProcessExecutor(2)
    env = envhive.make(CountingEnv, 2, executor=ex)
    with pytest.raises(envhive.ConfigError, match="new instance"):
        envhive.make(CountingEnv, 2, executor=ex)
    env.reset(seed=0)  # the first pool is untouched
    env.close()


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_parent_slice_matches_serial(mode):
    from envhive._cli import _disabled_transcript

    def factory():
        return CountingEnv(pattern=[(3, "term"), (4, "trunc")])

    rng = np.random.default_rng(1)
    acts = [rng.integers(0, 3, 5) for _ in range(40)]
    ex = ProcessExecutor(2, parent_slice=True)
    env = envhive.make(factory, 5, executor=ex, autoreset=mode)
    ref = envhive.make(factory, 5, executor="serial", autoreset=mode)
    assert "parent slice" in repr(env) and len(ex.worker_pids()) == 1
    if mode == "disabled":
        assert_same_transcript(_disabled_transcript(env, acts), _disabled_transcript(ref, acts))
    else:
        assert_same_transcript(transcript(env, 40, lambda t: acts[t], seed=2), transcript(ref, 40, lambda t: acts[t], seed=2))
    env.set_attr("pattern", [[(9, "term")]] * 5)
    assert env.get_attr("tag") == ref.get_attr("tag")  # the seeds reached the same envs
    assert env.get_attr("pattern") == tuple([[(9, "term")]] * 5)
    env.close()
    ref.close()


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_parent_slice_episodes_that_end_only_in_the_workers_are_seen(mode):
    # The parent's slice counts the episodes that ended in its own envs; envs the workers
    # ran were not counted, so the call's count must not stand for all of them (it did:
    # the pool then missed episodes that ended only in workers, and stepped them on).
    from envhive._cli import _disabled_transcript

    fns = [functools.partial(CountingEnv, pattern=[(40 if i < 2 else 2 + i % 2, "term")], tag=i)
           for i in range(6)]
    rng = np.random.default_rng(3)
    acts = [rng.integers(0, 3, 6) for _ in range(20)]
    env = envhive.make(fns, executor=ProcessExecutor(3, parent_slice=True), autoreset=mode)
    ref = envhive.make(fns, executor="serial", autoreset=mode)
    if mode == "disabled":
        assert_same_transcript(_disabled_transcript(env, acts), _disabled_transcript(ref, acts))
    else:
        assert_same_transcript(transcript(env, 20, lambda t: acts[t], seed=4), transcript(ref, 20, lambda t: acts[t], seed=4))
    env.close()
    ref.close()


def test_parent_slice_async_and_option_conflict():
    env = envhive.make(CountingEnv, 6, executor=ProcessExecutor(3, parent_slice=True), batch_size=2)
    env.async_reset()
    seen = set()
    # No starvation: every worker's envs come back. Not within a fixed number of rounds: a
    # worker that is slow to wake on a loaded machine legitimately finishes after the parent's
    # slice a few times (first finished is first returned), but never "never".
    deadline = time.monotonic() + LONG
    while seen != set(range(6)) and time.monotonic() < deadline:
        obs, rew, term, trunc, info = env.recv()
        seen.update(info["env_id"].tolist())
        env.send(np.zeros(2, np.int64), info["env_id"])
    assert seen == set(range(6))
    env.close()
    with pytest.raises(envhive.ConfigError, match="step_timeout"):
        ProcessExecutor(2, parent_slice=True, step_timeout=1.0)


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="Linux only")
def test_cpu_affinity_pins_each_worker_and_keeps_results():
    import os

    allowed = sorted(os.sched_getaffinity(0))

    def factory():
        return CountingEnv(pattern=[(4, "term")])

    acts = [np.full(4, t % 3) for t in range(12)]
    ex = ProcessExecutor(2, cpu_affinity=True)
    with envhive.make(factory, 4, executor=ex) as env, envhive.make(factory, 4, executor="serial") as ref:
        pins = [os.sched_getaffinity(wk.proc.pid) for wk in ex._state.workers]
        assert pins == [{allowed[0]}, {allowed[1 % len(allowed)]}]
        assert_same_transcript(transcript(env, 12, acts.__getitem__, seed=1), transcript(ref, 12, acts.__getitem__, seed=1))
    ex = ProcessExecutor(2, cpu_affinity=[allowed[-1]])
    with envhive.make(factory, 4, executor=ex):
        assert [os.sched_getaffinity(wk.proc.pid) for wk in ex._state.workers] == [{allowed[-1]}] * 2
    for bad in ([], [max(allowed) + 1000], "0", [True], 3):
        with pytest.raises(envhive.ConfigError, match="cpu_affinity"):
            ProcessExecutor(2, cpu_affinity=bad)


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="Linux only")
def test_restarted_workers_are_pinned_again():
    import os
    import signal

    allowed = sorted(os.sched_getaffinity(0))
    ex = ProcessExecutor(2, cpu_affinity=True, on_worker_failure="restart")
    with envhive.make(lambda: CountingEnv(pattern=[(50, "term")]), 4, executor=ex, seed=0) as env:
        env.reset()
        old = ex._state.workers[1].proc.pid
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + LONG
        while ex._state.workers[1].proc.pid == old and time.monotonic() < deadline:
            env.step(np.zeros(4, np.int64))
        new = ex._state.workers[1].proc.pid
        assert new != old
        assert os.sched_getaffinity(new) == {allowed[1 % len(allowed)]}


def test_cores_counted_are_those_this_process_may_use(monkeypatch):
    """Under taskset or a cpuset, fewer cores than the machine's: the default worker count and
    whether waiters give up their core between polls follow the usable ones (a parent spinning
    on the only usable core starves its worker)."""
    from envhive.executors import _spawn

    monkeypatch.setattr(_spawn.os, "sched_getaffinity", lambda pid: {0})
    assert _spawn.usable_cpus() == 1
    ex = ProcessExecutor()
    env = envhive.make("CartPole-v1", 4, executor=ex, seed=0)
    try:
        assert ex.num_workers is None and len(ex._state.workers) == 1  # one usable core
        assert ex._yield_core  # parent + 1 worker > 1 core: waiters yield between polls
        env.reset()
        env.step(np.zeros(4, dtype=np.int64))
    finally:
        env.close()
