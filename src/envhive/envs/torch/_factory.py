"""The ``"torch"`` engine kind's factory: one env (a batch of 1) for most executors, the
whole batch as one :class:`~envhive.envs.torch.TorchEngine` for ``native``.

Examples:
    >>> from envhive.engines import compiled_env
    >>> f = torch_factory(compiled_env("envhive/TorchCartPole-v1"), {}, None)
    >>> f().action_space, f.preferred_executor
    (Discrete(2), 'native')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from envhive.engines import load_entry_point
from envhive.engines._peers import gymnasium_peers
from envhive.envs.torch._engine import TorchBatchedEnv, TorchEngine
from envhive.errors import ConfigError

__all__ = ["TorchSingleEnv", "TorchEnvFactory", "torch_factory", "class_factory", "bench_peers"]


class TorchSingleEnv(gym.Env):
    """One env of a :class:`TorchBatchedEnv` (a batch of 1) behind ``gymnasium.Env``, with
    numpy in and out: what the serial, thread and process executors run for a torch id, so
    that it gives the native executor's numbers on every executor.

    Examples:
        >>> from envhive.envs.torch import TorchCartPole
        >>> env = TorchSingleEnv(TorchCartPole, {})
        >>> obs, info = env.reset(seed=0)
        >>> obs.dtype.name, env.step(1)[1]
        ('float32', 1.0)
    """

    def __init__(self, env_cls: type[TorchBatchedEnv], kwargs: dict[str, Any]) -> None:
        self.batch = env_cls(1, **kwargs)
        self.observation_space = self.batch.single_observation_space
        self.action_space = self.batch.single_action_space
        self.metadata = dict(self.batch.metadata)
        self.render_mode = None
        self._ids = self.batch.torch.zeros(1, dtype=self.batch.torch.int64, device=self.batch.device)
        self._started = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode (``seed`` restarts the env's generator, as in gymnasium)."""
        if options:
            raise ConfigError(f"reset options are not supported by torch batched envs, got {sorted(options)}")
        obs = self.batch.reset_envs(self._ids, [seed])
        self._started = True
        return obs[0].cpu().numpy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One step of the single env."""
        if not self._started:
            raise gym.error.ResetNeeded("call reset() before step()")
        torch = self.batch.torch
        acts = torch.as_tensor(np.asarray(action)[None], device=self.batch.device)
        obs, reward, term, trunc = self.batch.step_envs(acts, self._ids)
        return obs[0].cpu().numpy(), float(reward[0]), bool(term[0]), bool(trunc[0]), {}


def torch_factory(entry: Any, kwargs: dict[str, Any], max_episode_steps: int | None) -> TorchEnvFactory:
    """The ``"torch"`` engine kind's factory builder (``engines._registry``)."""
    return TorchEnvFactory(load_entry_point(entry.entry_point), kwargs, max_episode_steps)


def class_factory(env_cls: type, kwargs: dict[str, Any], max_episode_steps: int | None) -> TorchEnvFactory | None:
    """The ``"torch"`` kind's factory of a :class:`TorchBatchedEnv` subclass given to
    ``envhive.make`` as it is (``make(MyTorchEnv, 64)``), else ``None``."""
    if isinstance(env_cls, type) and issubclass(env_cls, TorchBatchedEnv):
        return TorchEnvFactory(env_cls, kwargs, max_episode_steps)
    return None


def bench_peers(entry: Any, num_envs: int) -> list[tuple[str, str, Any]]:
    """``envhive bench``'s peer for a torch id: gymnasium's env it reproduces, if it names one."""
    gym_id = load_entry_point(entry.entry_point).gym_id
    return gymnasium_peers(gym_id, num_envs) if gym_id else []


class TorchEnvFactory:
    """A picklable factory for a torch batched env id (or class): one env (a batch of 1) when
    called, for the serial, thread and process executors; a :class:`TorchEngine` of the whole
    batch for the native executor, which ``executor="auto"`` picks.

    Examples:
        >>> from envhive.envs.torch import TorchCartPole
        >>> TorchEnvFactory(TorchCartPole, {}, None)().action_space
        Discrete(2)
    """

    preferred_executor = "native"
    preferred_min_envs = 1

    def __init__(self, env_cls: type[TorchBatchedEnv], kwargs: dict[str, Any], max_episode_steps: int | None) -> None:
        self.env_cls = env_cls
        self.kwargs = dict(kwargs)
        if max_episode_steps is not None:
            self.kwargs["max_episode_steps"] = max_episode_steps
        #: Where the native engine builds the batch when ``kwargs`` names no device (set by
        #: ``make(device=...)``: a torch env then lives where its results are wanted).
        self.engine_device: Any = None
        env_cls(0, **self.kwargs)  # bad keywords fail at make(), not inside a worker

    def __call__(self) -> TorchSingleEnv:
        return TorchSingleEnv(self.env_cls, self.kwargs)

    def native_engine(self, num_envs: int, num_threads: int | None = None) -> TorchEngine:
        """The whole batch as one torch env (on ``engine_device`` unless ``kwargs`` say)."""
        kwargs = dict(self.kwargs)
        if self.engine_device is not None:
            kwargs.setdefault("device", self.engine_device)
        return TorchEngine(self.env_cls(num_envs, **kwargs))

    def native_problem(self) -> None:
        """A torch batched env runs on the native engine wherever torch imports."""
        return None

    def bytes_per_env(self, num_envs: int) -> int:
        """Memory one env takes: the tensors of a batch of one (its state), and its rows of
        the pool's buffers."""
        from envhive._buffers import BufferSpec

        env = self.env_cls(1, **self.kwargs)
        torch = env.torch
        state = sum(t.numel() * t.element_size() for t in vars(env).values() if isinstance(t, torch.Tensor))
        rows = BufferSpec(1, env.single_observation_space, env.single_action_space, with_final_obs=True)
        return int(state) + rows.bytes_per_env()

    def key(self) -> tuple[Any, ...]:
        """What must be equal for two factories to share one batch."""
        return (self.env_cls, sorted(self.kwargs.items()))

    def __repr__(self) -> str:
        return self.env_cls.__name__


if TYPE_CHECKING:
    from envhive.engines import NativeFactory

    def _implements_factory(factory: TorchEnvFactory) -> NativeFactory:
        return factory  # mypy checks TorchEnvFactory against the NativeFactory protocol here
