"""One kernel env as a plain ``gymnasium.Env``, and the factory that the registry hands out.

The ``native`` executor runs a whole batch in one kernel. Every other executor (serial,
thread, process) runs :class:`KernelEnv` objects, each a kernel of one env stepped by the same
compiled code, so that an ``envhive/...`` id gives the same numbers on every executor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from envhive._ops import RESET, STEP
from envhive.errors import ActionError, ConfigError
from envhive.kernels._kernel import Binding, Kernel

if TYPE_CHECKING:
    from collections.abc import Callable

    from envhive.engines import CompiledEnv, Engine, NativeFactory

__all__ = ["KernelEnv", "KernelFactory", "kernel_factory", "bench_peers"]


class KernelEnv(gym.Env):
    """A kernel of one env behind the ``gymnasium.Env`` API (time limit included).

    Args:
        kernel_cls: the kernel family.
        max_episode_steps: time limit (``None``: the family's default; ``0``: none).
        **kwargs: the family's keywords.

    Examples:
        >>> from envhive.kernels import CartPoleKernel
        >>> env = KernelEnv(CartPoleKernel)
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(1)
        >>> obs.dtype.name, reward, terminated, truncated
        ('float32', 1.0, False, False)
    """

    def __init__(
        self, kernel_cls: type[Kernel], max_episode_steps: int | None = None, **kwargs: Any
    ) -> None:
        self.kernel = k = kernel_cls(1, max_episode_steps=max_episode_steps, **kwargs)
        self.observation_space = k.observation_space
        self.action_space = k.action_space
        self.metadata = dict(k.metadata)
        self.render_mode = None
        self._drive = kernel_cls.driver()
        self._ids = np.zeros(1, np.int64)
        self._ops = np.zeros(1, np.int8)
        shape: tuple[int, ...] = self.action_space.shape or ()
        dtype = self.action_space.dtype
        self._actions = np.zeros((1, *shape), dtype)
        obs_shape: tuple[int, ...] = self.observation_space.shape or ()
        self._obs = np.zeros((1, *obs_shape), self.observation_space.dtype)
        self._reward = np.zeros(1, np.float64)
        self._term = np.zeros(1, np.bool_)
        self._trunc = np.zeros(1, np.bool_)
        self._started = False
        self._binding = Binding(k, self._ops, self._obs, self._obs, self._reward, self._term, self._trunc)

    def _run(self, op: int, validate: bool) -> int:
        self._ops[0] = op
        bad, low, _ = self._drive(self._ids, self._actions, self._binding.table, validate)
        if low:
            self.kernel.restock()
        return int(bad)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode; ``seed`` restarts the env's generator, as in gymnasium."""
        if options:
            raise ConfigError(
                f"{self.kernel.id}: reset options are not supported by envhive kernels, "
                f"got {sorted(options)}"
            )
        if seed is not None:
            self.kernel.seed(0, seed)
        self.kernel.restock([0])  # the first reset: no stock yet
        self._run(RESET, validate=False)
        self._started = True
        return self._obs[0].copy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One step; ``truncated`` comes from the env's own time limit."""
        if not self._started:
            raise gym.error.ResetNeeded("call reset() before step()")
        try:
            self._actions[0] = action
        except (TypeError, ValueError) as err:
            raise ActionError(f"{self.kernel.id}: action {action!r} is not in {self.action_space}: {err}") from None
        if self._run(STEP, validate=True) >= 0:
            raise ActionError(f"{self.kernel.id}: action {action!r} is outside {self.action_space}")
        return (
            self._obs[0].copy(),
            float(self._reward[0]),
            bool(self._term[0]),
            bool(self._trunc[0]),
            {},
        )


class KernelFactory:
    """A picklable zero-argument factory for an ``envhive/...`` kernel id.

    Calling it builds a :class:`KernelEnv` (for the serial, thread and process executors); the
    ``native`` executor calls :meth:`native_engine` instead, one kernel for the whole batch.

    Examples:
        >>> from envhive.kernels import CartPoleKernel
        >>> KernelFactory(CartPoleKernel, {}, None)().action_space
        Discrete(2)
    """

    #: The executor ``executor="auto"`` picks for a batch of these (from 2 envs on).
    preferred_executor = "native"
    preferred_min_envs = 2
    engine_device: Any = None  # host arrays only

    def __init__(
        self, kernel_cls: type[Kernel], kwargs: dict[str, Any], max_episode_steps: int | None
    ) -> None:
        self.kernel_cls = kernel_cls
        self.kwargs = dict(kwargs)
        self.max_episode_steps = max_episode_steps
        # Fail at make() time, not inside a worker: build a throwaway 1-env kernel's config.
        kernel_cls(0, max_episode_steps=max_episode_steps, **self.kwargs)

    def __call__(self) -> KernelEnv:
        return KernelEnv(self.kernel_cls, self.max_episode_steps, **self.kwargs)

    def native_engine(self, num_envs: int, num_threads: int | None = None) -> Engine:
        """The native executor's engine: one kernel of ``num_envs`` envs (single-threaded)."""
        from envhive.kernels._engine import KernelEngine

        return KernelEngine(
            self.kernel_cls(num_envs, max_episode_steps=self.max_episode_steps, **self.kwargs)
        )

    def native_problem(self) -> None:
        """The native engine runs kernels wherever envhive runs (numba is a dependency)."""
        return None

    def bytes_per_env(self, num_envs: int) -> int:
        """Memory one env of ``num_envs`` takes: a kernel's row and the pool's
        (``Kernel.bytes_per_env``, from a kernel of no envs)."""
        return self.kernel_cls(0, max_episode_steps=self.max_episode_steps, **self.kwargs).bytes_per_env(num_envs)

    def key(self) -> tuple[Any, ...]:
        """What must be equal for two factories to share one kernel."""
        return (self.kernel_cls, sorted(self.kwargs.items()), self.max_episode_steps)

    def __repr__(self) -> str:
        return self.kernel_cls.id


def kernel_factory(entry: CompiledEnv, kwargs: dict[str, Any], max_episode_steps: int | None) -> NativeFactory:
    """The ``"kernel"`` engine kind's factory builder (``engines._registry``)."""
    from envhive.engines import load_entry_point

    return KernelFactory(load_entry_point(entry.entry_point), kwargs, max_episode_steps)


def bench_peers(entry: CompiledEnv, num_envs: int) -> list[tuple[str, str, Callable[[], Any]]]:
    """``envhive bench``'s peer for a kernel id: gymnasium's own env of ``Kernel.gym_id``,
    numpy-vectorized where gymnasium has that."""
    from envhive.engines import load_entry_point
    from envhive.engines._peers import gymnasium_peers

    return gymnasium_peers(load_entry_point(entry.entry_point).gym_id, num_envs)


if TYPE_CHECKING:

    def _implements_factory(factory: KernelFactory) -> NativeFactory:
        return factory  # mypy checks KernelFactory against the NativeFactory protocol here
