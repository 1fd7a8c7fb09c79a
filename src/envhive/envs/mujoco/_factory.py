"""The factory of a compiled MuJoCo id: one env for most executors, a whole batch for ``native``.

Registered as the ``"mujoco"`` engine kind (``envhive.engines._registry``). The envs keep
their time limit inside (``max_episode_steps`` is an env keyword), so no ``TimeLimit`` wraps
them.

Examples:
    >>> from envhive.engines import compiled_env
    >>> f = mujoco_factory(compiled_env("envhive/Swimmer-v5"), {}, 7)
    >>> f().max_episode_steps, f.preferred_executor
    (7, 'native')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envhive.engines._registry import CompiledEnv, load_entry_point

if TYPE_CHECKING:
    from envhive.engines import Engine, NativeFactory
    from envhive.envs.mujoco._base import MujocoEnv

__all__ = ["MujocoFactory", "mujoco_factory"]


class MujocoFactory:
    """A picklable factory of one compiled MuJoCo env class with its keywords.

    Called, it builds one env (serial, thread and process executors); the native executor
    calls :meth:`native_engine`, which steps the whole batch in one compiled parallel call.
    """

    preferred_executor = "native"
    preferred_min_envs = 1
    engine_device: Any = None  # host arrays only

    def __init__(self, env_cls: type[MujocoEnv], kwargs: dict[str, Any]) -> None:
        self.env_cls = env_cls
        self.kwargs = dict(kwargs)
        self._bytes: int | None = None  # bytes_per_env, once measured

    def __call__(self) -> MujocoEnv:
        return self.env_cls(**self.kwargs)

    def native_engine(self, num_envs: int, num_threads: int | None = None) -> Engine:
        """The native executor's engine for ``num_envs`` of these envs."""
        from envhive.envs.mujoco._native import MujocoEngine

        return MujocoEngine(self.env_cls, num_envs, self.kwargs, num_threads)

    def native_problem(self) -> None:
        """The native engine runs every compiled MuJoCo id wherever mujoco imports."""
        return None

    def bytes_per_env(self, num_envs: int) -> int:
        """Memory one env takes: its model and data (an env of each slot, on every executor),
        twice for the Python objects and arena pages around them, measured on one env."""
        if self._bytes is None:
            env = self.env_cls(**self.kwargs)
            self._bytes = 2 * (int(env.model.nbuffer) + int(env.data.nbuffer)) + 262_144
            env.close()
        return self._bytes

    def key(self) -> tuple[Any, ...]:
        """What must be equal for two factories to share one engine."""
        return (self.env_cls, sorted(self.kwargs.items(), key=lambda kv: kv[0]))

    def __repr__(self) -> str:
        return self.env_cls.__name__


def mujoco_factory(entry: CompiledEnv, kwargs: dict[str, Any], max_episode_steps: int | None) -> NativeFactory:
    """The ``"mujoco"`` kind's factory builder: the time limit becomes the env's keyword."""
    if max_episode_steps is not None:
        kwargs = {**kwargs, "max_episode_steps": max_episode_steps}
    return MujocoFactory(load_entry_point(entry.entry_point), kwargs)


if TYPE_CHECKING:

    def _implements_factory(factory: MujocoFactory) -> NativeFactory:
        return factory  # mypy checks MujocoFactory against the NativeFactory protocol here
