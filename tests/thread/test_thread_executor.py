"""Thread executor: slices, parallelism, first-finished async order, faults and cleanup."""

from __future__ import annotations

import functools
import gc
import itertools
import os
import threading
import time
from typing import Any

import numpy as np
import pytest

import envhive
from envhive.executors import ThreadExecutor, available_executors
from envhive.testing import CountingEnv, assert_same_transcript, transcript

pytestmark = pytest.mark.timeout(300)


class SlowEnv(CountingEnv):
    """A CountingEnv whose step sleeps ``delay`` s (sleep releases the GIL); its
    ``fail_at``-th step call (over all episodes) raises ``exc``."""

    def __init__(self, tag: int, delay: float = 0.0, fail_at: int | None = None,
                 exc: type[BaseException] = ZeroDivisionError,
                 started: threading.Event | None = None) -> None:
        super().__init__(pattern=[(1000, "trunc")], tag=tag)
        self.delay, self.fail_at, self.exc = delay, fail_at, exc
        self.started = started
        self.closed = False
        self.calls = 0

    def step(self, action):
        self.calls += 1
        if self.started is not None:
            self.started.set()
        if self.calls == self.fail_at:
            raise self.exc("injected failure")
        if self.delay:
            time.sleep(self.delay)
        return super().step(action)

    def close(self):
        self.closed = True


#: A bounded wait for what takes milliseconds on an idle machine: generous, so that a loaded
#: machine never fails a test, while a wedge still does.
LONG = 30.0


def wait_until(cond, timeout: float = LONG) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


@pytest.fixture(autouse=True)
def no_leftover_threads():
    before = threading.active_count()
    yield
    gc.collect()
    assert wait_until(lambda: threading.active_count() <= before), (
        f"leftover threads: {[t.name for t in threading.enumerate()]}"
    )


def zeros(n: int) -> np.ndarray:
    return np.zeros(n, np.int64)


def test_registered_but_auto_keeps_serial():
    assert "thread" in available_executors()
    with envhive.make(lambda: CountingEnv(), 2) as env:
        assert env.executor == "serial"
    with envhive.make(lambda: CountingEnv(), 3, executor="thread", num_workers=2) as env:
        assert env.executor == "thread" and "thread, 2 threads" in repr(env)


class MeetingEnv(CountingEnv):
    """Records ``(tag, thread, order)`` at each step; with a ``barrier``, waits there (the
    slices holding one meet: they must run on threads of their own at the same time)."""

    def __init__(self, tag: int, log: list, order: Any, barrier: threading.Barrier | None) -> None:
        super().__init__(pattern=[(1000, "trunc")], tag=tag)
        self.log, self.order, self.barrier = log, order, barrier

    def step(self, action):
        self.log.append((self.tag, threading.get_ident(), next(self.order)))
        if self.barrier is not None:
            self.barrier.wait(timeout=LONG)
        return super().step(action)


def test_uneven_split_each_slice_runs_in_one_thread():
    log: list = []
    order = itertools.count()
    barrier = threading.Barrier(3)  # the first env of each slice: 0, 3 and 5
    fns = [functools.partial(MeetingEnv, i, log, order, barrier if i in (0, 3, 5) else None)
           for i in range(7)]
    with envhive.make(fns, executor=ThreadExecutor(3)) as env:
        assert "thread, 3 threads" in repr(env)
        env.reset()
        for _ in range(3):
            log.clear()
            env.step(zeros(7))
            ident = {tag: who for tag, who, _ in log}
            start = {tag: n for tag, _, n in log}
            # 7 envs on 3 threads: 3 + 2 + 2, contiguous, each slice run in order by one thread,
            # the three slices at the same time (else the barrier breaks: an env error).
            for part in ([0, 1, 2], [3, 4], [5, 6]):
                assert len({ident[i] for i in part}) == 1, (part, ident)
                assert [start[i] for i in part] == sorted(start[i] for i in part)
            assert len(set(ident.values())) == 3, ident


def test_matches_serial_with_uneven_split():
    def factory():
        return CountingEnv(pattern=[(4, "term"), (3, "trunc")])

    rng = np.random.default_rng(0)
    acts = [rng.integers(0, 3, 5) for _ in range(40)]
    for mode in ("next_step", "same_step", "disabled"):
        with envhive.make(factory, 5, executor=ThreadExecutor(3), autoreset=mode) as env, \
             envhive.make(factory, 5, executor="serial", autoreset=mode) as ref:
            if mode == "disabled":
                continue  # transcript() needs autoreset; disabled is covered by conformance
            assert_same_transcript(transcript(env, 40, lambda t: acts[t], seed=3),
                                   transcript(ref, 40, lambda t: acts[t], seed=3))


def test_steps_overlap_when_env_releases_the_gil():
    """Two envs on two threads step at the same time: they meet at a barrier inside their
    step (a pool that ran them one after the other would break it: an env error)."""
    log: list = []
    barrier = threading.Barrier(2)
    fns = [functools.partial(MeetingEnv, i, log, itertools.count(), barrier) for i in range(2)]
    with envhive.make(fns, executor=ThreadExecutor(2)) as env:
        env.reset()
        for t in range(1, 4):
            log.clear()
            obs = env.step(zeros(2))[0]
            assert obs[:, 2].tolist() == [t, t]
            assert len({who for _, who, _ in log}) == 2


class GatedEnv(CountingEnv):
    """A CountingEnv whose step waits for ``gate`` (an event the test sets), then sets
    ``done``: what runs when is the test's decision, not the clock's."""

    def __init__(self, tag: int, gate: threading.Event | None, done: threading.Event) -> None:
        super().__init__(pattern=[(1000, "trunc")], tag=tag)
        self.gate, self.done = gate, done

    def step(self, action):
        if self.gate is not None:
            assert self.gate.wait(LONG), "the test never opened the gate"
        out = super().step(action)
        self.done.set()
        return out


def test_async_recv_returns_fast_slice_first():
    gates = [threading.Event(), None, threading.Event()]
    done = [threading.Event() for _ in gates]
    fns = [functools.partial(GatedEnv, i, gates[i], done[i]) for i in range(3)]
    with envhive.make(fns, executor=ThreadExecutor(3), batch_size=1) as env:
        env.async_reset()
        assert sorted(int(env.recv()[4]["env_id"][0]) for _ in range(3)) == [0, 1, 2]
        env.send(zeros(3))
        # recv returns the env that finished without waiting for (or running) the others.
        assert int(env.recv()[4]["env_id"][0]) == 1
        assert not done[0].is_set() and not done[2].is_set()
        gates[2].set()
        assert int(env.recv()[4]["env_id"][0]) == 2
        assert not done[0].is_set()
        gates[0].set()
        assert int(env.recv()[4]["env_id"][0]) == 0


def test_send_returns_at_once_and_envs_run_in_the_background():
    gate = threading.Event()
    done = [threading.Event() for _ in range(2)]
    fns = [functools.partial(GatedEnv, i, gate, done[i]) for i in range(2)]
    with envhive.make(fns, executor=ThreadExecutor(2), batch_size=2) as env:
        env.reset()
        env.send(zeros(2))  # returns although no env can finish before the gate opens
        assert not any(e.is_set() for e in done), "send() waited for the envs"
        gate.set()
        # Nobody calls recv: the worker threads must still run every share.
        assert all(e.wait(LONG) for e in done)
        obs, rew, term, trunc, info = env.recv()
        assert sorted(info["env_id"].tolist()) == [0, 1]
        assert obs[:, 2].tolist() == [1, 1]


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_env_exception_names_env_and_pool_stays_usable(sync):
    fns = [lambda i=i: SlowEnv(i, fail_at=3 if i == 2 else None) for i in range(4)]
    with envhive.make(fns, executor=ThreadExecutor(2), batch_size=None if sync else 1) as env:
        env.reset()
        errors = []
        for _ in range(3):
            got = []
            try:
                if sync:
                    env.step(zeros(4))
                    continue
                env.send(zeros(4))
                while len(got) < 4:
                    got.append(int(env.recv()[4]["env_id"][0]))
            except envhive.EnvWorkerError as err:
                errors.append(err)
                while not sync and len(got) < 3:  # the other envs are still delivered
                    got.append(int(env.recv()[4]["env_id"][0]))
                assert sync or sorted(got) == [0, 1, 3]
        assert len(errors) == 1
        assert errors[0].env_id == 2
        assert errors[0].cause_type == "ZeroDivisionError"
        assert "injected failure" in errors[0].worker_traceback
        with pytest.raises(envhive.ResetNeededError):
            env.step(zeros(4)) if sync else env.send(zeros(4))
        if sync:
            env.reset()
            obs, *_ = env.step(zeros(4))
            assert obs[:, 2].tolist() == [1, 1, 1, 1]
        else:
            env.async_reset()
            assert sorted(int(env.recv()[4]["env_id"][0]) for _ in range(4)) == [0, 1, 2, 3]
            env.send(zeros(4))
            rows = [env.recv() for _ in range(4)]
            assert sorted(int(r[4]["env_id"][0]) for r in rows) == [0, 1, 2, 3]
            assert all(r[0][0, 2] == 1 for r in rows)


def test_base_exception_in_a_worker_thread_does_not_kill_it():
    # SystemExit escapes EnvRunner's `except Exception`: the thread must turn it into an error.
    started = threading.Event()
    fns = [CountingEnv, lambda: SlowEnv(1, fail_at=1, exc=SystemExit, started=started)]
    ex = ThreadExecutor(2)
    with envhive.make(fns, executor=ex, batch_size=1) as env:
        env.reset()
        env.send(zeros(2))
        # Once its thread has started it, env 1's share cannot be run by recv in this thread
        # (where SystemExit would propagate, as with the serial executor).
        assert started.wait(LONG)
        got = []
        with pytest.raises(envhive.EnvWorkerError) as info:
            for _ in range(2):
                got.append(int(env.recv()[4]["env_id"][0]))
        assert info.value.env_id == 1 and info.value.cause_type == "SystemExit"
        assert len(ex.thread_idents()) == 2
        if not got:  # env 0 is still ready to be received
            assert int(env.recv()[4]["env_id"][0]) == 0
        env.reset()
        env.send(zeros(2))
        assert sorted(int(env.recv()[4]["env_id"][0]) for _ in range(2)) == [0, 1]


def test_factory_errors_like_serial():
    def bad():
        raise OSError("no display")

    with pytest.raises(envhive.EnvWorkerError) as info:
        envhive.make([CountingEnv, CountingEnv, bad], executor="thread")
    assert info.value.env_id == 2 and "no display" in str(info.value)
    class Holder:  # hides the instance from make()'s up-front check: build_envs catches it
        env = CountingEnv()

        def get(self):
            return self.env

    holder = Holder()
    with pytest.raises(envhive.ConfigError, match="same env object as for env 1"):
        envhive.make([CountingEnv, holder.get, holder.get], executor=ThreadExecutor(2))


def test_call_and_set_attr():
    with envhive.make(lambda: CountingEnv(tag=1), 5, executor=ThreadExecutor(2), batch_size=2) as env:
        env.set_attr("tag", [10, 11, 12, 13, 14])
        assert env.get_attr("tag") == (10, 11, 12, 13, 14)
        env.async_reset()
        with pytest.raises(envhive.PendingCallError):
            env.get_attr("tag")


def test_close_joins_threads_and_closes_envs():
    before = threading.active_count()
    envs: list = []

    def factory():
        envs.append(SlowEnv(len(envs), delay=0.05))
        return envs[-1]

    env = envhive.make(factory, 4, executor=ThreadExecutor(3))
    assert threading.active_count() == before + 3
    env.reset()
    env.send(zeros(4))  # close with ops in flight: running ones finish, then threads exit
    env.close()
    env.close()
    assert threading.active_count() == before
    assert all(e.closed for e in envs)
    with pytest.raises(envhive.ClosedError):
        env.step(zeros(4))


def test_garbage_collection_stops_threads():
    before = threading.active_count()
    env = envhive.make(lambda: SlowEnv(0, delay=0.01), 4, executor=ThreadExecutor(2), batch_size=2)
    env.reset()
    env.send(zeros(4))  # even with ops in flight
    assert threading.active_count() == before + 2
    del env
    gc.collect()
    assert wait_until(lambda: threading.active_count() == before)
    with envhive.make(CountingEnv, 3, executor="thread") as env:
        env.reset()
    assert threading.active_count() == before
    # A bare pool (no VectorEnv.__del__ to close it): the executor's finalizer does it.
    from envhive._pool import Pool
    pool = Pool([CountingEnv] * 2, ThreadExecutor(2), autoreset=envhive.AutoresetMode.NEXT_STEP)
    pool.reset()
    assert threading.active_count() == before + 2
    del pool
    gc.collect()
    assert wait_until(lambda: threading.active_count() == before)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_num_threads_validation(bad):
    with pytest.raises(envhive.ConfigError, match=r"num_threads: expected a positive int or None, got"):
        ThreadExecutor(bad)


def test_num_threads_capped_at_num_envs():
    before = threading.active_count()
    with envhive.make(CountingEnv, 3, executor=ThreadExecutor(8)) as env:
        assert "thread, 3 threads" in repr(env)
        assert threading.active_count() == before + 3
    k = min(os.cpu_count() or 1, 64)
    with envhive.make(CountingEnv, 64, executor=ThreadExecutor()) as env:
        assert f"thread, {k} thread" in repr(env)
    with envhive.make(CountingEnv, 2, executor=ThreadExecutor(np.int64(2))) as env:
        env.reset()


def test_executor_instance_serves_one_pool():
    ex = ThreadExecutor(1)
    with envhive.make(CountingEnv, 1, executor=ex):
        with pytest.raises(envhive.ConfigError, match="already runs a pool"):
            envhive.make(CountingEnv, 1, executor=ex)


class HookEnv(CountingEnv):
    def __init__(self, hook):
        super().__init__(pattern=[(1000, "trunc")])
        self.hook = hook

    def step(self, action):
        self.hook()
        return super().step(action)


def test_garbage_collection_inside_its_own_worker_thread():
    # The cyclic collector runs finalizers in whichever thread triggers it: here, one of the
    # dropped pool's own threads, inside an env call. It must not deadlock or self-join.
    before = threading.active_count()
    entered, go, collected = threading.Event(), threading.Event(), threading.Event()

    def hook():
        if threading.current_thread() is not threading.main_thread():
            entered.set()
            go.wait(LONG)
            gc.collect()
            collected.set()

    env = envhive.make(lambda: HookEnv(hook), 2, executor=ThreadExecutor(2), batch_size=1)
    env.reset()
    gc.disable()
    try:
        env.send(zeros(2))
        assert entered.wait(LONG)
        holder: list = [env]
        holder.append(holder)  # only the cyclic collector can free the pool now
        del env, holder
        go.set()
        assert collected.wait(LONG)
    finally:
        gc.enable()
    assert wait_until(lambda: threading.active_count() == before)
