"""How the pool waits for what it sent: part of :class:`~envhive._pool.Pool`, in its own module.

``Waits`` is mixed into ``Pool``: receiving completions until enough envs are ready and
handing out the first ``batch_size`` of them (``recv``), until every env of a sync call is back
(``step``, ``reset``), and ``wait``, which receives every env in flight at once and returns
every env's row in env order, with an optional timeout: gymnasium's ``step_wait``/
``reset_wait`` on top of ``send``/``async_reset``.

Interrupts: ``recv`` and ``wait`` take envs off the books (``_ready``, ``_status``) before they
hand their rows out. A Ctrl-C between the two would lose those rows and leave the books
half-changed, so everything from the first look at the books to the return is inside one
``try`` that gives the pool up to ``_cut_short`` (free in CPython 3.11 until it catches).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive._arguments import check_seconds
from envhive._batch import NO_OP, Batch
from envhive.errors import NothingPendingError, WaitTimeoutError

if TYPE_CHECKING:
    from envhive._buffers import Buffers
    from envhive._infos import InfoColumns
    from envhive._report import Completion

__all__ = ["IDLE", "PENDING", "READY", "Waits"]

#: Per-env status: may be sent; sent, its op running; its op finished, the result waits for
#: ``recv`` (or ``wait``).
IDLE, PENDING, READY = 0, 1, 2

#: How long ``wait(timeout=...)`` sleeps between two looks at what finished.
_POLL_S = 0.0005


class Waits:
    """The waiting half of :class:`~envhive._pool.Pool` (see the module docstring)."""

    if TYPE_CHECKING:  # what Pool provides
        num_envs: int
        batch_size: int
        copy: bool
        resident: bool
        buffers: Buffers
        _all: np.ndarray
        _status: np.ndarray
        _in_flight: int
        _ready: collections.deque[int]
        _errors: dict[int, Any]
        _recv_out: tuple[Any, ...]
        _infos: dict[int, dict[str, Any]]
        _final_infos: dict[int, dict[str, Any]]

        def _check_open(self) -> None: ...
        def _recv(self, min_count: int, run_all: Any = None) -> Completion: ...
        def _absorb(self, done: Completion, sync: bool = False) -> int: ...
        def _cut_short(self, err: BaseException, ids: np.ndarray, always: bool = False,
                       sync: bool = True) -> None: ...
        def _take_infos(self, ids: Sequence[int], n: int, by_env: bool = False
                        ) -> tuple[InfoColumns, InfoColumns, np.ndarray | None]: ...
        def _all_rows(self, infos: InfoColumns, finals: InfoColumns,
                      has_final: np.ndarray | None, op: np.ndarray | None = None) -> Batch: ...

    def wait(self, timeout: float | None = None, *, caller: str = "wait") -> Batch:
        """Receive every env in flight at once: one row per env of the pool, in env order.

        After ``send``/``async_reset`` of any envs, ``wait`` waits for all of them and returns
        what ``step``/``reset`` would: every env's row, envs that were not sent with op
        ``NO_OP`` and their current observation. This is gymnasium's ``step_wait`` and
        ``reset_wait`` (``VectorEnv.step_async``, ...).

        Args:
            timeout: seconds to wait at most (``None``: until done). If the envs have not
                all finished by then, :class:`~envhive.errors.WaitTimeoutError` is raised and
                they stay in flight: a later ``wait`` (or ``recv``) returns them.
            caller: the name the timeout's message gives the call (``"step_wait"``, ...).

        Raises:
            envhive.NothingPendingError: nothing was sent.
            envhive.WaitTimeoutError: ``timeout`` ran out.
            envhive.EnvWorkerError: an env raised; it is raised once every env sent has
                finished, the others' results are dropped with it and every env is idle again
                (as for ``step``).

        Examples:
            >>> import envhive
            >>> pool = envhive.make("CartPole-v1", num_envs=3, seed=0).pool
            >>> pool.async_reset([0, 2])
            >>> batch = pool.wait(timeout=10.0)
            >>> batch.op.tolist(), batch.obs.shape
            ([1, -1, 1], (3, 4))
            >>> pool.close()
        """
        self._check_open()
        check_seconds(timeout, "timeout", zero_ok=True)
        sent = self._status != IDLE
        if not np.count_nonzero(sent):
            raise NothingPendingError(
                f"{caller}() called with no env in flight: send() actions or async_reset() first",
                caller.removesuffix("_wait"),
            )
        try:  # to the return: the books change below (see the module docstring)
            if timeout is None:
                while self._in_flight:
                    self._absorb(self._recv(self._in_flight))
            else:
                self._wait_until(time.monotonic() + timeout, timeout, caller)
            ids = np.flatnonzero(sent)
            self._status[ids] = IDLE
            self._ready.clear()
            if self._errors:  # as in _drain_all: the others' results go with the failed env's
                self._infos.clear()
                self._final_infos.clear()
                self._raise_errors()
            infos, finals, has_final = self._take_infos(range(self.num_envs), self.num_envs)
            op = np.full(self.num_envs, NO_OP, np.int8)
            op[ids] = self.buffers.ops[ids]
            return self._all_rows(infos, finals, has_final, op)
        except BaseException as err:
            self._cut_short(err, self._all[:0], sync=False)
            raise

    def recv(self) -> Batch:
        """The first ``batch_size`` envs to finish, one row each (``env_ids`` says which)."""
        self._check_open()
        k = self.batch_size
        if len(self._ready) + self._in_flight < k:
            raise NothingPendingError(
                f"recv() returns batches of {k} envs but only {self._in_flight} are pending and "
                f"{len(self._ready)} ready: send() actions or async_reset() first"
            )
        ids = self._all[:0]
        try:  # to the return: envs taken off _ready must be handed out or given up
            if len(self._ready) < k:
                self._collect(k - len(self._ready))
            ids = np.array([self._ready.popleft() for _ in range(k)], dtype=np.int64)
            self._status[ids] = IDLE
            return self._rows_of(ids, k)
        except BaseException as err:
            # Rows taken and not handed out are lost with the rest: their envs need a reset.
            self._cut_short(err, ids, sync=False)
            raise

    def _rows_of(self, ids: np.ndarray, k: int) -> Batch:
        """``recv``'s batch: the rows of ``ids`` (copies, or gathered into the recv buffers)."""
        infos, finals, has_final = self._take_infos(ids.tolist(), k)
        obs, reward, term, trunc, ops, final_obs, agents = self.buffers.gather(
            ids, self.copy, has_final is not None, self._recv_out
        )
        return Batch(ids, obs, reward, term, trunc, ops, final_obs, has_final, infos, finals, agents)

    @property
    def pending(self) -> int:
        """How many envs were sent and are not received yet (running, or ready for ``recv``)."""
        return self._in_flight + len(self._ready)

    def _wait_until(self, deadline: float, timeout: float, caller: str) -> None:
        """Receive what finished (``recv(0)`` waits for nothing) until nothing is in flight,
        or raise :class:`WaitTimeoutError` at ``deadline``."""
        while True:
            self._absorb(self._recv(0))
            if not self._in_flight:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeoutError(
                    f"The call to `{caller}` has timed out after {timeout} second(s): "
                    f"{self._in_flight} of the envs sent are still running. They stay in "
                    f"flight: call {caller}() again for their results, or close the pool"
                )
            time.sleep(min(left, _POLL_S))

    def _collect(self, min_count: int) -> None:
        """Receive completions until ``min_count`` more envs are ready (or an env failed)."""
        while min_count > 0 and self._in_flight and not self._errors:
            min_count -= self._absorb(self._recv(min_count))
        self._raise_errors()

    def _raise_errors(self) -> None:
        # Raised only after the bookkeeping, so the pool stays consistent and usable.
        if self._errors:
            errors, self._errors = self._errors, {}
            raise errors[min(errors)]

    def _drain_all(self) -> None:
        """Sync calls: wait for every env sent by this call.

        If an env failed, the others' transitions are dropped with it (the call raises), but
        every env is idle again, so the pool stays usable.
        """
        while self._in_flight:
            self._absorb(self._recv(self._in_flight), sync=True)
        if self._errors:
            # Nothing else was in flight when the sync call began: every info is this call's.
            self._infos.clear()
            self._final_infos.clear()
        self._raise_errors()
