"""PettingZoo ``ParallelEnv``s as pool rows with an agent axis.

:class:`ParallelAgents` wraps one ``ParallelEnv`` (anything with PettingZoo's parallel API:
``possible_agents``, ``agents``, ``observation_space(agent)``, ``action_space(agent)``,
``reset(seed=, options=)`` and ``step(actions)`` of dicts; pettingzoo itself is not imported)
as an :class:`~envhive._agents.AgentEnv`: observations of every possible agent stacked along
the agent axis (zeros for agents not in the result), actions split back into a dict for the
agents alive, rewards and flags per agent. An envhive factory may simply return the
``ParallelEnv``: :func:`as_agent_env` wraps it where it is built, inside the worker.

Examples:
    >>> from envhive.testing import TagTeamEnv
    >>> env = ParallelAgents(TagTeamEnv())
    >>> env.agent_ids, env.observation_space.shape
    (('a0', 'a1', 'a2'), (3, 4))
    >>> obs, info = env.reset(seed=3)
    >>> env.active.tolist()
    [True, True, False]
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space, create_empty_array, iterate

from envhive._agents import AgentEnv, env_end
from envhive.errors import ConfigError

__all__ = ["ParallelAgents", "is_parallel_env"]


def is_parallel_env(obj: Any) -> bool:
    """Whether ``obj`` has PettingZoo's parallel API (duck-typed: pettingzoo is optional).

    A class is not one, even with ``possible_agents`` as a class attribute: it is a factory.
    """
    return (
        not isinstance(obj, type) and hasattr(obj, "possible_agents") and callable(getattr(obj, "observation_space", None))
        and callable(getattr(obj, "action_space", None)) and callable(getattr(obj, "step", None))
        and callable(getattr(obj, "reset", None))
    )


def _pad(space: gym.Space) -> Any:
    """A zero value of ``space`` (what an agent absent from a result shows)."""
    return next(iter(iterate(batch_space(space, 1), create_empty_array(space, 1, np.zeros))))


class ParallelAgents(AgentEnv):
    """One PettingZoo ``ParallelEnv`` with an agent axis (see the module docstring).

    Args:
        env: the parallel env; its ``possible_agents`` fix the agent axis, in their order.
    """

    def __init__(self, env: Any) -> None:
        if not is_parallel_env(env):
            raise ConfigError(
                f"expected a PettingZoo ParallelEnv (possible_agents, observation_space(agent), "
                f"action_space(agent), reset, step), got {type(env).__name__}"
            )
        self.par_env = env
        self._init_agents(list(env.possible_agents))
        ids = self.agent_ids
        # Equal spaces are batched (agent_space), different ones are a Tuple of them.
        self._init_spaces([env.observation_space(a) for a in ids], [env.action_space(a) for a in ids])
        self._pads = [_pad(s) for s in self.agent_observation_spaces]
        # What the flag arrays hold, kept in Python: most steps change none of them, and a
        # list compare costs less than numpy's per-call overhead on a few elements.
        self._flags_set = False
        self._active_list = [False] * len(ids)
        self.metadata = dict(getattr(env, "metadata", {}) or {})
        self.render_mode = getattr(env, "render_mode", None)

    def _stack(self, obs: dict[Any, Any]) -> tuple[Any, list[bool]]:
        """The stacked observation and the ``active`` flags (set here too) of a result."""
        active = [a in obs for a in self.agent_ids]
        if active != self._active_list:  # agents come and go rarely: a list compare is cheaper
            self.active[:] = self._active_list = active
        pads = self._pads
        items = [obs[a] if on else pads[k] for k, (a, on) in enumerate(zip(self.agent_ids, active))]
        return self._stack_obs(items), active

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Reset the parallel env; the observation has every possible agent's row."""
        obs, infos = self.par_env.reset(seed=seed, options=options)
        self.agent_terminated[:] = False
        self.agent_truncated[:] = False
        self._flags_set = False
        return self._stack(obs)[0], _agent_infos(infos)

    def step(self, action: Any) -> tuple[Any, np.ndarray, bool, bool, dict[str, Any]]:
        """Step the agents alive with their rows of ``action`` (the others' are ignored)."""
        par, ids = self.par_env, self.agent_ids
        live = par.agents
        if len(live) > 8:  # many agents: a set's lookups beat the list's scans
            live = set(live)
        actions = {a: act for a, act in zip(ids, self._action_rows(action)) if a in live}
        obs, rewards, terms, truncs, infos = par.step(actions)
        te = [bool(terms.get(a, False)) for a in ids]
        tr = [bool(truncs.get(a, False)) for a in ids]
        ended = True in te or True in tr
        if ended or self._flags_set:  # else both are all False already: nothing to write
            self.agent_terminated[:] = te
            self.agent_truncated[:] = tr
            self._flags_set = ended
        stacked, active = self._stack(obs)
        reward = np.array([float(rewards.get(a, 0.0)) for a in ids])
        term, trunc = env_end(te, tr, active)
        if not (term or trunc) and not par.agents:  # the env says it is over
            term = True
        return stacked, reward, term, trunc, _agent_infos(infos)

    def render(self) -> Any:
        return self.par_env.render()

    def close(self) -> None:
        self.par_env.close()

    def __getattr__(self, name: str) -> Any:
        # ``call``/``get_wrapper_attr`` reach the parallel env's own attributes (``state()``).
        if name.startswith("_") or name == "par_env":
            raise AttributeError(name)
        return getattr(self.par_env, name)


def _agent_infos(infos: dict[Any, Any]) -> dict[str, Any]:
    """The per-agent infos worth keeping (non-empty ones), keyed by agent."""
    return {str(a): i for a, i in infos.items() if i} if infos else {}
