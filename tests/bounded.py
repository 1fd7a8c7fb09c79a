"""Bounded waits for tests: nothing in the suite decides on how fast the machine is.

A test waits for an event, a condition or a gate it opens itself, with a generous limit (at
least 10x what an idle machine takes): a loaded machine makes the wait longer, never a
failure; a wedge still fails, within the limit, instead of hanging the suite.

* :class:`Watchdog`: a block that must finish within a limit (SIGUSR1 into the main thread,
  so a blocked call is interrupted and the test fails with every thread's stack).
* :func:`wait_until`: poll a condition until it holds or the limit passes.
* :class:`FileGate`: a gate that envs in other threads or processes wait at until the test
  opens it (a file: it crosses process boundaries without being pickled as a lock).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

#: The limit of a bounded wait for what takes milliseconds to a second on an idle machine.
LONG = 30.0


class Wedged(Exception):
    """Raised in the main thread by :class:`Watchdog` when a call outlives its limit."""


class Watchdog:
    """Fail a block that does not finish within ``limit`` seconds, instead of hanging.

    A timer thread dumps every thread's stack, then sends SIGUSR1 to the main thread every
    half second until the block ends; the handler raises :class:`Wedged` there. A thread
    blocked on a lock is woken by it (CPython's lock waits are interruptible), so even a
    deadlock ends, as a failure.
    """

    def __init__(self, limit: float, what: str) -> None:
        self.limit, self.what = limit, what
        self.fired = False
        self._stop = threading.Event()

    def _watch(self) -> None:
        if self._stop.wait(self.limit):
            return
        self.fired = True
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        while not self._stop.is_set():
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
            self._stop.wait(0.5)

    def __enter__(self) -> Watchdog:
        def wedged(signum: int, frame: Any) -> None:
            raise Wedged(f"{self.what}: still running after {self.limit} s (stacks above)")

        self._previous = signal.signal(signal.SIGUSR1, wedged)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        signal.signal(signal.SIGUSR1, self._previous)
        if self.fired:
            pytest.fail(f"{self.what}: wedged (still running after {self.limit} s)")


def wait_until(cond: Callable[[], Any], timeout: float = LONG, poll: float = 0.01) -> bool:
    """Whether ``cond()`` held within ``timeout`` seconds (checked every ``poll`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(poll)
    return bool(cond())


class FileGate:
    """A gate envs wait at (:meth:`wait`) until the test opens it (:meth:`open`), in any
    thread or process of this machine. Picklable: it is a path."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix="envhive-gate-")
        os.close(fd)
        os.unlink(self.path)

    def open(self) -> None:
        with open(self.path, "w"):
            pass

    def is_open(self) -> bool:
        return os.path.exists(self.path)

    def wait(self, timeout: float = LONG) -> bool:
        """Block until the gate is open (``True``) or ``timeout`` passed (``False``)."""
        return wait_until(self.is_open, timeout, poll=0.005)

    def remove(self) -> None:
        if os.path.exists(self.path):
            os.unlink(self.path)
