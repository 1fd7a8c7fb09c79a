"""The native executor: compiled code steps the whole batch, with no Python per env.

It runs the ids envhive compiles: the classic-control kernels (``envhive/CartPole-v1`` ...) and
the MuJoCo envs that have a compiled step (``envhive/HalfCheetah-v5``, ``envhive/Ant-v5`` ...;
``envhive.make`` picks it by default for them). Ops come from the pool like for any executor;
an *engine* built by the ids' factory performs them and writes into the pool's buffers. Sync
steps take the ``step_all`` shortcut: the pool plans the ops, the engine validates the actions
and steps every env in one call.

The engine protocol is :class:`envhive.engines.Engine` (``step_all`` returns an
:class:`envhive.engines.StepAllResult`, whose step infos are neutral columns, one value per
env); which engine runs an id is registered in ``envhive.engines`` (``compiled_env``).

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
from envhive.engines import AsyncEngine, Engine, NativeFactory
from envhive.errors import ConfigError
from envhive.executors._protocol import RunsInSend

__all__ = ["NativeExecutor", "is_native_factory"]


def is_native_factory(factory: Any) -> bool:
    """Whether ``factory`` can build a native engine (envhive's compiled ids)."""
    return isinstance(factory, NativeFactory)


class NativeExecutor(RunsInSend):
    """Steps a batch of compiled envs with one compiled call per ``send``.

    Only for ids envhive compiles (``envhive.list_envs()`` shows them under ``envhive/``).
    Most engines have no workers: the call runs in the caller's thread and returns when done,
    and engines that parallelize (MuJoCo) use up to ``num_threads`` threads inside that call.
    An :class:`~envhive.engines.AsyncEngine` (a threaded engine's C++ threads) runs beside the
    caller: ``send`` starts its ops and ``recv`` collects the first finished.

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
        self._engine: Engine | None = None
        #: The engine again when it runs its envs beside the caller (``send`` starts, ``recv``
        #: collects), else ``None``: decided once, at launch, by the protocol it meets.
        self._async: AsyncEngine | None = None
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
        assert isinstance(first, NativeFactory)  # checked above
        engine = first.native_engine(len(factories), self.num_threads)
        self._engine = engine
        self._async = engine if isinstance(engine, AsyncEngine) else None
        # Engines whose envs live in tensors (TorchEngine) write results on their device.
        self.resident_device = engine.device
        return [engine.props] * len(factories)

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A buffer of the pool: a plain array (the engines write into the pool's rows)."""
        return np.zeros(shape, dtype=dtype)

    def _live(self) -> Engine:
        engine = self._engine
        if engine is None:
            raise ConfigError("the native executor has no engine (not launched, or closed)")
        return engine

    def bind(self, buffers: Buffers) -> None:
        engine = self._live()
        engine.bind(buffers)
        self._buffers = buffers
        # The executor protocol's optional fast paths (declared in executors._protocol), which
        # the pool reads once, after bind: the engine's own bound methods, so a step costs no
        # frame of this executor.
        self.step_all = engine.step_all
        self.take_finished = self._async.take_finished if self._async is not None else None

    def send(self, env_ids: np.ndarray, options: dict[str, Any] | None = None) -> None:
        ids = env_ids.astype(np.int64, copy=False)
        if self._async is not None:
            self._async.start(ids, options)  # returns before the ops finish
        else:
            self._live().run(ids, options, self._done)

    def recv(self, min_count: int) -> Completion:
        if self._async is not None:
            return self._async.collect(min_count)
        return super().recv(min_count)

    def discard(self) -> None:
        if self._async is not None:
            self._async.discard()
        else:
            super().discard()

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        return self._live().call(name, args, kwargs, env_ids)

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        self._live().set_attr(name, values, env_ids)

    def describe(self) -> str:
        threads = self._engine.num_threads if self._engine is not None else 1
        return f"native, {threads} threads" if threads > 1 else "native"

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
        self._engine = self._async = None
