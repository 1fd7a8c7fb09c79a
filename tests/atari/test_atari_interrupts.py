"""Ctrl-C on the native Atari engine leaves a pool whose next reset and steps are exactly a
fresh pool's (a discard drops what was in flight; an op running stops at its next check), and
reaches Python within a fraction of a second even inside an op that would never end by itself
(a reset of ``noop_max=10**9`` no-ops); ``close()`` then returns as fast."""

from __future__ import annotations

import os
import random
import signal
import threading

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

import envhive  # noqa: E402
from envhive.errors import ResetNeededError  # noqa: E402

pytestmark = pytest.mark.timeout(600)  # four pools and their serial references per test, on a loaded machine
ID = "envhive/Pong-v5"


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _same_as_fresh(env: envhive.VectorEnv) -> None:
    """A seeded reset and three steps equal a serial pool's."""
    ref = envhive.make(ID, 4, executor="serial", seed=1)
    try:
        assert np.array_equal(env.reset(seed=1)[0], ref.reset(seed=1)[0])
        for _ in range(3):
            got, want = env.step(np.ones(4, np.int64)), ref.step(np.ones(4, np.int64))
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    finally:
        ref.close()


@pytest.mark.parametrize("loop", ["step", "recv"])
def test_ctrl_c_at_random_moments(loop):
    rng = random.Random(7)
    for _ in range(4):
        env = envhive.make(ID, 4, executor="native", seed=0, batch_size=2 if loop == "recv" else None)
        try:
            env.reset()
            timer = threading.Timer(rng.uniform(0.0, 0.15), os.kill, (os.getpid(), signal.SIGINT))
            try:
                timer.start()  # inside: on a loaded machine the SIGINT may land right after it
                for _ in range(100_000):  # until the SIGINT lands (within 0.15 s)
                    if loop == "step":
                        env.step(np.zeros(4, np.int64))
                    else:
                        env.send(np.zeros(4, np.int64))
                        env.recv()
                        env.recv()
            except KeyboardInterrupt:
                pass
            timer.join()
            if env.pool.pending:  # sent by the loop's own code, before a recv it never reached
                env.pool.wait()
            _same_as_fresh(env)
        finally:
            env.close()


ENDLESS = {"noop_max": 10**9}  # a reset draws up to 10**9 no-ops: it does not end by itself


def _each_env_needs_a_reset(env) -> None:
    """Every env refuses a step until it is reset (its op was cut short), stepping nothing."""
    for i in range(env.num_envs):
        with pytest.raises(ResetNeededError):
            env.send(np.array([env.single_action_space.sample()]), np.array([i]))


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.parametrize("runners", [1, 2])  # the caller runs the reset itself; or a C++ thread too
def test_ctrl_c_inside_an_endless_reset_raises_and_close_returns(runners):
    """The no-op loop checks for a stop at every no-op, and the caller looks for Ctrl-C while it
    waits or runs an op: the interrupt comes through (the reset would not end by itself), the
    pool discards the op, and ``close()`` stops whatever still runs and joins the threads."""
    from envhive.executors import NativeExecutor

    before = _threads()
    env = envhive.make(ID, 2, executor=NativeExecutor(runners), seed=0, env_kwargs=ENDLESS)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        timer.start()  # inside: the SIGINT may land at once on a loaded machine
        env.reset()
    timer.join()
    _each_env_needs_a_reset(env)  # both envs' resets were cut short
    env.close()
    assert _threads() == before


def test_ctrl_c_in_an_async_recv_waiting_for_an_endless_reset():
    env = envhive.make(ID, 4, executor="native", seed=0, env_kwargs=ENDLESS, batch_size=2)
    try:
        env.async_reset()
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        with pytest.raises(KeyboardInterrupt):
            timer.start()  # inside: the SIGINT may land at once on a loaded machine
            env.recv()
        timer.join()
        assert not env.pool.pending  # every env in flight was given up
    finally:
        env.close()


def test_close_with_an_endless_reset_in_flight_returns():
    before = _threads()
    env = envhive.make(ID, 4, executor="native", seed=0, env_kwargs=ENDLESS, batch_size=2)
    env.async_reset()  # the threads start four endless resets
    env.close()
    assert _threads() == before
