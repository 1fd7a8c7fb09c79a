"""What every multi-worker executor shares: slice ownership, per-slice queues, restart books.

An executor that runs envs on several workers (threads, processes, Ray actors) gives each
worker a contiguous slice of env ids. Three pieces of that are the same whatever carries the
commands, so they live here once:

* :class:`SliceMap`: which slice owns each env, and a command's env ids split by slice (sync
  calls address every env, so that split is precomputed and found by identity).
* :class:`SendQueue`: a slice's commands that wait for it, in send order (a worker runs one
  command at a time; async ``send`` may queue several).
* :class:`RestartBook`: restart substitution. When a worker is rebuilt its envs are new, so
  the op each was sent becomes a RESET, and its result is reported as
  ``envhive._ops.restart_outcome`` says (the episode in progress ended truncated, with
  ``info[RESTART_INFO_KEY]``), while the pool still accounts by the op it sent. Envs of the
  rebuilt worker that were not running are substituted when they are next sent.

Examples:
    >>> m = SliceMap(7, 3)
    >>> m.bounds
    [(0, 3), (3, 5), (5, 7)]
    >>> m.split(np.array([6, 0, 1]))
    [(0, [0, 1]), (2, [6])]
    >>> q = SendQueue()
    >>> q.push([0], None); q.push([1], None); q.push([2], {"mode": 1})
    >>> q.pop(merge=True), q.pop(merge=True)
    (([0, 1], None), ([2], {'mode': 1}))
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import numpy as np

from envhive._buffers import Buffers
from envhive._ops import RESET, RESTART_INFO_KEY, restart_outcome

__all__ = ["slice_bounds", "SliceMap", "Job", "SendQueue", "RestartBook"]

#: One slice's share of a send: (env ids, reset options).
Job = tuple[list[int], dict[str, Any] | None]


def slice_bounds(num_envs: int, num_slices: int) -> list[tuple[int, int]]:
    """``num_envs`` split into ``min(num_slices, num_envs)`` contiguous runs ``[lo, hi)``,
    the first ``num_envs % k`` one longer (7 on 3: 3 + 2 + 2).

    Examples:
        >>> slice_bounds(7, 3), slice_bounds(2, 4)
        ([(0, 3), (3, 5), (5, 7)], [(0, 1), (1, 2)])
    """
    k = max(1, min(num_slices, num_envs))
    bounds, lo = [], 0
    for w in range(k):
        hi = lo + num_envs // k + (1 if w < num_envs % k else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


class SliceMap:
    """Which slice owns which env, and env ids split by slice.

    Args:
        num_envs: envs in the pool.
        num_slices: slices wanted (at most one per env; see :func:`slice_bounds`).
    """

    def __init__(self, num_envs: int, num_slices: int) -> None:
        self.bounds = slice_bounds(num_envs, num_slices)
        self.num_envs = num_envs
        #: ``owner[i]``: the slice of env ``i``.
        self.owner = np.concatenate(
            [np.full(hi - lo, w, np.int64) for w, (lo, hi) in enumerate(self.bounds)]
        ) if num_envs else np.zeros(0, np.int64)
        self.all_ids = list(range(num_envs))
        #: Every env, by slice. The id lists are never changed (commands only read them), so
        #: runners that cache an index per list reuse it on every sync call.
        self.all_groups: list[tuple[int, list[int]]] = [
            (w, list(range(lo, hi))) for w, (lo, hi) in enumerate(self.bounds)
        ]
        self._all_array: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.bounds)

    def split(self, env_ids: np.ndarray) -> list[tuple[int, list[int]]]:
        """``env_ids`` split by owning slice: ``[(slice, ids in send order), ...]``.

        The pool passes one read-only array for every all-env call, so a read-only array that
        held every id is recognized by identity afterwards and costs nothing to split.
        """
        if env_ids is self._all_array:
            return self.all_groups
        ids = env_ids.tolist()
        if ids == self.all_ids:
            if not env_ids.flags.writeable:  # it cannot change under us
                self._all_array = env_ids
            return self.all_groups
        owners = self.owner[env_ids]
        return [(w, env_ids[owners == w].tolist()) for w in np.unique(owners).tolist()]

    def group(self, env_ids: Sequence[int] | None) -> dict[int, list[int]]:
        """Env ids (``None``: all) grouped by owning slice, for ``call``/``set_attr``."""
        if env_ids is None:
            return dict(self.all_groups)
        groups: dict[int, list[int]] = {}
        for i in env_ids:
            groups.setdefault(int(self.owner[i]), []).append(int(i))
        return groups

    def ordered(
        self, env_ids: Sequence[int] | None, groups: dict[int, list[int]], results: dict[int, list[Any]]
    ) -> list[Any]:
        """Per-slice results (``results[w][k]`` for ``groups[w][k]``) back in ``env_ids`` order."""
        by_env = {i: r for w, ids in groups.items() for i, r in zip(ids, results[w])}
        order = env_ids if env_ids is not None else self.all_ids
        return [by_env[int(i)] for i in order]


class SendQueue:
    """One slice's jobs waiting for its worker, first sent first.

    The pool never sends an env that is in flight, so queued jobs address disjoint envs and
    jobs without reset options can be merged into one command (:meth:`pop`).
    """

    __slots__ = ("_jobs",)

    def __init__(self) -> None:
        self._jobs: collections.deque[Job] = collections.deque()

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)

    def push(self, ids: list[int], options: dict[str, Any] | None) -> None:
        """Queue one share of a send."""
        self._jobs.append((ids, options))

    def pop(self, merge: bool = False) -> Job:
        """The oldest job. ``merge``: it and the option-less jobs right after it, as one job
        (when it has no options either): one command instead of several where each costs a
        round trip (a process worker); a thread, whose jobs cost nothing to hand over, keeps
        them apart so that the first finishes first."""
        ids, options = self._jobs.popleft()
        if merge and options is None:
            jobs = self._jobs
            while jobs and jobs[0][1] is None:
                ids = ids + jobs.popleft()[0]
        return ids, options

    def clear(self) -> None:
        """Drop every queued job (shutdown)."""
        self._jobs.clear()


class RestartBook:
    """Restart substitution for executors that rebuild failed workers (see the module).

    The executor calls :meth:`rebuilt` when a worker comes back, :meth:`substitute_lost`
    with the ids of every command before it goes out, and :meth:`mark` on every completion.
    All three cost one truthiness test when nothing was ever restarted.
    """

    def __init__(self) -> None:
        self.lost: set[int] = set()  # envs of a rebuilt worker not yet sent since
        self.restarted: dict[int, int] = {}  # env id -> the op it was sent before substitution

    def rebuilt(self, slice_ids: Sequence[int], pending: Sequence[int], buffers: Buffers) -> None:
        """A worker owning ``slice_ids`` was rebuilt while running ``pending``: those are
        resubstituted now (the executor resends them), the rest when next sent."""
        busy = set(pending)
        self.lost.update(i for i in slice_ids if i not in busy)
        self.substitute(pending, buffers)

    def substitute_lost(self, ids: Sequence[int], buffers: Buffers) -> None:
        """Substitute the ops of those of ``ids`` whose worker was rebuilt since they ran."""
        if self.lost:
            self.substitute([i for i in ids if i in self.lost], buffers)

    def substitute(self, ids: Sequence[int], buffers: Buffers) -> None:
        """Turn the ops of ``ids`` into resets, remembering the ops sent. A reset keeps the
        seed it was sent with; a substituted step is unseeded (a seed left in its row is
        stale: the pool writes seeds only for the resets it plans)."""
        for i in ids:
            op = int(buffers.ops[i])
            self.restarted[i] = op
            self.lost.discard(i)
            if op != RESET:
                buffers.ops[i] = RESET
                buffers.has_seed[i] = False

    def forget(self, ids: Sequence[int]) -> None:
        """Drop the substitutions of ``ids`` (their command was discarded: nobody reports it)."""
        for i in ids:
            self.restarted.pop(i, None)

    def mark(
        self, done: Sequence[int], infos: dict[int, dict[str, Any]],
        final_infos: dict[int, dict[str, Any]], buffers: Buffers,
    ) -> None:
        """Report substituted envs among ``done`` as their sent op's restart outcome."""
        if not self.restarted:
            return
        b = buffers
        for i in done:
            op = self.restarted.pop(i, None)
            if op is None:
                continue
            b.ops[i] = op  # the pool accounts by the op it sent
            infos[i] = {**infos.get(i, {}), RESTART_INFO_KEY: True}
            outcome = restart_outcome(op)
            if outcome is None:
                continue  # the env was being reset anyway: a fresh episode, nothing lost
            b.reward[i] = outcome.reward
            b.terminated[i] = outcome.terminated
            b.truncated[i] = outcome.truncated
            agents = b.agent_rows
            if agents is not None:  # an agent axis: the lost episode ends for every agent
                agents.terminated[i] = agents.active[i] & outcome.terminated
                agents.truncated[i] = agents.active[i] & outcome.truncated
            if outcome.final_obs_is_reset_obs:
                b.obs_codec.write(b.final_obs, i, b.obs_codec.single(b.obs, i))
                final_infos[i] = {RESTART_INFO_KEY: True}
