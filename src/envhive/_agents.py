"""The agent axis: a multi-agent env is one row of the pool with an axis of agents.

A multi-agent env (a PettingZoo ``ParallelEnv``, a dmlab2d substrate, a MeltingPot-style
``dm_env`` of player lists) runs in the pool as an :class:`AgentEnv`: a ``gymnasium.Env`` whose
observation, action and reward carry a leading axis over its fixed set of possible agents
(``agent_ids``), in that order. Its spaces are the agents' spaces batched over that axis where
they agree (:func:`agent_space`: ``Box(A, ...)``, ``MultiDiscrete`` of ``A`` ...), else a
``Tuple`` of them. Its ``step`` returns the env-level flags the pool's bookkeeping and autoreset
read (the episode ended for the env), and keeps the per-agent ones in three arrays the runner
copies into the pool's buffers (``BufferSpec.agents``):

* ``active[a]``: agent ``a`` is in this op's result (PettingZoo: a key of the returned
  observation dict): its observation, reward and flags in the row are real. Agents that were
  dead before the step, or have not joined yet, are inactive: zero observation, reward 0,
  flags False. (PufferLib's mask.)
* ``agent_terminated[a]`` / ``agent_truncated[a]``: this op ended agent ``a``.

Episode rule (:func:`env_end`, :func:`end_agents`): an env's episode ends when every agent in
its result is done, or when the env (or a wrapper such as gymnasium's ``TimeLimit``) says so;
then every agent still in it gets the env's flag. The env-level flag is ``truncated`` when
some agent was truncated at the end, else ``terminated``.

Examples:
    >>> from gymnasium import spaces
    >>> agent_space([spaces.Discrete(3)] * 2)
    MultiDiscrete([3 3])
    >>> env_end(np.array([True, False]), np.array([False, True]), np.array([True, True]))
    (False, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from envhive.errors import ConfigError

__all__ = ["AgentEnv", "AgentRows", "agent_ids_of", "agent_space", "end_agents", "env_end"]


class AgentRows(NamedTuple):
    """The per-agent part of a pool's result (``Batch.agents``): ``(rows, num_agents)`` bools."""

    #: This op ended the agent (terminal state).
    terminated: Any
    #: This op ended the agent by a limit (no terminal state).
    truncated: Any
    #: The agent is in the row's result (see the module docstring); inactive rows are padding.
    active: Any


class AgentEnv(gym.Env):  # type: ignore[type-arg]
    """A multi-agent env behind ``gymnasium.Env`` with an agent axis (see the module docstring).

    Subclasses set ``observation_space``/``action_space`` (the agents' spaces batched with
    :func:`agent_space`), call :meth:`_init_agents` with the possible agents, and keep
    ``agent_terminated``, ``agent_truncated`` and ``active`` up to date in ``reset`` and
    ``step``; ``step`` returns ``(obs, rewards (num_agents,), terminated, truncated, info)``
    with the env-level flags.
    """

    agent_ids: tuple[str, ...] = ()

    def _init_agents(self, agent_ids: Sequence[Any]) -> None:
        ids = tuple(agent_ids)
        if not ids:
            raise ConfigError(f"{type(self).__name__}: expected at least one possible agent, got none")
        self.agent_ids = ids
        n = len(ids)
        self.agent_terminated = np.zeros(n, np.bool_)
        self.agent_truncated = np.zeros(n, np.bool_)
        self.active = np.zeros(n, np.bool_)

    @property
    def num_agents(self) -> int:
        """How many possible agents (the length of the agent axis)."""
        return len(self.agent_ids)


def agent_ids_of(env: gym.Env) -> tuple[str, ...]:
    """The possible agents of a built env (``()``: a single-agent env, no agent axis)."""
    core = getattr(env, "unwrapped", env)
    return tuple(core.agent_ids) if isinstance(core, AgentEnv) else ()


def agent_space(spaces: Sequence[gym.Space]) -> gym.Space:
    """The agents' spaces along one axis: batched (``gymnasium.vector.utils.batch_space``)
    when they are all equal, else a ``Tuple`` of them, one entry per agent.

    Examples:
        >>> from gymnasium import spaces
        >>> agent_space([spaces.Box(0, 1, (2,))] * 3).shape
        (3, 2)
        >>> type(agent_space([spaces.Discrete(2), spaces.Discrete(3)])).__name__
        'Tuple'
    """
    first = spaces[0]
    if all(s == first for s in spaces[1:]):
        return batch_space(first, len(spaces))
    return gym.spaces.Tuple(tuple(spaces))


def env_end(terminated: np.ndarray, truncated: np.ndarray, active: np.ndarray) -> tuple[bool, bool]:
    """The env-level flags from the agents': ended when every active agent is done (an env
    with no active agent has ended too); truncated if any agent was truncated, else terminated."""
    done = terminated | truncated
    if np.count_nonzero(active & ~done):
        return False, False
    trunc = bool(np.count_nonzero(truncated & active))
    return not trunc, trunc


def end_agents(
    terminated: bool, truncated: bool, agent_terminated: np.ndarray, agent_truncated: np.ndarray,
    active: np.ndarray,
) -> None:
    """When the env's episode ended, give every active agent not yet done the env's flag (in
    place): no agent row looks alive past its env's end, whoever ended it (a ``TimeLimit``).

    Examples:
        >>> at, au = np.array([True, False]), np.zeros(2, bool)
        >>> end_agents(False, True, at, au, np.array([True, True])); au.tolist()
        [False, True]
    """
    if not (terminated or truncated):
        return
    live = active & ~(agent_terminated | agent_truncated)
    if np.count_nonzero(live):
        (agent_truncated if truncated else agent_terminated)[live] = True
