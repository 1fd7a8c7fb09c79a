"""envhive's own ids in gymnasium's registry, so that gymnasium users get them too.

After ``import envhive``, ``gymnasium.make_vec("envhive/CartPole-v1", num_envs=64)`` returns an
``envhive.VectorEnv`` (through the spec's ``vector_entry_point``), and
``gymnasium.make("envhive/CartPole-v1")`` one env. Without importing envhive first, use
``gymnasium.make_vec("envhive:envhive/CartPole-v1", ...)``: gymnasium imports the module named
before the colon.

The time limit is the env's own (truncation inside the kernel), so the gymnasium specs carry no
``max_episode_steps`` and gymnasium adds no ``TimeLimit`` wrapper; ``max_episode_steps=`` is
passed to the env instead.

Examples:
    >>> import gymnasium as gym, envhive
    >>> env = gym.make_vec("envhive/CartPole-v1", num_envs=4)
    >>> type(env).__name__, env.num_envs
    ('VectorEnv', 4)
    >>> env.close()
    >>> gym.make("envhive/CartPole-v1").action_space
    Discrete(2)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

__all__ = ["register_with_gymnasium", "make_single", "make_vector"]

# make() options the vector entry point accepts as keywords; everything else is an env kwarg.
_MAKE_OPTIONS = ("executor", "num_workers", "batch_size", "autoreset", "seed", "copy")


def _refuse_render(envhive_id: str, render_mode: str | None) -> None:
    if render_mode is not None:
        from envhive.errors import ConfigError

        raise ConfigError(f"{envhive_id}: render_mode={render_mode!r} is not supported (only None)")


def make_single(
    envhive_id: str, max_episode_steps: int | None = None, render_mode: str | None = None, **kwargs: Any
) -> gym.Env:
    """gymnasium ``entry_point`` of an envhive id: one env, built like envhive builds it."""
    from envhive._registry import resolve_id

    _refuse_render(envhive_id, render_mode)
    factory, _ = resolve_id(envhive_id, kwargs, max_episode_steps)
    return factory()


def make_vector(
    envhive_id: str,
    num_envs: int = 1,
    max_episode_steps: int | None = None,
    render_mode: str | None = None,
    **kwargs: Any,
) -> gym.vector.VectorEnv:
    """gymnasium ``vector_entry_point`` of an envhive id: an :class:`envhive.VectorEnv`.

    ``executor``, ``num_workers``, ``batch_size``, ``autoreset``, ``seed`` and ``copy`` go to
    :func:`envhive.make`; other keywords are the env's.
    """
    from envhive._make import make

    _refuse_render(envhive_id, render_mode)
    options = {k: kwargs.pop(k) for k in _MAKE_OPTIONS if k in kwargs}
    return make(
        envhive_id,
        num_envs,
        env_kwargs=kwargs or None,
        max_episode_steps=max_episode_steps,
        **options,
    )


def register_with_gymnasium(ids: list[str]) -> None:
    """Register ``ids`` (envhive ids) with gymnasium; ids gymnasium already has are kept."""
    for env_id in ids:
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=f"{__name__}:make_single",
            vector_entry_point=f"{__name__}:make_vector",
            kwargs={"envhive_id": env_id},
            disable_env_checker=True,
        )
