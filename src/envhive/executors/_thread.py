"""The thread executor: envs in persistent worker threads, for envs whose step releases the GIL.

Each of ``num_threads`` daemon threads owns a contiguous slice of envs and runs it through the
shared :class:`~envhive.executors.EnvRunner`, writing into the pool's plain numpy buffers. Only
code that releases the GIL runs in parallel: MuJoCo's ``mj_step``, numpy on large arrays,
``time.sleep``, I/O. A pure-Python env is serialized by the GIL and gains nothing.

Synchronization (why it looks like this):

* One mutex (``_State.mu``) guards every piece of shared bookkeeping: the per-slice job queues,
  the "busy" claims and the list of finished jobs. It is held only for a few list operations,
  never while an env runs, so it is not a lock on the hot path in any meaningful sense.
* Sleeping is done on raw ``threading.Lock`` objects used as one-token semaphores (a worker, or
  the caller, blocks in ``acquire``; whoever hands it work ``release``\\ s it). That is one futex
  operation per wake-up: cheaper than ``threading.Condition``, which allocates a lock per wait.
  An ``asleep`` flag, read and written under the mutex, says whether a token is owed, so a lock
  is never released twice.
* Finished jobs are appended to one list under the mutex at the moment they finish, so the
  list is in finish order without timestamps: ``recv`` hands completions out first-finished
  first. The unit of completion is one slice's share of one ``send``.

Who runs a slice: ``send`` queues every slice's share on its own thread and wakes it (one
wake-up may be deferred, see ``send``), and returns at once, so async use keeps envs running in
the background. ``recv`` may *steal* a
queued share that no thread has started yet and run it in the calling thread, but only when it
has to wait for every op in flight anyway (a sync ``step``/``reset`` always does). Running one
then cannot delay the return, and the caller does useful work instead of sleeping: in a sync
call with the GIL held by the caller, the threads have usually not even woken up, so the caller
takes slice 0 and the threads take the rest. When ``recv`` only needs some of the ops in
flight (async with ``batch_size < num_envs``), it never steals: a slow share run inline would
hold back the fast ones it could have returned.

A slice is run by at most one thread at a time (its own thread or the caller), in send order,
so an env is never used concurrently. There is no ``step_timeout``: a Python thread cannot be
interrupted or killed, so a hung env hangs the call that waits for it.

Ctrl-C reaches only the caller, and anywhere: while it waits, between claiming a share and
running it, just after a finisher woke it. What the caller holds is kept where ``discard``
(which the pool calls after every interrupt, from the caller's thread) can give it back: the
slice it claimed (``_State.stolen``: a claim nobody releases would keep that slice's thread
asleep forever, and the next call waiting for it) and a wake-up token meant for it (taken back
without blocking: blocking for one already consumed, under the mutex, deadlocked every
thread). ``close`` holds Ctrl-C until it is done, and waits for the threads against one
deadline.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from envhive._buffers import Buffers
from envhive._interrupts import deferred_interrupts
from envhive._report import Completion, EnvFactory, EnvProps, env_props, safe_str
from envhive._runner import EnvRunner, build_envs
from envhive.errors import (
    ClosedError,
    ConfigError,
    EnvWorkerError,
    PendingCallError,
    WorkerDiedError,
)
from envhive.executors._protocol import Executor
from envhive.executors._slices import Job, SendQueue, SliceMap
from envhive.executors._spawn import resource_error

__all__ = ["ThreadExecutor"]

_POLL_S = 0.25  # how often a blocked recv checks that the threads it waits on are alive
#: close(): how long to wait for the threads, all together (as the process executor's close),
#: when one is still inside an env call; its envs are then left open.
_JOIN_TIMEOUT_S = 2.0
# run_all's route (see _Route). Observed: after _STOLEN_STREAK sync calls in a row whose every
# share the caller ran itself, the caller runs the next _INLINE_CALLS alone (doubling while the
# threads still start nothing, up to _INLINE_CALLS_MAX), then the threads again.
_STOLEN_STREAK = 8
_INLINE_CALLS, _INLINE_CALLS_MAX = 64, 4096
# Timed (revisit=True): after _WARM_CALLS sync calls, _TRIAL_CALLS timed calls of each route
# alternately; the faster route then runs the next _HOLD_CALLS calls (doubling while the trials
# agree, up to _HOLD_CALLS_MAX), then a trial again.
_WARM_CALLS, _TRIAL_CALLS = 16, 8
_HOLD_CALLS, _HOLD_CALLS_MAX = 256, 8192
_THREADS, _CALLER = "threads", "caller"
_clock = time.perf_counter  # the timed route's clock (looked up at each call: tests replace it)


class _Route:
    """Which route a sync call over every env takes: the threads (``send`` + ``recv``, the
    caller taking back shares no thread started) or the caller alone (every slice in the
    calling thread, in slice order, as ``recv`` would merge them). Both give the same results,
    so the route is only a question of time, and the pool's own calls answer it. One route is
    held for a number of calls (``left``), then the question is asked again:

    * **observed** (always): when the threads started none of the shares of
      ``_STOLEN_STREAK`` calls in a row (the caller, running envs that hold the GIL, took them
      all back before any thread got the GIL), waking threads only costs (futex wake-ups and GIL
      hand-offs): the caller runs alone for the next ``hold`` calls, twice as many each time
      the threads still start nothing when tried again.
    * **timed** (``revisit=True``, which ``executor="auto"`` sets when it picks threads: its
      probe at ``make`` was short, and the machine's load may change): a trial of a few calls
      of each route, alternately, timed, and the faster route is held, twice as long each time
      a trial agrees with the last.
    """

    def __init__(self, timed: bool) -> None:
        self.timed = timed
        self.route = _THREADS
        self.left = _WARM_CALLS if timed else 0  # calls to run on ``route`` before asking again
        self.hold = _HOLD_CALLS if timed else _INLINE_CALLS  # the next hold (doubles)
        self.streak = 0  # observed: calls in a row whose every share the caller ran
        self.trial: list[str] = []  # timed: the routes of the trial's calls still to run
        self.times: dict[str, list[float]] = {_THREADS: [], _CALLER: []}
        self.calls = 0
        self.verdict = ""  # timed: the last trial's finding, for describe()

    def next(self) -> str:
        """The route of the next sync call."""
        self.calls += 1
        if self.trial:
            return self.trial[0]
        if self.left > 0:
            self.left -= 1
            return self.route
        if self.timed:
            self.trial = [_THREADS, _CALLER] * _TRIAL_CALLS
            self.times = {_THREADS: [], _CALLER: []}
            return self.trial[0]
        self.route = _THREADS  # observed: a held caller-alone run is over; try the threads
        return _THREADS

    def record(self, route: str, seconds: float, all_stolen: bool) -> None:
        """A sync call ran on ``route`` in ``seconds``; on the threads, ``all_stolen`` says
        the caller ran every share itself."""
        if self.timed:
            self._timed(route, seconds)
        elif route == _THREADS:
            if not all_stolen:
                self.streak, self.hold = 0, _INLINE_CALLS
                return
            self.streak += 1
            if self.streak >= _STOLEN_STREAK:
                self.streak, self.route, self.left = 0, _CALLER, self.hold
                self.hold = min(2 * self.hold, _INLINE_CALLS_MAX)

    def _timed(self, route: str, seconds: float) -> None:
        if not self.trial or self.trial[0] != route:
            return
        self.trial.pop(0)
        self.times[route].append(seconds)
        if self.trial:
            return
        threads = sorted(self.times[_THREADS])[_TRIAL_CALLS // 2]
        caller = sorted(self.times[_CALLER])[_TRIAL_CALLS // 2]
        route = _CALLER if caller <= threads else _THREADS  # a tie: the cheaper route
        self.hold = min(2 * self.hold, _HOLD_CALLS_MAX) if route == self.route else _HOLD_CALLS
        self.route, self.left = route, self.hold
        ratio = max(threads, caller) / max(min(threads, caller), 1e-12)
        self.verdict = (f"the caller alone: {ratio:.2f}x faster than the threads" if route == _CALLER
                        else f"threads: {ratio:.2f}x faster than the caller alone")
        self.verdict += f" in sync calls {self.calls - 2 * _TRIAL_CALLS + 1}..{self.calls}"


class _Slice:
    """One thread's contiguous run of envs ``[lo, hi)`` and its work queue."""

    def __init__(self, w: int, lo: int, hi: int, runner: EnvRunner) -> None:
        self.w, self.lo, self.hi = w, lo, hi
        self.runner = runner
        # Not merged when popped: a share that finishes first is handed out first.
        self.queue = SendQueue()
        # Claimed by the thread or the caller running one of its jobs (under State.mu). Jobs of
        # one slice run one at a time, so no env is ever used by two threads at once.
        self.busy = False
        self.asleep = False  # its thread is (about to be) blocked in wake.acquire()
        self.wake = threading.Lock()
        self.wake.acquire()  # held = no token: the thread blocks until someone releases it
        self.thread: threading.Thread | None = None


class _State:
    """Everything the threads share, held apart from the executor.

    The threads reference this object, never the executor, so an executor that is dropped
    without ``close()`` can be garbage-collected; its ``weakref.finalize`` then calls
    :meth:`shutdown`, which stops the threads.
    """

    def __init__(self) -> None:
        self.mu = threading.Lock()
        self.slices: list[_Slice] = []
        self.done: list[Completion] = []  # finished jobs not yet received, in finish order
        self.outstanding = 0  # ops sent and not yet handed out by recv (queued, running or done)
        self.waiting = False  # the caller is (about to be) blocked in caller_wake.acquire()
        self.caller_wake = threading.Lock()
        self.caller_wake.acquire()
        self.closing = False
        # Bumped by discard(): a job taken before it finishes into the void (see finish).
        self.epoch = 0
        # One slice of the last send whose thread was not woken (see ThreadExecutor.send).
        self.deferred: _Slice | None = None
        # The slice whose share the caller claimed (busy) to run itself, until it is finished
        # (cleared in finish). A Ctrl-C between the claim and the finish leaves it set, and
        # discard releases it: the caller is no longer running it then.
        self.stolen: _Slice | None = None

    # ---------------------------------------------------------------- both sides
    def finish(self, sl: _Slice, out: Completion, epoch: int) -> None:
        """Record a finished job and free its slice; wake whoever waits for either. A job
        taken before the last ``discard`` (an older ``epoch``) is dropped."""
        with self.mu:
            sl.busy = False
            if self.stolen is sl:  # the caller held the claim, so the caller is finishing
                self.stolen = None
            if epoch == self.epoch:
                self.done.append(out)
            if sl.queue and sl.asleep:  # a job was queued while the caller ran a stolen one
                sl.asleep = False
                sl.wake.release()
            if self.waiting:
                self.waiting = False
                self.caller_wake.release()

    def wake_deferred(self) -> None:
        """Wake the deferred slice's thread if its share is still waiting (under ``mu``)."""
        d, self.deferred = self.deferred, None
        if d is not None and d.queue and not d.busy and d.asleep:
            d.asleep = False
            d.wake.release()

    # ---------------------------------------------------------------- worker side
    def serve(self, sl: _Slice) -> None:
        """A worker thread's loop: run the slice's queued jobs, sleep when there are none."""
        mu = self.mu
        while True:
            job: Job | None = None
            with mu:
                if self.closing:
                    return
                if sl.queue and not sl.busy:
                    job = sl.queue.pop()
                    sl.busy = True
                    epoch = self.epoch
                    if self.deferred is not None:
                        # The caller did not take the deferred share back in time (async
                        # use, or it is still busy): its own thread runs it after all.
                        self.wake_deferred()
                else:
                    # Sleep. A sender (or the caller returning a stolen slice) that sees
                    # `asleep` clears it and releases `wake` once, under this same mutex.
                    sl.asleep = True
            if job is None:
                sl.wake.acquire()
                continue
            ids, options = job
            out = Completion()
            try:
                sl.runner.run(ids, options, out)
            except BaseException as err:
                # EnvRunner turns env exceptions into out.errors; anything that still escapes
                # (SystemExit from an env, an internal bug) fails the job's envs instead of
                # killing the thread, which would leave the caller waiting forever.
                out = _failed_job(ids, out, err)
            self.finish(sl, out, epoch)

    # ---------------------------------------------------------------- shutdown
    def shutdown(self) -> None:
        """Stop and join every thread, then close the envs. Safe to call more than once."""
        me = threading.current_thread()
        if any(sl.thread is me for sl in self.slices):
            # Garbage collection ran the finalizer inside one of our own threads: maybe inside
            # an env call, maybe holding `mu` (not reentrant). A thread cannot join itself
            # either, so a helper thread shuts down once this one has returned to its loop.
            threading.Thread(target=self.shutdown, name="envhive-thread-shutdown", daemon=True).start()
            return
        with self.mu:
            self.closing = True
            self.stolen = None
            for sl in self.slices:
                sl.queue.clear()  # queued jobs never start; a running one finishes first
                if sl.asleep:
                    sl.asleep = False
                    sl.wake.release()
        deadline = time.monotonic() + _JOIN_TIMEOUT_S  # one deadline for every thread
        for sl in self.slices:
            t = sl.thread
            if t is not None and t.is_alive():
                t.join(max(0.0, deadline - time.monotonic()))
        for sl in self.slices:
            t = sl.thread
            if t is not None and t.is_alive():
                # Still inside an env call: closing its envs under it could crash a simulator.
                # The daemon thread exits when the call returns (closing is set).
                warnings.warn(
                    f"envhive thread executor: thread {sl.w} (envs {sl.lo}..{sl.hi - 1}) is still "
                    f"inside an env call {_JOIN_TIMEOUT_S:.0f} s into close(); its envs are "
                    "left open",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            sl.runner.close()
        self.slices = []
        self.done = []


def _failed_job(ids: list[int], out: Completion, err: BaseException) -> Completion:
    """A job whose run raised past EnvRunner: every env without its own error fails with it."""
    tb = traceback.format_exc()
    failed = Completion(errors=dict(out.errors))
    for i in ids:
        if i not in failed.errors:
            failed.errors[i] = EnvWorkerError(
                f"the env's thread raised {type(err).__name__}: {safe_str(err)}",
                env_id=i,
                worker_traceback=tb,
                cause_type=type(err).__name__,
            )
    return failed


class ThreadExecutor(Executor):
    """Runs envs in persistent worker threads; pays off when the env's step releases the GIL.

    Each thread owns a contiguous slice of envs (7 envs on 3 threads: 3 + 2 + 2). In a sync
    call the calling thread runs one slice itself while the threads run the others. ``send``
    returns at once and ``recv`` hands out each thread's share of a send in the order they
    finished. Good for MuJoCo (``mj_step`` releases the GIL); no use for pure-Python envs, which
    the GIL serializes. There is no ``step_timeout``: a thread cannot be killed.

    Args:
        num_threads: worker threads (default: one per CPU), at most one per env.
        revisit: time the pool's own sync calls on the threads and in the caller alone, now
            and then, and keep the faster (``executor="auto"`` sets it when it picks threads:
            the probe at ``make`` was short, and the machine's load may change).

    Examples:
        >>> import envhive
        >>> from envhive.executors import ThreadExecutor
        >>> env = envhive.make("CartPole-v1", 5, executor=ThreadExecutor(2), seed=0)
        >>> env
        envhive.VectorEnv('CartPole-v1', num_envs=5, executor='thread, 2 threads', autoreset='next_step')
        >>> env.reset()[0].shape
        (5, 4)
        >>> env.close()
    """

    name = "thread"
    #: Its threads are this process's: a forked child has none of them (and maybe a copy of
    #: a lock one of them held), so the child's copy of the pool refuses every call.
    fork_safe = False

    def __init__(self, num_threads: int | None = None, *, revisit: bool = False) -> None:
        if num_threads is not None and (
            isinstance(num_threads, bool)
            or not isinstance(num_threads, (int, np.integer))
            or num_threads < 1
        ):
            raise ConfigError(f"num_threads: expected a positive int or None, got {num_threads!r}")
        self.num_threads = None if num_threads is None else int(num_threads)
        self._state = _State()
        self._finalizer = weakref.finalize(self, self._state.shutdown)
        _LIVE.add(self)
        self._closed = False
        self._runner: EnvRunner | None = None  # every env, for call/set_attr in the caller
        self._map = SliceMap(0, 1)
        self._stolen = 0  # shares the caller ran itself, ever
        self._route = _Route(timed=revisit)  # run_all's choice: the threads or the caller alone

    @property
    def revisit(self) -> bool:
        """Whether the route of sync calls is timed (see :class:`_Route`); set it before the
        first call."""
        return self._route.timed

    @revisit.setter
    def revisit(self, value: bool) -> None:
        self._route = _Route(timed=bool(value))

    # ------------------------------------------------------------------ launch
    def launch(self, factories: Sequence[EnvFactory]) -> list[EnvProps]:
        self._claim()
        self._map = SliceMap(len(factories), self.num_threads or os.cpu_count() or 1)
        # Envs are built here, in the calling thread, exactly as the serial executor builds
        # them: the same errors (EnvWorkerError with the env id, ConfigError for a factory that
        # returns one shared instance, checked across all slices) and the same cleanup.
        envs = build_envs(factories, first_id=0)
        self._runner = EnvRunner(envs, first_id=0)
        self._all_ids = np.arange(len(envs))
        self._all_ids.flags.writeable = False  # SliceMap.split then reuses its groups
        state = self._state
        for w, (lo, hi) in enumerate(self._map.bounds):  # 7 envs on 3 threads: 3 + 2 + 2
            state.slices.append(_Slice(w, lo, hi, EnvRunner(envs[lo:hi], first_id=lo)))
        try:
            for sl in state.slices:
                sl.thread = threading.Thread(
                    target=state.serve, args=(sl,), name=f"envhive-thread-{sl.w}", daemon=True
                )
                try:
                    sl.thread.start()
                except RuntimeError as err:  # "can't start new thread"
                    sl.thread = None
                    raise resource_error(err, f"starting thread {sl.w} (envs {sl.lo}..{sl.hi - 1})") from None
        except BaseException:
            self.close()  # joins the started threads and closes every slice's envs
            raise
        return [env_props(env) for env in envs]

    def bind(self, buffers: Buffers) -> None:
        assert self._runner is not None
        self._runner.bind(buffers)
        # The threads read buffers only inside jobs, and jobs are queued under the mutex after
        # this: the lock acquisitions order these writes before any read.
        for sl in self._state.slices:
            sl.runner.bind(buffers)

    # ------------------------------------------------------------------ commands
    def _check_usable(self) -> None:
        if self._closed:
            raise ClosedError("the thread executor is closed")

    def send(self, env_ids: np.ndarray, options: dict[str, Any] | None = None) -> None:
        self._check_usable()
        state = self._state
        slices = state.slices
        # Every share goes to its thread, the caller's included: send must not run envs (async
        # callers expect it to return at once). recv may take a share back (see the module).
        # One wake-up is deferred when two or more threads are asleep: the first share's
        # thread is not woken here but by the first other thread that starts its job (or by
        # recv). In a sync call the caller takes that share back before any thread even holds
        # the GIL, so its thread, woken for nothing, would only contend for the GIL with the
        # threads doing work (docs/executors.md, "thread"). In async
        # use the share starts one GIL hand-off later. Only sleeping threads count: a busy one
        # might take long to finish its current job, so it must not be relied on to wake it.
        with state.mu:
            if state.deferred is not None:
                state.wake_deferred()
            sleepers = []
            for w, sl_ids in self._map.split(env_ids):
                sl = slices[w]
                sl.queue.push(sl_ids, options)
                state.outstanding += len(sl_ids)
                if sl.asleep and not sl.busy:
                    sleepers.append(sl)
            if len(sleepers) > 1:
                state.deferred = sleepers.pop(0)
            for sl in sleepers:
                sl.asleep = False
                sl.wake.release()

    def run_all(self, options: dict[str, Any] | None = None) -> Completion:
        """A sync call over every env (see ``Executor.run_all``): ``send`` + ``recv``, or every
        slice in the caller alone, as :class:`_Route` decides (always the caller alone with one
        thread, whose only share ``recv`` would steal). Nothing else is in flight and only the
        caller sends, so no thread can take a share meanwhile; the results are the same either
        way."""
        self._check_usable()
        slices = self._state.slices
        if len(slices) == 1:
            return self._run_inline(options)
        chooser = self._route
        route = chooser.next()
        t0 = _clock() if chooser.timed else 0.0
        if route == _CALLER:
            out = self._run_inline(options)
            stolen = 0
        else:
            stolen = self._stolen
            self.send(self._all_ids, options)
            out = self.recv(len(self._all_ids))
            stolen = self._stolen - stolen
        chooser.record(route, _clock() - t0 if chooser.timed else 0.0, stolen >= len(slices))
        return out

    def _run_inline(self, options: dict[str, Any] | None) -> Completion:
        """Every slice in the calling thread, in slice order (as ``recv`` would merge them)."""
        out = Completion()  # one for every slice: each run adds its envs and their count
        for sl, (_, ids) in zip(self._state.slices, self._map.all_groups):
            sl.runner.run_whole(ids, options, out)
        return out

    def recv(self, min_count: int) -> Completion:
        self._check_usable()
        state = self._state
        taken: list[Completion] = []
        got = 0
        while True:
            steal: _Slice | None = None
            job: Job = ([], None)
            epoch = 0
            with state.mu:
                if state.done:
                    for c in state.done:
                        n = len(c.env_ids) + len(c.errors)
                        got += n
                        state.outstanding -= n
                    taken.extend(state.done)
                    state.done.clear()
                if got >= min_count or not state.outstanding:
                    break
                if min_count - got >= state.outstanding:
                    # Every op in flight must finish before we return: running one of the
                    # not-yet-started shares here costs no latency. The deferred share first:
                    # its thread was not woken for it.
                    d = state.deferred
                    for sl in ([d] if d is not None else []) + state.slices:
                        if sl.queue and not sl.busy:
                            steal = sl
                            sl.busy = True
                            state.stolen = sl  # before the pop: discard releases the claim
                            job = sl.queue.pop()
                            epoch = state.epoch
                            break
                    if steal is d:
                        state.deferred = None
                if steal is None:
                    state.wake_deferred()  # nobody else may be left to start it
                    state.waiting = True
            if steal is not None:
                self._run_here(steal, *job, epoch)
            else:
                self._wait()
        return _merge(taken)

    def _run_here(
        self, sl: _Slice, ids: list[int], options: dict[str, Any] | None, epoch: int
    ) -> None:
        """Run a stolen share in the calling thread; record it like a thread would."""
        self._stolen += 1
        out = Completion()
        try:
            sl.runner.run(ids, options, out)
        except BaseException as err:
            # Keep the books straight (the slice is released, its envs reported failed), then
            # let KeyboardInterrupt/SystemExit reach the caller, as with the serial executor.
            self._state.finish(sl, _failed_job(ids, out, err), epoch)
            if isinstance(err, Exception):
                return
            raise
        self._state.finish(sl, out, epoch)

    def discard(self) -> None:
        state = self._state
        with state.mu:
            # Queued shares never run; running ones finish into the void (their epoch is old).
            state.epoch += 1
            for sl in state.slices:
                sl.queue.clear()
            state.done.clear()
            state.outstanding = 0
            state.deferred = None
            # Called by the caller after an interrupt, so the caller no longer runs the share
            # it claimed (a running thread's claim stays: it finishes into the void).
            if state.stolen is not None:
                state.stolen.busy = False
                state.stolen = None
            # A wait the interrupt cut before it began, or a token a finisher left for it.
            state.waiting = False
            state.caller_wake.acquire(False)

    def _wait(self) -> None:
        """Block until a thread finishes a job (state.waiting was set under the mutex)."""
        state = self._state
        try:
            while True:
                if state.caller_wake.acquire(True, _POLL_S):
                    return  # the finisher cleared state.waiting
                self._check_threads()
        except BaseException:
            # Dead thread or KeyboardInterrupt: retract the wait so that no token is
            # left behind. A finisher that cleared `waiting` released one under the mutex,
            # but the interrupt may have struck just after acquire() took it: take it back
            # only if it is there (a blocking acquire here, under the mutex, deadlocked the
            # caller and every finisher).
            with state.mu:
                state.waiting = False
                state.caller_wake.acquire(False)
            raise

    def _check_threads(self) -> None:
        if self._state.closing:  # shut down under us (only a finalizer does that)
            raise ClosedError("the thread executor was shut down while recv() waited")
        for sl in self._state.slices:
            t = sl.thread
            if t is not None and not t.is_alive() and (sl.queue or sl.busy):
                ids = list(range(sl.lo, sl.hi))
                self.close()
                raise WorkerDiedError(
                    f"thread {sl.w} (envs {sl.lo}..{sl.hi - 1}) exited with work pending; "
                    "the executor was shut down", env_ids=ids, exitcode=None,
                )

    # ------------------------------------------------------------------ env access
    def _check_idle(self, what: str) -> None:
        self._check_usable()
        if self._state.outstanding:
            raise PendingCallError(f"{what}() while ops are in flight: recv() them first")

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        # Nothing is in flight (the pool checks), so no thread touches an env: run it here.
        self._check_idle("call")
        assert self._runner is not None
        return self._runner.call(name, args, kwargs, env_ids)

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        self._check_idle("set_attr")
        assert self._runner is not None
        self._runner.set_attr(name, values, env_ids)

    def _left_behind(self) -> None:
        """In a process forked from this one: let go of the threads and envs without touching
        them. Shutting down would take the lock a parent's thread may have held at the fork
        (forever, in the child) and join threads the child does not have; closing the envs
        could close what they share with the parent's copies (a socket, a file)."""
        self._finalizer.detach()
        self._closed = True
        self._runner = None

    def close(self) -> None:
        self._closed = True
        if not self._finalizer.alive:  # shut down already (a close cut short before it began
            return  # left the finalizer alive: this call does the work)
        # Ctrl-C is held until every thread is stopped and every env closed (at most
        # _JOIN_TIMEOUT_S for threads inside env calls): half a close leaves envs open.
        with deferred_interrupts():
            self._finalizer()  # runs _State.shutdown once: stops the threads, closes the envs
        self._runner = None

    def thread_idents(self) -> list[int]:
        """Identifiers of the live worker threads, in slice order (for monitoring and tests)."""
        return [
            sl.thread.ident for sl in self._state.slices
            if sl.thread is not None and sl.thread.is_alive() and sl.thread.ident is not None
        ]

    def describe(self) -> str:
        k = len(self._state.slices) or self.num_threads or 0
        text = f"thread, {k} thread{'s' if k != 1 else ''}"
        if self._route.verdict:
            text += f", revisited: {self._route.verdict}"
        return text


def _merge(parts: list[Completion]) -> Completion:
    if len(parts) == 1:
        return parts[0]
    out = Completion()
    for c in parts:
        out.extend(c)
    return out


#: Every thread executor of this process; a forked child lets go of its copies (``_left_behind``).
_LIVE: weakref.WeakSet[ThreadExecutor] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for executor in list(_LIVE):
        executor._left_behind()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
