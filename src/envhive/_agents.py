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

Observations are stacked along the agent axis by :meth:`AgentEnv._stack_obs`: while envhive's
runner performs an op, ``obs_out`` is the env's row of the pool's buffers, and the agents'
observations are written straight into it (one copy from the env's arrays to the pool's,
checked against the agent's space as the pool checks any observation); outside an op (an env
used on its own) they go into a new array.

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
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from envhive._spaces import Codec, codec_for
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

    Subclasses call :meth:`_init_agents` with the possible agents, set
    ``observation_space``/``action_space`` (the agents' spaces batched with
    :func:`agent_space`; :meth:`_init_spaces` does it from the agents' spaces), and keep
    ``agent_terminated``, ``agent_truncated`` and ``active`` up to date in ``reset`` and
    ``step``; ``step`` returns ``(obs, rewards (num_agents,), terminated, truncated, info)``
    with the env-level flags.
    """

    agent_ids: tuple[str, ...] = ()
    #: The row of the pool's buffers the op being run writes its observation into (set and
    #: cleared by envhive's runner around each op), or ``None``: :meth:`_stack_obs` makes a
    #: new array.
    obs_out: Any = None
    _obs_codec: Codec | None = None
    _obs_stacked = True
    _act_iterate = False

    def _init_agents(self, agent_ids: Sequence[Any]) -> None:
        ids = tuple(agent_ids)
        if not ids:
            raise ConfigError(f"{type(self).__name__}: expected at least one possible agent, got none")
        self.agent_ids = ids
        n = len(ids)
        self.agent_terminated = np.zeros(n, np.bool_)
        self.agent_truncated = np.zeros(n, np.bool_)
        self.active = np.zeros(n, np.bool_)

    def _init_spaces(self, obs_spaces: Sequence[gym.Space], act_spaces: Sequence[gym.Space]) -> None:
        """Set the agents' spaces (in ``agent_ids`` order) and the env's, batched where equal."""
        #: Each agent's own spaces, in ``agent_ids`` order.
        self.agent_observation_spaces = tuple(obs_spaces)
        self.agent_action_spaces = tuple(act_spaces)
        self.observation_space = agent_space(obs_spaces)
        self.action_space = agent_space(act_spaces)
        self._obs_stacked = all(s == obs_spaces[0] for s in obs_spaces)
        codec = codec_for(obs_spaces[0]) if self._obs_stacked else None
        # Array leaves are written row by row; object leaves (Text, Graph) batch as gymnasium does.
        self._obs_codec = codec if codec is not None and not codec.has_objects() else None
        # A batched Box/MultiDiscrete/MultiBinary of actions is an array whose rows are the
        # agents' actions (gymnasium's iterate() is iter() for them): no dispatch per step.
        plain = (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
        stacked = all(s == act_spaces[0] for s in act_spaces)
        self._act_iterate = stacked and not isinstance(self.action_space, plain)

    def _action_rows(self, action: Any) -> Any:
        """The agents' actions in ``agent_ids`` order, from a value of ``action_space``."""
        return iterate(self.action_space, action) if self._act_iterate else action

    def _stack_obs(self, items: Sequence[Any]) -> Any:
        """The agents' observations (``agent_ids`` order) as one value of
        ``observation_space``: written into ``obs_out`` when set (checked per agent, as the
        pool checks an observation: a mismatch raises ``ValueError``), else a new array."""
        codec = self._obs_codec
        if codec is None:
            if not self._obs_stacked:
                return tuple(items)
            space = self.agent_observation_spaces[0]
            batch: Any = create_empty_array(space, len(items), np.zeros)
            return concatenate(space, items, batch)
        out = self.obs_out
        if out is None:
            out = codec.allocate(len(items))
        write = codec.write
        for k, item in enumerate(items):
            write(out, k, item)
        return out

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


def env_end(terminated: Sequence[Any], truncated: Sequence[Any], active: Sequence[Any]) -> tuple[bool, bool]:
    """The env-level flags from the agents' (sequences of bools, one per agent): ended when
    every active agent is done (an env with no active agent has ended too); truncated if any
    agent was truncated, else terminated. Plain Python: a few agents' flags are cheaper to
    read one by one than with numpy's per-call cost."""
    trunc = False
    for te, tr, on in zip(terminated, truncated, active):
        if on:
            if not (te or tr):
                return False, False
            trunc = trunc or bool(tr)
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
