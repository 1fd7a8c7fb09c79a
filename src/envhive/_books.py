"""The pool's books: what was sent and what came back, how the pool waits for it and hands it out.

:class:`Books` keeps, for one :class:`~envhive._pool.Pool` (which owns it as ``pool._books``):

* ``status``: each env ``IDLE`` (may be sent), ``PENDING`` (sent by ``send``/``async_reset``,
  its op running) or ``READY`` (its op finished, its row waits for ``recv``/``wait``). Sync
  calls (``step``, ``reset``) leave it alone: they leave nothing pending.
* ``in_flight`` (envs sent whose op has not come back), ``resets_in_flight`` (how many of them
  are RESET ops), ``ready`` (envs back, in the order they finished: ``recv`` hands them out
  first come first served).
* ``infos``/``final_infos``: each env's info dicts until its row is handed out (or, for an
  engine that keeps its infos in columns, which envs' rows of its ``InfoTable`` are kept);
  ``errors``: each failed env's error until it is raised.

And what is done with them: booking a dispatch (``sent``) and a :class:`Completion`
(``absorb``), collecting until ``k`` envs are ready (``take``), waiting for every env of a
sync call (``drain``) or for every env in flight, with a timeout (``wait_all``), handing the
rows out (``recv``'s: ``hand_out``; every env's: ``all_rows``), giving everything up
(``give_up``), and keeping the infos of an inline step (``Executor.step_all``) that reset
envs (``inline_infos``). An env's error is raised only after the bookkeeping, the lowest env
id's first when several failed, so the books stay straight and the pool usable.

The books hold no reference to the pool. What they need of it is given: the buffers (which
op each env runs, the rows handed out), the ``broken`` flags of the pool's envs
(``Lifecycle.broken``: an env whose op raised is marked broken in the same step as it is
marked idle) and, per call, ``pull``: the pool's way to receive completions and book them, its
envs' life cycle included (``Pool._pull``). Per call,
not kept: a kept bound method of the pool would make a reference cycle, and a pool dropped on
its own must close then (``Pool.__del__``), not at the next run of the cyclic collector.

Interrupts (Ctrl-C): the pool's public calls guard everything from their first look at the
books to their return, and a call cut short gives up everything in flight
(``Pool._cut_short``, with ``give_up`` here). For that to lose nothing silently, an env leaves
the books only while the pool's call holds its id: ``take`` pops ready envs but leaves them
``READY`` (a call cut short there loses them with every env not idle), and ``hand_out`` marks
them ``IDLE`` once the caller holds their ids (a call cut short later names them).

Examples:
    >>> import envhive
    >>> pool = envhive.make("CartPole-v1", num_envs=3, batch_size=2, seed=0).pool
    >>> pool.async_reset()
    >>> batch = pool.recv()
    >>> books = pool._books
    >>> books.pending, int(books.status[batch.env_ids].max()) == IDLE
    (1, True)
    >>> pool.close()
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from envhive._batch import NO_OP, Batch
from envhive._buffers import Buffers, as_index
from envhive._infos import InfoColumns, InfoTable, patch_reset_rows, split_rows, take_infos
from envhive._ops import Op
from envhive._report import Completion
from envhive.errors import NothingPendingError, PendingCallError, WaitTimeoutError

__all__ = ["IDLE", "PENDING", "READY", "Books", "Pull"]

#: Per-env status: may be sent; sent, its op running; its op finished, the result waits for
#: ``recv`` (or ``wait``).
IDLE, PENDING, READY = 0, 1, 2

#: ``pull(min_count, sync)``: receive completions of at least ``min_count`` envs (``0``:
#: whatever finished, without waiting) and book them; returns how many envs came back.
Pull = Callable[[int, bool], int]

#: How long ``wait_all(timeout=...)`` sleeps between two looks at what finished.
_POLL_S = 0.0005
_RESET = int(Op.RESET)
_new_batch = tuple.__new__  # Batch(...) without the NamedTuple's Python __new__ frame
_NONE = slice(0, 0)


class Books:
    """What a pool sent and what came back (see the module docstring).

    Args:
        buffers: the pool's buffers (the ops sent; the rows handed out).
        every_id: ``arange(num_envs)``, read-only: the ``env_ids`` of every-env rows.
        batch_size: how many rows ``recv`` hands out.
        copy: hand out copies (True), or views of the buffers (every env's rows) and rows
            gathered into arrays kept for it (``recv``'s) (False).
        broken: the pool's per-env flags of envs whose last op raised (written here when an
            error comes back).
    """

    def __init__(self, buffers: Buffers, every_id: np.ndarray, batch_size: int, copy: bool,
                 broken: np.ndarray) -> None:
        n = len(every_id)
        self.num_envs = n
        self.status = np.zeros(n, np.int8)
        self.in_flight = 0
        self.resets_in_flight = 0
        self.ready: collections.deque[int] = collections.deque()
        self.infos: dict[int, dict[str, Any]] = {}
        self.final_infos: dict[int, dict[str, Any]] = {}
        self.errors: dict[int, Any] = {}
        # Envs whose infos are rows of an engine's InfoTable (Completion.info_table), not dicts.
        self._table: InfoTable | None = None
        self._tabled = np.zeros(n, np.bool_)
        self._num_tabled = 0
        self._buffers, self._every_id, self._copy, self._broken = buffers, every_id, copy, broken
        #: Every env's rows, copied (``Buffers.row_copier``); the views are made once.
        self.copies = buffers.row_copier()
        self._views = buffers.row_views
        # Preallocated gather targets so that recv() with copy=False allocates no arrays.
        k = batch_size
        self._recv_out = (buffers.obs_codec.allocate(k),
                          np.zeros((k, *buffers.spec.reward_shape), np.float64),
                          np.zeros(k, np.bool_), np.zeros(k, np.bool_), np.zeros(k, np.int8))

    @property
    def pending(self) -> int:
        """How many envs were sent and are not received yet (running, or ready)."""
        return self.in_flight + len(self.ready)

    # ------------------------------------------------------------------ checks
    def check_sync(self, what: str) -> None:
        """Refuse a sync call while envs sent are not received."""
        if self.in_flight or self.ready:
            raise PendingCallError(
                f"{what}() called while {self.in_flight} sent env(s) are pending and "
                f"{len(self.ready)} are ready but not received: call recv() until every sent "
                "env is received before using synchronous calls"
            )

    def check_idle(self, ids: np.ndarray, what: str) -> None:
        """Refuse to send envs that are pending or ready."""
        busy = self.status[ids] != IDLE
        if np.count_nonzero(busy):
            i = int(ids[np.argmax(busy)])
            state = "pending" if self.status[i] == PENDING else "ready but not received"
            raise PendingCallError(
                f"{what}: env {i} is {state}; recv() it before sending it again"
            )

    # ------------------------------------------------------------------ booking
    def sent(self, where: slice | np.ndarray, count: int, resets: int, sync: bool) -> None:
        """Book ``count`` ops sent to ``where``, ``resets`` of them RESET. Sync calls skip
        the per-env status: they leave no env pending."""
        self.resets_in_flight += resets
        if not sync:
            self.status[where] = PENDING
        self.in_flight += count

    def absorb(self, done: Completion, sync: bool) -> tuple[slice | list[int], int, int, bool]:
        """Book a completion of the general path (``send``/``recv``, ``run_all``).

        Returns ``(ids, count, resets, failed)`` for the pool's own bookkeeping of the
        finished ops (``Lifecycle.finish``): where they ran (``slice(None)``: every env),
        how many, how many were RESET, and whether an env failed (marked broken here).
        """
        failed = bool(done.errors)
        if failed:
            bad = np.fromiter(done.errors, np.int64)
            self.status[bad] = IDLE
            self._broken[bad] = True
            self.in_flight -= bad.size
            self.resets_in_flight -= int(np.count_nonzero(self._buffers.ops[bad] == _RESET))
            self.errors.update(done.errors)
        count = len(done.env_ids)
        if not count:
            return _NONE, 0, 0, failed
        # Every env (ids are unique): the ids are only used as a set.
        ids = slice(None) if count == self.num_envs else as_index(done.env_ids)
        self.in_flight -= count
        if not sync:
            self.status[ids] = READY
            self.ready.extend(done.env_ids)
        resets = self._resets_back(ids) if self.resets_in_flight else 0
        if done.infos:
            self.infos.update(done.infos)
        if done.final_infos:
            self.final_infos.update(done.final_infos)
        if done.table_ids:
            self._table = done.info_table
            self._tabled[done.table_ids] = True
            self._num_tabled += len(done.table_ids)
        return ids, count, resets, failed

    def _resets_back(self, ids: slice | list[int] | np.ndarray) -> int:
        """How many of the ops that just came back on ``ids`` were RESET (``in_flight``
        already counts them out); taken off ``resets_in_flight``."""
        if self.in_flight:
            resets = int(np.count_nonzero(self._buffers.ops[ids] == _RESET))
        else:  # nothing else in flight: every pending reset was among these envs
            resets = self.resets_in_flight
        self.resets_in_flight -= resets
        return resets

    def absorb_finished(self, env_ids: np.ndarray, k: int, table: InfoTable) -> int:
        """Book what ``Executor.take_finished`` took: envs ``env_ids`` finished, every one
        without an error, their infos in ``table``; the first ``k`` are handed out at once
        (:meth:`hand_out_finished`), the rest wait on the ready queue. The same books as
        :meth:`absorb` and :meth:`take` keep, for the books' usual state when ``recv`` runs
        (nothing ready, kept or failed: see ``Pool.recv``). Returns how many of the ops were
        RESET (for ``Lifecycle.finish``)."""
        count = env_ids.size
        self.in_flight -= count
        resets = self._resets_back(env_ids) if self.resets_in_flight else 0
        if count > k:
            rest = env_ids[k:]
            self.status[rest] = READY
            self.ready.extend(rest.tolist())
            self._table = table
            self._tabled[rest] = True
            self._num_tabled += rest.size
        return resets

    def hand_out_finished(self, ids: np.ndarray, table: InfoTable) -> Batch:
        """``recv``'s batch of envs ``ids`` booked by :meth:`absorb_finished` (as
        :meth:`hand_out`, infos read from ``table``); they are idle again."""
        self.status[ids] = IDLE
        k = ids.size
        infos, finals, has_final = table.take(ids, slice(None), k)
        obs, reward, term, trunc, ops, final_obs, agents = self._buffers.gather(
            ids, self._copy, has_final is not None, self._recv_out
        )
        return Batch(ids, obs, reward, term, trunc, ops, final_obs, has_final, infos, finals, agents)

    @property
    def only_in_flight(self) -> bool:
        """Whether the books hold nothing but envs in flight (nothing ready, no kept infos,
        no errors): the state in which ``Executor.take_finished`` may serve ``recv``."""
        return not (self.ready or self.errors or self.infos or self.final_infos or self._num_tabled)

    def take_infos(
        self, ids: Sequence[int] | np.ndarray, n: int, by_env: bool = False
    ) -> tuple[InfoColumns, InfoColumns, np.ndarray | None]:
        """Take the kept infos of ``ids`` as columns (``_infos.take_infos``; row = position
        in ``ids``, or the env id with ``by_env``). Rows an engine keeps in its table
        (``InfoTable``) are read from there: the same columns, without a dict per env."""
        if self._num_tabled:
            idx = np.asarray(ids, np.int64)
            tabled = self._tabled[idx]
            count = int(np.count_nonzero(tabled))
            if count:
                self._tabled[idx] = False
                self._num_tabled -= count
                table: InfoTable = self._table  # type: ignore[assignment]  # set with the first
                if not (self.infos or self.final_infos):  # every kept info is in the table
                    if count == idx.size and not by_env and idx.size == n:
                        return table.take(idx, slice(None), n)
                    rows = idx if by_env else np.arange(idx.size)
                    return table.take(idx[tabled], rows[tabled], n)
                infos, finals = table.as_dicts(idx[tabled].tolist())  # mixed: the dict path
                self.infos.update(infos)
                self.final_infos.update(finals)
        if isinstance(ids, np.ndarray):
            ids = ids.tolist()
        return take_infos(self.infos, self.final_infos, ids, n, by_env)

    def _forget_tabled(self) -> None:
        if self._num_tabled:
            self._tabled.fill(False)
            self._num_tabled = 0

    def inline_infos(
        self, step_infos: InfoColumns, reset_infos: dict[int, dict[str, Any]], same_step: bool
    ) -> tuple[InfoColumns, InfoColumns, np.ndarray | None]:
        """The infos of an inline step (``Executor.step_all``) that reset envs (same_step:
        ended them): a reset row gets its reset info, and in same_step mode its step info as
        final info, as on the general path. Patched into the engine's columns where they can
        be (``patch_inline``), else kept per env (``keep_inline``) and taken."""
        patched = self.patch_inline(step_infos, reset_infos, same_step)
        if patched is not None:
            return patched
        self.keep_inline(step_infos, reset_infos, same_step)
        return self.take_infos(range(self.num_envs), self.num_envs)

    def patch_inline(
        self, step_infos: InfoColumns, reset_infos: dict[int, dict[str, Any]], same_step: bool
    ) -> tuple[InfoColumns, InfoColumns, np.ndarray | None] | None:
        """``patch_reset_rows`` for an inline step: rows reset by it (same_step: rows that
        ended)."""
        b = self._buffers
        ended = b.terminated | b.truncated
        special = np.flatnonzero(ended if same_step else (b.ops == _RESET))
        return patch_reset_rows(step_infos, reset_infos, special, ended if same_step else None)

    def keep_inline(
        self, step_infos: InfoColumns, reset_infos: dict[int, dict[str, Any]], same_step: bool
    ) -> None:
        """Keep an inline step's infos per env, as ``absorb`` keeps the general path's."""
        b = self._buffers
        ended = (b.terminated | b.truncated).tolist() if same_step else None
        infos, finals = split_rows(step_infos, reset_infos, b.ops.tolist(), ended)
        self.infos.update(infos)
        self.final_infos.update(finals)

    def raise_errors(self) -> None:
        """Raise the lowest failed env's error, if any (the others go with it)."""
        if self.errors:
            errors, self.errors = self.errors, {}
            raise errors[min(errors)]

    def _fail_whole(self) -> None:
        """An env of a call that returns every env failed: the others' results go with it
        (their infos), and its error is raised."""
        if self.errors:
            self.infos.clear()
            self.final_infos.clear()
            self._forget_tabled()
            self.raise_errors()

    def give_up(self) -> np.ndarray:
        """Forget everything sent (the pool discarded it): which envs were not idle."""
        lost = self.status != IDLE
        self.status.fill(IDLE)
        self.in_flight = 0
        self.resets_in_flight = 0
        self.ready.clear()
        self.infos.clear()
        self.final_infos.clear()
        self._forget_tabled()
        self.errors.clear()
        return lost

    # ------------------------------------------------------------------ waiting
    def take(self, k: int, pull: Pull) -> np.ndarray:
        """The ids of the first ``k`` envs to finish, off the ready queue (still ``READY``:
        ``hand_out`` marks them idle). Receives until ``k`` are ready; an env's error is
        raised once what came with it is booked."""
        ready = self.ready
        if len(ready) + self.in_flight < k:
            raise NothingPendingError(
                f"recv() returns batches of {k} envs but only {self.in_flight} are pending and "
                f"{len(ready)} ready: send() actions or async_reset() first"
            )
        if len(ready) < k:
            self.collect(k - len(ready), pull)
        return np.array([ready.popleft() for _ in range(k)], dtype=np.int64)

    def hand_out(self, ids: np.ndarray, k: int) -> Batch:
        """``recv``'s batch: the rows of ``ids`` (from ``take``), which are idle again."""
        self.status[ids] = IDLE
        infos, finals, has_final = self.take_infos(ids, k)
        obs, reward, term, trunc, ops, final_obs, agents = self._buffers.gather(
            ids, self._copy, has_final is not None, self._recv_out
        )
        return Batch(ids, obs, reward, term, trunc, ops, final_obs, has_final, infos, finals, agents)

    def all_rows(self, infos: InfoColumns, finals: InfoColumns, has_final: np.ndarray | None,
                 op: np.ndarray | None = None) -> Batch:
        """Every env's row (sync calls, ``wait``), straight from the buffers (views, or copies
        with ``copy``), in whatever layout they have (``Buffers.rows``).

        ``op``: the row ops, if not ``buffers.ops`` (e.g. a shared read-only row of one op, for
        a call where every env ran the same op: nothing to copy).
        """
        if self._copy:
            obs, reward, term, trunc, final_obs, agents = self.copies(has_final is not None)
            if op is None:
                op = self._buffers.ops.copy()
        else:
            obs, reward, term, trunc, final_obs, agents = self._views[has_final is not None]
            if op is None:
                op = self._buffers.ops
        return _new_batch(Batch, (self._every_id, obs, reward, term, trunc, op, final_obs,
                                  has_final, infos, finals, agents))

    def collect(self, min_count: int, pull: Pull) -> None:
        """Receive completions until ``min_count`` more envs are ready (or an env failed)."""
        while min_count > 0 and self.in_flight and not self.errors:
            min_count -= pull(min_count, False)
        self.raise_errors()

    def drain(self, pull: Pull) -> None:
        """Sync calls: wait for every env sent by this call.

        If an env failed, the others' transitions are dropped with it (the call raises), but
        every env is idle again, so the pool stays usable. (Nothing else was in flight when
        the sync call began: every info is this call's.)
        """
        while self.in_flight:
            pull(self.in_flight, True)
        self._fail_whole()

    def wait_all(self, pull: Pull, timeout: float | None, caller: str) -> np.ndarray:
        """``Pool.wait``: receive every env in flight and take every env sent off the books;
        returns every env's row op (the op it was sent; ``NO_OP`` if it was not sent).

        Raises:
            NothingPendingError: nothing was sent (nothing changed).
            WaitTimeoutError: ``timeout`` (seconds) ran out; the envs stay in flight.
            EnvWorkerError: an env raised, once every env sent is back: the others' results
                are dropped and every env is idle again (as ``drain``).
        """
        sent = self.status != IDLE
        if not np.count_nonzero(sent):
            raise NothingPendingError(
                f"{caller}() called with no env in flight: send() actions or async_reset() first",
                caller.removesuffix("_wait"),
            )
        if timeout is None:
            while self.in_flight:
                pull(self.in_flight, False)
        else:
            self._wait_until(pull, time.monotonic() + timeout, timeout, caller)
        ids = np.flatnonzero(sent)
        self.status[ids] = IDLE
        self.ready.clear()
        self._fail_whole()
        op = np.full(self.num_envs, NO_OP, np.int8)
        op[ids] = self._buffers.ops[ids]
        return op

    def _wait_until(self, pull: Pull, deadline: float, timeout: float, caller: str) -> None:
        """Receive what finished (``pull(0)`` waits for nothing) until nothing is in flight,
        or raise :class:`WaitTimeoutError` at ``deadline``."""
        while True:
            pull(0, False)
            if not self.in_flight:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeoutError(
                    f"The call to `{caller}` has timed out after {timeout} second(s): "
                    f"{self.in_flight} of the envs sent are still running. They stay in "
                    f"flight: call {caller}() again for their results, or close the pool"
                )
            time.sleep(min(left, _POLL_S))
