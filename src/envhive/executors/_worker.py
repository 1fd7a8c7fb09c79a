"""The process executor's transport, worker side: shared memory, semaphores and a pipe.

A worker owns a contiguous slice of envs, built inside it from cloudpickled factories (so envs
that cannot be pickled work). What it does with a command is the transport-free
:class:`~envhive.executors._core.WorkerCore`; this module only carries commands and replies.
Per command it receives only a wake-up and the env ids (in the shared control block); options,
object-typed actions, infos, errors and object-typed observations travel by pipe only when
there are any, and call/set_attr messages always do. What travels by pipe is the core's own
typed objects, pickled: a :class:`~envhive.executors._core.Run`, :class:`Call` or
:class:`SetAttr` command (its kind also in the control block) and a :class:`RunReply`,
:class:`CallReply` or :class:`ErrorReply` back; so do the envs' properties after the build
(a list of :class:`~envhive._report.EnvProps`, or an ``ErrorReply``) and the bind (a
:class:`Bind`; ``b"bound"`` or an ``ErrorReply`` back).

Signalling: the parent posts ``cmd_sem``; the worker spins briefly (``spin_s``) on a
non-blocking acquire, then blocks, so an idle worker uses no CPU. The worker sets
``ctrl.done_seq[w]`` to the command's sequence number and posts ``done_sem`` when it
finishes. The numbers, not the posts, say what finished (see :class:`Control`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

import cloudpickle
import numpy as np

from envhive._buffers import Buffers, BufferSpec
from envhive._report import env_props
from envhive._runner import EnvRunner, build_envs
from envhive.executors._core import (
    Close,
    CommandKind,
    Run,
    RunReply,
    WorkerCore,
    object_leaves,
    portable_error,
)
from envhive.executors._shm import ArraySpec, attach_arrays
from envhive.executors._spawn import resource_error
from envhive.executors._wire import (
    decode_command,
    decode_run,
    encode_call_reply,
    encode_error,
    encode_run_reply,
)

__all__ = [
    "Control", "Bind", "CMD_RUN", "CMD_CALL", "CMD_SET_ATTR", "CMD_CLOSE", "SpinPolicy",
    "worker_main", "object_leaves",
]

CMD_RUN, CMD_CALL, CMD_CLOSE = int(CommandKind.RUN), int(CommandKind.CALL), int(CommandKind.CLOSE)
CMD_SET_ATTR = int(CommandKind.SET_ATTR)
_MIN_POLL_S = 3e-4
# How often a blocked worker checks that its parent is still alive.
_PARENT_CHECK_S = 0.5


@dataclass
class Control:
    """The control block shared by the parent and its workers (all arrays in shared memory).

    Attributes:
        kind: per worker, the command (CMD_RUN, CMD_CALL, CMD_CLOSE).
        count: per worker, how many env ids its CMD_RUN carries.
        ids: env ids of each worker's command, in the worker's own region ``[lo, hi)``.
        ids_gen: per worker, bumped whenever the parent rewrites its ``count``/``ids`` (sync
            steps send the same ids every time: the worker then reuses its list).
        cmd_msg: per worker, 1 if the command has a pipe message (options, object actions).
        seq: per worker, the sequence number of its latest command (the parent bumps it).
        done_seq: per worker, the sequence number of the last command it finished (written
            by the worker). A command is finished when ``done_seq == seq``: shared memory is
            the truth, so a parent interrupted anywhere in its bookkeeping (Ctrl-C) finds out
            again what finished. The ``done_sem`` posts are only wake-ups.
        done_msg: per worker, 1 if a result message waits in the pipe (the parent clears it
            once read).
        done_time: per worker, ``time.monotonic()`` at completion (system-wide on Linux), so
            the parent can hand out completions first-finished first.
    """

    kind: memoryview
    count: memoryview
    ids: np.ndarray
    ids_gen: memoryview
    cmd_msg: memoryview
    seq: memoryview
    done_seq: memoryview
    done_msg: memoryview
    done_time: Any  # a memoryview of float64 items (typeshed types memoryview items as int)

    @classmethod
    def allocate(cls, num_workers: int, num_envs: int, alloc: Any) -> Control:
        """Allocate the block with ``alloc(shape, dtype)`` (same order on both sides).

        The per-worker fields, read and written one item at a time on every command, are
        memoryviews over the arrays ``alloc`` returns (an item access through a memoryview
        skips numpy's scalar machinery; docs/benchmarks.md has the figures). ``ids`` stays an
        array (written and read as slices)."""
        i8, i64 = np.dtype(np.int8), np.dtype(np.int64)

        def per_worker(dtype: np.dtype) -> memoryview:
            return memoryview(alloc((num_workers,), dtype))

        return cls(
            kind=per_worker(i8),
            count=per_worker(i64),
            ids=alloc((num_envs,), i64),
            ids_gen=per_worker(i64),
            cmd_msg=per_worker(i8),
            seq=per_worker(i64),
            done_seq=per_worker(i64),
            done_msg=per_worker(i8),
            done_time=per_worker(np.dtype(np.float64)),
        )


@dataclass(frozen=True)
class Bind:
    """The process transport's bind message: where the pool's buffers and the control block
    live in shared memory (both attached in this order)."""

    num_workers: int
    spec: BufferSpec
    buffer_specs: list[ArraySpec]
    ctrl_specs: list[ArraySpec]


def _attacher(specs: list[ArraySpec]) -> Any:
    arrays = iter(attach_arrays(specs))

    def alloc(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        array = next(arrays)
        if array.shape != tuple(shape) or array.dtype != np.dtype(dtype):
            raise RuntimeError(f"shared buffer layout mismatch: {array.shape}/{array.dtype}")
        return array

    return alloc


class SpinPolicy:
    """How long a waiter polls before it blocks, learned from its recent waits.

    Blocking costs a wake-up (slow on virtual machines; see docs/benchmarks.md), which matters when waits are
    short (a cheap env, one env per call). Polling costs a core, which matters when waits are
    long and the cores are busy with envs. So poll only when recent waits are short: up to
    about three typical waits, and never longer than ``max_s``. Between polls the core is
    yielded (``sched_yield``) to anyone else runnable.

    Examples:
        >>> policy = SpinPolicy(2e-3)
        >>> for _ in range(20):
        ...     policy.observe(1e-4)
        >>> 3e-4 <= policy.budget() < 4e-4
        True
        >>> for _ in range(20):
        ...     policy.observe(0.01)
        >>> policy.budget()
        0.0
    """

    def __init__(self, max_s: float, yield_core: bool = True) -> None:
        self.max_s = max_s
        self.typical = 0.0
        # Without a spare core, yield it between polls; with one, a plain spin reacts faster
        # (a sched_yield is a syscall, and slow under virtualization).
        self.yield_core = yield_core

    def budget(self) -> float:
        """Seconds to poll before blocking."""
        if not self.max_s or self.typical > self.max_s:
            return 0.0
        # The floor keeps one slow iteration (a GC pause, the caller's own work) from costing
        # a wake-up; it only applies while waits are typically short.
        return min(self.max_s, max(3.0 * self.typical + 5e-5, _MIN_POLL_S))

    def observe(self, waited: float) -> None:
        """Record how long a wait took (poll and block together)."""
        self.typical += 0.2 * (waited - self.typical)

    def poll(self, sem: Any) -> bool:
        """Poll ``sem`` for up to ``budget()``; True if acquired."""
        budget = self.budget()
        if budget:
            deadline = time.perf_counter() + budget
            acquire, clock, yield_core = sem.acquire, time.perf_counter, self.yield_core
            tries = 0
            while clock() < deadline:
                if acquire(False):
                    return True
                tries += 1
                # With a spare core a plain spin reacts fastest, but "spare" is a guess: other
                # processes may hold the cores, and then the party we wait for needs ours. So
                # yield it now and then even so (every 64 tries: a few µs apart).
                if yield_core or not tries & 63:
                    os.sched_yield()  # free when the core is idle; yields it to anyone runnable
        return False


def _wait(sem: Any, policy: SpinPolicy, parent: Any) -> None:
    """A worker's wait for its next command: poll (``policy``), then block in slices, exiting
    if the ``parent`` process died (orphaned)."""
    start = time.perf_counter()
    if not policy.poll(sem):
        while not sem.acquire(True, _PARENT_CHECK_S):
            if parent is not None and not parent.is_alive():
                raise SystemExit(0)  # orphaned: the parent died without closing us
    policy.observe(time.perf_counter() - start)


def worker_main(
    w: int,
    lo: int,
    hi: int,
    conn: Any,
    cmd_sem: Any,
    done_sem: Any,
    factories_blob: bytes,
    spin_s: float,
    yield_core: bool = True,
) -> None:
    """Entry point of worker ``w``, which runs envs ``[lo, hi)``."""
    import multiprocessing

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    parent = multiprocessing.parent_process()
    try:
        factories = cloudpickle.loads(factories_blob)
        envs = build_envs(factories, first_id=lo)
        conn.send_bytes(cloudpickle.dumps([env_props(e) for e in envs]))
    except BaseException as err:
        with contextlib.suppress(OSError):  # the parent may have given up on the pool already
            conn.send_bytes(encode_error(portable_error(err, lo)))
        return
    runner = EnvRunner(envs, first_id=lo)
    try:
        _serve(w, lo, conn, cmd_sem, done_sem, runner, SpinPolicy(spin_s, yield_core), parent)
    finally:
        runner.close()


def _serve(
    w: int, lo: int, conn: Any, cmd_sem: Any, done_sem: Any,
    runner: EnvRunner, policy: SpinPolicy, parent: Any,
) -> None:
    """The shared-memory transport, worker side: decode each command from the control block
    (and the pipe, when it has a message), let the core handle it, encode the reply."""
    try:
        bind: Bind = cloudpickle.loads(conn.recv_bytes())
    except (EOFError, OSError):
        return  # the parent gave up on the pool before binding it (another worker failed)
    try:
        ctrl = Control.allocate(bind.num_workers, bind.spec.num_envs, _attacher(bind.ctrl_specs))
        buffers = Buffers.allocate(bind.spec, _attacher(bind.buffer_specs), check=False)
        core = WorkerCore(runner, buffers)
    except BaseException as err:
        if isinstance(err, OSError):
            err = resource_error(err, f"worker {w} mapping the pool's shared memory")
        conn.send_bytes(encode_error(portable_error(err, lo)))
        return
    # The last command's sequence number (a rebuilt worker's too), read before the parent
    # hears "bound" and may send the next one.
    seen = int(ctrl.seq[w])
    conn.send_bytes(b"bound")
    ids: list[int] = []
    plain = Run(ids)
    ids_gen = -1
    while True:
        _wait(cmd_sem, policy, parent)
        kind = int(ctrl.kind[w])
        if kind == CMD_CLOSE:
            core.handle(Close())
            return
        seq = int(ctrl.seq[w])
        if seq == seen:
            # A spare post (the parent re-posted a command a Ctrl-C may have cut short,
            # ProcessExecutor._settle): no new command, nothing to do.
            continue
        seen = seq
        if kind != CMD_RUN:  # a Call or a SetAttr, always with its message
            command = decode_command(kind, conn.recv_bytes())
            _post(ctrl, w, done_sem, conn, encode_call_reply(core.handle(command), lo))
            continue
        if ctrl.ids_gen[w] != ids_gen:  # sync steps send the same ids: reuse the list
            ids_gen = int(ctrl.ids_gen[w])
            ids = ctrl.ids[lo : lo + int(ctrl.count[w])].tolist()
            plain = Run(ids)  # the command without a message (frozen: reused)
        if ctrl.cmd_msg[w]:  # the Run's options, object actions or big seeds
            out = core.handle(decode_run(conn.recv_bytes(), ids))
        else:
            out = core.handle(plain)
        assert isinstance(out, RunReply)
        _post(ctrl, w, done_sem, conn, None if out.empty else encode_run_reply(out, ids))


def _post(ctrl: Control, w: int, done_sem: Any, conn: Any, message: bytes | None) -> None:
    """Report a finished command: its sequence number, the completion post, then the message, if any.

    The post comes *before* the message. The parent reads the pipe only after it has taken
    the post, and a pipe holds a few hundred KB: a worker that wrote a larger message first
    would block in the write while the parent waits for the post, forever. This way the
    parent is already reading (or about to) while the message is written, whatever its size;
    if the worker dies mid-message, the parent's read ends with EOF, not a hang.
    """
    ctrl.done_msg[w] = message is not None
    ctrl.done_time[w] = time.monotonic()
    ctrl.done_seq[w] = ctrl.seq[w]  # the parent bumps seq only once this command is collected
    done_sem.release()
    if message is not None:
        conn.send_bytes(message)
