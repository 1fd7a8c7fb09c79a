"""The envhive error hierarchy.

Every error envhive raises on purpose derives from :class:`EnvhiveError`. Messages say what
was expected, what was got, and where (which env, which worker). Errors that describe bad
arguments also derive from :class:`ValueError`/:class:`TypeError` so that generic handlers
keep working.

Examples:
    >>> import envhive
    >>> try:
    ...     envhive.make("CartPole-v1", num_envs=2, autoreset="sometimes")
    ... except envhive.ConfigError as err:
    ...     print(type(err).__name__, isinstance(err, envhive.EnvhiveError))
    ConfigError True
"""

from __future__ import annotations

__all__ = [
    "EnvhiveError",
    "ConfigError",
    "UnknownEnvError",
    "SpaceMismatchError",
    "UnexpectedKeywordError",
    "ActionError",
    "InvalidStateError",
    "ClosedError",
    "PendingCallError",
    "NothingPendingError",
    "ResetNeededError",
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


class UnknownEnvError(ConfigError):
    """An environment id is registered neither with envhive nor with gymnasium.

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


class UnexpectedKeywordError(ConfigError, TypeError):
    """An env was given a keyword argument it does not take.

    Also a :class:`TypeError` with Python's own wording ("got an unexpected keyword argument
    'x'"), as a class's ``__init__`` would raise: code that probes envs with optional keywords
    and retries without them on ``TypeError`` (TorchRL's ``GymEnv`` does, with ``frameskip``)
    works with envhive's envs as with any other.
    """


class SpaceMismatchError(ConfigError):
    """The envs of one pool do not share the same observation and action spaces."""


class ActionError(EnvhiveError, ValueError):
    """An action batch does not fit the action space (shape, dtype or value).

    Nothing is stepped when this is raised.
    """


class InvalidStateError(EnvhiveError, RuntimeError):
    """A call does not fit the pool's current state (see the pool's state machine)."""


class ClosedError(InvalidStateError):
    """A method was called on a pool that has been closed."""


class PendingCallError(InvalidStateError):
    """A synchronous call was made while asynchronous sends are still pending."""


class NothingPendingError(InvalidStateError):
    """``recv()`` was called but not enough envs are in flight to fill a batch."""


class ResetNeededError(InvalidStateError):
    """An env was stepped before its first reset, or after it ended with autoreset disabled."""


class EnvWorkerError(EnvhiveError, RuntimeError):
    """An environment raised (or misbehaved) while an executor was running it.

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
