"""The native executor: one compiled kernel steps the whole batch, with no Python per env.

It runs ``envhive/...`` kernel ids only (``envhive.make("envhive/CartPole-v1", 64)`` picks it by
default). Ops come from the pool like for any executor; the kernel's compiled loop performs
them and writes into the pool's buffers. Sync steps take the ``step_all`` shortcut: the pool
plans the ops, the kernel validates the actions and steps every env in one call.

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

from envhive.errors import ConfigError, EnvWorkerError
from envhive.executors._base import Buffers, Completion, EnvFactory, EnvProps, Executor, Op

__all__ = ["NativeExecutor", "is_kernel_factory"]

_RESET, _STEP_RESET = int(Op.RESET), int(Op.STEP_RESET)


def is_kernel_factory(factory: Any) -> bool:
    """Whether ``factory`` builds an envhive kernel env (``envhive/...`` kernel ids)."""
    return getattr(factory, "preferred_executor", None) == "native" and hasattr(factory, "kernel_cls")


class NativeExecutor(Executor):
    """Steps a batch of kernel envs with one compiled call per ``send``.

    Only for ids backed by a kernel (``envhive.list_envs()`` shows them under ``envhive/``).
    There are no workers: the call runs in the caller's thread, and returns when done.

    Examples:
        >>> import envhive
        >>> from envhive.executors import NativeExecutor
        >>> env = envhive.make("envhive/Pendulum-v1", num_envs=2, executor=NativeExecutor())
        >>> env.reset(seed=1)[0].shape
        (2, 3)
        >>> env.close()
    """

    name = "native"

    def __init__(self) -> None:
        self._kernel: Any = None
        self._done = Completion()
        self._binding: Any = None

    def launch(self, factories: Sequence[EnvFactory]) -> list[EnvProps]:
        self._claim()
        first = factories[0]
        for i, f in enumerate(factories):
            if f is first and i:
                continue  # one factory for every env (an id): checked once
            if not is_kernel_factory(f):
                raise ConfigError(
                    f"env {i}: the native executor runs envhive's compiled kernels only "
                    f"(ids such as 'envhive/CartPole-v1'), got {f!r}; use executor='serial', "
                    "'thread' or 'process' for other envs"
                )
            if f.key() != first.key():  # type: ignore[attr-defined]
                raise ConfigError(
                    f"env {i}: the native executor steps one kernel with one configuration, "
                    f"got {f.key()} but env 0 has {first.key()}"  # type: ignore[attr-defined]
                )
        cls = first.kernel_cls  # type: ignore[attr-defined]
        self._kernel = k = cls(
            len(factories), max_episode_steps=first.max_episode_steps, **first.kwargs  # type: ignore[attr-defined]
        )
        self._drive = cls.driver()
        props = EnvProps(k.observation_space, k.action_space, dict(k.metadata), None, None)
        return [props] * len(factories)

    def bind(self, buffers: Buffers) -> None:
        from envhive.kernels._kernel import Binding

        k = self._kernel
        self._buffers = b = buffers
        final = b.final_obs if b.final_obs is not None else b.obs
        self._all = np.arange(k.num_envs, dtype=np.int64)
        self._binding = Binding(k, b.ops, b.obs, final, b.reward, b.terminated, b.truncated)
        self._table = self._binding.table

    def _step_all(self, actions: np.ndarray) -> tuple[int, int]:
        bad, low, done = self._drive(self._all, actions, self._table, True)
        if low:
            self._kernel.restock()
        return bad, done

    step_all = _step_all  # type: ignore[assignment]

    def send(self, env_ids: np.ndarray, options: dict[str, Any] | None = None) -> None:
        b, k = self._buffers, self._kernel
        ids = env_ids.astype(np.int64, copy=False)
        resets = b.ops[ids] == _RESET
        if np.count_nonzero(resets):
            reset_ids = ids[resets].tolist()
            if options:
                # Pool bookkeeping stays consistent: the envs are reported as failed.
                for i in reset_ids:
                    self._done.errors[i] = EnvWorkerError(
                        f"reset options are not supported by envhive kernels, got {sorted(options)}",
                        env_id=i,
                        cause_type="ConfigError",
                    )
                ids = ids[~resets]
            else:
                for i in reset_ids:
                    if b.has_seed[i]:
                        k.seed(i, int(b.seeds[i]))
                k.restock(reset_ids)  # envs reset for the first time have no stock yet
        if ids.size:
            _, low, _ = self._drive(ids, b.actions, self._table, False)
            if low:
                k.restock()
            listed = ids.tolist()
            self._done.env_ids.extend(listed)
            if b.final_obs is not None:
                # Like EnvRunner: a STEP_RESET that ended an episode reports the step's info
                # (kernels have none) as the final info.
                ended = (b.ops[ids] == _STEP_RESET) & (b.terminated[ids] | b.truncated[ids])
                for i in ids[ended].tolist():
                    self._done.final_infos[i] = {}

    def recv(self, min_count: int, timeout: float | None = None) -> Completion:
        # Every sent op already ran inside send(): hand over all of them.
        done, self._done = self._done, Completion()
        return done

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        k = self._kernel
        n = k.num_envs
        if name in ("observation_space", "action_space", "metadata", "max_episode_steps"):
            return [getattr(k, name)] * n
        if name == "render_mode":
            return [None] * n
        if name == "np_random":
            return [k.rng(i) for i in range(n)]
        if name in ("state", "elapsed"):
            return [row.copy() for row in getattr(k, name)]
        raise ConfigError(
            f"call({name!r}): a native kernel has no per-env objects; it exposes "
            "observation_space, action_space, metadata, max_episode_steps, render_mode, "
            "np_random, state and elapsed"
        )

    def set_attr(self, name: str, values: Sequence[Any]) -> None:
        raise ConfigError(
            f"set_attr({name!r}): a native kernel's envs have no attributes to set; pass "
            "keywords with make(..., env_kwargs=...) instead"
        )

    def close(self) -> None:
        self._kernel = None
        self._binding = None
