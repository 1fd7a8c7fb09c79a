"""MeltingPot-style ``dm_env``s (lists of per-player observations and rewards) with an agent axis.

MeltingPot's substrates are ``dm_env.Environment``s whose ``observation_spec()`` and
``action_spec()`` are lists with one entry per player, and whose time steps hold a list of
per-player observation dicts and a list (or array) of per-player rewards. :class:`PlayersAgents`
runs any such env as an :class:`~envhive._agents.AgentEnv`: players ``player_0`` ... are the
agents, all active for the whole episode, which ends when the time step is LAST (terminated
when its discount is 0, else truncated). dm_env's ``reset()`` takes no seed: a seeded reset
calls the env's ``seed(seed)`` first when it has one (dmlab2d substrates here do; for another
env, seed it in its factory).

dm_env specs become gymnasium spaces (:func:`spec_space`): a scalar bounded int spec is a
``Discrete``, a vector one a ``MultiDiscrete`` (with ``start``), other arrays ``Box``es, dicts
``Dict``s; specs of strings or objects are dropped from observations.

Examples:
    >>> import numpy as np
    >>> from dm_env import specs
    >>> spec_space(specs.BoundedArray((), np.int32, 0, 7))
    Discrete(8)
    >>> spec_space(specs.BoundedArray((2,), np.int32, [0, -1], [4, 1]))
    MultiDiscrete([5 3], start=[ 0 -1])
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envhive._agents import AgentEnv
from envhive.errors import ConfigError

__all__ = ["PlayersAgents", "is_players_env", "spec_space"]


def is_players_env(obj: Any) -> bool:
    """Whether ``obj`` is a dm_env-like env with one action spec per player (a list)."""
    try:
        return (callable(getattr(obj, "action_spec", None)) and callable(getattr(obj, "step", None))
                and isinstance(obj.action_spec(), (list, tuple)))
    except Exception:  # an env whose spec cannot be read is not one
        return False


def spec_space(spec: Any) -> gym.Space | None:
    """The gymnasium space of a dm_env spec (``None`` for specs of strings or objects)."""
    if isinstance(spec, dict):
        kids = {k: spec_space(v) for k, v in spec.items()}
        return gym.spaces.Dict({k: v for k, v in kids.items() if v is not None})
    dtype = np.dtype(spec.dtype)
    if dtype.kind not in "biuf":
        return None
    if hasattr(spec, "num_values"):  # DiscreteArray
        return gym.spaces.Discrete(int(spec.num_values))
    shape = tuple(spec.shape)
    low = getattr(spec, "minimum", None)
    if dtype.kind in "iu" and low is not None:
        lo = np.broadcast_to(np.asarray(low, np.int64), shape)
        hi = np.broadcast_to(np.asarray(spec.maximum, np.int64), shape)
        if not shape:
            return gym.spaces.Discrete(int(hi - lo + 1), start=int(lo))
        return gym.spaces.MultiDiscrete(hi - lo + 1, start=lo)
    if low is not None:
        return gym.spaces.Box(np.broadcast_to(low, shape).astype(dtype),
                              np.broadcast_to(spec.maximum, shape).astype(dtype), shape, dtype)
    if dtype.kind == "f":
        return gym.spaces.Box(-np.inf, np.inf, shape, dtype)
    if dtype == np.bool_:
        return gym.spaces.MultiBinary(shape) if shape else gym.spaces.Discrete(2)
    info = np.iinfo(dtype)
    return gym.spaces.Box(info.min, info.max, shape, dtype)


class PlayersAgents(AgentEnv):
    """A dm_env of player lists (MeltingPot's substrates) with an agent axis.

    Args:
        env: the dm_env; ``action_spec()`` is a list with one spec per player.
        agent_ids: names of the players (default ``player_0``, ``player_1``, ...).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, env: Any, agent_ids: list[str] | None = None) -> None:
        if not is_players_env(env):
            raise ConfigError(
                f"expected a dm_env whose action_spec() is a list (one spec per player, as "
                f"MeltingPot's substrates), got {type(env).__name__}"
            )
        self.dm_env = env
        act_specs, obs_specs = list(env.action_spec()), list(env.observation_spec())
        self._init_agents(agent_ids or [f"player_{k}" for k in range(len(act_specs))])
        if not len(act_specs) == len(obs_specs) == self.num_agents:
            raise ConfigError(
                f"{type(env).__name__}: expected one observation and action spec per player "
                f"({self.num_agents}), got {len(obs_specs)} and {len(act_specs)}"
            )
        obs_spaces = [spec_space(s) for s in obs_specs]
        act_spaces = [spec_space(s) for s in act_specs]
        if any(s is None for s in obs_spaces + act_spaces):
            raise ConfigError(f"{type(env).__name__}: a player's spec has no numeric array form")
        self._init_spaces(obs_spaces, act_spaces)  # type: ignore[arg-type]
        self._keys = [list(s.spaces) if isinstance(s, gym.spaces.Dict) else None for s in obs_spaces]

    def _observe(self, timestep: Any) -> tuple[Any, np.ndarray]:
        # The spec's entries only (strings and objects are dropped), each written once:
        # into the pool's row while it runs an op (AgentEnv._stack_obs).
        items = [
            {k: o[k] for k in keys} if keys is not None else o
            for o, keys in zip(timestep.observation, self._keys)
        ]
        reward = timestep.reward
        rewards = np.zeros(self.num_agents) if reward is None else np.asarray(reward, np.float64)
        return self._stack_obs(items), rewards

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Reset the dm_env (seeded through its ``seed(seed)`` when given a seed)."""
        if seed is not None:
            seeder = getattr(self.dm_env, "seed", None)
            if not callable(seeder):
                raise ConfigError(
                    f"{type(self.dm_env).__name__} takes no seed (dm_env's reset() has none): "
                    "seed it in its factory instead"
                )
            seeder(seed)
        obs, _ = self._observe(self.dm_env.reset())
        self.agent_terminated[:] = False
        self.agent_truncated[:] = False
        self.active[:] = True
        return obs, {}

    def step(self, action: Any) -> tuple[Any, np.ndarray, bool, bool, dict[str, Any]]:
        """Step every player with its row of ``action``."""
        rows = list(self._action_rows(action))
        timestep = self.dm_env.step(rows)
        obs, rewards = self._observe(timestep)
        last = bool(timestep.last())
        term = last and timestep.discount is not None and float(np.max(timestep.discount)) == 0.0
        trunc = last and not term
        self.agent_terminated[:] = term
        self.agent_truncated[:] = trunc
        return obs, rewards, term, trunc, {}

    def close(self) -> None:
        close = getattr(self.dm_env, "close", None)
        if callable(close):
            close()
