"""gymnasium's vector-env constructors, building envhive pools instead.

The vendored tests import ``SyncVectorEnv``, ``AsyncVectorEnv`` and ``make_vec`` from here
instead of from gymnasium (the only change to their code besides import paths). Each one maps
gymnasium's keyword arguments onto :func:`envhive.make` with the list of factories, on the
executor of the running test (``EXECUTOR``, set by ``conftest.py``'s ``executor`` fixture):

* ``copy``, ``observation_mode``, ``autoreset_mode``: passed on (same meaning).
* ``shared_memory``: no envhive counterpart. The process executor always keeps array leaves
  in shared memory and sends object leaves (Text, Graph, custom spaces) as messages.
* ``context``: the process executor's ``start_method``.
* ``daemon``: envhive's worker processes are always daemonic.
* ``worker``: a custom gymnasium worker function cannot drive envhive's workers (refused).
* ``max_concurrency``: no envhive counterpart (``num_workers`` bounds parallelism instead).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

import envhive

__all__ = ["EXECUTOR", "SyncVectorEnv", "AsyncVectorEnv", "make_vec", "close_all"]

#: The executor the next pool is built on (conftest's ``executor`` fixture sets it per test).
EXECUTOR = "serial"

# Every pool built during the running test, closed by the fixture at teardown: gymnasium's
# tests do not always close their envs, and a process pool left to the garbage collector keeps
# its workers alive meanwhile.
_BUILT: list[weakref.ref[envhive.VectorEnv]] = []


def _executor(context: str | None) -> Any:
    if context is not None and EXECUTOR == "process":
        from envhive.executors import ProcessExecutor

        return ProcessExecutor(start_method=context)
    return EXECUTOR


def _make(env_fns: Sequence[Callable[[], gym.Env]], *, context: str | None = None,
          **kwargs: Any) -> envhive.VectorEnv:
    env = envhive.make(list(env_fns), len(env_fns), executor=_executor(context), **kwargs)
    _BUILT.append(weakref.ref(env))
    return env


def SyncVectorEnv(
    env_fns: Sequence[Callable[[], gym.Env]],
    copy: bool = True,
    observation_mode: Any = "same",
    autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
) -> envhive.VectorEnv:
    """``gymnasium.vector.SyncVectorEnv``'s signature, an envhive pool on ``EXECUTOR``."""
    return _make(env_fns, copy=copy, observation_mode=observation_mode, autoreset=autoreset_mode)


def AsyncVectorEnv(
    env_fns: Sequence[Callable[[], gym.Env]],
    shared_memory: bool = True,
    copy: bool = True,
    context: str | None = None,
    daemon: bool = True,
    worker: Callable[..., None] | None = None,
    observation_mode: Any = "same",
    autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
    max_concurrency: int | None = None,
) -> envhive.VectorEnv:
    """``gymnasium.vector.AsyncVectorEnv``'s signature, an envhive pool on ``EXECUTOR``."""
    if worker is not None:
        raise NotImplementedError("envhive runs its own workers; a gymnasium worker cannot be used")
    return _make(env_fns, context=context, copy=copy, observation_mode=observation_mode,
                 autoreset=autoreset_mode)


def make_vec(
    id: str,
    num_envs: int = 1,
    vectorization_mode: Any = None,
    vector_kwargs: dict[str, Any] | None = None,
    wrappers: Sequence[Callable[[gym.Env], gym.Wrapper]] | None = None,
    **kwargs: Any,
) -> envhive.VectorEnv:
    """``gymnasium.make_vec`` for ``"sync"``/``"async"``: an envhive pool on ``EXECUTOR``."""
    vector_kwargs = dict(vector_kwargs or {})
    autoreset = vector_kwargs.pop("autoreset_mode", AutoresetMode.NEXT_STEP)
    vector_kwargs.pop("shared_memory", None)
    context = vector_kwargs.pop("context", None)

    def factory() -> gym.Env:
        env = gym.make(id, **kwargs)
        for wrapper in wrappers or ():
            env = wrapper(env)
        return env

    return _make([factory] * num_envs, context=context, autoreset=autoreset, **vector_kwargs)


def close_all() -> None:
    """Close every pool built since the last call (idempotent for pools already closed)."""
    while _BUILT:
        env = _BUILT.pop()()
        if env is not None:
            env.close()
