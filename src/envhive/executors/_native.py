"""The native executor: compiled code steps the whole batch, with no Python per env.

It runs the ids envhive compiles: the classic-control kernels (``envhive/CartPole-v1`` ...) and
the MuJoCo envs that have a compiled step (``envhive/HalfCheetah-v5``, ``envhive/Ant-v5`` ...;
``envhive.make`` picks it by default for them). Ops come from the pool like for any executor;
an *engine* built by the ids' factory performs them and writes into the pool's buffers. Sync
steps take the ``step_all`` shortcut: the pool plans the ops, the engine validates the actions
and steps every env in one call.

The engine protocol (duck-typed; see ``envhive.kernels._engine.KernelEngine``):

* ``props``: the envs' :class:`~envhive.executors.EnvProps` (one object for all of them);
* ``bind(buffers)``: attach the pool's buffers;
* ``step_all(actions) -> (bad, done, step_infos, reset_infos)``: run every env's op with the
  caller's batch; ``bad`` is ``-1`` or the first env whose action is outside the action space
  (then nothing ran), ``done`` counts stepped envs whose episode ended, ``step_infos`` are the
  step infos of every env batched as gymnasium does (``None``: no infos), ``reset_infos`` the
  non-empty reset infos of the envs this call reset;
* ``run(ids, options, completion)``: the general path, ops of ``ids`` with the buffers' actions;
* ``call``, ``set_attr``, ``close``.

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envhive/CartPole-v1", num_envs=8, seed=0)
    >>> env
    envhive.VectorEnv('envhive/CartPole-v1', num_envs=8, executor='native (auto)', autoreset='next_step')
    >>> obs, info = env.reset()
    >>> obs, rew, term, trunc, info = env.step(np.zeros(8, dtype=np.int64))
    >>> rew.sum()
    np.float64(8.0)
    >>> env.close()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from envhive._buffers import Buffers
from envhive._report import Completion, EnvFactory, EnvProps
from envhive.errors import ConfigError
from envhive.executors._protocol import Executor

__all__ = ["NativeExecutor", "is_native_factory"]


def is_native_factory(factory: Any) -> bool:
    """Whether ``factory`` can build a native engine (envhive's compiled ids)."""
    return callable(getattr(factory, "native_engine", None))


class NativeExecutor(Executor):
    """Steps a batch of compiled envs with one compiled call per ``send``.

    Only for ids envhive compiles (``envhive.list_envs()`` shows them under ``envhive/``).
    There are no workers: the call runs in the caller's thread and returns when done. Engines
    that parallelize (MuJoCo) use up to ``num_threads`` threads inside that call.

    Args:
        num_threads: threads for engines that parallelize a step (``None``: one per core).

    Examples:
        >>> import envhive
        >>> from envhive.executors import NativeExecutor
        >>> env = envhive.make("envhive/Pendulum-v1", num_envs=2, executor=NativeExecutor())
        >>> env.reset(seed=1)[0].shape
        (2, 3)
        >>> env.close()
    """

    name = "native"

    def __init__(self, num_threads: int | None = None) -> None:
        if num_threads is not None and (
            isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1
        ):
            raise ConfigError(f"num_threads: expected a positive int or None, got {num_threads!r}")
        self.num_threads = num_threads
        self._engine: Any = None
        self._done = Completion()

    def launch(self, factories: Sequence[EnvFactory]) -> list[EnvProps]:
        self._claim()
        first = factories[0]
        for i, f in enumerate(factories):
            if f is first and i:
                continue  # one factory for every env (an id): checked once
            if not is_native_factory(f):
                raise ConfigError(
                    f"env {i}: the native executor runs envhive's compiled envs only "
                    f"(ids such as 'envhive/CartPole-v1' or 'envhive/Ant-v5'), got {f!r}; use "
                    "executor='serial', 'thread' or 'process' for other envs"
                )
            if f.key() != first.key():  # type: ignore[attr-defined]
                raise ConfigError(
                    f"env {i}: the native executor steps one batch with one configuration, "
                    f"got {f.key()} but env 0 has {first.key()}"  # type: ignore[attr-defined]
                )
        self._engine = first.native_engine(len(factories), self.num_threads)  # type: ignore[attr-defined]
        return [self._engine.props] * len(factories)

    def bind(self, buffers: Buffers) -> None:
        self._engine.bind(buffers)
        self._buffers = buffers

    def _step_all(self, actions: np.ndarray) -> Any:
        return self._engine.step_all(actions)

    step_all = _step_all  # type: ignore[assignment]

    def send(self, env_ids: np.ndarray, options: dict[str, Any] | None = None) -> None:
        self._engine.run(env_ids.astype(np.int64, copy=False), options, self._done)

    def recv(self, min_count: int) -> Completion:
        # Every sent op already ran inside send(): hand over all of them.
        done, self._done = self._done, Completion()
        return done

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        return self._engine.call(name, args, kwargs)  # type: ignore[no-any-return]

    def set_attr(self, name: str, values: Sequence[Any]) -> None:
        self._engine.set_attr(name, values)

    def describe(self) -> str:
        threads = getattr(self._engine, "num_threads", None)
        return f"native, {threads} threads" if threads and threads > 1 else "native"

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
        self._engine = None
