"""Holding Ctrl-C for the few steps that must not be cut in half.

A ``KeyboardInterrupt`` can arrive between any two bytecodes. Most of envhive is written so
that an interrupt anywhere leaves the pool consistent (the pool's state machine), but a few
steps are one unit to another process: a semaphore post followed by the message it announces.
Cut between the two, the worker waits for a message that never comes. Such steps run inside
:func:`deferred_interrupts`, which holds SIGINT until the block ends and then raises it.

Examples:
    >>> with deferred_interrupts():
    ...     pass
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["deferred_interrupts"]


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Run the block with SIGINT held; an interrupt that came meanwhile is raised after it.

    Only the main thread receives signals in Python, so elsewhere this does nothing. It costs
    two ``signal.signal`` calls: use it on rare paths (messages), not on every step.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[Any] = []

    def hold(signum: int, frame: Any) -> None:
        pending.append(frame)

    try:
        if signal.getsignal(signal.SIGINT) is None:
            # Not installed from Python (embedding C code, or the interpreter shutting down):
            # it could not be put back, so leave it alone.
            yield
            return
        previous = signal.signal(signal.SIGINT, hold)
    except ValueError:  # not the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            if callable(previous):
                previous(signal.SIGINT, pending[0])  # default_int_handler raises KeyboardInterrupt
            elif previous == signal.SIG_DFL:
                raise KeyboardInterrupt
