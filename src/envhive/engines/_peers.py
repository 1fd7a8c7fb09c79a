"""The gymnasium peers ``envhive bench`` measures compiled ids against (one definition).

An engine kind names its peers with a ``PeerBuilder`` (``engines._registry``); the kinds that
reproduce a gymnasium env use these: gymnasium's ``SyncVectorEnv`` of the reference env, or
its numpy-vectorized ``vector_entry_point`` where gymnasium has one (the fastest it has).

Examples:
    >>> [label for label, _, _ in gymnasium_peers("CartPole-v1", 4)]
    ['gymnasium vector_entry_point']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

__all__ = ["SYNC", "VECTOR", "gymnasium_peers", "EnvPoolPeer"]

SYNC = "gymnasium SyncVectorEnv"
VECTOR = "gymnasium vector_entry_point"


def gymnasium_peers(gym_id: str, num_envs: int, vectorized: bool = True) -> list[tuple[str, str, Callable[[], Any]]]:
    """``[(label, gym_id, build)]``: the vectorized env if gymnasium has one (and
    ``vectorized``), else ``SyncVectorEnv``."""
    if vectorized and gym.spec(gym_id).vector_entry_point is not None:
        return [(VECTOR, gym_id, lambda: gym.make_vec(gym_id, num_envs=num_envs,
                                                      vectorization_mode="vector_entry_point"))]
    return [(SYNC, gym_id, lambda: gym.vector.SyncVectorEnv([lambda: gym.make(gym_id)] * num_envs,
                                                             copy=False))]


class EnvPoolPeer:
    """An EnvPool pool as the bench measures vector envs: ``action_space`` the batched space
    the bench samples from (in the dtype EnvPool checks), ``reset(seed=)`` (EnvPool seeds at
    ``make``, so the seed is not passed on), ``step`` and ``close``."""

    def __init__(self, env: Any, action_space: gym.Space) -> None:
        self.env = env
        self.action_space = action_space

    def reset(self, seed: int | None = None) -> Any:
        return self.env.reset()

    def step(self, actions: Any) -> Any:
        return self.env.step(actions)

    def close(self) -> None:
        self.env.close()
