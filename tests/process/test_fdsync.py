"""The descriptor-based shared objects of ``executors/_fdsync.py`` (the native Atari engine's
block and semaphores): counting, timeouts, Ctrl-C in a wait, handing them to a spawned child
(and only then), and starting that child without a resource tracker."""

from __future__ import annotations

import os
import pickle
import signal
import threading

import numpy as np
import pytest

from envhive._interrupts import deferred_interrupts
from envhive.executors._fdsync import EventSemaphore, SharedBlock, fd_sharing, untracked_process

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not fd_sharing(), reason="no memfd_create/eventfd on this platform"),
]


@pytest.fixture
def ctrl_c_raises():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_the_semaphore_counts_posts():
    sem = EventSemaphore()
    assert not sem.acquire(False)
    for _ in range(3):
        sem.release()
    assert [sem.acquire(False), sem.acquire(True, 0.0), sem.acquire(True, 1.0)] == [True] * 3
    assert not sem.acquire(False)
    assert not sem.acquire(True, 0.02)  # times out, with nothing taken
    sem.release()
    assert sem.acquire()  # block=True, no timeout: the post is there
    sem.close()
    assert sem.fileno() == -1
    sem.close()


def test_a_blocked_acquire_wakes_on_a_release_from_another_thread():
    sem = EventSemaphore()
    timer = threading.Timer(0.05, sem.release)
    timer.start()
    assert sem.acquire(True, 30.0)
    timer.join()
    sem.close()


def test_ctrl_c_raises_out_of_a_blocked_acquire(ctrl_c_raises):
    sem = EventSemaphore()
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        sem.acquire(True, 30.0)
    timer.join()
    sem.close()


def test_a_held_ctrl_c_lets_the_wait_finish_then_raises(ctrl_c_raises):
    # As the Atari engine's rounds rely on: the signal interrupts the poll, the handler
    # holds it, the wait goes on and takes the post; KeyboardInterrupt comes after.
    sem = EventSemaphore()
    kill = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT))
    post = threading.Timer(0.2, sem.release)
    kill.start()
    post.start()
    got = None
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupts():
            got = sem.acquire(True, 30.0)
    kill.join()
    post.join()
    assert got is True
    sem.close()


def test_they_refuse_to_be_pickled_outside_a_process_start():
    sem, block = EventSemaphore(), SharedBlock(16)
    for obj in (sem, block):
        with pytest.raises(RuntimeError, match="inheritance"):
            pickle.dumps(obj)
    sem.close()
    block.close()


def test_the_block_reserves_and_shares_its_pages():
    block = SharedBlock(3 * 4096)
    assert os.fstat(block.fileno()).st_size == 3 * 4096
    a = np.ndarray((3 * 4096,), np.uint8, block.map())
    b = np.ndarray((3 * 4096,), np.uint8, block.map())
    block.close()  # the mappings keep the memory
    a[-1] = 7
    assert b[-1] == 7 and a.sum() == 7


_CHILD = """
import numpy as np
ready.release()
cmd.acquire(True, 30)  # blocks until the parent posts
arr = np.ndarray((4,), np.int64, block.map())
block.close()
arr[:] = [1, 2, 3, 4]
done.release()
"""


def test_a_spawned_child_gets_them_by_descriptor_and_no_tracker_starts():
    from multiprocessing import resource_tracker

    tracker = resource_tracker._resource_tracker
    had_tracker = tracker._fd is not None  # (a renamed attribute fails here, not silently)
    block = SharedBlock(32)
    ready, cmd, done = EventSemaphore(), EventSemaphore(), EventSemaphore()
    names = {"block": block, "ready": ready, "cmd": cmd, "done": done}
    proc = untracked_process(target=exec, args=(_CHILD, names), daemon=True)
    proc.start()
    try:
        assert ready.acquire(True, 60.0)
        cmd.release()
        assert done.acquire(True, 60.0)
        proc.join(30)
        assert proc.exitcode == 0
        arr = np.ndarray((4,), np.int64, block.map())
        assert arr.tolist() == [1, 2, 3, 4]
        # Starting it did not start multiprocessing's resource tracker (a plain spawn does).
        assert (tracker._fd is not None) == had_tracker
    finally:
        if proc.is_alive():
            proc.kill()
        for obj in (block, ready, cmd, done):
            obj.close()
