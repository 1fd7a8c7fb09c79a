"""A PettingZoo ``ParallelEnv`` view of a multi-agent pool (``api="pettingzoo"``).

The whole pool is one parallel env whose agents are every (env, agent) pair: ``"<env>/<agent>"``
(the env's own agent ids when the pool has one env). Dicts in, dicts out, as PettingZoo's
parallel API has them; the envs step together (one pool step), each with its own episode: an
agent leaves ``agents`` when it is done, an env's agents all leave when its episode ends, and
the episode of the view ends when no agent is left (``reset()`` starts every env again). The
pool runs with autoreset disabled: in this API an agent that is done never comes back
(PettingZoo's ``parallel_api_test`` checks it). Trainers that want autoreset take the
flattened view or the pool's ``Batch`` instead.

``reset(seed=s)`` seeds env ``i`` with ``s + i``. ``step`` takes an action for every agent
alive (in ``agents``): a live agent left out of the dict, or a key that is no agent of the
view, is an :class:`~envhive.errors.ActionError` naming them and their envs, and nothing is
stepped. Actions of agents no longer alive are ignored. To let agents left out act with a
fixed valid action of their space instead, set ``missing_actions = "idle"``.

Examples:
    >>> import envhive
    >>> from envhive.testing import TagTeamEnv
    >>> env = envhive.make(TagTeamEnv, num_envs=2, api="pettingzoo")
    >>> obs, infos = env.reset(seed=0)
    >>> env.agents
    ['0/a0', '0/a1', '1/a0', '1/a1']
    >>> obs, rew, term, trunc, infos = env.step({a: 1 for a in env.agents})
    >>> rew["1/a1"]
    101.0
    >>> try:
    ...     env.step({"0/a0": 1})
    ... except envhive.ActionError as err:
    ...     print(str(err)[:74])
    step: no action for live agents '0/a1' (env 0), '1/a0', '1/a1' (env 1); ex
    >>> env.missing_actions = "idle"
    >>> len(env.step({"0/a0": 1})[0])  # every agent stepped; a2 joined at step 2
    6
    >>> env.close()
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import concatenate, create_empty_array

from envhive._batch import Batch
from envhive._infos import Column
from envhive._spaces import codec_for
from envhive.errors import ActionError, ActionTypeError, ConfigError

__all__ = ["PettingZooEnv"]

#: What ``step`` does with a live agent left out of the actions.
MISSING_ACTIONS = ("raise", "idle")


def _row_info(infos: dict[str, Column], row: int) -> dict[str, Any]:
    """The info dict one row reported (its columns where the mask is set)."""
    out: dict[str, Any] = {}
    for key, col in infos.items():
        if col.mask[row]:
            out[key] = _row_info(col.values, row) if isinstance(col.values, dict) else col.values[row]
    return out


class PettingZooEnv:
    """The pool as one PettingZoo ``ParallelEnv`` (see the module docstring).

    Args:
        pool: a pool of multi-agent envs in ``disabled`` autoreset mode.
        name: shown in ``repr``.
        missing_actions: ``"raise"`` (an ``ActionError`` when a live agent has no action) or
            ``"idle"`` (it acts with a fixed valid action of its space); also settable later
            as the attribute of that name.
    """

    metadata: dict[str, Any] = {"render_modes": [], "is_parallelizable": True}

    def __init__(self, pool: Any, name: str = "", missing_actions: str = "raise") -> None:
        if not pool.agents:
            raise ConfigError("api='pettingzoo': these envs have no agent axis (one agent each)")
        if pool.autoreset is not gym.vector.AutoresetMode.DISABLED:
            raise ConfigError("PettingZooEnv needs a pool with autoreset disabled (use make(api='pettingzoo'))")
        self.pool, self._name = pool, name
        n, ids = pool.num_envs, list(pool.agents)
        self._keys = [(i, k) for i in range(n) for k in range(len(ids))]
        self.possible_agents = [a if n == 1 else f"{i}/{a}" for i in range(n) for a in ids]
        self._index = {a: j for j, a in enumerate(self.possible_agents)}
        obs_spaces = pool.call("agent_observation_spaces", env_ids=[0])[0]
        act_spaces = pool.call("agent_action_spaces", env_ids=[0])[0]
        self.observation_spaces = {a: obs_spaces[k] for a, (_, k) in zip(self.possible_agents, self._keys)}
        self.action_spaces = {a: act_spaces[k] for a, (_, k) in zip(self.possible_agents, self._keys)}
        self._obs_codec = codec_for(pool.observation_space)
        self._act_codec = codec_for(pool.action_space)
        self._agent_acts = list(act_spaces)
        self._stacked = all(sp == act_spaces[0] for sp in act_spaces)
        self._obs_stacked = all(sp == obs_spaces[0] for sp in obs_spaces)
        # A valid action for every agent that sends none (dead agents' rows must still fit).
        self._idle = []
        for sp in act_spaces:
            sp = copy.deepcopy(sp)
            sp.seed(0)
            self._idle.append(sp.sample())
        self.agents: list[str] = []
        self.render_mode = getattr(pool.props, "render_mode", None)
        self._live = np.zeros((n, len(ids)), np.bool_)
        self.missing_actions = missing_actions

    @property
    def missing_actions(self) -> str:
        """What ``step`` does with a live agent left out of the actions: ``"raise"`` (an
        :class:`~envhive.errors.ActionError`) or ``"idle"`` (a fixed valid action)."""
        return self._missing

    @missing_actions.setter
    def missing_actions(self, value: str) -> None:
        if value not in MISSING_ACTIONS:
            raise ConfigError(f"missing_actions: expected one of {list(MISSING_ACTIONS)}, got {value!r}")
        self._missing = value

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        return len(self.possible_agents)

    @property
    def unwrapped(self) -> PettingZooEnv:
        return self

    def observation_space(self, agent: str) -> gym.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.Space:
        return self.action_spaces[agent]

    def _agent_obs(self, env_obs: Any, k: int) -> Any:
        """Agent ``k``'s observation in its env's (batched over agents, or a tuple of them)."""
        if not self._obs_stacked:
            return env_obs[k]
        if isinstance(env_obs, dict):
            return {key: self._agent_obs(v, k) for key, v in env_obs.items()}
        if isinstance(env_obs, tuple):
            return tuple(self._agent_obs(v, k) for v in env_obs)
        return env_obs[k]

    def _dicts(self, b: Batch, rows: np.ndarray) -> tuple[dict, dict, dict, dict, dict]:
        """The result of the envs in ``rows``, as PettingZoo's dicts over their agents."""
        assert b.agents is not None
        active, codec = b.agents.active, self._obs_codec
        obs, rew, term, trunc, infos = {}, {}, {}, {}, {}
        cache: dict[int, Any] = {}
        for j, (i, k) in enumerate(self._keys):
            if not (rows[i] and active[i, k]):
                continue
            a = self.possible_agents[j]
            if i not in cache:
                cache[i] = (codec.single(b.obs, i), _row_info(b.infos, i))
            env_obs, env_info = cache[i]
            obs[a] = self._agent_obs(env_obs, k)
            rew[a] = float(b.reward[i, k])
            term[a] = bool(b.agents.terminated[i, k])
            trunc[a] = bool(b.agents.truncated[i, k])
            own = env_info.get(self.pool.agents[k])
            infos[a] = dict(own) if isinstance(own, dict) else {}
        return obs, rew, term, trunc, infos

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Reset every env (env ``i`` with ``seed + i``); the observations of the agents present."""
        b = self.pool.reset(seed=seed, options=options)
        assert b.agents is not None
        self._live[:] = b.agents.active
        obs, _, _, _, infos = self._dicts(b, np.ones(self.pool.num_envs, np.bool_))
        self.agents = [a for j, a in enumerate(self.possible_agents) if self._live[self._keys[j]]]
        return obs, infos

    def _env_action(self, i: int, actions: dict[str, Any]) -> Any:
        """Env ``i``'s action row: its live agents' actions, the idle action elsewhere."""
        base = i * len(self.pool.agents)
        items = [
            actions[a] if a in actions and self._live[i, k] else self._idle[k]
            for k, a in enumerate(self.possible_agents[base:base + len(self._idle)])
        ]
        if not self._stacked:
            return tuple(items)
        space = self._agent_acts[0]
        out = create_empty_array(space, len(items), np.zeros)
        return concatenate(space, items, out)  # type: ignore[arg-type]

    def _check_actions(self, actions: Any) -> None:
        """Refuse actions that are not a dict, name no agent of the view, or (unless
        ``missing_actions == "idle"``) leave out a live agent; nothing has been sent yet."""
        if not isinstance(actions, dict):
            raise ActionTypeError(f"step: expected a dict of actions by agent, got {type(actions).__name__}")
        unknown = [a for a in actions if a not in self._index]
        if unknown:
            shown = ", ".join(map(repr, unknown[:5])) + (", ..." if len(unknown) > 5 else "")
            raise ActionError(
                f"step: actions for agents that do not exist: {shown}; this view's agents are "
                f"{self.possible_agents[:4]}{' ...' if len(self.possible_agents) > 4 else ''} "
                f"(\"<env>/<agent>\" when there are several envs); nothing was stepped")
        if self._missing == "idle":
            return
        missing = [a for a in self.agents if a not in actions]
        if missing:
            by_env: dict[int, list[str]] = {}
            for a in missing:
                by_env.setdefault(self._keys[self._index[a]][0], []).append(repr(a))
            shown = ", ".join(
                f"{', '.join(names[:4])}{', ...' if len(names) > 4 else ''} (env {i})"
                for i, names in list(by_env.items())[:4])
            raise ActionError(
                f"step: no action for live agents {shown}{' ...' if len(by_env) > 4 else ''}; "
                "expected one for every agent in env.agents (or set env.missing_actions = "
                "'idle' to have them act with a fixed valid action); nothing was stepped")

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Step every env that has an agent alive, with the actions of its agents."""
        n = self.pool.num_envs
        self._check_actions(actions)
        envs = np.flatnonzero(self._live.any(axis=1))
        if envs.size == 0:
            return {}, {}, {}, {}, {}
        batch = self._act_codec.allocate(envs.size)
        for j, i in enumerate(envs.tolist()):
            self._act_codec.write(batch, j, self._env_action(i, actions))
        try:  # a Ctrl-C between the two (or as one returns): see Pool.raised_around
            self.pool.send(batch, envs)
            b = self.pool.wait()
        except BaseException as err:
            self.pool.raised_around(err)
            raise
        assert b.agents is not None
        stepped = np.zeros(n, np.bool_)
        stepped[envs] = True
        out = self._dicts(b, stepped)
        done = b.agents.terminated | b.agents.truncated
        self._live[envs] = (b.agents.active & ~done)[envs]
        self.agents = [a for j, a in enumerate(self.possible_agents) if self._live[self._keys[j]]]
        return out

    def state(self) -> Any:
        """The envs' states (``state()`` of each env), when they have one."""
        return self.pool.call("state")

    def render(self) -> Any:
        return self.pool.call("render")

    def close(self) -> None:
        self.pool.close()

    def __repr__(self) -> str:
        return f"envhive.PettingZooEnv({self._name!r}, num_envs={self.pool.num_envs}, agents={len(self.possible_agents)})"

