"""EnvPool's own pool in its async mode, for envhive pools that run async (``batch_size <
num_envs``): EnvPool's threads keep stepping while the caller works, as in EnvPool itself.

**The mapping.** EnvPool's pool is built with ``batch_size = k`` (envhive's ``batch_size``):
``_send``/``_reset`` only queue envs (any envs, any number, in any order), and each ``_recv``
returns the next ``k`` results in the order EnvPool's threads finished them. So ``start``
queues the ops and returns at once, and ``collect`` receives batches until enough envs
finished, as envhive's ``recv`` (the first ``batch_size`` envs to finish) asks. Per op, as on
the sync mapping (:mod:`envhive.envs.envpool._engine`): a STEP or an autoreset is a ``_send``
(EnvPool resets an env that ended on its next ``_send``), a RESET of an env that has not
ended a ``_reset``; a STEP_RESET whose step ended the episode keeps its terminal observation
and step info and is queued for a ``_reset``, and is reported when that reset's result comes
back (reward and flags stay the step's).

**Spare envs.** A ``_recv`` waits until ``k`` results are there, and nothing can make EnvPool
return fewer: with fewer than ``k`` results to come it would never return. The pool therefore
holds ``k - 1`` *spare* envs besides envhive's (env ids ``num_envs ...``): when envhive needs
results and fewer than ``k`` are coming (a sync ``step`` of ``num_envs`` not a multiple of
``k``, a ``recv`` after a partial ``send``, STEP_RESET resets still to come), spares are stepped
to fill the batch and their results dropped. Every spare comes back in that same ``_recv``,
so none is ever running otherwise. In EnvPool's own loop (``recv`` of ``k``, ``send`` of the
``k`` received) no spare ever runs.

**Discard.** EnvPool cannot cancel an op: a discarded env's result is dropped when it comes
back, and before any new op is queued every discarded env is received (an env may not be
queued twice).

Seeds, infos and everything else are the sync mapping's (:class:`EnvPoolEngine`, which this
class extends). Multi-player ids keep the sync mapping (their pool is built with ``batch_size =
1`` there, which needs no spare).

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envpool/CartPole-v1", num_envs=4, batch_size=2, seed=0)  # doctest: +SKIP
    >>> env.async_reset()  # doctest: +SKIP
    >>> len(env.recv()[-1]["env_id"])  # doctest: +SKIP
    2
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from envhive._ops import RESET, STEP_RESET
from envhive._report import Completion
from envhive.engines._batched import refuse_reset_options
from envhive.envs.envpool._engine import _NONE, EnvPoolEngine, random_seeds
from envhive.envs.envpool._real import envpool_module, real_envpool
from envhive.errors import EnvWorkerError

if TYPE_CHECKING:
    from envhive._infos import InfoTable
    from envhive.engines import AsyncEngine

__all__ = ["StreamEngine"]

# What EnvPool is doing for an env (``StreamEngine._kind``).
_IDLE, _STEP, _RESET, _AGAIN, _SPARE, _DROPPED = range(6)


def spare_action(space: gym.Space, dtype: np.dtype) -> np.ndarray | None:
    """A valid action of one env for the spares (``None``: the spares are reset instead).

    Examples:
        >>> spare_action(gym.spaces.Box(1.0, 2.0, (2,)), np.dtype(np.float32)).tolist()
        [1.0, 1.0]
        >>> int(spare_action(gym.spaces.Discrete(3, start=1), np.dtype(np.int32)))
        1
    """
    if isinstance(space, gym.spaces.Discrete):
        return np.asarray(space.start, dtype)
    if isinstance(space, gym.spaces.Box):
        return np.clip(np.zeros(space.shape, dtype), space.low, space.high).astype(dtype)
    return None


class StreamEngine(EnvPoolEngine):
    """A batch of one single-player EnvPool id's envs in EnvPool's async mode (see the module
    docstring).

    Args:
        task_id: EnvPool's id.
        kwargs: EnvPool ``make`` keywords (as :class:`EnvPoolEngine`).
        num_envs: batch size.
        num_threads: EnvPool's worker threads (``None``: one per usable core).
        batch_size: envs per EnvPool ``_recv`` (envhive's ``batch_size``), ``< num_envs``.
    """

    def __init__(self, task_id: str, kwargs: dict[str, Any], num_envs: int, num_threads: int | None,
                 batch_size: int) -> None:
        super().__init__(task_id, kwargs, num_envs, num_threads)
        assert 1 <= batch_size < self.num_envs and not self._multi
        self._k = k = int(batch_size)
        self._lean_sync = False  # a sync step receives batch by batch (_run)
        self._total = total = self.num_envs + k - 1  # envhive's envs, then the spares
        self._kind = np.zeros(total, np.int8)
        self._out = 0  # results EnvPool owes: every env queued and not received
        self._live = 0  # envhive's envs queued and not reported (not discarded)
        self._dropped = 0  # discarded envs queued and not received
        #: Envs queued whose rows are not plain steps of envhive's envs (resets, spares,
        #: discarded envs): while there are none, a batch takes ``_write_steps_only``.
        self._odd = 0
        self._receiving = False  # inside _recv (see _recover)
        # The spares' actions: one valid action each (None: the spares are reset instead).
        single = spare_action(self.layout.player_action_space, self.layout.action_dtype)
        self._spare_rows = None if single is None else np.stack([single] * max(k - 1, 1))
        self._spare_ids = np.arange(self.num_envs, total, dtype=np.int32)

    def _build(self, seeds: list[int]) -> None:
        """(Re)build EnvPool's pool in async mode, the spares seeded at random."""
        self._close_pool()
        ep = envpool_module()
        with real_envpool():
            self._pool = ep.make_gymnasium(self.task_id, num_envs=self._total, batch_size=self._k,
                                           num_threads=self.num_threads,
                                           env_seed=list(seeds) + random_seeds(self._k - 1), **self._kwargs)
        self._done[:] = True
        self._touched[:] = False
        self._kind[:] = _IDLE
        self._out = self._live = self._dropped = self._odd = 0
        self._receiving = False

    # -- queueing ------------------------------------------------------------------------
    def _enqueue(self, ids: np.ndarray, kind: int, out: Completion, odd: int) -> None:
        """Queue envs ``ids`` (``_RESET``: a ``_reset``; ``_STEP``: a ``_send`` of their
        actions), ``odd`` of them not plain steps. EnvPool refusing the call fails each env
        in ``out``."""
        ids32 = ids.astype(np.int32)
        try:
            if kind == _RESET:
                self._pool._reset(ids32)
            else:
                self._pool._send([ids32, ids32, self._ob.actions[ids].astype(self.layout.action_dtype)])
        except Exception as err:
            for i in ids.tolist():
                out.errors[i] = EnvWorkerError(f"EnvPool {self.task_id}: {type(err).__name__}: {err}",
                                               env_id=i, cause_type=type(err).__name__)
            return
        self._kind[ids] = kind
        self._touched[ids] = True
        self._out += ids.size
        self._live += ids.size
        self._odd += odd

    def _pad(self) -> None:
        """Step (or reset) spares so that EnvPool owes a whole batch (see the module)."""
        idle = self._spare_ids[self._kind[self._spare_ids] == _IDLE]  # (all, but after a Ctrl-C)
        spares = idle[:self._k - self._out]
        if self._spare_rows is None:
            self._pool._reset(spares)
        else:
            self._pool._send([spares, spares, self._spare_rows[:spares.size]])
        self._kind[spares] = _SPARE
        self._out += spares.size
        self._odd += spares.size

    def _run(self, ids: np.ndarray, seeded: bool, out: Completion, leave: bool) -> None:
        """Queue the ops of ``ids`` (RESETs of envs that have not ended as ``_reset``, the
        rest as one ``_send``); without ``leave``, receive until every env is reported."""
        self._ensure_pool()
        self._drain()
        odd = 0  # RESETs riding in the _send (of envs that ended)
        if np.count_nonzero(self._ob.ops[ids] == RESET):  # else: steps only, one _send
            if seeded:
                ids = self._seed(ids, out)
            resets = self._ob.ops[ids] == RESET
            forced = resets & ~self._done[ids]
            odd = int(np.count_nonzero(resets & self._done[ids]))
            if np.count_nonzero(forced):
                self._enqueue(ids[forced], _RESET, out, int(np.count_nonzero(forced)))
                ids = ids[~forced]
        if ids.size:
            self._enqueue(ids, _STEP, out, odd)
        if not leave:
            while self._live and self._out:
                self._receive_into(out)

    def _drain(self) -> None:
        """Receive every discarded env still queued (their results dropped), keeping what
        else comes back for ``collect``."""
        self._recover()
        while self._dropped and self._out:
            self._receive_into(self._stash)
        if self._dropped:  # a batch was lost to an interrupt (_recover): nothing is owed now
            self._kind[self._kind == _DROPPED] = _IDLE
            self._dropped = self._odd = 0

    def _recover(self) -> None:
        """After a Ctrl-C that struck as a ``_recv`` returned (its results are lost, and so
        is which envs they were): EnvPool owes that batch no more. The pool discards what
        was in flight after such an interrupt, so the lost envs are dropped ones, and
        ``_drain`` forgets them once EnvPool owes nothing."""
        if self._receiving:
            self._receiving = False
            self._out -= self._k

    def _settle(self) -> None:
        """Receive everything queued (for a call that needs EnvPool's envs at rest)."""
        self._recover()
        while self._live and self._out:
            self._receive_into(self._stash)
        self._drain()

    # -- receiving -----------------------------------------------------------------------
    def _receive_into(self, out: Completion) -> tuple[np.ndarray, int] | None:
        """One :meth:`_receive`, its envs reported in ``out``; returns them (``None``: EnvPool
        raised, and every env it owed failed in ``out``)."""
        got = self._received(out)
        if got is not None and got[0].size:
            out.add_tabled(got[0].tolist(), got[1], self._table)
        return got

    def _received(self, out: Completion) -> tuple[np.ndarray, int] | None:
        """:meth:`_receive`, or ``None`` when EnvPool raised: then every env it owed fails in
        ``out`` and its pool is dropped (the next op builds a new one)."""
        try:
            return self._receive()
        except Exception as err:
            kinds = self._kind[:self.num_envs]
            for i in np.flatnonzero((kinds > _IDLE) & (kinds < _SPARE)).tolist():
                out.errors[i] = EnvWorkerError(f"EnvPool {self.task_id}: {type(err).__name__}: {err}",
                                               env_id=i, cause_type=type(err).__name__)
            self._close_pool()
            self._kind[:] = _IDLE
            self._out = self._live = self._dropped = self._odd = 0
            return None

    def _receive(self) -> tuple[np.ndarray, int]:
        """One EnvPool ``_recv`` (padded with spares when fewer than a batch are owed): its
        results into the buffers and info columns. Returns the envs reported (in EnvPool's
        order) and how many of them ended an episode."""
        self._recover()
        if self._out < self._k:
            self._pad()
        self._receiving = True
        state = self._pool._recv()
        self._out -= self._k
        self._receiving = False
        eids = state[self.layout.env_id]
        if not self._odd:  # the common case: every row a step of one of envhive's envs
            self._kind[eids] = _IDLE
            return self._write_steps_only(eids.astype(np.int64), state)
        return self._receive_odd(eids, state)

    def _receive_odd(self, eids: np.ndarray, state: list[np.ndarray]) -> tuple[np.ndarray, int]:
        """:meth:`_receive` of a batch that may hold resets, spares or discarded envs."""
        kinds = self._kind[eids]
        self._kind[eids] = _IDLE
        plain = kinds == _STEP
        plain[plain] = self._ob.ops[eids[plain]] != RESET
        self._odd -= eids.size - int(np.count_nonzero(plain))
        live = kinds < _SPARE
        if not np.count_nonzero(live):
            self._dropped -= int(np.count_nonzero(kinds == _DROPPED))
            return _NONE, 0
        rows: Any = slice(None)
        if not live.all():
            self._dropped -= int(np.count_nonzero(kinds == _DROPPED))
            rows = np.flatnonzero(live)
            eids, kinds = eids[rows], kinds[rows]
        return self._write_rows(eids.astype(np.int64), kinds, state, rows)

    def _write_steps_only(self, ids: np.ndarray, state: list[np.ndarray]) -> tuple[np.ndarray, int]:
        """A batch of steps of envs ``ids`` (the rows in order) into the buffers and the
        step infos' columns; STEP_RESETs that ended are queued for their reset."""
        b, layout, info = self._ob, self.layout, self._info
        for j, leaf, _ in self._obs_leaves:
            leaf[ids] = state[j]
        done, trunc = state[layout.done], state[layout.trunc]
        b.reward[ids] = state[layout.reward]
        b.terminated[ids] = np.greater(done, trunc)  # done & ~trunc
        b.truncated[ids] = trunc
        self._done[ids] = done
        self._reset_after[ids] = False
        rep, step = info["rep"], info["step"]
        for j, name, _ in layout.info_keys:
            rep[name][ids] = step[name][ids] = state[j]
        ended = int(np.count_nonzero(done))
        if ended:
            new = done & (b.ops[ids] == STEP_RESET)
            if np.count_nonzero(new):
                return self._reset_again(ids, new, ended)
        self._live -= ids.size
        return ids, ended

    def _write_rows(self, ids: np.ndarray, kinds: np.ndarray, state: list[np.ndarray],
                    rows: Any) -> tuple[np.ndarray, int]:
        """The results of envs ``ids`` (``state``'s rows ``rows``, EnvPool's kinds ``kinds``)
        into the buffers; STEP_RESETs that ended are queued for their reset (not reported)."""
        b, layout = self._ob, self.layout
        for j, leaf, _ in self._obs_leaves:
            leaf[ids] = state[j][rows]
        done, trunc, reward = state[layout.done][rows], state[layout.trunc][rows], state[layout.reward][rows]
        values = {name: state[j][rows] for j, name, _ in layout.info_keys}
        ops = b.ops[ids]
        steps = kinds == _STEP
        steps &= ops != RESET  # the rows of steps; the others are resets of some kind
        again = kinds == _AGAIN  # a STEP_RESET's reset: reward and flags stay the step's
        self._write_steps(ids, reward, done, trunc, ~again)
        self._done[ids[again]] = False
        self._put_rows(ids, ~steps, values)
        stepped_end = done & steps
        ended = int(np.count_nonzero(stepped_end)) + int(np.count_nonzero(again))  # again: its step ended
        new = stepped_end & (ops == STEP_RESET)
        if not np.count_nonzero(new):
            self._live -= ids.size
            return ids, ended
        return self._reset_again(ids, new, ended)

    def _write_steps(self, ids: np.ndarray, reward: np.ndarray, done: np.ndarray, trunc: np.ndarray,
                     rows: Any) -> None:
        """Reward and flags of envs ``ids[rows]`` (their op's last transition)."""
        sid = ids[rows]
        b = self._ob
        b.reward[sid] = reward[rows]
        b.terminated[sid] = done[rows] > trunc[rows]  # done & ~trunc
        b.truncated[sid] = trunc[rows]
        self._done[sid] = done[rows]
        self._reset_after[sid] = False

    def _put_rows(self, ids: np.ndarray, resets: np.ndarray, values: dict[str, np.ndarray]) -> None:
        """Info values of envs ``ids`` into the columns: ``rep``, and ``reset`` for the rows
        of resets (``resets``), ``step`` for the others."""
        info = self._info
        all_resets = bool(resets.all())
        no_resets = not all_resets and not np.count_nonzero(resets)
        for name, value in values.items():
            info["rep"][name][ids] = value
            if all_resets:
                info["reset"][name][ids] = value
            elif no_resets:
                info["step"][name][ids] = value
            else:
                info["reset"][name][ids[resets]] = value[resets]
                info["step"][name][ids[~resets]] = value[~resets]

    def _reset_again(self, ids: np.ndarray, new: np.ndarray, ended: int) -> tuple[np.ndarray, int]:
        """Queue the reset of the envs whose STEP_RESET ended (``ids[new]``), their terminal
        observation kept; the others are reported."""
        again = ids[new]
        if self._final_leaves is not None:
            for (_, leaf, _), (_, final, _) in zip(self._obs_leaves, self._final_leaves):
                final[again] = leaf[again]
        self._reset_after[again] = True
        self._pool._reset(again.astype(np.int32))
        self._kind[again] = _AGAIN
        self._out += again.size
        self._odd += again.size
        report = ids[~new]
        self._live -= report.size
        return report, ended - again.size

    # -- the async protocol ----------------------------------------------------------------
    def start(self, ids: np.ndarray, options: dict[str, Any] | None) -> None:
        """Queue the ops of ``ids``; returns while EnvPool's threads run them (and others)."""
        if options:
            ids = refuse_reset_options(ids, self._ob.ops, options, self._stash, self.what)
            if not ids.size:
                return
        self._run(ids, True, self._stash, True)

    def collect(self, min_count: int) -> Completion:
        """Every env reported so far, receiving batches until at least ``min_count``."""
        out, self._stash = self._stash, Completion()
        while len(out.env_ids) + len(out.errors) < min_count and self._live and self._out:
            self._receive_into(out)
        return out

    def take_finished(self, min_count: int) -> tuple[np.ndarray, int, InfoTable] | None:
        """:meth:`collect` for the pool's lean ``recv``: ``(env ids, how many ended, the info
        table)``; ``None`` (``collect`` must run) when anything waits in the stash."""
        if self._stash.env_ids or self._stash.errors:
            return None
        got: list[np.ndarray] = []
        count = ended = 0
        while count < min_count and self._live and self._out:
            one = self._received(self._stash)
            if one is None:
                break
            ids, e = one
            got.append(ids)
            count += ids.size
            ended += e
        ids = got[0] if len(got) == 1 else np.concatenate(got) if got else _NONE
        if count < min_count or self._stash.errors:
            if ids.size:
                self._stash.add_tabled(ids.tolist(), ended, self._table)
            return None
        return ids, ended, self._table

    def discard(self) -> None:
        """Forget every op queued and not reported: those envs' results are dropped when
        they come back (received before any new op, ``_drain``)."""
        self._stash = Completion()
        self._recover()
        live = (self._kind > _IDLE) & (self._kind < _SPARE)
        count = int(np.count_nonzero(live))
        self._kind[live] = _DROPPED
        self._dropped += count
        self._live = 0
        self._odd = int(np.count_nonzero(self._kind != _IDLE))  # every env queued is odd now


if TYPE_CHECKING:

    def _implements_async(engine: StreamEngine) -> AsyncEngine:
        return engine  # mypy checks StreamEngine against AsyncEngine here
