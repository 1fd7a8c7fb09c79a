"""Ctrl-C on the native Atari engines leaves a pool whose next reset and steps are exactly a
fresh pool's: on the worker-process engine, a round of worker commands is one unit (no
completion post of an interrupted round is left for the next round to mistake for its own);
on the threaded engine, a call is one C call and a discard drops what was in flight."""

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

pytestmark = pytest.mark.timeout(300)
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


@pytest.mark.usefixtures("process_engine")
def test_ctrl_c_inside_a_round_of_worker_commands(monkeypatch):
    # The exact place: SIGINT arrives while the parent waits for its workers' completions.
    env = envhive.make(ID, 4, executor="native", seed=0)
    try:
        env.reset()
        engine = env._pool.executor._engine
        wait_round = engine._wait_round

        def interrupted_wait() -> None:
            os.kill(os.getpid(), signal.SIGINT)
            wait_round()

        monkeypatch.setattr(engine, "_wait_round", interrupted_wait)
        with pytest.raises(KeyboardInterrupt):
            env.step(np.zeros(4, np.int64))
        monkeypatch.setattr(engine, "_wait_round", wait_round)
        _same_as_fresh(env)
    finally:
        env.close()


@pytest.mark.parametrize("loop", ["step", "recv"])
def test_ctrl_c_at_random_moments(loop, engine):
    rng = random.Random(7)
    for _ in range(4):
        env = envhive.make(ID, 4, executor="native", seed=0, batch_size=2 if loop == "recv" else None)
        try:
            env.reset()
            timer = threading.Timer(rng.uniform(0.0, 0.15), os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            try:
                for _ in range(400):
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


@pytest.mark.usefixtures("process_engine")
def test_ctrl_c_inside_close_still_stops_the_workers_and_frees_the_block(monkeypatch):
    # The finalizer runs once: a close cut short used to leave workers and block for good.
    env = envhive.make(ID, 4, executor="native", seed=0)
    env.reset()
    engine = env._pool.executor._engine
    procs, block = list(engine._procs), engine._block or engine._shm
    finalize = engine._finalizer

    def interrupted_finalize() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        finalize()

    monkeypatch.setattr(engine, "_finalizer", interrupted_finalize)
    try:
        env.close()
    except KeyboardInterrupt:
        pass
    for p in procs:
        p.join(5)
    assert not any(p.is_alive() for p in procs)
    if engine._block is not None:  # the memfd's descriptor closed (Linux)
        assert block.fileno() == -1
    else:  # the named block of other platforms unlinked
        assert not os.path.exists(f"/dev/shm/{block.name}")
