"""The executor interface: the one primitive every way of running envs implements.

An executor runs envs and writes their raw transitions into buffers the pool owns. It never
knows about autoreset modes: the pool tells it, per env, which *op* to perform
(``envhive._ops``) and turns the raw transitions into next_step / same_step / disabled
semantics. That is what makes every executor identical by construction.

Life cycle: ``launch(factories)`` builds the envs and reports their spaces; the pool checks
them, allocates :class:`~envhive._buffers.Buffers` with ``executor.allocate`` and calls
``bind``; then any number of ``send``/``recv``; finally ``close``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from envhive._buffers import Buffers
from envhive._report import Completion, EnvFactory, EnvProps
from envhive.errors import ConfigError

__all__ = ["Executor", "RunsInSend"]


class Executor(ABC):
    """How a pool's envs are run. Subclass this to add a way of running envs.

    Implementations must: build the envs in ``launch`` (inside workers, where they have
    workers), write raw transitions straight into the bound buffers, and report completions.
    They must not implement autoreset: ops come from the pool.
    """

    #: The name used in ``envhive.make(executor=...)`` and in ``repr`` of a pool.
    name: ClassVar[str] = "abstract"

    #: Why ``executor="auto"`` chose this executor (an ``envhive.executors.AutoChoice``), or
    #: ``None`` when it was named or passed by the caller. Set by ``resolve_executor``.
    auto: Any = None

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Allocate one buffer array (override to place buffers in shared memory)."""
        return np.zeros(shape, dtype=dtype)

    @abstractmethod
    def launch(self, factories: Sequence[EnvFactory]) -> list[EnvProps]:
        """Build one env per factory and return their properties, in env order."""

    @abstractmethod
    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (allocated with :meth:`allocate`)."""

    @abstractmethod
    def send(self, env_ids: np.ndarray, options: dict[str, Any] | None = None) -> None:
        """Start the ops written in ``buffers.ops`` for ``env_ids``; may return before they end."""

    @abstractmethod
    def recv(self, min_count: int) -> Completion:
        """Wait until at least ``min_count`` sent ops have finished and report every finished one.

        Each finished op is reported exactly once.
        """

    @abstractmethod
    def discard(self) -> None:
        """Forget every op sent and not yet received; the pool gave up on them.

        Called after a sync or async call was interrupted (Ctrl-C, an env raising
        ``SystemExit``): the pool marks those envs as needing a reset. Queued ops never run;
        an op running now finishes, but its results are dropped. Must not wait for envs.
        Afterwards :meth:`recv` reports only ops sent after this call.
        """

    @abstractmethod
    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        """Call (or read) an attribute on the envs ``env_ids`` (``None``: every env, in env
        order); one result per id, in the order of ``env_ids``. An env that raises makes the
        call raise an :class:`~envhive.errors.EnvWorkerError` naming that env."""

    @abstractmethod
    def set_attr(
        self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None
    ) -> None:
        """Set an attribute on the envs ``env_ids`` (``None``: every env): ``values[k]`` goes
        to ``env_ids[k]``."""

    @abstractmethod
    def close(self) -> None:
        """Release every env, worker and buffer. Must be idempotent."""

    def describe(self) -> str:
        """A short text for ``repr`` (e.g. ``"process, 4 workers"``)."""
        return self.name

    #: Executors that can run a whole sync step inline, with no per-env Python, set this to
    #: a method ``step_all(actions) -> envhive.engines.StepAllResult`` (``bad, done,
    #: step_infos, reset_infos``): run the ops in ``buffers.ops`` for every env, taking env
    #: ``i``'s action from ``actions[i]`` (the caller's batch, dtype and shape checked, values
    #: not). ``bad`` is ``-1``, or the first env whose action is outside the action space (then
    #: nothing ran); ``done`` counts the stepped envs whose episode ended; ``step_infos`` are
    #: neutral columns, key -> ``(num_envs, ...)`` array, one value per env (``None``: no step
    #: infos); ``reset_infos`` maps the envs reset by this call to their non-empty reset infos
    #: (``None``: none). The ops finish inside the call, with no errors. The pool then skips
    #: the send/recv bookkeeping (see the inline path of ``Pool.step``).
    step_all: Callable[[Any], tuple[int, int, Any, Any]] | None = None

    #: Whether a process forked from the caller may go on using this executor. False for
    #: executors whose workers are the caller's own processes or actors: a forked child gets
    #: copies of their handles, not workers of its own, and must not touch its parent's. The
    #: pool then refuses every call in such a child (``ClosedError``) before it touches a buffer.
    fork_safe: ClassVar[bool] = True

    #: The torch device an engine writes its results on, if it can write tensors there
    #: (``None``: numpy on the host). When a front end asks for that device, the pool
    #: allocates device-resident buffers (``BufferSpec.resident``); set by ``launch``.
    resident_device: Any = None

    #: Executors that can run a sync call over every env faster as one fused command than as
    #: ``send`` + ``recv`` set this to a method ``run_all(options) -> Completion``: run the op
    #: in ``buffers.ops`` of every env, wait for all of them, and report each env exactly once
    #: (in ``env_ids`` or ``errors``). The pool calls it only with nothing in flight.
    run_all: Callable[[dict[str, Any] | None], Completion] | None = None

    #: Executors whose ``recv`` can hand over finished envs without a :class:`Completion`
    #: set this, once bound, to a method ``take_finished(min_count) -> (env_ids, ended,
    #: info_table) | None``: wait until at least ``min_count`` sent envs finished and take
    #: every finished one (``env_ids``, int64, in the order ``recv`` would report them),
    #: every one of them without an error, its results in the pool's buffers, its infos in
    #: ``info_table`` (an :class:`envhive._infos.InfoTable`); ``ended`` counts those whose
    #: flags say the episode ended. ``None``: nothing was taken, ``recv`` must run (an env
    #: raised, or results are pending). The pool calls it only when its books hold nothing
    #: but envs in flight (see ``Pool.recv``).
    take_finished: Callable[[int], tuple[np.ndarray, int, Any] | None] | None = None

    def _claim(self) -> None:
        """Call at the start of ``launch``: one executor instance serves one pool."""
        if getattr(self, "_claimed", False):
            raise ConfigError(
                f"this {type(self).__name__} already runs a pool; pass a new instance to each "
                "envhive.make() call"
            )
        self._claimed = True


class RunsInSend(Executor):
    """Base of executors that run every op inside ``send`` (serial, native): finished ops
    wait in ``self._done`` until ``recv`` hands them all over."""

    _done: Completion

    def recv(self, min_count: int) -> Completion:
        done, self._done = self._done, Completion()
        return done

    def discard(self) -> None:
        # An interrupted send left at most some finished results here: nothing runs later.
        self._done = Completion()
