"""The process executor: any Python env, in worker processes, over shared memory.

Each of ``num_workers`` processes owns a contiguous slice of envs, built inside it from
cloudpickled factories. The pool's buffers live in shared memory, and workers write results in
place and read their actions there. A command is a few integers in a shared control block plus
one semaphore post. A completion is a sequence number plus a post back. Only infos, env errors and
object-typed observations go through a pipe, and only when there are some.

This module is the transport (how commands and replies travel, how the parent waits and what it
reads back); launching, faults, restarts, calls, ``close()`` and fork are the supervisor's
(:class:`~envhive.executors._supervisor.Supervisor`, shared with the Ray executor).

Faults: an env exception comes back as an :class:`~envhive.errors.EnvWorkerError` with the env
id and the worker's traceback (see the pool). A dead worker is noticed within
``_POLL_S`` of waiting on it. By default that raises :class:`~envhive.errors.WorkerDiedError`
and shuts the executor down cleanly. With ``on_worker_failure="restart"``, the worker is
rebuilt, and the episodes it lost are reported as truncated with ``info["worker_restarted"]``.
A worker that exceeds ``step_timeout`` is treated like a dead one.

Cleanup: ``close()``, garbage collection and interpreter exit (``weakref.finalize``) all stop
every worker (close command, then terminate, then kill) and unlink every segment. A process
forked from the caller lets the workers be (``_left_behind``) and cannot use them.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.process as mp_process
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import cloudpickle
import numpy as np

from envhive._arguments import check_count, check_seconds
from envhive._buffers import Buffers
from envhive._interrupts import deferred_interrupts
from envhive._report import Completion, EnvFactory, EnvProps, env_props
from envhive._runner import EnvRunner, build_envs
from envhive.errors import ConfigError, WorkerDiedError
from envhive.executors._core import CommandKind, ErrorReply
from envhive.executors._handles import Shutdown, WorkerHandle
from envhive.executors._shm import release_semaphore
from envhive.executors._spawn import (
    affinity_cpus,
    main_hidden,
    resource_error,
    stop_process,
    usable_cpus,
)
from envhive.executors._supervisor import Supervisor
from envhive.executors._worker import (
    CMD_RUN,
    Bind,
    Control,
    SpinPolicy,
    worker_main,
)

__all__ = ["ProcessExecutor", "default_start_method"]

_POLL_S = 0.05  # how often a blocked parent checks worker liveness and step timeouts
_LAUNCH_TIMEOUT_S = 600.0


def default_start_method() -> str:
    """``forkserver`` where available, else ``spawn``.

    ``fork`` is fast but copies the parent's threads' locks in whatever state they are in (torch,
    JAX, grpc and many BLAS builds start threads), which deadlocks at random; CPython 3.12+
    warns about it and 3.14 stops defaulting to it. ``forkserver`` forks workers from a clean
    single-threaded server, so it is safe and still much faster to start than ``spawn``.
    """
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


class ProcessExecutor(Supervisor):
    """Runs envs in worker processes that write straight into shared-memory buffers.

    Args:
        num_workers: processes to start (default: one per CPU this process may use, at most
            one per env).
        start_method: ``"forkserver"`` (default on Linux, see :func:`default_start_method`),
            ``"spawn"`` or ``"fork"``.
        step_timeout: seconds a worker may take for one command before it is declared hung.
        on_worker_failure: ``"raise"`` (default) or ``"restart"``.
        spin_s: the longest a waiting side polls (yielding the core between polls) before it
            blocks; each side polls only while its recent waits are short (``SpinPolicy``).
            Default 2 ms. On virtual machines a blocked process is slow to wake.
        parent_slice: run one slice of envs in the calling process, inside ``recv`` (and so
            inside ``step``), with ``num_workers - 1`` worker processes. On a machine with as
            many workers as cores this avoids a third process competing for the cores, and
            sync throughput goes up. Those envs lose process isolation: a crash in them is a
            crash of the caller. Off by default; it cannot be combined with ``step_timeout``.
        cpu_affinity: pin each worker process to one CPU (Linux). ``True``: worker ``w`` on the
            ``w``-th CPU of the caller's allowed set (round robin); a sequence of CPU ids: worker
            ``w`` on ``cpu_affinity[w % len]``. Pinned workers do not migrate, which helped cheap
            envs on a 2-core VM (docs/benchmarks.md, "Pinning"). Off by
            default: pools that each pin from the first CPU on would pile onto the same cores.

    Examples:
        >>> import envhive
        >>> env = envhive.make("CartPole-v1", 4, executor="process", num_workers=2, seed=0)
        >>> env.reset()[0].shape
        (4, 4)
        >>> env.close()
    """


    name = "process"
    _slots: list[WorkerHandle]

    def __init__(
        self,
        num_workers: int | None = None,
        *,
        start_method: str | None = None,
        step_timeout: float | None = None,
        on_worker_failure: str = "raise",
        spin_s: float | None = None,
        parent_slice: bool = False,
        cpu_affinity: bool | Sequence[int] | None = None,
    ) -> None:
        self._cpus = affinity_cpus(cpu_affinity)
        if parent_slice and step_timeout is not None:
            raise ConfigError(
                "parent_slice=True cannot be combined with step_timeout: an env hung in the "
                "parent process cannot be interrupted"
            )
        check_count(num_workers, "num_workers")
        check_seconds(spin_s, "spin_s", zero_ok=True)
        method = start_method or default_start_method()
        if method not in mp.get_all_start_methods():
            raise ConfigError(f"start_method: expected one of {mp.get_all_start_methods()}, got "
                              f"{method!r} (multiprocessing: cannot find context for {method!r})")
        super().__init__(Shutdown(), step_timeout, on_worker_failure)
        self._ctx: Any = mp.get_context(method)
        if method == "forkserver":
            try:  # imports multiprocessing.forkserver: a file to open
                self._ctx.set_forkserver_preload(["envhive.executors._worker"])
            except OSError as err:
                raise resource_error(err, "setting up the forkserver") from None
        self.start_method = method
        self.num_workers = num_workers
        # The cap of the adaptive poll (SpinPolicy): polling saves two wake-ups per call, and
        # yields the core between tries when there is no spare one.
        self._spin_s = 2e-3 if spin_s is None else spin_s
        self.parent_slice = parent_slice
        self._ctrl: Control | None = None
        self._bind_payload: bytes = b""

    # ------------------------------------------------------------------ launch
    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return self._state.arena.allocate(shape, dtype)  # type: ignore[no-any-return]

    def _num_slices(self, num_envs: int) -> int:
        return self.num_workers or usable_cpus()

    def _inline_slice(self) -> int | None:
        return 0 if self.parent_slice and len(self._map) > 1 else None

    def _new_slot(self, w: int, lo: int, hi: int, blob: bytes) -> WorkerHandle:
        return WorkerHandle(w, lo, hi, blob)

    def _prepare(self) -> None:
        # Waiters yield the core between polls unless every process has a core of its own
        # (the cores this process may use: under taskset or a cpuset, fewer than the machine's).
        self._yield_core = len(self._slots) + 1 > usable_cpus()
        self._spin = SpinPolicy(self._spin_s, self._yield_core)
        try:
            self._done_sem = self._state.done_sem = self._ctx.Semaphore(0)
        except OSError as err:
            raise resource_error(err, "making the executor's semaphore") from None

    def _launch_inline(self, factories: Sequence[EnvFactory], lo: int) -> list[EnvProps]:
        self._inline = self._state.inline = EnvRunner(build_envs(factories, first_id=lo), first_id=lo)
        return [env_props(env) for env in self._inline.envs]

    def _start(self, wk: WorkerHandle) -> None:
        """Start ``wk``'s process; the OS refusing a pipe, semaphore or process (out of file
        descriptors, say) is a :class:`ResourceError` naming the limit, with nothing left open."""
        release_semaphore(wk.cmd_sem)  # a rebuilt worker's old one (its process is gone)
        wk.maybe_extra = False  # a new semaphore has no spare post
        made: list[Any] = []
        try:
            parent_conn, child_conn = self._ctx.Pipe(duplex=True)
            made += [parent_conn, child_conn]
            wk.cmd_sem = self._ctx.Semaphore(0)
            wk.proc = self._ctx.Process(
                target=worker_main,
                args=(wk.w, wk.lo, wk.hi, child_conn, wk.cmd_sem, self._done_sem,
                      wk.blob, self._spin_s, self._yield_core),
                name=f"envhive-worker-{wk.w}",
                daemon=True,
            )
            with main_hidden():
                wk.proc.start()
        except (OSError, EOFError) as err:  # EOFError: the forkserver failed to start it
            for conn in made:
                conn.close()
            raise resource_error(err, f"starting worker {wk.w} (envs {wk.lo}..{wk.hi - 1})") from None
        child_conn.close()
        wk.conn = parent_conn
        if self._cpus:
            try:
                os.sched_setaffinity(wk.proc.pid, {self._cpus[wk.w % len(self._cpus)]})
            except OSError:  # the worker already exited: its handshake reports why
                pass

    def _died_while(self, wk: WorkerHandle, doing: str) -> WorkerDiedError:
        """The error of a worker that exited while ``doing`` (building its envs, ...)."""
        _reap(wk)
        return WorkerDiedError(
            f"worker {wk.w} exited with code {wk.proc.exitcode} while {doing}",
            env_ids=list(range(wk.lo, wk.hi)), exitcode=wk.proc.exitcode,
        )

    def _handshake(self, wk: WorkerHandle) -> list[EnvProps]:
        deadline = time.monotonic() + _LAUNCH_TIMEOUT_S
        building = f"building envs {wk.lo}..{wk.hi - 1}"
        while not wk.conn.poll(_POLL_S):
            if not wk.proc.is_alive():
                raise self._died_while(wk, building)
            if time.monotonic() > deadline:
                raise WorkerDiedError(
                    f"worker {wk.w} did not build its envs within {_LAUNCH_TIMEOUT_S:.0f} s",
                    env_ids=list(range(wk.lo, wk.hi)), exitcode=None,
                )
        try:
            reply = cloudpickle.loads(wk.conn.recv_bytes())
        except (EOFError, OSError):  # poll() is also true at EOF: it died before replying
            raise self._died_while(wk, building) from None
        if isinstance(reply, ErrorReply):
            raise reply.error
        return reply  # type: ignore[no-any-return]

    def _attach(self, buffers: Buffers) -> None:
        arena = self._state.arena
        n_buffer_arrays = len(arena.specs)
        self._ctrl = Control.allocate(len(self._map), self._map.num_envs, arena.allocate)
        self._state.kind = self._ctrl.kind
        specs = arena.specs
        self._bind_payload = cloudpickle.dumps(
            Bind(len(self._map), buffers.spec, specs[:n_buffer_arrays], specs[n_buffer_arrays:])
        )
        if self._inline is not None:
            self._inline.bind(buffers)

    def _bind_slot(self, wk: WorkerHandle) -> None:
        try:
            wk.conn.send_bytes(self._bind_payload)
            while not wk.conn.poll(_POLL_S):
                if not wk.proc.is_alive():
                    raise self._died_while(wk, "attaching buffers")
            reply = wk.conn.recv_bytes()
        except (EOFError, OSError):
            raise self._died_while(wk, "attaching buffers") from None
        if reply != b"bound":
            raise cloudpickle.loads(reply).error  # an ErrorReply: why the worker could not bind

    def _stop(self, wk: WorkerHandle) -> None:
        stop_process(wk.proc)
        if wk.conn is not None:
            wk.conn.close()  # a completion post it may have made before dying is left: a spurious wake-up

    # ------------------------------------------------------------------ commands
    def _publish(self, wk: WorkerHandle, ids: list[int], options: dict[str, Any] | None,
                 message: bytes | None) -> None:
        """Send ``wk`` a RUN of ``ids``: the ids into its region of the control block (unless
        they are there already: sync steps send the same ids every time), then the post."""
        ctrl = self._ctrl
        assert ctrl is not None
        w = wk.w
        if ids is not wk.cmd_ids and ids != wk.cmd_ids:
            ctrl.count[w] = len(ids)
            ctrl.ids[wk.lo : wk.lo + len(ids)] = ids
            ctrl.ids_gen[w] += 1
            wk.cmd_ids = ids
        if wk.maybe_extra:
            self._take_back_spare_post(wk)
        ctrl.cmd_msg[w] = message is not None
        ctrl.kind[w] = CMD_RUN
        # Busy before the sequence number moves: a Ctrl-C anywhere from here on leaves a
        # command that discard() sees and settles (_settle).
        wk.busy, wk.busy_options = wk.cmd_ids, options
        wk.sent_at = time.monotonic()
        ctrl.seq[w] += 1
        self._post(wk, message)

    def _post(self, wk: WorkerHandle, message: bytes | None) -> None:
        """Wake ``wk`` for the command in its control block, then send the command's message.

        The post comes first: the worker reads the pipe only once woken, and a message larger
        than the pipe's buffer (a few hundred KB) would block a writer that sends before
        posting, forever. Post and message are one unit (SIGINT is held between them: a
        worker woken for a message that never comes would wait forever). A worker that died
        is failed as usual (see ``_fail``).
        """
        seq = self._ctrl.seq[wk.w]  # type: ignore[union-attr]
        if message is None:
            wk.cmd_sem.release()  # a semaphore post is a memory barrier: the block is visible
            wk.posted_seq = seq
            return
        try:
            with deferred_interrupts():
                wk.cmd_sem.release()
                wk.conn.send_bytes(message)
                wk.posted_seq = seq
        except OSError:  # BrokenPipeError, ConnectionResetError: the worker is gone
            _reap(wk)
            self._fail(wk, "died")

    def _send_call(self, wk: WorkerHandle, kind: CommandKind, message: bytes) -> None:
        ctrl = self._ctrl
        assert ctrl is not None
        if wk.maybe_extra:
            self._take_back_spare_post(wk)
        ctrl.kind[wk.w] = kind
        wk.busy, wk.calling = [], True  # before seq moves: see _publish
        wk.sent_at = time.monotonic()
        ctrl.seq[wk.w] += 1
        self._post(wk, message)

    def _read(self, wk: WorkerHandle) -> bytes | None:
        """The message ``wk`` announced with its completion; ``None`` if it died meanwhile
        (then it was failed: rebuilt with its command resent, or the executor shut down).

        Read whole or not at all: SIGINT is held until the message is read and its flag
        cleared (a Ctrl-C in the middle of a large message would leave the rest in the pipe,
        and a Ctrl-C between the read and the flag would make the next collect read again).
        """
        ctrl = self._ctrl
        assert ctrl is not None
        try:
            with deferred_interrupts():
                message = wk.conn.recv_bytes()
                ctrl.done_msg[wk.w] = 0
            return message  # type: ignore[no-any-return]
        except (EOFError, OSError):
            _reap(wk)
            self._fail(wk, "died")
            return None

    def _call_replies(self) -> list[tuple[WorkerHandle, bytes]]:
        replies = []
        for wk in self._wait_some():
            message = self._read(wk)
            if message is not None:
                wk.busy, wk.calling = None, False
                replies.append((wk, message))
        return replies

    def recv(self, min_count: int) -> Completion:
        self._check_usable()
        out = Completion()
        got = 0
        if min_count <= 0:  # a poll (Pool.wait's timeout): what finished, waiting for none
            self._check_workers()
        if self._inline_queue or min_count <= 0:
            # Workers that already finished come first (they finished before the parent's slice
            # runs), else a parent slice would starve them whenever it alone fills a batch.
            for wk in self._sweep():
                got += self._collect_and_refill(wk, out)
        while self._inline_queue:
            ids, options = self._inline_queue.pop()
            assert self._inline is not None
            before = len(out.env_ids) + len(out.errors)
            self._inline.run(ids, options, out)
            got += len(out.env_ids) + len(out.errors) - before
        while got < min_count and any(wk.busy is not None for wk in self._slots):
            for wk in self._wait_some():
                got += self._collect_and_refill(wk, out)
        return out

    def _collect_some(self, out: Completion, needed: int) -> int:
        got = 0
        for wk in self._wait_some():
            got += self._collect_and_refill(wk, out)
        return got

    def run_all(self, options: dict[str, Any] | None = None) -> Completion:
        """A sync call over every env: ``send`` + ``recv`` fused (see ``Executor.run_all``).

        The same commands and the same fault handling, minus the async bookkeeping (queues,
        the first-finished sweep), which a sync call never needs: nothing else is in flight.
        """
        self._check_usable()
        workers = self._slots
        if options is None and self._plain_call():
            for wk in workers:  # the control block holds each worker's ids already
                self._publish(wk, wk.cmd_ids, None, None)
            out = Completion()  # made while the workers run
        else:
            self._drain_discarded()
            out = Completion()
            groups = self._map.all_groups
            for wk in workers:
                self._dispatch(wk, groups[wk.w][1], options)
            if self._inline is not None:
                self._inline.run(groups[0][1], options, out)
        self._collect_all(out)
        return out

    def _plain_call(self) -> bool:
        """Whether a sync call's commands need nothing ``_dispatch`` checks: no parent slice,
        no lost envs to substitute, no object actions or big seeds to carry, every worker idle
        with no spare post, and the control block holding each worker's whole slice (the
        last command was a sync call's too)."""
        if (self._inline is not None or self._restarts.lost or self._results.act_objects
                or self._buffers.big_seeds):  # type: ignore[union-attr]
            return False
        groups = self._map.all_groups
        for wk in self._slots:
            if wk.busy is not None or wk.maybe_extra or wk.cmd_ids is not groups[wk.w][1]:
                return False
        return True

    def _collect_all(self, out: Completion) -> None:
        """Collect every busy worker's command into ``out`` (a sync call's wait).

        Which worker finishes first does not matter here, so each post is followed by one
        scan of the sequence numbers (no sort, no list); whatever this loop leaves (a worker
        rebuilt meanwhile runs its command again; no post will come for a failed call) the
        general loop finishes."""
        ctrl = self._ctrl
        assert ctrl is not None
        workers = self._slots
        done_seq, seq = ctrl.done_seq, ctrl.seq
        left = len(workers)
        while left > 0 and self._take_post():
            taken = 1  # the post just taken is the first finished worker's
            for wk in workers:
                if wk.busy is not None and done_seq[wk.w] == seq[wk.w]:
                    if not taken:  # its post is made or about to be (see _sweep)
                        self._done_sem.acquire(False)
                    taken = 0
                    self._collect(wk, out)
                    left -= 1
        while any(wk.busy is not None for wk in workers):
            for wk in self._wait_some():
                self._collect(wk, out)

    def _settle(self, wk: WorkerHandle) -> bool:
        """Make sure the command ``wk`` is busy with went out, or withdraw it; False if withdrawn.

        A Ctrl-C can cut a dispatch between marking the worker busy and posting: a command
        that was never posted would be waited for forever. A command with a message was
        posted exactly when ``posted_seq`` says so; one that was not is withdrawn (the worker
        never saw it; the next command's sequence number supersedes it). A command without
        one may have been posted just before the Ctrl-C: take the post back if it is still
        there (withdrawn), else post again. The worker ignores a post that brings no new
        sequence number, and a spare one is taken back before the next command.
        """
        ctrl = self._ctrl
        assert ctrl is not None
        seq = ctrl.seq[wk.w]
        if wk.posted_seq == seq or ctrl.done_seq[wk.w] == seq:
            return True
        withdraw = bool(wk.calling or ctrl.cmd_msg[wk.w]) or wk.cmd_sem.acquire(False)
        if withdraw:
            self._restarts.forget(wk.busy or [])
            wk.busy, wk.calling = None, False
            wk.posted_seq = seq
            return False
        wk.cmd_sem.release()
        wk.posted_seq = seq
        wk.maybe_extra = True
        return True

    def _take_back_spare_post(self, wk: WorkerHandle) -> None:
        """Before a new command: remove a spare post ``_settle`` may have left. If the
        worker took it first, it found no new sequence number and ignored it."""
        wk.cmd_sem.acquire(False)
        wk.maybe_extra = False

    def _collect_and_refill(self, wk: WorkerHandle, out: Completion) -> int:
        """Collect a finished worker's results and start its next queued command, if any."""
        got = self._collect(wk, out)
        self._refill(wk)
        return got

    def _sweep(self, taken: int = 0) -> list[WorkerHandle]:
        """Finished workers, without waiting for any: first-finished first.

        ``taken``: completion posts the caller already took for them.
        """
        ctrl = self._ctrl
        assert ctrl is not None
        finished = self._finished()
        if not finished:
            return finished
        for _ in range(len(finished) - taken):
            # Each finished command's post is made or about to be: take those already made.
            # One not made yet (or taken by a call a Ctrl-C cut short) is a spurious wake-up
            # later, which costs one loop: the sequence numbers say what finished.
            if not self._done_sem.acquire(False):
                break
        if len(finished) > 1:
            finished.sort(key=lambda wk: float(ctrl.done_time[wk.w]))
        return finished

    def _finished(self) -> list[WorkerHandle]:
        """Busy workers whose command finished (its sequence number is in ``done_seq``)."""
        ctrl = self._ctrl
        assert ctrl is not None
        seq, done = ctrl.seq, ctrl.done_seq
        return [wk for wk in self._slots if wk.busy is not None and done[wk.w] == seq[wk.w]]

    def _wait_some(self) -> list[WorkerHandle]:
        """Wait for a completion; return every finished worker, first-finished first (maybe
        none: a spurious wake-up, or a call's worker failed; callers loop).

        Each worker posts ``done_sem`` once per command, after recording it finished. We take
        a post per worker we hand back when it is there; what finished is read from the
        sequence numbers, so a missed or extra post only costs a wake-up.
        """
        if not self._take_post():
            return []
        return self._sweep(taken=1)

    def _take_post(self) -> bool:
        """Take one completion post: poll while waits are short (SpinPolicy), then block,
        checking worker liveness and step timeouts every ``_POLL_S``. False (no post taken)
        when no post will come: a call's worker failed and was rebuilt, or no worker is busy
        any more (one rebuilt while running a discarded command)."""
        sem = self._done_sem
        start = time.perf_counter()
        if not self._spin.poll(sem):
            while not sem.acquire(True, _POLL_S):
                self._check_workers()
                if self._failed_calls:
                    return False
                if self._finished():
                    break  # finished without a post left to take (an interrupted sweep took it)
                if not any(wk.busy is not None for wk in self._slots):
                    return False  # a worker rebuilt meanwhile has nothing to run: stop waiting
        self._spin.observe(time.perf_counter() - start)
        return True

    def _collect(self, wk: WorkerHandle, out: Completion) -> int:
        ctrl = self._ctrl
        assert ctrl is not None
        message = None
        if ctrl.done_msg[wk.w]:
            message = self._read(wk)
            if message is None:
                return 0  # it died mid-message and was rebuilt: its command runs again
        ids, wk.busy = wk.busy or [], None
        if wk.discard:  # the pool gave up on this command (discard): drop its results
            wk.discard = wk.calling = False
            return 0
        return self._results.apply(ids, None if message is None else cloudpickle.loads(message), out)

    # ------------------------------------------------------------------ faults
    def _dead(self, wk: WorkerHandle) -> bool:
        return not wk.proc.is_alive()

    def _how_it_died(self, wk: WorkerHandle, cause: BaseException | None) -> tuple[str, int | None]:
        code = wk.proc.exitcode
        sig = f" (signal {-code})" if code is not None and code < 0 else ""
        return f"with exit code {code}{sig}", code

    def _left_behind(self) -> None:
        # multiprocessing's exit hook in this (forked) process would SIGTERM every daemon
        # child it lists, and the list is the parent's: take the parent's workers off it.
        children = getattr(mp_process, "_children", None)
        if isinstance(children, set):
            for wk in self._slots:
                children.discard(wk.proc)

    # ------------------------------------------------------------------ monitoring
    def worker_pids(self) -> list[int]:
        """Process ids of the live workers, in worker order (for monitoring and tests)."""
        return [wk.proc.pid for wk in self._slots if wk.proc is not None]

    def describe(self) -> str:
        k = len(self._slots)
        parent = " + parent slice" if self._inline is not None else ""
        return f"process, {k} worker{'s' if k != 1 else ''}{parent}, {self.start_method}"


def _reap(wk: WorkerHandle) -> None:
    """Wait a moment for a worker found gone (a broken pipe, EOF) to exit, so its exit code is
    known; a process never started (a start cut short) has none."""
    if wk.proc is not None and wk.proc.pid is not None:
        wk.proc.join(1.0)


if sys.platform == "win32":  # pragma: no cover
    raise ImportError("the process executor needs POSIX shared memory and semaphores")
