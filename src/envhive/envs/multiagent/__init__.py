"""Multi-agent envs with an agent axis (``envhive._agents``): the sources envhive wraps.

* :class:`ParallelAgents`: a PettingZoo ``ParallelEnv``.
* :class:`PlayersAgents`: a MeltingPot-style ``dm_env`` of player lists (MeltingPot's
  substrates, or :class:`Lab2dPlayers`: the dmlab2d wheel's levels, ids ``dmlab2d/<level>``).

A factory given to :func:`envhive.make` may return either kind as is: :func:`as_agent_env`
wraps it where it is built (inside the worker).

Examples:
    >>> from envhive.testing import TagTeamEnv
    >>> as_agent_env(TagTeamEnv()).agent_ids
    ('a0', 'a1', 'a2')
"""

from __future__ import annotations

from typing import Any

from envhive._agents import AgentEnv
from envhive.envs.multiagent._lab2d import LEVELS, Lab2dPlayers, dmlab2d_substrate
from envhive.envs.multiagent._parallel import ParallelAgents, is_parallel_env
from envhive.envs.multiagent._players import PlayersAgents, is_players_env

__all__ = ["ParallelAgents", "PlayersAgents", "Lab2dPlayers", "LEVELS", "as_agent_env",
           "dmlab2d_substrate", "is_multiagent"]


def is_multiagent(obj: Any) -> bool:
    """Whether ``obj`` is a multi-agent env envhive can wrap (or has wrapped)."""
    return isinstance(obj, AgentEnv) or is_parallel_env(obj) or is_players_env(obj)


def as_agent_env(obj: Any) -> AgentEnv | None:
    """``obj`` as an :class:`~envhive._agents.AgentEnv`: a PettingZoo ``ParallelEnv`` or a
    dm_env of player lists wrapped, an ``AgentEnv`` as is; ``None`` for anything else."""
    if isinstance(obj, AgentEnv):
        return obj
    if is_parallel_env(obj):
        return ParallelAgents(obj)
    if is_players_env(obj):
        return PlayersAgents(obj)
    return None
