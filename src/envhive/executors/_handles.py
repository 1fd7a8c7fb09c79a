"""The process executor's handles on its workers, and what ``close()`` releases.

:class:`WorkerHandle` is the parent's view of one worker process: the supervisor's
:class:`~envhive.executors._supervisor.Slot` (its slice, the command it is running and the
commands queued behind it) plus its process, pipe, semaphore and where the command's post
stands (see ``posted_seq`` and ``maybe_extra``). :class:`Shutdown` holds every
OS resource of an executor apart from the executor itself, so ``weakref.finalize`` can release
them when the executor is collected without keeping it alive.
"""

from __future__ import annotations

import time
from typing import Any

from envhive._runner import EnvRunner
from envhive.executors._shm import SharedArena, release_semaphore
from envhive.executors._spawn import stop_process
from envhive.executors._supervisor import Slot
from envhive.executors._worker import CMD_CLOSE

__all__ = ["WorkerHandle", "Shutdown"]


class WorkerHandle(Slot):
    """Parent-side handle of one worker process: a :class:`Slot` plus its process, pipe and
    command semaphore, and where its command's post stands."""

    def __init__(self, w: int, lo: int, hi: int, blob: bytes = b"") -> None:
        super().__init__(w, lo, hi, blob)
        self.proc: Any = None
        self.conn: Any = None
        self.cmd_sem: Any = None
        self.cmd_ids: list[int] = []  # the env ids now in the control block for this worker
        # The sequence number whose command post (and pipe message) went out. Set right after
        # the post, so a Ctrl-C can leave it one behind ``Control.seq`` although the post was
        # made; for a command with a message it is exact (set inside the deferred block).
        # ``discard`` settles the doubt (``ProcessExecutor._settle``).
        self.posted_seq = 0
        # ``_settle`` posted again and the first post may have been made too: the spare
        # post is taken back before the next command (the worker ignores one it sees first).
        self.maybe_extra = False


class Shutdown:
    """Everything that must be released, held apart from the executor for weakref.finalize."""

    def __init__(self) -> None:
        self.workers: list[WorkerHandle] = []
        self.inline: EnvRunner | None = None
        self.arena = SharedArena()
        self.kind: Any = None  # the control block's per-worker command kinds (a memoryview)
        self.done_sem: Any = None

    def __call__(self) -> None:
        for wk in self.workers:
            if self.kind is None and wk.conn is not None:
                # Not bound (the pool failed to build, e.g. its spaces differ): the worker
                # waits for its bind message on the pipe, so the pipe's end tells it to stop
                # (there is no control block to post CLOSE in yet).
                wk.conn.close()
                wk.conn = None
            if wk.proc is not None and wk.proc.is_alive() and self.kind is not None:
                try:
                    self.kind[wk.w] = CMD_CLOSE
                    wk.cmd_sem.release()
                except Exception:
                    pass
        deadline = time.monotonic() + 2.0
        for wk in self.workers:
            if wk.proc is not None and wk.proc.pid is not None:  # started (a start can be cut short)
                wk.proc.join(max(0.0, deadline - time.monotonic()))
        for wk in self.workers:
            stop_process(wk.proc)
            if wk.conn is not None:
                wk.conn.close()
            release_semaphore(wk.cmd_sem)
            wk.proc = wk.conn = wk.cmd_sem = None
        release_semaphore(self.done_sem)
        self.done_sem = None
        self.kind = None
        if self.inline is not None:
            self.inline.close()
            self.inline = None
        self.arena.close()
