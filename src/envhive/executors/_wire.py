"""The worker core's typed commands and replies, pickled for a transport.

Every transport that carries :mod:`envhive.executors._core` objects across a process boundary
(the process executor's pipe, Ray actor calls) pickles them the same way, here: commands are
the core's own :class:`~envhive.executors._core.Run`, :class:`Call` and :class:`SetAttr`
(each with its :class:`CommandKind`, so a worker never guesses what a message is), replies its
own :class:`RunReply`, :class:`CallReply` and :class:`ErrorReply`. A reply that cannot be
pickled (an info holding a lock, an unpicklable exception) is narrowed down to errors naming
the env and the key, so the worker and its other envs carry on.

Examples:
    >>> import cloudpickle
    >>> from envhive.executors._core import CommandKind, SetAttr
    >>> decode_command(CommandKind.SET_ATTR, cloudpickle.dumps(SetAttr("x", [1], [0])))
    SetAttr(name='x', values=[1], env_ids=[0])
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import cloudpickle

from envhive._report import safe_str
from envhive.errors import ConfigError, EnvWorkerError
from envhive.executors._core import (
    Command,
    CommandKind,
    ErrorReply,
    Run,
    RunReply,
)

_MESSAGE_KINDS = (CommandKind.RUN, CommandKind.CALL, CommandKind.SET_ATTR)

__all__ = [
    "decode_command", "decode_run", "encode_command", "encode_run_reply", "encode_call_reply", "encode_error",
]


def encode_command(command: Command, what: str) -> bytes:
    """``command`` pickled for a worker; a value in it that cannot be is a :class:`ConfigError`
    (``what``: which of the caller's values, e.g. "the arguments of call('render')")."""
    try:
        return cloudpickle.dumps(command)
    except Exception as err:
        raise ConfigError(
            f"{what} cannot be sent to a worker process ({type(err).__name__}: {err})"
        ) from err


def decode_command(kind: int, message: bytes) -> Command:
    """The typed command a pipe ``message`` holds; it must be of the control block's ``kind``
    (a mismatch is a transport bug: the worker must not guess)."""
    command = cloudpickle.loads(message)
    if kind not in _MESSAGE_KINDS or CommandKind.of(command) != kind:
        raise RuntimeError(f"envhive worker: command kind {kind} but message {type(command).__name__}")
    return command


def decode_run(message: bytes, ids: list[int]) -> Run:
    """The :class:`Run` a message holds, for ``ids`` (a transport may carry the ids apart,
    as the process executor's control block does)."""
    run = decode_command(CommandKind.RUN, message)
    assert isinstance(run, Run)
    return replace(run, ids=ids) if run.ids != ids else run


def encode_run_reply(out: RunReply, ids: list[int]) -> bytes:
    """A RUN's side data, pickled. A value that cannot be pickled (an info holding a lock, a
    socket, a generator...) becomes its env's error naming the key, and the rest still
    travels: the worker and its other envs carry on."""
    try:
        return cloudpickle.dumps(out)
    except Exception:  # narrowed down env by env below
        pass
    errors = dict(out.errors)
    infos, finals = dict(out.infos), dict(out.final_infos)
    for what, table in (("info", infos), ("final info", finals)):
        for i, info in list(table.items()):
            bad = _unpicklable(info)
            if bad is not None:
                del table[i]
                errors.setdefault(i, EnvWorkerError(
                    f"the env's {what} cannot be sent from its worker process: key {bad[0]!r} "
                    f"holds a {bad[1]} ({bad[2]}); infos must be picklable on the process and ray "
                    "executors", env_id=i, cause_type="PicklingError",
                ))
    for i, err in list(errors.items()):
        if _unpicklable({"error": err}) is not None:
            errors[i] = EnvWorkerError(
                f"the env raised {type(err).__name__}, which cannot be sent from its worker "
                f"process: {safe_str(err)}", env_id=i, cause_type=type(err).__name__,
            )
    objects = [_picklable_rows(leaf, ids, errors, "observation") for leaf in out.object_obs]
    final_objects = None if out.object_final_obs is None else [
        _picklable_rows(leaf, ids, errors, "final observation") for leaf in out.object_final_obs
    ]
    return cloudpickle.dumps(RunReply(infos, finals, errors, objects, final_objects))


def _picklable_rows(values: list[Any], ids: list[int], errors: dict[int, Any], what: str) -> list[Any]:
    """One object-typed leaf's values (one per id), unpicklable ones replaced by ``None`` and
    reported as their env's error."""
    out = list(values)
    for k, (i, value) in enumerate(zip(ids, values)):
        bad = _unpicklable({what: value})
        if bad is not None:
            out[k] = None
            errors.setdefault(i, EnvWorkerError(
                f"the env's {what} cannot be sent from its worker process: a {bad[1]} ({bad[2]})",
                env_id=i, cause_type="PicklingError",
            ))
    return out


def encode_error(err: BaseException) -> bytes:
    """A failure to build or bind the envs, pickled as an :class:`ErrorReply`. An env's error
    that does not pickle (an attribute copied from the factory's own exception, see
    ``worker_error_as``) goes as a plain :class:`EnvWorkerError` with the same env, message
    and traceback."""
    try:
        return cloudpickle.dumps(ErrorReply(err))
    except Exception:
        if not isinstance(err, EnvWorkerError):
            raise
        return cloudpickle.dumps(ErrorReply(EnvWorkerError(
            err.message, env_id=err.env_id, worker_traceback=err.worker_traceback,
            cause_type=err.cause_type,
        )))


def encode_call_reply(reply: Any, env_id: int) -> bytes:
    """A CALL/SET_ATTR reply, pickled; a result that cannot be pickled becomes the error."""
    try:
        return cloudpickle.dumps(reply)
    except Exception as err:  # any pickling failure is reported the same way
        return cloudpickle.dumps(ErrorReply(EnvWorkerError(
            f"the result cannot be sent from the worker process ({type(err).__name__}: "
            f"{safe_str(err)})", env_id=env_id, cause_type="PicklingError",
        )))


def _unpicklable(mapping: dict[str, Any]) -> tuple[str, str, str] | None:
    """The first key of ``mapping`` whose value does not pickle: (key, type name, why)."""
    for key, value in mapping.items():
        try:
            cloudpickle.dumps(value)
        except Exception as err:
            return str(key), type(value).__name__, f"{type(err).__name__}: {safe_str(err)}"
    return None
