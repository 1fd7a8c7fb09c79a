"""The envhive error hierarchy.

Every error envhive raises on purpose derives from :class:`EnvhiveError`. Messages say what
was expected, what was got, and where (which env, which worker). Errors that describe bad
arguments also derive from :class:`ValueError`/:class:`TypeError` so that generic handlers
keep working, and errors that gymnasium has a class for also derive from that class
(``gymnasium.error.ClosedEnvironmentError``, ``AlreadyPendingCallError``, ``NoAsyncCallError``,
``ResetNeeded``, ``InvalidAction``, ``UnregisteredEnv``; ``RuntimeError`` for spaces that
do not match, as gymnasium's vector envs raise), so that code written against gymnasium's
vector envs catches envhive's errors too.

Examples:
    >>> import envhive
    >>> try:
    ...     envhive.make("CartPole-v1", num_envs=2, autoreset="sometimes")
    ... except envhive.ConfigError as err:
    ...     print(type(err).__name__, isinstance(err, envhive.EnvhiveError))
    ConfigError True
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from gymnasium import error as gym_error

__all__ = [
    "EnvhiveError",
    "ConfigError",
    "ConfigTypeError",
    "UnknownEnvError",
    "SpaceMismatchError",
    "UnexpectedKeywordError",
    "ActionError",
    "ActionTypeError",
    "InvalidStateError",
    "ClosedError",
    "PendingCallError",
    "NothingPendingError",
    "ResetNeededError",
    "WaitTimeoutError",
    "EnvWorkerError",
    "WorkerDiedError",
    "StepTimeoutError",
    "ResourceError",
]


class EnvhiveError(Exception):
    """Base class of every error envhive raises on purpose."""


class ConfigError(EnvhiveError, ValueError):
    """An argument to :func:`envhive.make` or a pool method is not acceptable.

    Examples: unknown autoreset mode, ``batch_size > num_envs``, a seed list of the wrong
    length, an executor that cannot run the given envs.
    """


class ConfigTypeError(ConfigError, TypeError):
    """An argument has the wrong type, e.g. a ``reset_mask`` that is not a bool array.

    Also a :class:`TypeError`, as Python's own checks (and gymnasium's) raise for a wrong type.
    """


class UnknownEnvError(ConfigError, gym_error.UnregisteredEnv):
    """An environment id is registered neither with envhive nor with gymnasium.

    Also a ``gymnasium.error.UnregisteredEnv``, the base of what ``gymnasium.make`` raises.

    Attributes:
        env_id: the id that was asked for.
        suggestions: close matches among the registered ids (possibly empty).
    """

    def __init__(self, env_id: str, suggestions: list[str]) -> None:
        self.env_id = env_id
        self.suggestions = list(suggestions)
        hint = f" Did you mean: {', '.join(map(repr, suggestions))}?" if suggestions else ""
        super().__init__(
            f"Unknown environment id {env_id!r}: expected an id registered with envhive or "
            f"gymnasium (see envhive.list_envs()).{hint}"
        )

    def __reduce__(self) -> tuple:
        return (type(self), (self.env_id, self.suggestions))


class UnexpectedKeywordError(ConfigTypeError):
    """An env was given a keyword argument it does not take.

    Also a :class:`TypeError` with Python's own wording ("got an unexpected keyword argument
    'x'"), as a class's ``__init__`` would raise: code that probes envs with optional keywords
    and retries without them on ``TypeError`` (TorchRL's ``GymEnv`` does, with ``frameskip``)
    works with envhive's envs as with any other.
    """


class SpaceMismatchError(ConfigError, RuntimeError):
    """The envs of one pool do not share the same observation and action spaces (or, with
    ``observation_mode="different"``, observation spaces of one shape and dtype).

    Also a :class:`RuntimeError`, what gymnasium's vector envs raise for spaces that differ.
    """


class ActionError(EnvhiveError, ValueError, gym_error.InvalidAction):
    """An action batch does not fit the action space (shape, dtype or value).

    Nothing is stepped when this is raised. Also a ``gymnasium.error.InvalidAction``.
    """


class ActionTypeError(ActionError, TypeError):
    """The actions are not a batch at all (a scalar where one action per env is expected).

    Also a :class:`TypeError`, as gymnasium's vector envs raise for a scalar action batch.

    Examples:
        >>> import envhive
        >>> env = envhive.make("CartPole-v1", num_envs=2, seed=0)
        >>> _ = env.reset()
        >>> try:
        ...     env.step(0)
        ... except TypeError as err:
        ...     print(type(err).__name__, isinstance(err, envhive.ActionError))
        ActionTypeError True
        >>> env.close()
    """


class InvalidStateError(EnvhiveError, RuntimeError):
    """A call does not fit the pool's current state (see the pool's state machine)."""


class ClosedError(InvalidStateError, gym_error.ClosedEnvironmentError):
    """A method was called on a pool that has been closed.

    Also a ``gymnasium.error.ClosedEnvironmentError``.
    """


class PendingCallError(InvalidStateError, gym_error.AlreadyPendingCallError):
    """A synchronous call was made while asynchronous sends are still pending (or a send to
    an env that is still pending).

    Also a ``gymnasium.error.AlreadyPendingCallError``; ``name`` is the pending call's name
    (``"step"``, ``"reset"``) when it is one of gymnasium's ``*_async`` calls, else ``""``.
    """

    def __init__(self, message: str, name: str = "") -> None:
        Exception.__init__(self, message)  # not gymnasium's __init__, which requires a name
        self.name = name


class NothingPendingError(InvalidStateError, gym_error.NoAsyncCallError):
    """``recv()`` was called but not enough envs are in flight to fill a batch (or a
    ``*_wait`` call without its ``*_async``).

    Also a ``gymnasium.error.NoAsyncCallError``; ``name`` as for :class:`PendingCallError`.
    """

    def __init__(self, message: str, name: str = "") -> None:
        Exception.__init__(self, message)  # not gymnasium's __init__, which requires a name
        self.name = name


class ResetNeededError(InvalidStateError, gym_error.ResetNeeded):
    """An env was stepped before its first reset, or after it ended with autoreset disabled.

    Also a ``gymnasium.error.ResetNeeded``.
    """


class WaitTimeoutError(EnvhiveError, multiprocessing.TimeoutError, TimeoutError):
    """``step_wait``/``reset_wait(timeout=...)`` (or ``Pool.wait``) ran out of time.

    The envs are still running and the call stays pending: wait again for its results, or
    close the pool. Also a ``multiprocessing.TimeoutError`` (what gymnasium's
    ``AsyncVectorEnv`` raises) and a built-in :class:`TimeoutError`.
    """


class EnvWorkerError(EnvhiveError, RuntimeError):
    """An environment raised (or misbehaved) while an executor was running it.

    When an env's *factory* raised, the error is also an instance of the factory's exception
    class where the two combine (see :func:`worker_error_as`), so an ``except`` for that class
    catches it too.

    Attributes:
        env_id: index of the env in the pool.
        worker_traceback: the formatted traceback from where the env ran (a worker process,
            a thread or the calling thread).
        cause_type: the name of the original exception type.
    """

    def __init__(
        self, message: str, *, env_id: int, worker_traceback: str = "", cause_type: str = ""
    ) -> None:
        self.env_id = env_id
        self.worker_traceback = worker_traceback
        self.cause_type = cause_type
        self.message = message
        text = f"env {env_id}: {message}"
        if worker_traceback:
            text += f"\n--- traceback from the env ---\n{worker_traceback.rstrip()}"
        super().__init__(text)

    def __reduce__(self) -> tuple:
        # Keyword-only arguments defeat Exception's default pickling; errors cross processes.
        return (
            _rebuild_worker_error,
            (type(self), self.message, self.env_id, self.worker_traceback, self.cause_type),
        )


def worker_error_as(
    cause: BaseException, message: str, *, env_id: int, worker_traceback: str = ""
) -> EnvWorkerError:
    """An :class:`EnvWorkerError` that is also an instance of ``cause``'s class, when the two
    classes can be combined (else a plain one); ``cause_type`` names ``cause``'s class.

    So code written for the env's own error (SB3's ``except gym.error.DeprecatedEnv:``
    fallback to a newer id) still catches it, while ``except envhive.EnvWorkerError`` keeps
    working and the error keeps the env id and the traceback from where the env ran. The
    instance gets a copy of ``cause``'s attributes (its class's ``__init__`` is not called:
    it may take other arguments); its message is envhive's. It pickles (a worker process sends
    it) as long as ``cause``'s class can be imported where it is unpickled.

    Examples:
        >>> err = worker_error_as(KeyError("x"), "the factory raised KeyError", env_id=3)
        >>> isinstance(err, KeyError), isinstance(err, EnvWorkerError), str(err)
        (True, True, 'env 3: the factory raised KeyError')
        >>> type(err).__name__
        'EnvWorkerError[KeyError]'
    """
    kind = _combined(type(cause))
    if kind is not None:
        try:
            err = kind(message, env_id=env_id, worker_traceback=worker_traceback,
                       cause_type=type(cause).__name__)
            err.__dict__.update({k: v for k, v in vars(cause).items() if k not in err.__dict__})
            return err
        except Exception:  # a class whose instances cannot be made this way: a plain one
            pass
    return EnvWorkerError(message, env_id=env_id, worker_traceback=worker_traceback,
                          cause_type=type(cause).__name__)


# One generated class per cause class (None: the two cannot be combined). Unbounded, as the
# classes an env's factory raises are few; an entry keeps its cause class alive.
_COMBINED: dict[type, type[EnvWorkerError] | None] = {}


def _combined(cause_cls: type[BaseException]) -> type[EnvWorkerError] | None:
    """``EnvWorkerError[cause_cls]``, one class per cause class (``None``: cannot be made)."""
    if cause_cls not in _COMBINED:
        _COMBINED[cause_cls] = _make_combined(cause_cls)
    return _COMBINED[cause_cls]


def _make_combined(cause_cls: type[BaseException]) -> type[EnvWorkerError] | None:
    if issubclass(cause_cls, EnvWorkerError) or not issubclass(cause_cls, Exception):
        return None

    def __reduce__(self: EnvWorkerError) -> tuple[Any, ...]:
        # Rebuilt through the cause class (pickled by reference), not the generated class.
        state = {k: v for k, v in vars(self).items()
                 if k not in ("env_id", "worker_traceback", "cause_type", "message")}
        args = (cause_cls, self.message, self.env_id, self.worker_traceback, self.cause_type)
        return (_rebuild_combined, args, state)

    name = f"EnvWorkerError[{cause_cls.__name__}]"
    try:
        # BaseException's __str__ and __repr__: a built-in cause class (KeyError,
        # UnicodeError, ...) would otherwise format the message its own way.
        return type(name, (EnvWorkerError, cause_cls), {
            "__module__": __name__, "__qualname__": name, "__reduce__": __reduce__,
            "__str__": BaseException.__str__, "__repr__": BaseException.__repr__,
        })
    except Exception:  # incompatible layouts or metaclasses, an inconsistent MRO, a raising
        return None    # __init_subclass__: a plain EnvWorkerError then


def _rebuild_combined(
    cause_cls: type[BaseException], message: str, env_id: int, tb: str, cause: str
) -> EnvWorkerError:
    kind = _combined(cause_cls) or EnvWorkerError
    return kind(message, env_id=env_id, worker_traceback=tb, cause_type=cause)


class WorkerDiedError(EnvWorkerError):
    """A worker process died (killed, crashed, or out of memory) while running envs.

    Attributes:
        env_id: the first env of the dead worker's slice.
        env_ids: every env the worker ran.
        exitcode: the process exit code (negative: killed by that signal).
    """

    def __init__(self, message: str, *, env_ids: list[int], exitcode: int | None) -> None:
        self.env_ids = list(env_ids)
        self.exitcode = exitcode
        super().__init__(message, env_id=self.env_ids[0] if self.env_ids else -1)

    def __reduce__(self) -> tuple:
        return (_rebuild_died_error, (self.message, self.env_ids, self.exitcode))


class StepTimeoutError(WorkerDiedError):
    """A worker took longer than ``step_timeout`` for one command; it was stopped."""

    def __reduce__(self) -> tuple:
        return (_rebuild_timeout_error, (self.message, self.env_ids))


class ResourceError(EnvhiveError, OSError):
    """The OS refused something an executor needs: file descriptors, shared memory, a process
    or a thread. The message says which limit was hit and how to raise it; ``errno`` is the
    OS error's. What the executor had created before the refusal is released.

    Examples:
        >>> import errno
        >>> err = ResourceError(errno.EMFILE, "out of file descriptors")
        >>> isinstance(err, OSError), err.errno == errno.EMFILE
        (True, True)
    """


def _rebuild_timeout_error(message: str, env_ids: list[int]) -> StepTimeoutError:
    return StepTimeoutError(message, env_ids=env_ids, exitcode=None)


def _rebuild_died_error(message: str, env_ids: list[int], exitcode: int | None) -> WorkerDiedError:
    return WorkerDiedError(message, env_ids=env_ids, exitcode=exitcode)


def _rebuild_worker_error(
    cls: type[EnvWorkerError], message: str, env_id: int, tb: str, cause: str
) -> EnvWorkerError:
    return cls(message, env_id=env_id, worker_traceback=tb, cause_type=cause)
