"""The parent side of the worker core: applying replies, and which call error is raised.

Every executor whose workers run a :class:`~envhive.executors._core.WorkerCore` away from the
pool (worker processes, Ray actors) gets typed replies back and must do the same two things
with them, so they live here once:

* :class:`RunResults`: apply a :class:`~envhive.executors._core.RunReply` for a command's env
  ids: write the object-typed observation leaves (they cannot live in shared memory or travel
  as plain arrays), report restart substitutions (:class:`~envhive.executors._slices.RestartBook`)
  and add the completions to the caller's :class:`~envhive._report.Completion`.
* :func:`call_results`: the replies of one ``call``/``set_attr`` from several workers, turned
  into per-worker values or the one error the serial executor would raise: a worker that
  failed first, else the env error of the env that comes first in the caller's order.
* :func:`call_commands`, :func:`set_attr_commands`: one typed command per worker of a call.

What is done when a worker dies or hangs (restart, rebuild, resend, give up) is the supervisor's
(:mod:`envhive.executors._supervisor`).

Examples:
    >>> from envhive.executors._core import CallReply, ErrorReply
    >>> from envhive.errors import EnvWorkerError
    >>> call_results({0: CallReply([1, 2]), 1: CallReply([3])}, {}, [0, 1, 2])
    {0: [1, 2], 1: [3]}
    >>> bad = {0: ErrorReply(EnvWorkerError("a", env_id=1)), 1: ErrorReply(EnvWorkerError("b", env_id=2))}
    >>> call_results(bad, {}, [2, 1, 0])
    Traceback (most recent call last):
    ...
    envhive.errors.EnvWorkerError: env 2: b
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envhive._buffers import Buffers
from envhive._report import Completion
from envhive.executors._core import Call, CallReply, ErrorReply, RunReply, SetAttr, object_leaves
from envhive.executors._slices import RestartBook, SliceMap

__all__ = ["RunResults", "call_results", "call_commands", "set_attr_commands"]

_EMPTY = RunReply()


class RunResults:
    """Applies the replies of RUN commands to the pool's buffers (see the module docstring).

    Args:
        buffers: the pool's buffers (the numeric results are already in them, or copied in by
            the transport before :meth:`apply`).
        restarts: the executor's restart book.
    """

    def __init__(self, buffers: Buffers, restarts: RestartBook) -> None:
        self.buffers = buffers
        self.restarts = restarts
        self._obs_objects = object_leaves(buffers.obs)
        self._final_objects = object_leaves(buffers.final_obs) if buffers.final_obs is not None else []
        #: The object-typed action leaves, whose values a RUN command carries (``Run.object_actions``).
        self.act_objects = object_leaves(buffers.actions)

    def object_actions(self, ids: list[int]) -> list[list[Any]]:
        """The object-typed action values of ``ids``, one list per leaf (for ``Run``)."""
        return [leaf[ids].tolist() for leaf in self.act_objects]

    def apply(self, ids: list[int], reply: RunReply | None, out: Completion) -> int:
        """Report a finished RUN of ``ids`` (``reply``: its side data, ``None``: there was
        none) into ``out``; returns how many envs it reports (finished or failed).

        ``out.ended`` becomes ``None`` (the pool reads the flags): a count the parent's slice
        made of its own envs must not stand for these too."""
        out.ended = None
        if reply is None:
            if not self.restarts.restarted:  # the hot path: nothing but the ids to report
                out.env_ids.extend(ids)
                return len(ids)
            reply = _EMPTY
        for leaf, values in zip(self._obs_objects, reply.object_obs):
            for i, v in zip(ids, values):
                leaf[i] = v
        if reply.object_final_obs is not None:
            for leaf, values in zip(self._final_objects, reply.object_final_obs):
                for i, v in zip(ids, values):
                    if i in reply.final_infos:
                        leaf[i] = v
        errors = reply.errors
        infos, finals = dict(reply.infos), dict(reply.final_infos)
        done = [i for i in ids if i not in errors] if errors else ids
        self.restarts.mark(done, infos, finals, self.buffers)
        out.env_ids.extend(done)
        out.infos.update(infos)
        out.final_infos.update(finals)
        out.errors.update(errors)
        return len(done) + len(errors)


def call_results(
    replies: dict[int, CallReply | ErrorReply],
    failures: dict[int, BaseException],
    order: Sequence[int],
) -> dict[int, list[Any] | None]:
    """The values of one call from several workers (keyed by slice), or the error to raise.

    Args:
        replies: the replies of the workers that answered.
        failures: the workers that failed (died, hung) while running the call, and the error
            to raise for each.
        order: env ids in the caller's order (every env for a call on all of them).

    Raises:
        BaseException: the failure of the lowest-numbered failed worker, else the env error
            of the env that comes first in ``order`` (as the serial executor would raise).
    """
    for w in sorted(failures):
        raise failures[w]
    errors = [r.error for r in replies.values() if isinstance(r, ErrorReply)]
    if errors:
        rank = {int(i): k for k, i in enumerate(order)}

        def position(err: BaseException) -> int:
            return rank.get(getattr(err, "env_id", None), -1)  # type: ignore[arg-type]

        raise min(errors, key=position)
    return {w: r.values for w, r in replies.items() if isinstance(r, CallReply)}


def call_commands(
    slices: SliceMap, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
    env_ids: Sequence[int] | None,
) -> dict[int, Call | SetAttr]:
    """One :class:`Call` per slice that owns some of ``env_ids`` (``None``: every env)."""
    return {w: Call(name, args, kwargs, ids) for w, ids in slices.group(env_ids).items()}


def set_attr_commands(
    slices: SliceMap, name: str, values: Sequence[Any], env_ids: Sequence[int] | None
) -> dict[int, Call | SetAttr]:
    """One :class:`SetAttr` per slice: ``values[k]`` goes to ``env_ids[k]`` (``None``: every
    env, in env order)."""
    order = list(env_ids) if env_ids is not None else slices.all_ids
    value_of = dict(zip(order, values))
    return {
        w: SetAttr(name, [value_of[i] for i in ids], ids)
        for w, ids in slices.group(env_ids).items()
    }
