"""The thread executor's sync calls run in the caller alone while the threads start nothing.

When envs hold the GIL, the caller takes back every share of a sync call before a thread gets
the GIL to start one; waking the threads then only costs. ``ThreadExecutor.run_all`` notices
(every share stolen, several calls in a row) and runs the next calls in the caller without
sending anything to the threads, then tries the threads again. Envs that release the GIL keep
the threads.

What is observed is behaviour only: which threads ran the envs' steps, and whether a sync call
went through the executor's ``send`` (which hands shares to the threads). Nothing depends on
how fast the machine is: the GIL-holding case waits, boundedly, for the switch to happen; the
GIL-releasing case makes its two slices meet at a barrier, so a call whose shares did not run
at the same time on two threads fails (after a generous timeout) instead of passing by luck.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest

import envhive
from envhive.executors import ThreadExecutor
from envhive.testing import CountingEnv

#: How many calls the GIL-holding case may take to switch to the caller alone (the executor
#: switches after a streak of 8 calls whose every share the caller ran; a thread winning a
#: share under load restarts the streak).
SWITCH_WITHIN = 400
#: Calls in a row with no send that show the caller runs alone.
ALONE_FOR = 40


class BusyEnv(CountingEnv):
    """Holds the GIL for ``busy`` seconds per step (pure Python); with a ``barrier``, waits
    there (releasing the GIL) at every step; records the thread that ran each step."""

    def __init__(self, tag: int, busy: float = 0.0, barrier: threading.Barrier | None = None,
                 ran: list[int] | None = None, pattern: Any = ((10**6, "trunc"),)) -> None:
        super().__init__(pattern=pattern, tag=tag)
        self.busy, self.barrier, self.ran = busy, barrier, ran

    def step(self, action):
        if self.ran is not None:
            self.ran.append(threading.get_ident())
        if self.barrier is not None:
            self.barrier.wait(timeout=30.0)  # a share left to the caller alone breaks it
        end = time.perf_counter() + self.busy
        while time.perf_counter() < end:
            pass
        return super().step(action)


@pytest.fixture
def long_switch_interval():
    """A woken thread cannot make the caller drop the GIL mid-call, as on an idle machine."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    yield
    sys.setswitchinterval(interval)


def _spy_sends(monkeypatch: pytest.MonkeyPatch, ex: ThreadExecutor) -> list[int]:
    sends: list[int] = []
    send = ex.send
    monkeypatch.setattr(ex, "send", lambda *a: sends.append(1) or send(*a))
    return sends


def _until_alone(sends: list[int], step: Any) -> int:
    """Step until ``ALONE_FOR`` calls in a row sent nothing to the threads (at most
    ``SWITCH_WITHIN`` calls before that run starts); returns the calls made."""
    quiet = calls = 0
    while quiet < ALONE_FOR:
        assert calls < SWITCH_WITHIN + ALONE_FOR, "the caller never took the calls alone"
        before = len(sends)
        step()
        calls += 1
        quiet = quiet + 1 if len(sends) == before else 0
    return calls


@pytest.mark.usefixtures("long_switch_interval")
def test_envs_that_hold_the_gil_run_in_the_caller_alone(monkeypatch):
    ran: list[int] = []
    fns = [functools.partial(BusyEnv, i, busy=2e-4, ran=ran) for i in range(4)]
    with envhive.make(fns, executor=ThreadExecutor(2), seed=0) as env:
        sends = _spy_sends(monkeypatch, env.pool.executor)
        env.reset()
        t = 0

        def step() -> None:
            nonlocal t
            t += 1
            obs = env.step(np.zeros(4, np.int64))[0]
            assert obs[:, 2].tolist() == [t] * 4  # every env stepped, whoever ran it

        _until_alone(sends, step)
        del ran[:]
        for _ in range(10):  # still alone: every env stepped by the caller, nothing sent
            before = len(sends)
            step()
            assert len(sends) == before
        assert set(ran) == {threading.get_ident()}


def test_envs_that_release_the_gil_keep_the_threads(monkeypatch):
    ran: list[int] = []
    barrier = threading.Barrier(2)  # env 0 (slice 0) and env 2 (slice 1) meet at every step
    fns = [functools.partial(BusyEnv, i, barrier=barrier if i in (0, 2) else None, ran=ran)
           for i in range(4)]
    with envhive.make(fns, executor=ThreadExecutor(2), seed=0) as env:
        sends = _spy_sends(monkeypatch, env.pool.executor)
        env.reset()
        for t in range(1, 41):
            del ran[:]
            before = len(sends)
            obs = env.step(np.zeros(4, np.int64))[0]
            assert obs[:, 2].tolist() == [t] * 4
            assert len(sends) == before + 1  # every call handed shares to the threads
            assert len(set(ran)) == 2  # and the two slices ran on two threads at once


@pytest.mark.usefixtures("long_switch_interval")
def test_the_caller_alone_counts_the_episodes_of_every_slice(monkeypatch):
    # The slices run into one completion; its count of ended episodes is every slice's (the
    # pool's next_step autoreset plans from it), whichever slices' envs end in a step: a wrong
    # count would plan the wrong resets, and the rows would differ from serial's.
    lengths = [2, 3, 2, 30, 4, 5]  # slice 0: envs 0-2, slice 1: envs 3-5
    fns = [functools.partial(BusyEnv, i, busy=2e-4, pattern=[(n, "term")]) for i, n in enumerate(lengths)]
    ex = ThreadExecutor(2)
    with envhive.make(fns, executor=ex) as env, envhive.make(fns, executor="serial") as ref:
        sends = _spy_sends(monkeypatch, ex)
        env.reset(seed=0)
        ref.reset(seed=0)
        t = 0
        ended = []

        def step() -> None:
            nonlocal t
            actions = np.full(6, t % 3)
            t += 1
            before = len(sends)
            got, want = env.step(actions), ref.step(actions)
            for a, b in zip(got[:4], want[:4]):
                np.testing.assert_array_equal(a, b)
            if len(sends) == before:  # a call the caller ran alone
                ended.append(int(np.count_nonzero(want[2] | want[3])))

        _until_alone(sends, step)
        assert sum(ended) > 10 and len(set(ended)) > 1  # episodes of both slices ended alone
