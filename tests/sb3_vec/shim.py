"""Stable-Baselines3's ``DummyVecEnv`` and ``SubprocVecEnv`` constructors, building envhive
SB3 front ends instead.

The vendored tests import ``DummyVecEnv`` and ``SubprocVecEnv`` from here instead of from
``stable_baselines3.common.vec_env`` (the only change to their code). Each one calls
:func:`envhive.make` with the list of factories and ``api="sb3"``, on the executor of the
running test (``EXECUTOR``, set by ``conftest.py``'s ``executor`` fixture):

* ``SubprocVecEnv(start_method=...)``: the process executor's ``start_method``. The serial and
  thread executors start no processes; there it has no meaning and is not passed on.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

import envhive

__all__ = ["EXECUTOR", "DummyVecEnv", "SubprocVecEnv", "close_all"]

#: The executor the next VecEnv is built on (conftest's ``executor`` fixture sets it per test).
EXECUTOR = "serial"

# Every VecEnv built during the running test, closed by the fixture at teardown: SB3's tests do
# not always close theirs, and a process pool left to the garbage collector keeps its workers
# alive meanwhile.
_BUILT: list[weakref.ref[Any]] = []


def _make(env_fns: Sequence[Callable[[], gym.Env]], start_method: str | None = None) -> Any:
    executor: Any = EXECUTOR
    if start_method is not None and EXECUTOR == "process":
        from envhive.executors import ProcessExecutor

        executor = ProcessExecutor(start_method=start_method)
    venv = envhive.make(list(env_fns), len(env_fns), api="sb3", executor=executor)
    _BUILT.append(weakref.ref(venv))
    return venv


def DummyVecEnv(env_fns: list[Callable[[], gym.Env]]) -> Any:
    """``stable_baselines3``'s ``DummyVecEnv(env_fns)``: an envhive SB3 VecEnv on ``EXECUTOR``."""
    return _make(env_fns)


def SubprocVecEnv(env_fns: list[Callable[[], gym.Env]], start_method: str | None = None) -> Any:
    """``stable_baselines3``'s ``SubprocVecEnv(env_fns, start_method)``: an envhive SB3 VecEnv
    on ``EXECUTOR`` (``start_method`` for the process executor)."""
    return _make(env_fns, start_method)


def close_all() -> None:
    """Close every VecEnv built since the last call (idempotent for ones already closed)."""
    while _BUILT:
        venv = _BUILT.pop()()
        if venv is not None:
            venv.close()
