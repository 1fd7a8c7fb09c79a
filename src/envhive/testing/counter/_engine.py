"""The counter's engine and factory: what a C++ family on the threaded core writes in Python.

:class:`CounterEngine` is :class:`~envhive.engines._threaded.ThreadedEngine` over the compiled
``_counter`` module with the counter's spaces; :class:`CounterFactory` builds one
:class:`~envhive.testing.counter.CounterEnv` per env for the general executors, the engine for
the native executor, and says what an env takes in memory.

Examples:
    >>> import envhive
    >>> env = envhive.make("envhive/Counter-v0", num_envs=2, executor="native", seed=1)
    >>> env.reset()[0].shape
    (2, 4)
    >>> env.close()
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from envhive._report import EnvProps
from envhive.engines._protocol import NativeProblem
from envhive.engines._registry import CompiledEnv
from envhive.engines._threaded import ThreadedEngine
from envhive.errors import ConfigError
from envhive.testing.counter._env import CounterEnv, check_options

try:
    from envhive.testing.counter import _counter  # type: ignore[attr-defined]
except ImportError:  # no C++ compiler at install, or not Linux
    _counter = None

if TYPE_CHECKING:
    from envhive.engines import AsyncEngine, Engine, NativeFactory

__all__ = ["CounterEngine", "CounterFactory", "counter_factory"]

ID = "envhive/Counter-v0"


class CounterEngine(ThreadedEngine):
    """A batch of counters stepped by C++ threads (``num_threads`` runners with the caller)."""

    what = "the counter's native engine"

    def __init__(self, num_envs: int, options: dict[str, Any], num_threads: int | None = None) -> None:
        seeds = [int.from_bytes(os.urandom(8), "little", signed=True) for _ in range(num_envs)]
        super().__init__(_counter, num_envs, num_threads, check_options(options), seeds, ID)
        probe = CounterEnv(**options)
        self.props = EnvProps(probe.observation_space, probe.action_space, dict(CounterEnv.metadata), None, None)


class CounterFactory:
    """A picklable factory of counters with these options (see the module docstring)."""

    preferred_executor = "native"
    preferred_min_envs = 1
    engine_device: Any = None

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = check_options(options)

    def __call__(self) -> CounterEnv:
        return CounterEnv(**self.options)

    def native_problem(self) -> NativeProblem | None:
        """Without its C++ module (no compiler at install) the counter runs in Python."""
        if _counter is None:
            return NativeProblem("the counter's C++ module is not built", "process")
        return None

    def native_engine(self, num_envs: int, num_threads: int | None = None) -> Engine:
        if _counter is None:
            raise ConfigError("executor='native': the counter's C++ module is not built")
        return CounterEngine(num_envs, self.options, num_threads)

    def bytes_per_env(self, num_envs: int) -> int:
        """An env's state and slot in C++, its info columns, its rows of the pool's buffers."""
        return 256

    def key(self) -> tuple[Any, ...]:
        return ("counter", sorted(self.options.items()))

    def __repr__(self) -> str:
        return ID


def counter_factory(entry: CompiledEnv, kwargs: dict[str, Any], max_episode_steps: int | None) -> NativeFactory:
    """The ``"counter"`` kind's factory builder: the time limit is the counter's ``limit``."""
    if max_episode_steps is not None:
        kwargs = {**kwargs, "limit": max_episode_steps}
    return CounterFactory(kwargs)


if TYPE_CHECKING:

    def _implements_factory(factory: CounterFactory) -> NativeFactory:
        return factory

    def _implements_engine(engine: CounterEngine) -> Engine:
        return engine

    def _implements_async(engine: CounterEngine) -> AsyncEngine:
        return engine

