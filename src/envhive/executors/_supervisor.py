"""One supervisor for the executors whose workers live apart from the pool: processes, Ray actors.

Such a worker owns a contiguous slice of envs (:class:`~envhive.executors._slices.SliceMap`) and
runs a :class:`~envhive.executors._core.WorkerCore`. It can die (killed, out of memory, its node
lost) or hang, and it can be rebuilt from its slice's pickled factories. What an executor does
about that is the same whatever carries its commands, so it is written here once, in
:class:`Supervisor`, over a few hooks its transport implements (:class:`Transport`):

* **Start**: every slice's factories are pickled first (one that cannot be is a
  :class:`~envhive.errors.ConfigError` naming the env), then every worker is started before
  any is waited for (they build their envs side by side), then each is heard from
  (``_handshake``: its envs' properties) and, once the pool has allocated its buffers, bound
  (``_bind_slot``). A failure anywhere closes everything that was started.
* **Commands**: ``send`` splits env ids by slice; a worker runs one command at a time and later
  sends queue behind it (:class:`~envhive.executors._slices.SendQueue`), going out merged when
  it finishes (``_refill``). ``_dispatch`` substitutes the ops of envs whose worker was
  rebuilt since they ran (:class:`~envhive.executors._slices.RestartBook`) and builds the
  command's message when it needs one (reset options, object-typed actions, seeds beyond
  int64); the transport publishes it (``_publish``).
* **Faults** (``_check_workers``, ``_fail``): a worker found dead (``_dead``, or by the
  transport when a reply cannot be had) or past ``step_timeout`` either shuts the executor
  down and raises :class:`~envhive.errors.WorkerDiedError` /
  :class:`~envhive.errors.StepTimeoutError` (``on_worker_failure="raise"``), or is rebuilt
  (``"restart"``): ``_restart`` stops it, starts a replacement (up to three tries), books its
  envs' lost episodes and sends again the command it was running, or what waited behind a
  discarded one. A replacement that keeps failing shuts the executor down with a
  ``WorkerDiedError`` saying it could not be rebuilt. A call (``call``/``set_attr``) whose
  worker failed raises once its other workers replied; the pool goes on.
* **Ctrl-C during a rebuild** (anything that is not an ``Exception``): the half-built
  replacement is stopped and the interrupt goes on to the pool, which gives up what was in
  flight (``Pool._cut_short``). The worker stays dead, so its next command finds it so and
  rebuilds it: nothing half-built keeps running, and nothing waits for it.
* **Discard** (a call cut short): queued commands are dropped; a running one is settled
  (``_settle``: the process transport may have to withdraw a post) and its results dropped
  when it finishes.
* **Close**: ``close()``, garbage collection and interpreter exit release everything through
  one ``weakref.finalize`` over the transport's state (never over the executor itself).
* **Fork**: the workers belong to the process that started them. A process forked from it
  (``os.fork``, a ``multiprocessing`` fork child) gets a copy of the executor that is closed
  (its calls raise :class:`~envhive.errors.ClosedError` saying why) and whose finalizer is
  detached, and the transport lets go of its parent's workers (``_left_behind``: the process
  transport takes them off ``multiprocessing``'s list of children, whose exit hook would
  otherwise SIGTERM them when the child exits).

Examples:
    >>> import envhive, numpy as np
    >>> from envhive.executors import ProcessExecutor
    >>> ex = ProcessExecutor(2, on_worker_failure="restart")
    >>> isinstance(ex, Supervisor), ex.on_worker_failure
    (True, 'restart')
    >>> env = envhive.make("CartPole-v1", 4, executor=ex, seed=0)
    >>> env.reset()[0].shape
    (4, 4)
    >>> env.close()
    >>> ex.send(np.arange(4))
    Traceback (most recent call last):
    ...
    envhive.errors.ClosedError: the process executor is closed (it may have shut down after a worker failure)
"""

from __future__ import annotations

import os
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import cloudpickle
import numpy as np

from envhive._arguments import check_seconds
from envhive._buffers import Buffers
from envhive._interrupts import deferred_interrupts
from envhive._report import Completion, EnvFactory, EnvProps
from envhive._runner import EnvRunner
from envhive.errors import ClosedError, ConfigError, StepTimeoutError, WorkerDiedError
from envhive.executors._core import Call, CallReply, CommandKind, ErrorReply, Run, SetAttr
from envhive.executors._parent import RunResults, call_commands, call_results, set_attr_commands
from envhive.executors._protocol import Executor
from envhive.executors._slices import RestartBook, SendQueue, SliceMap
from envhive.executors._wire import encode_command

__all__ = ["Slot", "Supervisor", "Transport", "RESTART_ATTEMPTS", "forked_error"]

#: How often a replacement worker that fails to start is tried before the executor gives up.
RESTART_ATTEMPTS = 3


class Slot:
    """The parent's view of one worker, what every transport keeps: its slice, the command it
    runs and what queues behind it. A transport's handle subclasses it (its process and pipe,
    its Ray actor).

    Args:
        w: the slice's number.
        lo: its first env id.
        hi: one past its last.
        blob: its envs' factories, cloudpickled (kept to rebuild it).
    """

    def __init__(self, w: int, lo: int, hi: int, blob: bytes = b"") -> None:
        self.w, self.lo, self.hi, self.blob = w, lo, hi, blob
        self.busy: list[int] | None = None  # env ids of the running command ([] for a call)
        self.busy_options: dict[str, Any] | None = None  # its reset options
        self.calling = False  # the running command is a CALL or SET_ATTR
        self.discard = False  # the running command's results are to be dropped (discard())
        self.sent_at = 0.0
        self.queue = SendQueue()

    def become_idle(self) -> None:
        """Forget the running command (its worker is rebuilt); a transport that keeps a token
        of it (a Ray ``ObjectRef``) drops that too."""
        self.busy, self.busy_options, self.calling, self.discard = None, None, False, False

    def name(self, what: str) -> str:
        """``'worker 1 (envs 2..3)'``, for messages (``what``: "worker", "actor")."""
        return f"{what} {self.w} (envs {self.lo}..{self.hi - 1})"


class Transport(ABC):
    """The hooks a :class:`Supervisor` needs from what carries its commands (see the module)."""

    @abstractmethod
    def _start(self, slot: Any) -> None:
        """Start ``slot``'s worker: it builds its envs from ``slot.blob``."""

    @abstractmethod
    def _handshake(self, slot: Any) -> list[EnvProps]:
        """Wait (bounded, interruptibly) until the worker built its envs; their properties.
        A worker that died meanwhile is a :class:`WorkerDiedError`; one whose factories
        raised, that error."""

    @abstractmethod
    def _bind_slot(self, slot: Any) -> None:
        """Attach the worker to the pool's buffers (after :meth:`Supervisor.bind`)."""

    @abstractmethod
    def _stop(self, slot: Any) -> None:
        """Stop the worker for good, whatever state it is in (never started: nothing)."""

    @abstractmethod
    def _publish(self, slot: Any, ids: list[int], options: dict[str, Any] | None,
                 message: bytes | None) -> None:
        """Send the worker a RUN of ``ids`` (ops in the buffers; ``message``: a pickled
        :class:`Run` when it carries anything besides the ids) and mark it busy with it."""

    @abstractmethod
    def _send_call(self, slot: Any, kind: CommandKind, message: bytes) -> None:
        """Send the worker a CALL or SET_ATTR (``message``: the pickled command) and mark it
        busy with it (``busy == []``, ``calling``)."""

    @abstractmethod
    def _call_replies(self) -> list[tuple[Any, bytes]]:
        """Wait a bounded while for replies to calls; the workers that replied, with their
        pickled replies, now idle. A worker that failed meanwhile was failed (``_fail``)."""

    @abstractmethod
    def _collect_some(self, out: Completion, needed: int) -> int:
        """Wait a bounded while for RUN commands to finish (for all of them when ``needed``
        takes them all); collect each finished one into ``out`` and start what queued behind
        it. Returns how many envs were reported."""

    def _dead(self, slot: Any) -> bool:
        """Whether ``slot``'s worker is known dead now (the process transport asks the OS;
        the Ray transport learns it from a failed reply instead)."""
        return False

    @abstractmethod
    def _how_it_died(self, slot: Any, cause: BaseException | None) -> tuple[str, int | None]:
        """How the worker died, for messages (e.g. ``"with exit code -9 (signal 9)"``), and
        its exit code if known."""

    def _settle(self, slot: Any) -> bool:
        """At ``discard``: whether ``slot``'s running command went out (its reply will come
        and is to be dropped); False if it was withdrawn (the worker never saw it)."""
        return True

    @abstractmethod
    def _left_behind(self) -> None:
        """In a process forked from the one that started the workers: let go of them without
        touching them (see the module)."""


#: Every supervisor of this process; a forked child closes its copies (see the module).
_LIVE: weakref.WeakSet[Supervisor] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for supervisor in list(_LIVE):
        supervisor._inherited()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def forked_error(subject: str, owner: int) -> ClosedError:
    """The error of a call on ``subject`` ("this pool", ...) in a process forked from
    ``owner``, the process whose workers it uses.

    Examples:
        >>> print(forked_error("this pool", 1))  # doctest: +ELLIPSIS
        this pool belongs to process 1, from which this process (...) was forked: ...
    """
    return ClosedError(
        f"{subject} belongs to process {owner}, from which this process ({os.getpid()}) was "
        "forked: its workers are not this process's, and it cannot be used here. Make a new "
        "pool in this process with envhive.make()"
    )


class Supervisor(Transport, Executor):
    """An executor whose workers own slices of envs apart from the pool and may be rebuilt.

    Subclasses are transports: they implement :class:`Transport`'s hooks, and hand their
    state (what ``close()`` releases, with a ``workers`` list of slots) to ``__init__``.

    Args:
        state: what the finalizer releases (called once, by ``close()``, garbage collection
            or interpreter exit); its ``workers`` list holds the slots.
        step_timeout: seconds a worker may take for one command before it is declared hung.
        on_worker_failure: ``"raise"`` or ``"restart"`` (see the module).
    """

    #: What a worker is called in messages: "worker", "actor".
    what: ClassVar[str] = "worker"
    #: Where a slice's envs live, for messages: "worker process", "Ray actor".
    place: ClassVar[str] = "worker process"
    fork_safe = False  # the workers are this process's

    def __init__(self, state: Any, step_timeout: float | None, on_worker_failure: str) -> None:
        if on_worker_failure not in ("raise", "restart"):
            raise ConfigError(
                f"on_worker_failure: expected 'raise' or 'restart', got {on_worker_failure!r}"
            )
        check_seconds(step_timeout, "step_timeout")
        self.step_timeout = step_timeout
        self.on_worker_failure = on_worker_failure
        self._state = state
        self._slots: list[Any] = state.workers
        self._by_slice: dict[int, Any] = {}
        self._finalizer = weakref.finalize(self, state)
        self._closed = False
        self._owner: int | None = None  # set in a forked child: the process the workers are of
        self._pid = os.getpid()
        self._map = SliceMap(0, 1)
        self._restarts = RestartBook()
        self._buffers: Buffers | None = None
        # The slice the caller runs itself (the process executor's parent_slice), if any.
        self._inline: EnvRunner | None = None
        self._inline_queue = SendQueue()
        # Calls whose worker failed and was rebuilt (restart mode): slice -> the error to raise
        # once the call's other workers have replied.
        self._failed_calls: dict[int, BaseException] = {}
        _LIVE.add(self)

    # ------------------------------------------------------------------ launch
    def _num_slices(self, num_envs: int) -> int:
        """How many slices to cut ``num_envs`` envs into (at most one per env)."""
        raise NotImplementedError

    def _prepare(self) -> None:
        """What the transport needs before its workers start (inside launch's cleanup)."""

    def _inline_slice(self) -> int | None:
        """The slice the caller runs itself, if any (the process executor's parent_slice)."""
        return None

    def _launch_inline(self, factories: Sequence[EnvFactory], lo: int) -> list[EnvProps]:
        raise NotImplementedError

    def launch(self, factories: Sequence[EnvFactory]) -> list[EnvProps]:
        self._claim()
        self._map = SliceMap(len(factories), self._num_slices(len(factories)))
        inline = self._inline_slice()
        for w, (lo, hi) in enumerate(self._map.bounds):
            if w == inline:
                continue
            slot = self._new_slot(w, lo, hi, self._pickled(factories[lo:hi], lo))
            self._slots.append(slot)
            self._by_slice[w] = slot
        props: list[EnvProps] = []
        try:
            self._prepare()
            for slot in self._slots:
                self._start(slot)
            if inline is not None:  # the caller's own slice builds while the workers build theirs
                lo, hi = self._map.bounds[inline]
                props.extend(self._launch_inline(factories[lo:hi], lo))
            for slot in self._slots:
                props.extend(self._handshake(slot))
        except BaseException:
            self.close()
            raise
        return props

    @abstractmethod
    def _new_slot(self, w: int, lo: int, hi: int, blob: bytes) -> Slot:
        """The transport's handle on the worker of slice ``w``."""

    def _pickled(self, factories: Sequence[EnvFactory], lo: int) -> bytes:
        try:
            return cloudpickle.dumps(list(factories))
        except Exception as err:
            self.close()
            raise ConfigError(
                f"env {lo}: the env factory cannot be serialized for a {self.place} "
                f"({type(err).__name__}: {err}). Pass a factory that builds the env, e.g. "
                "lambda: MyEnv(...); it may capture anything cloudpickle can serialize."
            ) from err

    def _attach(self, buffers: Buffers) -> None:
        """The transport's part of ``bind``, before each worker is bound."""

    def bind(self, buffers: Buffers) -> None:
        self._buffers = buffers
        self._results = RunResults(buffers, self._restarts)
        try:
            self._attach(buffers)
            for slot in self._slots:
                self._bind_slot(slot)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ commands
    def _check_usable(self) -> None:
        if self._closed:
            if self._owner is not None:
                raise forked_error(f"this {self.name} executor", self._owner)
            raise ClosedError(
                f"the {self.name} executor is closed (it may have shut down after a {self.what} "
                "failure)"
            )

    def send(self, env_ids: np.ndarray, options: dict[str, Any] | None = None) -> None:
        self._check_usable()
        for w, ids in self._map.split(env_ids):
            slot = self._by_slice.get(w)
            if slot is None:
                # The caller's own slice runs inside recv(), while the workers run theirs.
                self._inline_queue.push(ids, options)
            elif slot.busy is None:
                self._dispatch(slot, ids, options)
            else:
                slot.queue.push(ids, options)

    def _dispatch(self, slot: Any, ids: list[int], options: dict[str, Any] | None) -> None:
        b = self._buffers
        assert b is not None
        if self._restarts.lost:
            # Envs of a rebuilt worker, sent (or queued) before it was rebuilt: their ops
            # become resets now, whenever the command goes out.
            self._restarts.substitute_lost(ids, b)
        message = None
        big = b.big_seeds_of(ids) if b.big_seeds else None
        if options is not None or self._results.act_objects or big is not None:
            run = Run(ids, options, self._results.object_actions(ids), big)
            message = encode_command(run, f"the reset options or actions of envs {ids}")
        self._publish(slot, ids, options, message)

    def _refill(self, slot: Any) -> None:
        """Start what queued behind ``slot``'s finished command: consecutive queued sends
        without options go out as one command (each command costs a round trip)."""
        if slot.queue and slot.busy is None:
            self._dispatch(slot, *slot.queue.pop(merge=True))

    def discard(self) -> None:
        # Queued commands never go out; a running one finishes and is collected as usual
        # (keeping the transport in step), its results dropped.
        if self._closed:
            return  # nothing runs any more (or, in a forked child, nothing here is ours)
        self._inline_queue.clear()
        self._failed_calls.clear()  # a call cut short: nobody will raise its worker's failure
        for slot in self._slots:
            slot.queue.clear()
            if slot.busy is not None and self._settle(slot):
                # A RUN or a CALL that went out: its reply is read and dropped.
                slot.discard = True
                self._restarts.forget(slot.busy)

    def _drain_discarded(self) -> None:
        """Before a call that addresses workers while nothing else may run (a CALL, a fused
        sync call): wait for the commands a Ctrl-C made the pool give up on, and drop them."""
        while any(slot.busy is not None for slot in self._slots):
            self._collect_some(Completion(), 1)

    # ------------------------------------------------------------------ faults
    def _check_workers(self) -> None:
        """Fail every busy worker that is dead or past ``step_timeout``."""
        now = time.monotonic()
        timeout = self.step_timeout
        for slot in self._slots:
            if slot.busy is None:
                continue
            dead = self._dead(slot)
            hung = timeout is not None and now - slot.sent_at > timeout
            if dead or hung:
                self._fail(slot, "hung" if hung and not dead else "died")

    def _fail(self, slot: Any, how: str, cause: BaseException | None = None) -> None:
        """Handle a dead (``how="died"``; ``cause``: what the transport got instead of a
        reply) or hung worker: rebuild it (restart mode; a call it ran raises once the
        call's other workers replied) or shut the executor down and raise."""
        envs = list(range(slot.lo, slot.hi))
        doing = "a call/get_attr/set_attr" if slot.calling else f"envs {slot.busy}"
        code: int | None = None
        if how == "hung":
            what = f"exceeded step_timeout={self.step_timeout} s running {doing}"
        else:
            died, code = self._how_it_died(slot, cause)
            what = f"died {died} while running {doing}"
        error = StepTimeoutError if how == "hung" else WorkerDiedError
        name = slot.name(self.what)
        if self.on_worker_failure == "restart":
            if slot.calling and not slot.discard:  # a discarded call has nobody to raise to
                # A call's result is lost with its worker, and a rebuilt env is not the one
                # it asked: the call raises (once its other workers replied), the pool goes on.
                self._failed_calls[slot.w] = error(
                    f"{name} {what}; it was rebuilt (its envs start a new episode on their "
                    "next step) and the call's results are lost", env_ids=envs, exitcode=code,
                )
            self._restart(slot)
            return
        if how == "hung":  # stop it now: it never heeds CLOSE, and close() would wait for it
            self._stop(slot)
        self.close()
        raise error(
            f"{name} {what}; the executor was shut down. Use on_worker_failure='restart' to "
            f"rebuild failed {self.what}s instead.", env_ids=envs, exitcode=code,
        )

    def _restart(self, slot: Any) -> None:
        """Rebuild ``slot``'s worker, then book its envs' lost episodes and send again the
        command it was running (or what queued behind a discarded one)."""
        pending, options = slot.busy or [], slot.busy_options
        if slot.discard:  # nobody waits for that command any more: nothing to run again
            pending, options = [], None
        slot.become_idle()
        for attempt in range(1, RESTART_ATTEMPTS + 1):
            self._stop(slot)
            try:
                self._start(slot)
                self._handshake(slot)
                self._bind_slot(slot)
                break
            except BaseException as err:
                if not isinstance(err, Exception):
                    # Ctrl-C during the rebuild: leave the worker dead (its next command
                    # finds it so and rebuilds it) rather than half built, or shut down.
                    self._stop(slot)
                    raise
                if attempt < RESTART_ATTEMPTS:
                    continue  # a replacement that died while starting: try again
                # It keeps failing (a factory that now raises, no memory left): there is no
                # slice to go on with. Shut down cleanly and say why, as raise mode would.
                self.close()
                raise WorkerDiedError(
                    f"{slot.name(self.what)} could not be rebuilt ({RESTART_ATTEMPTS} attempts; "
                    f"last: {type(err).__name__}: {err}); the executor was shut down",
                    env_ids=list(range(slot.lo, slot.hi)), exitcode=getattr(err, "exitcode", None),
                ) from err
        assert self._buffers is not None
        # The slice's envs are new: those it was running are substituted now (and run again),
        # the others when next sent.
        self._restarts.rebuilt(range(slot.lo, slot.hi), pending, self._buffers)
        if pending:
            self._dispatch(slot, pending, options)  # a reset with options gets them again
        else:
            self._refill(slot)

    # ------------------------------------------------------------------ env access
    def _roundtrip(
        self, commands: dict[int, Call | SetAttr], order: Sequence[int] | None, what: str
    ) -> dict[int, Any]:
        """Send one Call or SetAttr to each worker in ``commands`` (keyed by slice) and gather
        the values (see :func:`~envhive.executors._parent.call_results` for what is raised)."""
        messages = {w: encode_command(command, what) for w, command in commands.items()}
        self._check_usable()
        self._drain_discarded()
        targets = [slot for slot in self._slots if slot.w in messages]
        for slot in targets:
            self._send_call(slot, CommandKind.of(commands[slot.w]), messages[slot.w])
        replies: dict[int, CallReply | ErrorReply] = {}
        failures: dict[int, BaseException] = {}
        while len(replies) + len(failures) < len(targets):
            for slot, message in self._call_replies():
                replies[slot.w] = cloudpickle.loads(message)
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
        if inline is not None:  # the caller's own slice
            replies[0] = self._inline.call(name, args, kwargs, inline.env_ids)  # type: ignore[union-attr]
        return self._map.ordered(env_ids, groups, replies)

    def set_attr(
        self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None
    ) -> None:
        commands = set_attr_commands(self._map, name, values, env_ids)
        inline = commands.pop(0) if self._inline is not None and 0 in commands else None
        self._roundtrip(commands, env_ids, f"the values of set_attr({name!r})")
        if isinstance(inline, SetAttr):  # the caller's own slice
            self._inline.set_attr(name, inline.values, inline.env_ids)  # type: ignore[union-attr]

    # ------------------------------------------------------------------ end
    def close(self) -> None:
        self._closed = True
        if self._finalizer.alive:  # Ctrl-C held to the end: a close cut in half leaked for good
            with deferred_interrupts():
                self._finalizer()

    def _inherited(self) -> None:
        """In a child forked from the process that owns the workers: close this copy without
        touching them (see the module)."""
        self._closed = True
        self._owner = self._pid
        self._finalizer.detach()
        self._left_behind()
