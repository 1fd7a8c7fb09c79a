"""The steps around the op rule that every batched engine takes, written once.

An engine performs the pool's ops (``envhive._ops``) on many envs per call. Whatever its envs
are (numba kernels, MuJoCo, torch tensors, ALE), the same steps surround its own step and
reset: split a call's ids by op, step the envs that step, find the rows whose op resets them
after their step (``resets_in_op``: same_step's ended envs), keep their terminal observation
in ``final_obs``, reset those (unseeded) and the RESET rows (seeded from the command block when
the pool sent the resets), give RESET rows ``RESET_REWARD`` and clear flags, and route each
env's step info to ``infos`` or, for rows that reset after their step, ``final_infos``.

:class:`BatchedOps` holds that sequence; an engine subclasses it and supplies three primitives
(``_step_rows``, ``_reset_rows``, ``_first_bad``), plus ``_step_info_rows`` if its envs have step
infos. It then gets ``step_all`` (the pool's inline sync step) and ``run`` (the general path)
with exactly the semantics of ``EnvRunner`` for Python envs. Engines whose compiled driver
performs every op inside one call (classic kernels) use the functions here for the parts they
still do in Python (:func:`split_ops`, :func:`refuse_reset_options`, :func:`reset_seeds`).

Examples:
    >>> import numpy as np
    >>> from envhive._ops import RESET, STEP, STEP_RESET
    >>> ops = np.array([STEP, RESET, STEP_RESET], np.int8)
    >>> step, reset = split_ops(np.arange(3), ops)
    >>> step.tolist(), reset.tolist()
    ([0, 2], [1])
    >>> term, trunc = np.array([True, False, True]), np.zeros(3, bool)
    >>> ended_rows(step, ops, term, trunc).tolist()  # STEP_RESET rows that ended
    [2]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from envhive._buffers import Buffers
from envhive._ops import RESET, RESET_REWARD, resets_in_ops
from envhive._report import Completion
from envhive.engines._protocol import StepAllResult
from envhive.errors import EnvWorkerError

__all__ = ["BatchedOps", "split_ops", "ended_rows", "refuse_reset_options", "reset_seeds"]

_EMPTY = np.empty(0, np.int64)
_EMPTY.flags.writeable = False
# StepAllResult(...) without the NamedTuple's Python __new__ frame: built every step.
_result = tuple.__new__


def split_ops(ids: np.ndarray, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(step ids, reset ids)``: the envs of ``ids`` whose op steps (STEP, STEP_RESET) and
    those whose op is RESET, each in ``ids`` order. With no RESET, ``ids`` itself (no copy)."""
    resets = ops[ids] == RESET
    if not resets.any():
        return ids, _EMPTY
    return ids[~resets], ids[resets]


def ended_rows(step_ids: np.ndarray, ops: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> np.ndarray:
    """The envs of ``step_ids`` whose op resets them after their step (``_ops.resets_in_ops``:
    STEP_RESET and the step ended the episode), in ``step_ids`` order."""
    ended = resets_in_ops(ops[step_ids], terminated[step_ids], truncated[step_ids])
    return step_ids[ended] if ended.any() else _EMPTY


def refuse_reset_options(
    ids: np.ndarray, ops: np.ndarray, options: dict[str, Any] | None, out: Completion, what: str
) -> np.ndarray:
    """For engines whose envs take no reset options: every RESET of ``ids`` given ``options``
    fails as its env's error in ``out`` (the pool's books stay straight); returns the rest."""
    if not options:
        return ids
    resets = ops[ids] == RESET
    for i in ids[resets].tolist():
        out.errors[i] = EnvWorkerError(
            f"reset options are not supported by {what}, got {sorted(options)}",
            env_id=i, cause_type="ConfigError",
        )
    return ids[~resets]


def reset_seeds(buffers: Buffers, ids: np.ndarray) -> list[int | None]:
    """The seed of each env's RESET op in the command block (``None``: unseeded)."""
    b = buffers
    if not b.has_seed[ids].any():
        return [None] * ids.size
    return [b.seed_of(i) for i in ids.tolist()]


class BatchedOps:
    """The op sequence of a batched engine (see the module docstring); subclass it.

    Subclasses set ``num_envs`` and call :meth:`_bind_ops` from their ``bind``, and implement:

    * ``_step_rows(ids, actions) -> done``: step envs ``ids`` (none of them RESET) with
      ``actions[i]`` for env ``i``, writing their obs, reward and flags rows; return how
      many ended (terminated or truncated). The host flags must be readable after it.
    * ``_reset_rows(ids, seeds, out) -> (reset ids, infos)``: reset envs ``ids`` (``seeds[k]``
      for ``ids[k]``; ``None``: continue its generator), writing their obs rows; return the ids
      that were reset and their non-empty reset infos. With ``out``, an env whose reset raises
      is reported there and left out; without, the exception propagates.
    * ``_first_bad(actions, ids) -> int``: the first env of ``ids`` whose action is outside
      the action space, or -1 (nothing is stepped when one is).
    * optionally ``_step_info_rows(ids) -> columns | None``: the step infos of envs ``ids``
      as neutral columns (key -> array, one row per id), ``None`` when the envs have none;
      ``_keep_final(ids)`` and ``_clear_reset_rows(ids)`` for buffers that are not numpy.

    ``reset_options``: whether the envs take reset options (else a RESET with options fails
    as the env's error, naming ``what``).
    """

    num_envs: int
    reset_options = False
    what = "this engine's envs"

    def _bind_ops(self, buffers: Buffers) -> None:
        self._ob = buffers
        self._ob_all = np.arange(self.num_envs, dtype=np.int64)
        self._ob_all.flags.writeable = False

    # -- primitives (subclasses) ------------------------------------------------------
    def _step_rows(self, ids: np.ndarray, actions: Any) -> int:
        raise NotImplementedError

    def _reset_rows(
        self, ids: np.ndarray, seeds: Sequence[int | None], out: Completion | None
    ) -> tuple[np.ndarray, dict[int, dict[str, Any]]]:
        raise NotImplementedError

    def _first_bad(self, actions: Any, ids: np.ndarray) -> int:
        raise NotImplementedError

    def _step_info_rows(self, ids: np.ndarray | None) -> dict[str, np.ndarray] | None:
        """Step infos of envs ``ids`` (``None``: every env) as columns; ``None``: no infos."""
        return None

    def _keep_final(self, ids: np.ndarray) -> None:
        """The terminal observations of envs ``ids`` (in ``obs`` now) into ``final_obs``."""
        b = self._ob
        b.final_obs[ids] = b.obs[ids]  # type: ignore[index]

    def _clear_reset_rows(self, ids: np.ndarray) -> None:
        """RESET rows report ``RESET_REWARD`` and neither flag (``_ops``)."""
        b = self._ob
        b.reward[ids] = RESET_REWARD
        b.terminated[ids] = False
        b.truncated[ids] = False

    # -- the sequence ------------------------------------------------------------------
    def _perform(
        self, ids: np.ndarray, actions: Any, seeded: bool, out: Completion | None
    ) -> tuple[int, np.ndarray, np.ndarray, dict[int, dict[str, Any]]]:
        """Run the op of every env in ``ids``: ``(done, step ids, ended ids, reset infos)``.

        ``seeded``: RESET ops take the command block's seeds (``run``: resets the pool sent);
        in ``step_all`` every RESET is an autoreset and the block's seeds belong to earlier
        reset calls. Rows that reset after their step are reset unseeded, as ``EnvRunner``
        calls ``env.reset()``."""
        b = self._ob
        step_ids, reset_ids = split_ops(ids, b.ops)
        done = self._step_rows(step_ids, actions) if step_ids.size else 0
        again = ended_rows(step_ids, b.ops, b.terminated, b.truncated) if done else _EMPTY
        if again.size:
            self._keep_final(again)
        infos: dict[int, dict[str, Any]] = {}
        if again.size or reset_ids.size:
            seeds = reset_seeds(b, reset_ids) if seeded and reset_ids.size else [None] * reset_ids.size
            # One reset call for both kinds (an engine may reset a batch in one compiled call).
            both = np.concatenate((again, reset_ids)) if again.size and reset_ids.size else (
                again if again.size else reset_ids)
            reset, infos = self._reset_rows(both, [None] * again.size + seeds, out)
            fresh = reset if not again.size else reset[b.ops[reset] == RESET]
            if fresh.size:
                self._clear_reset_rows(fresh)
        return done, step_ids, again, infos

    def step_all(self, actions: Any) -> StepAllResult:
        """Run every env's op with ``actions`` (validated first: nothing runs if one is bad)."""
        every = self._ob_all
        step_ids, _ = split_ops(every, self._ob.ops)
        bad = self._first_bad(actions, step_ids)
        if bad >= 0:
            return _result(StepAllResult, (bad, 0, None, None))
        done, _, _, reset_infos = self._perform(every, actions, False, None)
        return _result(StepAllResult, (-1, done, self._step_info_rows(None), reset_infos or None))

    def run(self, ids: np.ndarray, options: dict[str, Any] | None, out: Completion) -> None:
        """The general path: the ops of ``ids``, actions from the bound buffers; every env of
        ``ids`` is reported in ``out`` (in ``ids`` order: ``env_ids``, or ``errors``)."""
        b = self._ob
        if not self.reset_options:
            ids = refuse_reset_options(ids, b.ops, options, out, self.what)
        if not ids.size:
            return
        _, step_ids, again, reset_infos = self._perform(ids, b.actions, True, out)
        columns = self._step_info_rows(step_ids) if step_ids.size else None
        if columns is not None:
            ended = set(again.tolist())
            keys = list(columns.items())
            for pos, i in enumerate(step_ids.tolist()):
                info = {k: v[pos] for k, v in keys}
                if i in ended:
                    out.final_infos[i] = info  # the step's info; the reset's is the row's
                elif info:
                    out.infos[i] = info
        else:
            for i in again.tolist():
                out.final_infos[i] = {}
        out.infos.update(reset_infos)
        errors = out.errors
        out.env_ids.extend(i for i in ids.tolist() if i not in errors)
