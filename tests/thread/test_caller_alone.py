"""The thread executor's sync calls run in the caller alone while the threads start nothing.

When envs hold the GIL, the caller takes back every share of a sync call before a thread gets
the GIL to start one; waking the threads then only costs. ``ThreadExecutor.run_all`` notices
(every share stolen, ``_STOLEN_STREAK`` calls in a row) and runs the next calls in the caller,
then tries the threads again. Envs that release the GIL (here: sleep) keep the threads.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time

import numpy as np

import envhive
from envhive.executors import ThreadExecutor, _thread
from envhive.testing import CountingEnv


class BusyEnv(CountingEnv):
    """Holds the GIL for ``busy`` seconds per step (pure Python), or sleeps (``sleep``)."""

    def __init__(self, tag: int, busy: float = 0.0, sleep: float = 0.0) -> None:
        super().__init__(pattern=[(10**6, "trunc")], tag=tag)
        self.busy, self.sleep = busy, sleep

    def step(self, action):
        if self.sleep:
            time.sleep(self.sleep)
        end = time.perf_counter() + self.busy
        while time.perf_counter() < end:
            pass
        return super().step(action)


def _pool(**kw):
    fns = [functools.partial(BusyEnv, i, **kw) for i in range(4)]
    return envhive.make(fns, executor=ThreadExecutor(2), seed=0)


def test_envs_that_hold_the_gil_run_in_the_caller_alone(monkeypatch):
    # A long switch interval: a woken thread cannot make the caller drop the GIL mid-call, as
    # on an idle machine. (Under load a thread may still win a share now and then; that only
    # restarts the streak, so the test waits, boundedly, for the switch, then checks it.)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        with _pool(busy=2e-4) as env:
            ex = env.pool.executor
            sends = []
            send = ex.send
            monkeypatch.setattr(ex, "send", lambda *a: sends.append(1) or send(*a))
            env.reset()
            t = 0
            while not ex._inline_left and t < 400:
                t += 1
                obs = env.step(np.zeros(4, np.int64))[0]
                assert obs[:, 2].tolist() == [t] * 4  # every env stepped, whoever ran it
            assert ex._inline_left, "the caller never took the calls alone"  # it chose ...
            assert ex._inline_calls > _thread._INLINE_CALLS
            before = len(sends)
            for _ in range(40):
                t += 1
                obs = env.step(np.zeros(4, np.int64))[0]
                assert obs[:, 2].tolist() == [t] * 4
            assert len(sends) == before  # ... and sent nothing while it did
    finally:
        sys.setswitchinterval(interval)


def test_envs_that_release_the_gil_keep_the_threads():
    with _pool(sleep=2e-3) as env:
        ex = env.pool.executor
        env.reset()
        for _ in range(40):
            env.step(np.zeros(4, np.int64))
        assert ex._inline_left == 0 and ex._inline_calls == _thread._INLINE_CALLS
        assert ex._stolen < 60  # the caller ran about one share per call, the threads the rest


def test_the_caller_alone_counts_the_episodes_of_every_slice():
    # The slices run into one completion; its count of ended episodes is every slice's (the
    # pool's next_step autoreset plans from it), whichever slices' envs end in a step.
    lengths = [2, 3, 2, 30, 4, 5]  # slice 0: envs 0-2, slice 1: envs 3-5
    fns = [functools.partial(CountingEnv, pattern=[(n, "term")], tag=i) for i, n in enumerate(lengths)]
    ex = ThreadExecutor(2)
    with envhive.make(fns, executor=ex) as env, envhive.make(fns, executor="serial") as ref:
        env.reset(seed=0)
        ref.reset(seed=0)
        ex._inline_left = 10**6  # the caller alone, from the first call
        counts = []
        original = ex.run_all

        def run_all(options=None):
            out = original(options)
            counts.append(out.ended)
            return out

        env.pool._paths = dataclasses.replace(env.pool._paths, run_all=run_all)
        for t in range(12):
            actions = np.full(6, t % 3)
            got, want = env.step(actions), ref.step(actions)
            for a, b in zip(got[:4], want[:4]):
                np.testing.assert_array_equal(a, b)
            assert counts[-1] == int(np.count_nonzero(want[2] | want[3]))
