"""EnvPool's typed public interface (``envpool.python.protocol``): what ``make_spec``,
``make_dm`` and ``make_gym``/``make_gymnasium`` return, as ``typing.Protocol`` classes.

Examples:
    >>> from envhive.envpool.python.protocol import GymnasiumEnvPool
    >>> GymnasiumEnvPool.__name__
    'GymnasiumEnvPool'
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

__all__ = ["EnvSpec", "EnvPool", "DMEnvPool", "GymnasiumEnvPool"]


class EnvSpec(Protocol):
    """A spec: config, state and action arrays, their dm_env specs and gymnasium spaces."""

    @property
    def config(self) -> Any:
        """The config (a namedtuple)."""

    @property
    def state_array_spec(self) -> dict[str, Any]:
        """State arrays by name."""

    @property
    def action_array_spec(self) -> dict[str, Any]:
        """Action arrays by name."""

    def observation_spec(self) -> Any:
        """dm_env specs of the observation and infos."""

    def action_spec(self) -> Any:
        """dm_env spec of the action."""

    @property
    def observation_space(self) -> Any:
        """One env's observation space."""

    @property
    def action_space(self) -> Any:
        """One env's action space."""

    @property
    def reward_threshold(self) -> float | None:
        """The reward threshold, ``None`` if none."""


class EnvPool(Protocol):
    """A pool: ``send``/``recv``, ``step``/``reset``, its config and ids."""

    spec: Any

    def __len__(self) -> int:
        """How many envs."""

    @property
    def all_env_ids(self) -> np.ndarray:
        """Every env id (int32)."""

    @property
    def is_async(self) -> bool:
        """Whether ``batch_size < num_envs``."""

    @property
    def config(self) -> dict[str, Any]:
        """The config as a dict."""

    def send(self, action: Any, env_id: np.ndarray | None = None) -> None:
        """Start stepping envs."""

    def recv(self, reset: bool = False, return_info: bool = True) -> Any:
        """The envs done."""

    def async_reset(self) -> None:
        """Start resetting every env."""

    def step(self, action: Any, env_id: np.ndarray | None = None) -> Any:
        """``send`` + ``recv``."""

    def reset(self, env_id: np.ndarray | None = None) -> Any:
        """Reset envs."""

    def render(self, env_ids: Any = None, camera_id: int | None = None) -> np.ndarray | None:
        """Frames of envs."""

    def close(self) -> None:
        """Release the pool."""


class DMEnvPool(EnvPool, Protocol):
    """A dm_env pool: ``TimeStep``s."""

    def observation_spec(self) -> Any:
        """dm_env specs of the observation and infos."""

    def action_spec(self) -> Any:
        """dm_env spec of the action."""


class GymnasiumEnvPool(EnvPool, Protocol):
    """A gymnasium pool: gymnasium's tuples, one env's spaces."""

    @property
    def num_envs(self) -> int:
        """How many envs."""

    @property
    def observation_space(self) -> Any:
        """One env's observation space."""

    @property
    def action_space(self) -> Any:
        """One env's action space."""
