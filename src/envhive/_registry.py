"""Environment ids: envhive's own registry, falling back to gymnasium's.

An id resolves to a zero-argument factory that builds one env. Factories are small picklable
objects (not lambdas) so that process executors can ship them to workers with cloudpickle and
build the env there.

Examples:
    >>> import envhive
    >>> "CartPole-v1" in envhive.list_envs()
    True
    >>> envhive.register("envhive-test/Counting-v0", "envhive.testing:CountingEnv")
    >>> envhive.make("envhive-test/Counting-v0", num_envs=2).num_envs
    2
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from envhive.engines import compiled_env, compiled_ids, native_factory
from envhive.engines._registry import builtin_compiled_ids
from envhive.envs.multiagent._lab2d import LEVELS
from envhive.errors import ConfigError, UnknownEnvError

__all__ = ["EnvSpec", "register", "list_envs", "resolve_id", "EnvFactoryFromCallable"]


@dataclass(frozen=True)
class EnvSpec:
    """An envhive registration.

    Attributes:
        id: the id used in :func:`envhive.make`.
        entry_point: ``"module:attr"`` or a callable returning a ``gymnasium.Env``.
        kwargs: default keyword arguments for the entry point.
        max_episode_steps: default time limit (``None``: none).
        executor: the executor ``executor="auto"`` picks for this id (``None``: the default).
        limit_in_env: the env takes ``max_episode_steps`` as a keyword (its own time limit)
            instead of being wrapped in gymnasium's ``TimeLimit``.
        executor_min_envs: ``auto`` uses ``executor`` only from this many envs on.
    """

    id: str
    entry_point: str | Callable[..., gym.Env]
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None
    executor: str | None = None
    limit_in_env: bool = False
    executor_min_envs: int = 2


_ENVHIVE: dict[str, EnvSpec] = {}
# envhive's built-in envs that are not compiled: they run on threads (mujoco releases the GIL),
# which pay for their hand-offs from 2 envs on when the physics is expensive (Humanoid).
_BUILTIN: dict[str, EnvSpec] = {
    f"envhive/{name}": EnvSpec(
        f"envhive/{name}",
        f"envhive.envs.mujoco:{cls}",
        executor="thread",
        limit_in_env=True,
        executor_min_envs=min_envs,
    )
    for name, (cls, min_envs) in {
        "Humanoid-v5": ("HumanoidEnv", 2),
    }.items()
}


# The dmlab2d wheel's levels: multi-agent envs (an agent axis), kept out of gymnasium's
# registry (its vector API has no agent axis). ``env_kwargs``: num_players, settings, world_obs.
_MULTIAGENT: dict[str, EnvSpec] = {
    f"dmlab2d/{level}": EnvSpec(
        f"dmlab2d/{level}", "envhive.envs.multiagent:dmlab2d_substrate", {"level": level},
        executor="process",
    )
    for level in LEVELS
}


def register(
    id: str,
    entry_point: str | Callable[..., gym.Env],
    *,
    kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    executor: str | None = None,
) -> None:
    """Register an env id with envhive (it takes precedence over a gymnasium id of that name).

    ``executor`` names the executor ``make(..., executor="auto")`` picks for the id (e.g.
    ``"thread"`` for envs whose step releases the GIL); ``None`` keeps the default.

    Examples:
        >>> register("envhive-test/Counting-v0", "envhive.testing:CountingEnv", max_episode_steps=5)
    """
    _ENVHIVE[id] = EnvSpec(id, entry_point, dict(kwargs or {}), max_episode_steps, executor)


def list_envs() -> list[str]:
    """Every id :func:`envhive.make` accepts: envhive's, then gymnasium's, sorted.

    Examples:
        >>> "Pendulum-v1" in list_envs()
        True
    """
    own = sorted({*_ENVHIVE, *compiled_ids(), *_BUILTIN, *_MULTIAGENT})
    return own + sorted(k for k in gym.registry if k not in own)


def builtin_ids() -> list[str]:
    """The ids envhive itself implements (its compiled families' and the MuJoCo envs)."""
    return sorted({*builtin_compiled_ids(), *_BUILTIN})


def _load(entry_point: str | Callable[..., gym.Env]) -> Callable[..., gym.Env]:
    if callable(entry_point):
        return entry_point
    module, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module), attr)


class EnvFactoryFromCallable:
    """A picklable factory: ``fn(**kwargs)``, optionally wrapped in gymnasium's TimeLimit."""

    def __init__(
        self,
        fn: Callable[..., gym.Env],
        kwargs: dict[str, Any],
        max_episode_steps: int | None,
        preferred_executor: str | None = None,
        preferred_min_envs: int = 2,
    ) -> None:
        self.fn = fn
        self.kwargs = kwargs
        self.max_episode_steps = max_episode_steps
        #: What ``executor="auto"`` picks for a batch of at least ``preferred_min_envs`` of
        #: these (``None``: the default).
        self.preferred_executor = preferred_executor
        self.preferred_min_envs = preferred_min_envs

    def __call__(self) -> gym.Env:
        env = self.fn(**self.kwargs)
        if self.max_episode_steps is not None and not isinstance(env, gym.Env):
            from envhive.envs.multiagent import (
                as_agent_env,  # a multi-agent env: its time limit too
            )

            env = as_agent_env(env) or env
        if self.max_episode_steps is not None and isinstance(env, gym.Env):
            env = gym.wrappers.TimeLimit(env, self.max_episode_steps)
        return env

    def __repr__(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))


class GymIdFactory:
    """A picklable factory that calls ``gymnasium.make(id, **kwargs)`` where it runs."""

    def __init__(self, id: str, kwargs: dict[str, Any], max_episode_steps: int | None) -> None:
        self.id = id
        self.kwargs = kwargs
        self.max_episode_steps = max_episode_steps

    def __call__(self) -> gym.Env:
        _import_plugin(self.id)
        extra: dict[str, Any] = {}
        if self.max_episode_steps is not None:
            extra["max_episode_steps"] = self.max_episode_steps
        return gym.make(self.id, **self.kwargs, **extra)

    def __repr__(self) -> str:
        return self.id


# Namespaces whose envs live in a package that registers them when imported.
_PLUGINS = {"ALE": "ale_py"}


def _import_plugin(env_id: str) -> None:
    namespace = env_id.split("/", 1)[0] if "/" in env_id else None
    module = _PLUGINS.get(namespace or "")
    if module and env_id not in gym.registry:
        try:
            gym.register_envs(importlib.import_module(module))
        except ImportError:
            pass


def resolve_id(
    env_id: str, env_kwargs: dict[str, Any] | None, max_episode_steps: int | None
) -> tuple[Callable[[], gym.Env], str]:
    """Turn an id into (factory, display name); unknown ids raise with close matches."""
    kwargs = dict(env_kwargs or {})
    spec = _ENVHIVE.get(env_id) or _BUILTIN.get(env_id) or _MULTIAGENT.get(env_id)
    if spec is not None:
        steps = max_episode_steps if max_episode_steps is not None else spec.max_episode_steps
        fn = _load(spec.entry_point)
        if spec.limit_in_env and steps is not None:
            kwargs["max_episode_steps"], steps = steps, None
        factory = EnvFactoryFromCallable(fn, {**spec.kwargs, **kwargs}, steps, spec.executor,
                                         spec.executor_min_envs)
        return factory, env_id
    compiled = compiled_env(env_id)
    if compiled is not None:  # its engine kind builds the factory (engines._registry)
        return native_factory(compiled, kwargs, max_episode_steps), env_id
    _import_plugin(env_id)
    try:
        gym.spec(env_id)
    except gym.error.Error as err:
        matches = difflib.get_close_matches(env_id, list_envs(), n=3, cutoff=0.6)
        if matches or "not found" in str(err).lower() or "doesn't exist" in str(err).lower():
            raise UnknownEnvError(env_id, matches) from None
        raise ConfigError(f"env id {env_id!r}: {err}") from None
    return GymIdFactory(env_id, kwargs, max_episode_steps), env_id
