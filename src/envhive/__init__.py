"""envhive: step many reinforcement-learning environments as one batch.

One pool API over every way of running envs (serial, threads, processes, native kernels),
gymnasium's vector API and EnvPool's async ``send``/``recv`` on the same object, and exact
autoreset semantics (``next_step``, ``same_step``, ``disabled``) written once for all of them.

Examples:
    >>> import envhive
    >>> with envhive.make("CartPole-v1", num_envs=4, seed=0) as env:
    ...     obs, info = env.reset()
    ...     obs, rew, term, trunc, info = env.step(env.action_space.sample())
    ...     rew.shape
    (4,)
"""

from __future__ import annotations

from gymnasium.vector import AutoresetMode

from envhive import _gym_register, _registry
from envhive._make import make
from envhive._registry import list_envs, register
from envhive.errors import (
    ActionError,
    ActionTypeError,
    ClosedError,
    ConfigError,
    ConfigTypeError,
    EnvhiveError,
    EnvWorkerError,
    InvalidStateError,
    NothingPendingError,
    PendingCallError,
    ResetNeededError,
    ResourceError,
    SpaceMismatchError,
    StepTimeoutError,
    UnexpectedKeywordError,
    UnknownEnvError,
    WaitTimeoutError,
    WorkerDiedError,
)
from envhive.frontends._gymnasium import VectorEnv

__version__ = "0.1.0"

# envhive's own ids become gymnasium ids too (gymnasium.make_vec("envhive/CartPole-v1", ...)).
_gym_register.register_with_gymnasium(_registry.builtin_ids())

__all__ = [
    "make",
    "VectorEnv",
    "AutoresetMode",
    "register",
    "list_envs",
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
    "__version__",
]
