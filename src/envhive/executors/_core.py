"""The worker core: typed commands in, typed replies out, over a slice of envs; no transport.

A worker (a process or a Ray actor) is a :class:`WorkerCore` plus a transport. The core
owns the slice's :class:`~envhive._runner.EnvRunner` and the buffers it writes into, and turns
each command into a reply; how commands and replies travel is the transport's business
(``_worker.py``: a shared-memory control block, semaphores and a pipe; tests: a loopback that
pickles both ways, as a remote transport would). Commands and replies are frozen dataclasses
that pickle, so any transport can carry them.

Why the split: the process executor's lifecycle (spawn, handshake, liveness, restarts) and its
wire format are one concern, what a worker does with a command is another. A Ray actor hosts the
same core and only needs to carry these objects.

Examples:
    >>> import gymnasium as gym
    >>> from envhive._buffers import Buffers, BufferSpec
    >>> from envhive._runner import EnvRunner, build_envs
    >>> envs = build_envs([lambda: gym.make("CartPole-v1")] * 2, first_id=0)
    >>> b = Buffers.allocate(BufferSpec(2, envs[0].observation_space, envs[0].action_space))
    >>> core = WorkerCore(EnvRunner(envs, first_id=0), b)
    >>> b.ops[:] = 1  # RESET
    >>> core.handle(Run([0, 1])).errors
    {}
    >>> core.handle(Call("spec", (), {}, [1])).values[0].id
    'CartPole-v1'
    >>> core.handle(Close()) is None
    True
"""

from __future__ import annotations

import enum
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envhive._buffers import Buffers
from envhive._report import Completion, safe_str
from envhive._runner import EnvRunner
from envhive._spaces import tree_leaves
from envhive.errors import EnvhiveError, EnvWorkerError

__all__ = [
    "CommandKind",
    "Run",
    "Call",
    "SetAttr",
    "Close",
    "Command",
    "RunReply",
    "CallReply",
    "ErrorReply",
    "Reply",
    "WorkerCore",
    "object_leaves",
    "portable_error",
]


class CommandKind(enum.IntEnum):
    """The kinds of command; the shared-memory transport writes these codes."""

    RUN = 1
    CALL = 2
    CLOSE = 3
    SET_ATTR = 4

    @classmethod
    def of(cls, command: Command) -> CommandKind:
        """The kind of ``command``."""
        return _KINDS[type(command)]


@dataclass(frozen=True, slots=True)
class Run:
    """Run the ops written in the buffers' command block for ``ids`` (pool-wide env ids)."""

    ids: list[int]
    options: dict[str, Any] | None = None
    #: Values of the object-typed action leaves for ``ids`` (they cannot live in shared
    #: memory), one list per leaf; ``None``: none.
    object_actions: list[list[Any]] | None = None
    #: Seeds of RESET ops too large for the shared ``seeds`` column, by env id
    #: (:meth:`Buffers.big_seeds_of`); ``None``: none.
    big_seeds: dict[int, int] | None = None


@dataclass(frozen=True, slots=True)
class Call:
    """Call (or read) ``name`` on ``env_ids`` of the slice (``None``: every env of it)."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    env_ids: list[int] | None = None


@dataclass(frozen=True, slots=True)
class SetAttr:
    """Set ``name`` to ``values[k]`` on ``env_ids[k]`` (``None``: every env of the slice)."""

    name: str
    values: list[Any]
    env_ids: list[int] | None = None


@dataclass(frozen=True, slots=True)
class Close:
    """Close every env of the slice; the worker then exits."""


Command = Run | Call | SetAttr | Close
_KINDS = {Run: CommandKind.RUN, Call: CommandKind.CALL, SetAttr: CommandKind.SET_ATTR, Close: CommandKind.CLOSE}


@dataclass(frozen=True, slots=True)
class RunReply:
    """What a :class:`Run` did beyond the buffers: side data, present only when there is some."""

    infos: dict[int, dict[str, Any]] = field(default_factory=dict)
    final_infos: dict[int, dict[str, Any]] = field(default_factory=dict)
    errors: dict[int, EnvWorkerError] = field(default_factory=dict)
    #: The object-typed observation leaves' values for the run's ids, one list per leaf.
    object_obs: list[list[Any]] = field(default_factory=list)
    #: The same for ``final_obs`` (only when some env ended in a STEP_RESET).
    object_final_obs: list[list[Any]] | None = None

    @property
    def empty(self) -> bool:
        """Nothing to send back: every result is in the (shared) buffers."""
        return not (self.infos or self.final_infos or self.errors or self.object_obs)


@dataclass(frozen=True, slots=True)
class CallReply:
    """The results of a :class:`Call` (in ``env_ids`` order), or ``None`` for :class:`SetAttr`."""

    values: list[Any] | None


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A :class:`Call`/:class:`SetAttr` that raised: the error, made picklable."""

    error: BaseException


Reply = RunReply | CallReply | ErrorReply | None


def object_leaves(tree: Any) -> list[np.ndarray]:
    """The object-dtype leaves of a buffer tree (they cannot live in shared memory)."""
    return [leaf for leaf in tree_leaves(tree) if leaf.dtype == object]


def portable_error(err: BaseException, env_id: int) -> BaseException:
    """``err`` as an error that pickles and names an env (call inside the ``except``)."""
    if isinstance(err, EnvhiveError):
        return err  # already says which env and what went wrong
    return EnvWorkerError(
        f"worker failed: {type(err).__name__}: {safe_str(err)}",
        env_id=env_id,
        worker_traceback=traceback.format_exc(),
        cause_type=type(err).__name__,
    )


class WorkerCore:
    """Handles typed commands for one slice of envs (see the module docstring).

    Args:
        runner: the slice's runner (not yet bound).
        buffers: the buffers it writes into: the pool's (or shared-memory views of them), or
            with ``local`` buffers of the slice's rows only.
        local: ``buffers`` hold only this slice (row ``i - runner.first_id`` is env ``i``), as
            a remote worker's would: the transport copies the command block and actions in
            and the results out (see :meth:`~envhive._buffers.Buffers.copy_rows`).
    """

    def __init__(self, runner: EnvRunner, buffers: Buffers, local: bool = False) -> None:
        self.runner = runner
        self.buffers = buffers
        self._row0 = runner.first_id if local else 0
        runner.bind(buffers, local=local)
        self._obs_objects = object_leaves(buffers.obs)
        self._final_objects = object_leaves(buffers.final_obs) if buffers.final_obs is not None else []
        self._act_objects = object_leaves(buffers.actions)
        self._slice = list(range(runner.first_id, runner.first_id + len(runner.envs)))
        self._ids: list[int] | None = None  # the ids of the last RUN, and whether they are
        self._whole = False  # the whole slice in order
        self._out = Completion()

    @property
    def has_object_actions(self) -> bool:
        """Whether :class:`Run` commands must carry object-typed action values."""
        return bool(self._act_objects)

    def handle(self, command: Command) -> Reply:
        """Perform ``command`` and return its reply (``None`` for :class:`Close`)."""
        if type(command) is Run:
            return self._run(command)
        if type(command) is Close:
            self.runner.close()
            return None
        try:
            if type(command) is Call:
                return CallReply(self.runner.call(command.name, command.args, command.kwargs, command.env_ids))
            if type(command) is SetAttr:
                self.runner.set_attr(command.name, command.values, command.env_ids)
                return CallReply(None)
            raise TypeError(f"unknown command {command!r}")
        except BaseException as err:
            return ErrorReply(portable_error(err, self.runner.first_id))

    def _run(self, command: Run) -> RunReply:
        ids = command.ids
        if command.big_seeds is not None:
            for i, seed in command.big_seeds.items():
                self.buffers.big_seeds[i - self._row0] = seed
        if command.object_actions is not None:
            for leaf, values in zip(self._act_objects, command.object_actions):
                leaf[self._rows(ids)] = values
        # The completion of the last RUN, reused unless its reply took its dicts: only its
        # env ids (which no reply carries) are left in it.
        out = self._out
        out.env_ids.clear()
        if ids is not self._ids:  # commands of sync calls bring the same list every time
            self._ids, self._whole = ids, ids == self._slice
        if self._whole:  # the whole slice in order: the runner's shortest path
            self.runner.run_whole(ids, command.options, out)
        else:
            self.runner.run(ids, command.options, out)
        if not (out.infos or out.final_infos or out.errors or self._obs_objects):
            return _EMPTY
        self._out = Completion()
        rows = self._rows(ids)
        objects = [leaf[rows].tolist() for leaf in self._obs_objects]
        finals = [leaf[rows].tolist() for leaf in self._final_objects] if out.final_infos else None
        return RunReply(out.infos, out.final_infos, out.errors, objects, finals)

    def _rows(self, ids: list[int]) -> list[int]:
        """The buffer rows of env ``ids``."""
        return ids if not self._row0 else [i - self._row0 for i in ids]


_EMPTY = RunReply()
