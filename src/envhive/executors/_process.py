"""The process executor: any Python env, in worker processes, over shared memory.

Each of ``num_workers`` processes owns a contiguous slice of envs, built inside it from
cloudpickled factories. The pool's buffers live in shared memory, and workers write results in
place and read their actions there. A command is a few integers in a shared control block plus
one semaphore post. A completion is a sequence number plus a post back. Only infos, env errors and
object-typed observations go through a pipe, and only when there are some.

Faults: an env exception comes back as an :class:`~envhive.errors.EnvWorkerError` with the env
id and the worker's traceback (see the pool). A dead worker is noticed within
``_POLL_S`` of waiting on it. By default that raises :class:`~envhive.errors.WorkerDiedError`
and shuts the executor down cleanly. With ``on_worker_failure="restart"``, the worker is
rebuilt, and the episodes it lost are reported as truncated with ``info["worker_restarted"]``.
A worker that exceeds ``step_timeout`` is treated like a dead one.

Cleanup: ``close()``, garbage collection and interpreter exit (``weakref.finalize``) all stop
every worker (close command, then terminate, then kill) and unlink every segment.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
import weakref
from collections.abc import Sequence
from typing import Any

import cloudpickle
import numpy as np

from envhive._arguments import check_count, check_seconds
from envhive._buffers import Buffers
from envhive._interrupts import deferred_interrupts
from envhive._report import Completion, EnvFactory, EnvProps, env_props
from envhive._runner import EnvRunner, build_envs
from envhive.errors import (
    ClosedError,
    ConfigError,
    StepTimeoutError,
    WorkerDiedError,
)
from envhive.executors._core import Call, CallReply, CommandKind, ErrorReply, Run, SetAttr
from envhive.executors._handles import Shutdown, WorkerHandle
from envhive.executors._parent import (
    RunResults,
    call_commands,
    call_results,
    not_rebuilt,
    resend_after_rebuild,
    set_attr_commands,
)
from envhive.executors._protocol import Executor
from envhive.executors._shm import release_semaphore
from envhive.executors._slices import RestartBook, SendQueue, SliceMap
from envhive.executors._spawn import (
    affinity_cpus,
    main_hidden,
    resource_error,
    stop_process,
    usable_cpus,
)
from envhive.executors._wire import encode_command
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
_RESTART_ATTEMPTS = 3  # a replacement worker that fails to start is tried again this often


def default_start_method() -> str:
    """``forkserver`` where available, else ``spawn``.

    ``fork`` is fast but copies the parent's threads' locks in whatever state they are in (torch,
    JAX, grpc and many BLAS builds start threads), which deadlocks at random; CPython 3.12+
    warns about it and 3.14 stops defaulting to it. ``forkserver`` forks workers from a clean
    single-threaded server, so it is safe and still much faster to start than ``spawn``.
    """
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


class ProcessExecutor(Executor):
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
        if on_worker_failure not in ("raise", "restart"):
            raise ConfigError(
                f"on_worker_failure: expected 'raise' or 'restart', got {on_worker_failure!r}"
            )
        check_seconds(step_timeout, "step_timeout")
        check_count(num_workers, "num_workers")
        check_seconds(spin_s, "spin_s", zero_ok=True)
        method = start_method or default_start_method()
        if method not in mp.get_all_start_methods():
            raise ConfigError(f"start_method: expected one of {mp.get_all_start_methods()}, got "
                              f"{method!r} (multiprocessing: cannot find context for {method!r})")
        self._ctx: Any = mp.get_context(method)
        if method == "forkserver":
            try:  # imports multiprocessing.forkserver: a file to open
                self._ctx.set_forkserver_preload(["envhive.executors._worker"])
            except OSError as err:
                raise resource_error(err, "setting up the forkserver") from None
        self.start_method = method
        self.num_workers = num_workers
        self.step_timeout = step_timeout
        self.on_worker_failure = on_worker_failure
        self._spin_s = spin_s
        self.parent_slice = parent_slice
        self._inline: EnvRunner | None = None  # slice 0 when parent_slice: run in this process
        self._inline_queue = SendQueue()
        self._by_slice: dict[int, WorkerHandle] = {}
        self._state = Shutdown()
        self._finalizer = weakref.finalize(self, self._state)
        self._closed = False
        self._ctrl: Control | None = None
        self._buffers: Buffers | None = None
        self._map = SliceMap(0, 1)
        self._restarts = RestartBook()
        # Calls whose worker failed and was rebuilt (restart mode): slice -> the error to raise
        # once the call's other workers have replied.
        self._failed_calls: dict[int, BaseException] = {}
        self._bind_payload: bytes = b""

    # ------------------------------------------------------------------ launch
    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return self._state.arena.allocate(shape, dtype)

    def launch(self, factories: Sequence[EnvFactory]) -> list[EnvProps]:
        self._claim()
        self._map = SliceMap(len(factories), self.num_workers or usable_cpus())
        bounds = self._map.bounds
        inline = self.parent_slice and len(bounds) > 1
        if self._spin_s is None:
            # The cap of the adaptive poll (SpinPolicy): polling saves two wake-ups
            # per call, and yields the core between tries when there is no spare one.
            self._spin_s = 2e-3
        for w, (lo, hi) in enumerate(bounds):
            if inline and w == 0:
                continue
            try:
                blob = cloudpickle.dumps(list(factories[lo:hi]))
            except Exception as err:
                self.close()
                raise ConfigError(
                    f"env {lo}: the env factory cannot be serialized for a worker process "
                    f"({type(err).__name__}: {err}). Pass a factory that builds the env, e.g. "
                    "lambda: MyEnv(...); it may capture anything cloudpickle can serialize."
                ) from err
            wk = WorkerHandle(w, lo, hi)
            wk.blob = blob
            self._state.workers.append(wk)
            self._by_slice[w] = wk
        # Waiters yield the core between polls unless every process has a core of its own
        # (the cores this process may use: under taskset or a cpuset, fewer than the machine's).
        self._yield_core = len(self._state.workers) + 1 > usable_cpus()
        self._spin = SpinPolicy(self._spin_s, self._yield_core)
        props: list[EnvProps] = []
        try:
            try:
                self._done_sem = self._state.done_sem = self._ctx.Semaphore(0)
            except OSError as err:
                raise resource_error(err, "making the executor's semaphore") from None
            for wk in self._state.workers:
                self._start(wk)
            if inline:
                lo, hi = bounds[0]
                self._inline = EnvRunner(build_envs(factories[lo:hi], first_id=lo), first_id=lo)
                self._state.inline = self._inline
                props.extend(env_props(env) for env in self._inline.envs)
            for wk in self._state.workers:
                props.extend(self._handshake(wk))
        except BaseException:
            self.close()
            raise
        return props

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

    def _handshake(self, wk: WorkerHandle) -> list[EnvProps]:
        deadline = time.monotonic() + _LAUNCH_TIMEOUT_S
        while not wk.conn.poll(_POLL_S):
            if not wk.proc.is_alive():
                raise WorkerDiedError(
                    f"worker {wk.w} exited with code {wk.proc.exitcode} while building envs "
                    f"{wk.lo}..{wk.hi - 1}", env_ids=list(range(wk.lo, wk.hi)),
                    exitcode=wk.proc.exitcode,
                )
            if time.monotonic() > deadline:
                raise WorkerDiedError(
                    f"worker {wk.w} did not build its envs within {_LAUNCH_TIMEOUT_S:.0f} s",
                    env_ids=list(range(wk.lo, wk.hi)), exitcode=None,
                )
        try:
            reply = cloudpickle.loads(wk.conn.recv_bytes())
        except (EOFError, OSError):  # poll() is also true at EOF: it died before replying
            wk.proc.join(1.0)
            raise WorkerDiedError(
                f"worker {wk.w} exited with code {wk.proc.exitcode} while building envs "
                f"{wk.lo}..{wk.hi - 1}", env_ids=list(range(wk.lo, wk.hi)),
                exitcode=wk.proc.exitcode,
            ) from None
        if isinstance(reply, ErrorReply):
            raise reply.error
        return reply  # type: ignore[no-any-return]

    def bind(self, buffers: Buffers) -> None:
        n_buffer_arrays = len(self._state.arena.specs)
        n = self._map.num_envs
        self._ctrl = Control.allocate(len(self._map), n, self._state.arena.allocate)
        self._state.kind = self._ctrl.kind
        specs = self._state.arena.specs
        self._buffers = buffers
        self._results = RunResults(buffers, self._restarts)
        self._bind_payload = cloudpickle.dumps(
            Bind(len(self._map), buffers.spec, specs[:n_buffer_arrays], specs[n_buffer_arrays:])
        )
        if self._inline is not None:
            self._inline.bind(buffers)
        try:
            for wk in self._state.workers:
                self._bind_worker(wk)
        except BaseException:
            self.close()
            raise

    def _bind_worker(self, wk: WorkerHandle) -> None:
        def died() -> WorkerDiedError:
            wk.proc.join(1.0)
            return WorkerDiedError(
                f"worker {wk.w} exited with code {wk.proc.exitcode} while attaching buffers",
                env_ids=list(range(wk.lo, wk.hi)), exitcode=wk.proc.exitcode,
            )

        try:
            wk.conn.send_bytes(self._bind_payload)
            while not wk.conn.poll(_POLL_S):
                if not wk.proc.is_alive():
                    raise died()
            reply = wk.conn.recv_bytes()
        except (EOFError, OSError):
            raise died() from None
        if reply != b"bound":
            raise cloudpickle.loads(reply).error  # an ErrorReply: why the worker could not bind

    # ------------------------------------------------------------------ commands
    def _check_usable(self) -> None:
        if self._closed:
            raise ClosedError("the process executor is closed (it may have shut down after a worker failure)")

    def send(self, env_ids: np.ndarray, options: dict[str, Any] | None = None) -> None:
        self._check_usable()
        groups = self._map.split(env_ids)
        for w, w_ids in groups:
            wk = self._by_slice.get(w)
            if wk is None:
                # The parent's own slice runs inside recv(), while the workers run theirs.
                self._inline_queue.push(w_ids, options)
            elif wk.busy is None:
                self._dispatch(wk, w_ids, options)
            else:
                wk.queue.push(w_ids, options)

    def _dispatch(self, wk: WorkerHandle, ids: list[int], options: dict[str, Any] | None) -> None:
        ctrl = self._ctrl
        assert ctrl is not None
        if self._restarts.lost:
            # Envs of a rebuilt worker, sent (or queued) before it was rebuilt: their ops
            # become resets now, whenever the command goes out.
            assert self._buffers is not None
            self._restarts.substitute_lost(ids, self._buffers)
        if ids != wk.cmd_ids:  # sync steps send the same ids every time
            ctrl.count[wk.w] = len(ids)
            ctrl.ids[wk.lo : wk.lo + len(ids)] = ids
            ctrl.ids_gen[wk.w] += 1
            wk.cmd_ids = ids
        message = None
        big = self._buffers.big_seeds_of(ids) if self._buffers.big_seeds else None  # type: ignore[union-attr]
        if options is not None or self._results.act_objects or big is not None:
            run = Run(ids, options, self._results.object_actions(ids), big)
            message = encode_command(run, f"the reset options or actions of envs {ids}")
        if wk.maybe_extra:
            self._take_back_spare_post(wk)
        self._publish(wk, options, message)

    def _publish(self, wk: WorkerHandle, options: dict[str, Any] | None, message: bytes | None) -> None:
        """Send ``wk`` a RUN of the ids now in its control block (``wk.cmd_ids``)."""
        ctrl = self._ctrl
        assert ctrl is not None
        w = wk.w
        ctrl.cmd_msg[w] = message is not None
        ctrl.kind[w] = CMD_RUN
        # Busy before the sequence number moves: a Ctrl-C anywhere from here on leaves a
        # command that discard() sees and settles (_settle_post).
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
            wk.proc.join(1.0)
            self._fail(wk, "died")

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
            return message
        except (EOFError, OSError):
            wk.proc.join(1.0)
            self._fail(wk, "died")
            return None

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
        while got < min_count and any(wk.busy is not None for wk in self._state.workers):
            for wk in self._wait_some():
                got += self._collect_and_refill(wk, out)
        return out

    def run_all(self, options: dict[str, Any] | None = None) -> Completion:
        """A sync call over every env: ``send`` + ``recv`` fused (see ``Executor.run_all``).

        The same commands and the same fault handling, minus the async bookkeeping (queues,
        the first-finished sweep), which a sync call never needs: nothing else is in flight.
        """
        self._check_usable()
        workers = self._state.workers
        if options is None and self._plain_call():
            for wk in workers:  # the control block holds each worker's ids already
                self._publish(wk, None, None)
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
        for wk in self._state.workers:
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
        workers = self._state.workers
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
        for wk in workers:
            if wk.busy is not None:
                break
        else:
            return
        while any(wk.busy is not None for wk in workers):
            for wk in self._wait_some():
                self._collect(wk, out)

    def discard(self) -> None:
        # Queued commands never go out; a running one finishes and is collected as usual
        # (keeping the pipe and the sequence numbers in step), its results dropped.
        self._inline_queue.clear()
        self._failed_calls.clear()  # a call cut short: nobody will raise its worker's failure
        for wk in self._state.workers:
            wk.queue.clear()
            if wk.busy is not None and self._settle_post(wk):
                # A RUN or a CALL that went out: its reply is read and dropped.
                wk.discard = True
                self._restarts.forget(wk.busy)

    def _settle_post(self, wk: WorkerHandle) -> bool:
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
        """Before a new command: remove a spare post ``_settle_post`` may have left. If the
        worker took it first, it found no new sequence number and ignored it."""
        wk.cmd_sem.acquire(False)
        wk.maybe_extra = False

    def _drain_discarded(self) -> None:
        """Before a call that addresses every worker at once (fused sync call, CALL): wait for
        the commands a Ctrl-C made the pool give up on (``discard``), and drop them."""
        while any(wk.busy is not None for wk in self._state.workers):
            for wk in self._wait_some():
                self._collect(wk, Completion())

    def _collect_and_refill(self, wk: WorkerHandle, out: Completion) -> int:
        """Collect a finished worker's results and start its next queued command, if any."""
        got = self._collect(wk, out)
        if wk.queue and wk.busy is None:
            # Consecutive queued sends without options go out as one command.
            self._dispatch(wk, *wk.queue.pop(merge=True))
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
        return [wk for wk in self._state.workers if wk.busy is not None and done[wk.w] == seq[wk.w]]

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
                if not any(wk.busy is not None for wk in self._state.workers):
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
    def _check_workers(self) -> None:
        now = time.monotonic()
        for wk in self._state.workers:
            if wk.busy is None:
                continue
            dead = not wk.proc.is_alive()
            hung = self.step_timeout is not None and now - wk.sent_at > self.step_timeout
            if dead or hung:
                self._fail(wk, "hung" if hung and not dead else "died")

    def _fail(self, wk: WorkerHandle, how: str) -> None:
        envs = list(range(wk.lo, wk.hi))
        doing = "a call/get_attr/set_attr" if wk.calling else f"envs {wk.busy}"
        if how == "hung":
            what = f"exceeded step_timeout={self.step_timeout} s running {doing}"
            code = None
        else:
            code = wk.proc.exitcode
            sig = f" (signal {-code})" if code is not None and code < 0 else ""
            what = f"died with exit code {code}{sig} while running {doing}"
        error = StepTimeoutError if how == "hung" else WorkerDiedError
        if self.on_worker_failure == "restart":
            if wk.calling and not wk.discard:  # a discarded call has nobody to raise to
                # A call's result is lost with its worker, and a rebuilt env is not the one
                # it asked: the call raises (once its other workers replied), the pool goes on.
                self._failed_calls[wk.w] = error(
                    f"worker {wk.w} (envs {wk.lo}..{wk.hi - 1}) {what}; it was rebuilt (its "
                    "envs start a new episode on their next step) and the call's results are "
                    "lost", env_ids=envs, exitcode=code,
                )
            self._restart(wk)
            return
        if how == "hung":  # stop it now: it never heeds CLOSE, and close() would wait 2 s for it
            stop_process(wk.proc)
        self.close()
        raise error(
            f"worker {wk.w} (envs {wk.lo}..{wk.hi - 1}) {what}; the executor was shut down. "
            "Use on_worker_failure='restart' to rebuild failed workers instead.",
            env_ids=envs, exitcode=code,
        )

    def _restart(self, wk: WorkerHandle) -> None:
        pending, options = wk.busy or [], wk.busy_options
        if wk.discard:  # nobody waits for that command any more: nothing to run again
            pending, options = [], None
        wk.busy, wk.calling, wk.discard = None, False, False
        for attempt in range(1, _RESTART_ATTEMPTS + 1):
            stop_process(wk.proc)
            wk.conn.close()
            # A completion post it may have made before dying is left: a spurious wake-up.
            try:
                self._start(wk)
                self._handshake(wk)
                self._bind_worker(wk)
                break
            except BaseException as err:
                if not isinstance(err, Exception):
                    # Ctrl-C during the rebuild: leave the worker dead (its next command finds
                    # it so and rebuilds it) rather than shut the executor down.
                    stop_process(wk.proc)
                    raise
                if attempt < _RESTART_ATTEMPTS:
                    continue  # a replacement that died while starting: try again
                # It keeps failing (a factory that now raises, no memory left): there is no
                # slice to go on with. Shut down cleanly and say why, as raise mode would.
                self.close()
                raise not_rebuilt("worker", wk, _RESTART_ATTEMPTS, err) from err
        assert self._buffers is not None
        resend_after_rebuild(wk, pending, options, self._restarts, self._buffers, self._dispatch)

    # ------------------------------------------------------------------ env access
    def _roundtrip(
        self, commands: dict[int, Call | SetAttr], order: Sequence[int] | None, what: str
    ) -> dict[int, Any]:
        """Send one Call or SetAttr to each worker in ``commands`` (keyed by slice) and gather
        the values (see :func:`call_results` for what is raised)."""
        messages = {w: encode_command(command, what) for w, command in commands.items()}
        self._check_usable()
        ctrl = self._ctrl
        assert ctrl is not None
        self._drain_discarded()
        targets = [wk for wk in self._state.workers if wk.w in messages]
        for wk in targets:
            if wk.maybe_extra:
                self._take_back_spare_post(wk)
            ctrl.kind[wk.w] = CommandKind.of(commands[wk.w])
            wk.busy, wk.calling = [], True  # before seq moves: see _dispatch
            wk.sent_at = time.monotonic()
            ctrl.seq[wk.w] += 1
            self._post(wk, messages[wk.w])
        replies: dict[int, CallReply | ErrorReply] = {}
        failures: dict[int, BaseException] = {}
        while len(replies) + len(failures) < len(targets):
            for wk in self._wait_some():
                message = self._read(wk)
                if message is not None:
                    wk.busy, wk.calling = None, False
                    replies[wk.w] = cloudpickle.loads(message)
            for w in list(self._failed_calls):
                failure = self._failed_calls.pop(w)
                if w in messages:  # one of this call's workers
                    failures[w] = failure
        return call_results(replies, failures, order if order is not None else self._map.all_ids)

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        groups = self._map.group(env_ids)
        commands = call_commands(self._map, name, args, kwargs, env_ids)
        inline = commands.pop(0) if self._inline is not None and 0 in commands else None
        replies = self._roundtrip(commands, env_ids, f"the arguments of call({name!r})")
        if inline is not None:  # the parent's own slice
            replies[0] = self._inline.call(name, args, kwargs, inline.env_ids)  # type: ignore[union-attr]
        return self._map.ordered(env_ids, groups, replies)

    def set_attr(
        self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None
    ) -> None:
        commands = set_attr_commands(self._map, name, values, env_ids)
        inline = commands.pop(0) if self._inline is not None and 0 in commands else None
        self._roundtrip(commands, env_ids, f"the values of set_attr({name!r})")
        if isinstance(inline, SetAttr):  # the parent's own slice
            self._inline.set_attr(name, inline.values, inline.env_ids)  # type: ignore[union-attr]

    def close(self) -> None:
        self._closed = True
        if self._finalizer.alive:  # Ctrl-C held to the end: a close cut in half leaked for good
            with deferred_interrupts():
                self._finalizer()

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers, in worker order (for monitoring and tests)."""
        return [wk.proc.pid for wk in self._state.workers if wk.proc is not None]

    def describe(self) -> str:
        k = len(self._state.workers)
        parent = " + parent slice" if self._inline is not None else ""
        return f"process, {k} worker{'s' if k != 1 else ''}{parent}, {self.start_method}"


if sys.platform == "win32":  # pragma: no cover
    raise ImportError("the process executor needs POSIX shared memory and semaphores")
