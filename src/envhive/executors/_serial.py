"""The serial executor: every env in the calling thread. The reference for every other one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from envhive._buffers import Buffers
from envhive._report import Completion, EnvFactory, EnvProps, env_props
from envhive._runner import EnvRunner, build_envs
from envhive.executors._protocol import RunsInSend

__all__ = ["SerialExecutor"]


class SerialExecutor(RunsInSend):
    """Runs all envs in the calling thread, one after another, on ``send``.

    It is the reference semantics: the conformance suite proves every other executor gives
    the same outputs as this one.

    Examples:
        >>> import envhive
        >>> with envhive.make("CartPole-v1", num_envs=2, executor="serial", seed=0) as env:
        ...     obs, info = env.reset()
        ...     obs.shape
        (2, 4)
    """

    name = "serial"

    def __init__(self) -> None:
        self._runner: EnvRunner | None = None
        self._done = Completion()

    def launch(self, factories: Sequence[EnvFactory]) -> list[EnvProps]:
        self._claim()
        envs = build_envs(factories, first_id=0)
        self._runner = EnvRunner(envs, first_id=0)
        self._ids = list(range(len(envs)))  # never changed: the runner keeps its index
        return [env_props(env) for env in envs]

    def run_all(self, options: dict[str, Any] | None = None) -> Completion:
        """A sync call over every env (see ``Executor.run_all``): no ``Completion`` waits in
        between, and the runner reuses its index of the whole slice."""
        assert self._runner is not None
        out = Completion()
        self._runner.run_whole(self._ids, options, out)
        return out

    def bind(self, buffers: Buffers) -> None:
        assert self._runner is not None
        self._runner.bind(buffers)

    def send(self, env_ids: np.ndarray, options: dict[str, Any] | None = None) -> None:
        assert self._runner is not None
        self._runner.run(env_ids.tolist(), options, self._done)

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        assert self._runner is not None
        return self._runner.call(name, args, kwargs, env_ids)

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        assert self._runner is not None
        self._runner.set_attr(name, values, env_ids)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
