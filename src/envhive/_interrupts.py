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

import _signal  # signal's C functions: the module's wrappers convert every handler to an enum
import signal
import threading
from types import TracebackType
from typing import Any

__all__ = ["deferred_interrupts"]

_SIGINT = int(signal.SIGINT)
_SIG_DFL = int(signal.SIG_DFL)


class deferred_interrupts:  # used as a function: ``with deferred_interrupts():``
    """Run the block with SIGINT held; an interrupt that came meanwhile is raised after it.

    Only the main thread receives signals in Python, so elsewhere this does nothing. It costs
    two ``signal.signal`` calls (a few µs, through ``_signal``: no enum conversions), so it
    belongs on paths that are one unit to another process, not around every step.
    """

    __slots__ = ("_active", "_pending", "_previous")

    def __init__(self) -> None:
        self._previous: Any = None
        self._pending: list[Any] = []
        self._active = False

    def _hold(self, signum: int, frame: Any) -> None:
        self._pending.append(frame)

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            if _signal.getsignal(_SIGINT) is None:
                # Not installed from Python (embedding C code, or the interpreter shutting
                # down): it could not be put back, so leave it alone.
                return
            self._previous = _signal.signal(_SIGINT, self._hold)
        except ValueError:  # not the main interpreter
            return
        self._active = True

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._active:
            return
        self._active = False
        previous = self._previous
        _signal.signal(_SIGINT, previous)
        if self._pending:
            frame = self._pending[0]
            self._pending.clear()
            if callable(previous):
                previous(_SIGINT, frame)  # default_int_handler raises KeyboardInterrupt
            elif previous == _SIG_DFL:
                raise KeyboardInterrupt
