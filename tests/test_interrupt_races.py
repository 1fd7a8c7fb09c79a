"""Ctrl-C where it used to wedge or corrupt a pool (issue 20: interrupts, hangs, shutdown).

Real SIGINTs are sent to this process at randomized but seeded delays while slow envs (20-50
ms a step) run sync steps, resets and async recv loops, with the thread executor's caller
stealing shares; and at the exact places that failed, by wrapping the one call there so that
it is interrupted (as ``test_interrupts.InterruptedPost`` does for the process executor's post).

Every trial runs under a :class:`Watchdog`: a wedge fails the test with every thread's stack
instead of hanging the suite. After every interrupt the pool must take a ``reset()`` and give
correct results (``assert_fresh_and_usable``); a close leaves no segment and no process.
"""

from __future__ import annotations

import dis
import functools
import gc
import os
import random
import signal
import subprocess
import sys
import threading
import time
import warnings
from typing import Any

import numpy as np
import pytest

import envhive
from envhive.executors import ProcessExecutor, SerialExecutor, ThreadExecutor, available_executors
from envhive.executors._shm import shm_prefix
from envhive.testing import CountingEnv
from tests.bounded import LONG, Watchdog

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt, even when the run inherited it ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class SlowEnv(CountingEnv):
    """A CountingEnv whose steps and resets sleep 20-50 ms (seeded per env: varied finish
    order), or ``hold`` seconds when it is set (``hold < 0``: no sleep at all)."""

    def __init__(self, tag: int, seed: int = 0, hold: float = 0.0) -> None:
        super().__init__(pattern=[(10**6, "trunc")], tag=tag)
        self.rng = random.Random(seed * 1000 + tag)
        self.hold = hold

    def _nap(self) -> None:
        if self.hold >= 0:
            time.sleep(self.hold or self.rng.uniform(0.02, 0.05))

    meet: threading.Barrier | None = None

    def meet_at(self, barrier: threading.Barrier) -> None:
        """From now on each step first meets the other envs at ``barrier`` (they all run at
        once); then envs on other threads than the caller's nap 0.3 s more: the caller, done
        with its own env, surely waits for them."""
        self.meet = barrier

    def step(self, action):
        self._nap()
        if self.meet is not None:
            self.meet.wait(LONG)
            if threading.current_thread() is not threading.main_thread():
                time.sleep(0.3)
        return super().step(action)

    def reset(self, *, seed=None, options=None):
        self._nap()
        return super().reset(seed=seed, options=options)


EXECUTORS = {
    "serial": SerialExecutor,
    "thread2": lambda: ThreadExecutor(2),  # 4 envs on 2 threads: the caller steals a share
    "thread4": lambda: ThreadExecutor(4),
    "process": lambda: ProcessExecutor(2),
}
if "ray" in available_executors():  # the ray executor (the session's local Ray instance)
    from envhive.executors import RayExecutor

    EXECUTORS["ray"] = lambda: RayExecutor(2)


def make(name: str, n: int = 4, seed: int = 0, hold: float = 0.0, **kw: Any) -> Any:
    fns = [functools.partial(SlowEnv, i, seed, hold) for i in range(n)]
    return envhive.make(fns, executor=EXECUTORS[name](), autoreset="next_step", **kw)


def sigint_after(seconds: float) -> threading.Timer:
    gc.collect()  # a Ctrl-C inside a finalizer is printed and dropped, not raised
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def assert_fresh_and_usable(env: Any, n: int = 4) -> None:
    obs, _ = env.reset(seed=0)
    assert obs[:, 2].tolist() == [0] * n  # step 0 of a new episode
    for t in (1, 2):
        obs, *_ = env.step(np.zeros(n, np.int64))
        assert obs[:, 2].tolist() == [t] * n  # no stale result of the interrupted call
        assert obs[:, 0].tolist() == list(range(n))


def landed_in_caller(tb: Any) -> bool:
    """Whether a ``KeyboardInterrupt`` was raised in this file's own code, not in envhive's,
    or as an envhive function was entered (at its ``RESUME``, where Python checks for
    signals, before its first line ran: it did nothing yet)."""
    while tb.tb_next is not None:
        tb = tb.tb_next
    if tb.tb_frame.f_code.co_filename == __file__:
        return True
    resume = next(ins.offset for ins in dis.get_instructions(tb.tb_frame.f_code) if ins.opname == "RESUME")
    return bool(tb.tb_lasti <= resume)


def own_segments() -> list[str]:
    return [s for s in os.listdir("/dev/shm") if s.startswith(f"{shm_prefix()}{os.getpid()}_")]


def _step_loop(env: Any) -> None:
    while True:
        env.step(np.zeros(4, np.int64))


def _reset_loop(env: Any) -> None:
    while True:
        env.reset()


def _recv_loop(env: Any) -> None:
    env.send(np.zeros(4, np.int64))
    while True:
        *_, info = env.recv()
        env.send(np.zeros(len(info["env_id"]), np.int64), info["env_id"])


LOOPS = {"step": _step_loop, "reset": _reset_loop, "recv": _recv_loop}


# The thread executor with slow envs (the caller waits, steals, is woken); the async loop on
# the others with instant envs, so that the SIGINT lands in the pool's own code, not in an env.
CASES = [(name, loop) for name in ("thread2", "thread4") for loop in LOOPS] + [
    (name, "recv") for name in ("serial", "native", "process")
] + [("ray", loop) for loop in ("step", "recv") if "ray" in EXECUTORS]


@pytest.mark.parametrize(("name", "loop"), CASES, ids=[f"{n}-{lp}" for n, lp in CASES])
def test_ctrl_c_at_random_moments_of_a_loop(name, loop):
    """Item 1 (thread: wedged in _wait) and item 2 (async: reset() raised PendingCallError):
    a SIGINT at a seeded random moment of a step, reset or async recv loop, several times on
    one pool; after each, reset() works and results are fresh."""
    rng = random.Random(f"{name}-{loop}")
    batch_size = 2 if loop == "recv" else None
    if name == "native":
        env = envhive.make("envhive/CartPole-v1", 4, batch_size=batch_size, seed=0)
    else:
        env = make(name, batch_size=batch_size, hold=0.0 if name.startswith("thread") else -1)
    try:
        for trial in range(6):
            env.reset(seed=0)
            delay = rng.uniform(0.02, 0.25)
            with Watchdog(LONG, f"{name} {loop} trial {trial} (SIGINT after {delay:.3f} s)"):
                timer = sigint_after(delay)
                with pytest.raises(KeyboardInterrupt) as caught:
                    LOOPS[loop](env)
                timer.join()
                if landed_in_caller(caught.tb) and env.pool.pending:
                    # Between two async calls, in the caller's own loop (a stalled machine):
                    # not inside envhive, so the envs sent stay in flight (executors.md,
                    # "Interrupts"); receive them, as the docs tell the user to.
                    env.pool.wait(timeout=10.0)
                if name == "native":
                    env.reset(seed=0)
                    env.step(np.zeros(4, np.int64))
                else:
                    assert_fresh_and_usable(env)
    finally:
        env.close()


class TakeThenInterrupt:
    """The thread executor's caller wake-up lock, whose next timed ``acquire`` takes the
    token and is then cut short by a Ctrl-C, as a SIGINT landing just after a finisher woke
    the caller is (the handler runs at the caller's next bytecode, token taken)."""

    def __init__(self, lock: Any) -> None:
        self._lock, self.armed = lock, True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lock, name)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got and self.armed and blocking and timeout > 0:
            self.armed = False
            raise KeyboardInterrupt
        return got

    def release(self) -> None:
        self._lock.release()


@pytest.mark.parametrize("sync", [True, False], ids=["step", "recv"])
def test_ctrl_c_just_after_the_caller_was_woken(sync, monkeypatch):
    """The interrupted wait gave its token back with a blocking acquire under the mutex: the
    token was already taken, so the caller and every finishing thread deadlocked."""
    ex = ThreadExecutor(4)
    env = envhive.make([functools.partial(SlowEnv, i) for i in range(4)], executor=ex,
                       batch_size=None if sync else 2)
    env.reset(seed=0)
    if sync:  # the caller surely waits: every env starts (a barrier), the threads' then nap
        env.call("meet_at", threading.Barrier(4))
    monkeypatch.setattr(ex._state, "caller_wake", TakeThenInterrupt(ex._state.caller_wake))
    with Watchdog(LONG, "the interrupted wait"):
        with pytest.raises(KeyboardInterrupt):
            if sync:
                env.step(np.zeros(4, np.int64))
            else:
                _recv_loop(env)
        assert_fresh_and_usable(env)
    env.close()


def test_ctrl_c_between_claiming_a_share_and_running_it(monkeypatch):
    """The caller claimed a share (its slice busy) and was interrupted before running it: no
    one released the claim, so the slice's thread slept through every later call."""
    ex = ThreadExecutor(2)
    env = envhive.make([functools.partial(SlowEnv, i) for i in range(4)], executor=ex)
    env.reset(seed=0)
    run_here, calls = ex._run_here, []

    def interrupted_first(*args: Any) -> None:
        calls.append(args[0])
        if len(calls) == 1:
            raise KeyboardInterrupt  # after the claim, before the run
        run_here(*args)

    monkeypatch.setattr(ex, "_run_here", interrupted_first)
    with Watchdog(LONG, "the call after an interrupted steal"):
        with pytest.raises(KeyboardInterrupt):
            env.step(np.zeros(4, np.int64))
        assert calls  # the caller did claim a share
        assert_fresh_and_usable(env)
    env.close()


@pytest.mark.parametrize("where", ["before_dispatch", "after_popleft"])
@pytest.mark.parametrize("name", ["serial", "thread2", "process", "native"])
def test_ctrl_c_outside_the_old_guard_of_send_and_recv(monkeypatch, name, where):
    """Item 2: a Ctrl-C in send() before its dispatch, with other envs in flight, or in recv()
    after it took the batch off the ready queue: reset() works (was PendingCallError), and
    every env comes back from recv afterwards (the popped batch was lost for good)."""
    if name == "native":
        env = envhive.make("envhive/CartPole-v1", 4, batch_size=2, seed=0)
    else:
        env = make(name, batch_size=2)
    pool = env.pool
    env.async_reset(seed=0)
    env.recv()
    # Before send's dispatch; in recv between taking the batch's ids off the ready queue and
    # handing out its rows.
    owner, target = (pool, "_env_ids") if where == "before_dispatch" else (pool._books, "hand_out")
    original = getattr(owner, target)

    def interrupted(*args: Any) -> Any:
        monkeypatch.setattr(owner, target, original)
        raise KeyboardInterrupt

    monkeypatch.setattr(owner, target, interrupted)
    with Watchdog(LONG, f"{name}: the pool after a Ctrl-C {where}"):
        with pytest.raises(KeyboardInterrupt):
            env.send(np.zeros(2, np.int64), [0, 1]) if where == "before_dispatch" else env.recv()
        env.reset(seed=0)
        env.async_reset(seed=0)
        got = sorted(int(i) for _ in range(2) for i in env.recv()[4]["env_id"])
        assert got == [0, 1, 2, 3]
    env.close()


@pytest.mark.parametrize("api", ["gymnasium", "dm_env"])
def test_ctrl_c_in_the_front_ends_layout_of_a_recv(monkeypatch, api):
    """A Ctrl-C after the pool's recv returned, in the front end's layout of the batch (other
    envs still in flight): reset() works, as for a Ctrl-C inside the pool's recv."""
    fns = [functools.partial(SlowEnv, i, 0, -1) for i in range(4)]
    env = envhive.make(fns, executor="serial", batch_size=2, api=api, seed=0)
    module = sys.modules[type(env).__module__]
    target = "gym_infos" if api == "gymnasium" else None
    if target is not None:
        original = getattr(module, target)

        def interrupted(*args: Any, **kwargs: Any) -> Any:
            monkeypatch.setattr(module, target, original)
            raise KeyboardInterrupt

        monkeypatch.setattr(module, target, interrupted)
    else:
        original_timestep = env._timestep

        def interrupted_timestep(batch: Any) -> Any:
            monkeypatch.setattr(env, "_timestep", original_timestep)
            raise KeyboardInterrupt

        monkeypatch.setattr(env, "_timestep", interrupted_timestep)
    with Watchdog(LONG, f"{api}: the pool after a Ctrl-C in the front end's recv layout"):
        env.async_reset() if api == "gymnasium" else env.async_reset(seed=0)
        with pytest.raises(KeyboardInterrupt):
            env.recv()
        assert env.pool.pending == 0  # the envs still in flight were given up
        env.reset()
    env.close()


@pytest.mark.parametrize(("api", "call"), [
    ("gymnasium", "send"), ("gymnasium", "recv"), ("gymnasium", "async_reset"),
    ("gymnasium", "step_async"), ("gymnasium", "reset_async"),
    ("dm_env", "send"), ("dm_env", "recv"), ("dm_env", "async_reset"),
])
def test_ctrl_c_as_the_pools_call_returns_into_the_front_end(monkeypatch, api, call):
    """Python delivers a signal when a call completes, in the caller's frame: a Ctrl-C just
    as the pool's send/recv/async_reset returned into the front end (simulated: the pool's
    call does its work, then raises) leaves nothing in flight and nothing pending, as one
    inside the pool does; reset() and the async calls work after it."""
    fns = [functools.partial(SlowEnv, i, 0, -1) for i in range(4)]
    env = envhive.make(fns, executor="serial", batch_size=2, api=api, seed=0)
    pool = env.pool
    pool_call = {"step_async": "send", "reset_async": "async_reset"}.get(call, call)
    original = getattr(pool, pool_call)

    def then_interrupted(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(pool, pool_call, original)
        original(*args, **kwargs)
        raise KeyboardInterrupt

    with Watchdog(LONG, f"{api}: a Ctrl-C as the pool's {pool_call} returned into {call}"):
        env.reset()
        if call == "recv":
            env.send(np.zeros(4, np.int64), np.arange(4))  # two stay in flight after the recv
        monkeypatch.setattr(pool, pool_call, then_interrupted)
        with pytest.raises(KeyboardInterrupt):
            if call == "send":
                env.send(np.zeros(2, np.int64), np.arange(2))
            elif call == "async_reset":
                env.async_reset(np.arange(2), seed=0) if api == "dm_env" else env.async_reset(np.arange(2))
            elif call == "step_async":
                env.step_async(np.zeros(4, np.int64))
            elif call == "reset_async":
                env.reset_async(seed=0)
            else:
                env.recv()
        assert pool.pending == 0
        env.reset()
        env.send(np.zeros(4, np.int64), np.arange(4))
        assert sorted(int(i) for _ in range(2) for i in (
            env.recv()[4]["env_id"] if api == "gymnasium" else env.recv()[1])) == [0, 1, 2, 3]
        if api == "gymnasium":
            env.step_async(np.zeros(4, np.int64))  # nothing left pending from the interrupted call
            env.step_wait()
    env.close()


@pytest.mark.parametrize("trial", range(3))
@pytest.mark.parametrize("name", ["process", "thread2"])
def test_ctrl_c_during_a_close(name, trial):
    """Item 4: a SIGINT inside close() (its workers still busy with a slow step) left every
    segment of a process pool in /dev/shm (a thread pool: a thread and its envs), and a second
    close() or garbage collection did not remove them."""
    rng = random.Random(trial)
    env = make(name, hold=0.4, batch_size=2)
    env.reset(seed=0)
    ex = env.pool.executor
    pids = ex.worker_pids() if name == "process" else []
    threads = [sl.thread for sl in ex._state.slices] if name == "thread2" else []
    env.send(np.zeros(4, np.int64))  # the workers are inside a 0.4 s step while close waits
    with Watchdog(LONG, "close() cut short"):
        timer = None
        try:
            timer = sigint_after(rng.uniform(0.0, 0.15))
            env.close()
            time.sleep(0.3)  # the signal lands after close, at worst
        except KeyboardInterrupt:
            pass
        finally:
            if timer is not None:
                timer.join()
        env.close()
    gc.collect()
    assert own_segments() == []
    assert not [p for p in pids if _alive(p)]
    assert not [t for t in threads if t.is_alive()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("name", ["process", "thread2"])
def test_a_pool_close_cut_short_is_finished_by_the_next(name):
    """A Ctrl-C that struck pool.close() before the executor's own close began: the next
    close() finishes the job (it returned at once: the pool was already marked closed)."""
    env = make(name)
    env.reset(seed=0)
    ex = env.pool.executor
    close = ex.close

    def interrupted() -> None:
        ex.close = close
        raise KeyboardInterrupt

    ex.close = interrupted
    with pytest.raises(KeyboardInterrupt):
        env.close()
    env.close()
    if name == "process":
        assert own_segments() == []
    else:
        assert ex.thread_idents() == []


def test_thread_close_waits_once_for_every_stuck_thread():
    """Item 5: close() waited up to 10 s for each thread still inside an env call, one after
    another (40 s for 4); now one deadline covers them all."""
    release = threading.Event()

    class Stuck(CountingEnv):
        def step(self, action):
            release.wait(60)
            return super().step(action)

    ex = ThreadExecutor(4)
    env = envhive.make([lambda: Stuck(pattern=[(100, "trunc")]) for _ in range(4)], executor=ex,
                       batch_size=4)
    env.reset(seed=0)
    env.send(np.zeros(4, np.int64))
    time.sleep(0.1)  # every thread is inside its step
    try:
        with Watchdog(LONG, "close() with 4 threads stuck in env calls"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                env.close()
        stuck = [w for w in caught if "still inside an env call" in str(w.message)]
        assert len(stuck) == 4
    finally:
        release.set()


_EXIT_WITH_STUCK_THREADS = """
import time, numpy as np, envhive
from envhive.executors import ThreadExecutor
from envhive.testing import CountingEnv

class Stuck(CountingEnv):
    def step(self, action):
        time.sleep(60)

env = envhive.make([lambda: Stuck(pattern=[(100, "trunc")]) for _ in range(2)],
                   executor=ThreadExecutor(2), batch_size=2)
env.reset(seed=0)
env.send(np.zeros(2, np.int64))
time.sleep(0.1)
print("exiting", flush=True)
"""


def test_interpreter_exit_with_stuck_threads_is_bounded():
    """Item 5, at interpreter exit: the finalizer waited 10 s per thread inside an env call
    (20 s for 2); now one 2 s deadline. The child must exit within the watchdog's limit."""
    try:
        done = subprocess.run([sys.executable, "-c", _EXIT_WITH_STUCK_THREADS],
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the interpreter did not exit within 120 s with 2 threads stuck in env calls")
    assert "exiting" in done.stdout, done.stderr
    assert done.stderr.count("still inside an env call") == 2, done.stderr


@pytest.mark.parametrize("name", ["serial", "process"])
def test_ctrl_c_in_wait_after_the_envs_came_back_loses_them_visibly(name, monkeypatch):
    """A Ctrl-C in wait() after every env came back and was taken off the books, before its
    rows are handed out: those rows are lost, so their envs need a reset (stepping them
    raises ResetNeededError), as for envs a cut-short recv took; envs not sent are untouched."""
    env = make(name)
    pool = env.pool
    env.reset(seed=0)
    pool.send(np.zeros(2, np.int64), [0, 1])
    original = pool._books.all_rows

    def interrupted(*args: Any) -> Any:
        monkeypatch.setattr(pool._books, "all_rows", original)
        raise KeyboardInterrupt

    monkeypatch.setattr(pool._books, "all_rows", interrupted)
    with Watchdog(LONG, f"{name}: the pool after a Ctrl-C in wait"):
        with pytest.raises(KeyboardInterrupt):
            pool.wait()
        with pytest.raises(envhive.ResetNeededError):
            pool.send(np.zeros(1, np.int64), [0])
        pool.send(np.zeros(2, np.int64), [2, 3])  # not sent before: still steppable
        assert pool.wait().op.tolist()[2:] == [int(envhive._ops.Op.STEP)] * 2
        assert_fresh_and_usable(env)
    env.close()


@pytest.mark.parametrize("call", ["wait", "recv"])
@pytest.mark.parametrize("name", ["serial", "process"])
def test_ctrl_c_at_the_first_check_of_wait_and_recv(monkeypatch, name, call):
    """A Ctrl-C in ``wait``'s or ``recv``'s first check, with envs in flight, is inside the
    call's guard too: the envs in flight are given up and ``reset()`` works (it raised
    PendingCallError when the checks ran before the guard)."""
    env = make(name, batch_size=2, hold=-1)
    pool = env.pool
    env.async_reset(seed=0)
    original = pool._check_open

    def interrupted() -> None:
        monkeypatch.setattr(pool, "_check_open", original)
        raise KeyboardInterrupt

    monkeypatch.setattr(pool, "_check_open", interrupted)
    with Watchdog(LONG, f"{name}: the pool after a Ctrl-C at {call}'s first check"):
        with pytest.raises(KeyboardInterrupt):
            pool.wait() if call == "wait" else pool.recv()
        assert pool.pending == 0
        assert_fresh_and_usable(env)
    env.close()
