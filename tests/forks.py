"""Waiting for a forked child in a test: its exit code, or a failure if it hangs."""

from __future__ import annotations

import os
import signal
import time

import pytest


def exit_code_of(pid: int, seconds: float = 120.0) -> int:
    """Wait (bounded) for the forked child ``pid``; kill it and fail the test if it hangs."""
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.01)
