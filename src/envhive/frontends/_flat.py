"""The flattened view of a multi-agent pool: agents folded into the batch axis, with a mask.

Parameter-sharing trainers (and PufferLib) see a multi-agent batch as a single-agent one whose
rows are (env, agent) pairs. :class:`FlatAgents` is that view of a pool with an agent axis: it
has the pool's interface (``reset``, ``step``, ``send``/``recv``, ``wait``, ``call``, ...), so
the single-agent front ends take it as they take a pool (``envhive.make(...,
agent_layout="flat")``). Row ``env * num_agents + k`` is agent ``k`` of env ``env``:

* ``obs``, ``final_obs``, ``reward``: the agent's; ``terminated``/``truncated``: the agent's
  own flags (``Batch.agents``); ``op``, ``has_final`` and infos: its env's, repeated per agent;
* ``infos["players.env_id"]`` and ``infos["players.id"]`` (int32 per row): the row's env and
  agent index, EnvPool's multi-player names;
* ``infos["active"]`` (bool per row): the row is real (the agent is in this op's result).
  Inactive rows (dead or not yet joined agents) are padding: zero observation, reward 0, flags
  False; a learner masks them out. An agent's actions are ignored while it is inactive.

Every agent's spaces must be equal (the single-agent front ends have one space per row).
Envs are sent whole: ``send``/``async_reset`` take rows of whole envs. Agents are reset with
their env: ``reset(options={"reset_mask": rows})`` resets an env when the mask covers all its
rows, or some of them and the env's episode has ended; a done agent of an env still running
(TorchRL asks to reset every done row) stays padding until its env ends, so no other agent's
episode is cut.

Examples:
    >>> import envhive, numpy as np
    >>> from envhive.testing import TagTeamEnv
    >>> env = envhive.make(TagTeamEnv, num_envs=2, agent_layout="flat", seed=0)
    >>> obs, info = env.reset()
    >>> obs.shape, info["active"].tolist()
    ((6, 4), [True, True, False, True, True, False])
    >>> env.close()
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envhive._batch import NO_OP, Batch
from envhive._infos import Column, InfoColumns
from envhive._spaces import tree_map
from envhive.errors import ConfigError

__all__ = ["FlatAgents", "OneAgent", "check_agent_axis"]


def check_agent_axis(pool: Any, api: str) -> Any:
    """The pool a front end with no agent axis (``api`` names it) lays out: ``pool`` itself
    when its envs have no agent axis; :class:`OneAgent` over it when they have exactly one
    agent (that agent's observations and actions, the env's flags); a
    :class:`~envhive.errors.ConfigError` naming the ways out when they have several.

    Examples:
        >>> import envhive
        >>> from envhive.testing import TagTeamEnv
        >>> pool = envhive.make(TagTeamEnv, num_envs=2, api="pool")
        >>> try:
        ...     check_agent_axis(pool, "gymnasium")
        ... except envhive.ConfigError as err:
        ...     print(str(err)[:69])
        api='gymnasium' takes one agent per env, but these envs have 3 agents
        >>> pool.close()
    """
    agents = getattr(pool, "agents", ())
    if len(agents) == 1:
        return OneAgent(pool)
    if agents:
        raise ConfigError(
            f"api={api!r} takes one agent per env, but these envs have {len(agents)} agents "
            f"{list(agents)[:4]}: pass agent_layout='flat' to fold the agents into the batch "
            "axis (rows are (env, agent) pairs, infos['active'] masks the padding), or use "
            "api='pettingzoo' (a ParallelEnv view) or the pool itself (Batch.agents)"
        )
    return pool


def _repeat(columns: InfoColumns, k: int) -> InfoColumns:
    """Info columns of envs as columns of their agents' rows (each env's row ``k`` times)."""
    out: InfoColumns = {}
    for key, col in columns.items():
        values = col.values
        values = _repeat(values, k) if isinstance(values, dict) else np.repeat(values, k, axis=0)
        out[key] = Column(values, np.repeat(col.mask, k))
    return out


class FlatAgents:
    """A pool with its agents folded into the batch axis (see the module docstring).

    Args:
        pool: a :class:`~envhive._pool.Pool` of multi-agent envs (``pool.agents``).
    """

    def __init__(self, pool: Any) -> None:
        if not pool.agents:
            raise ConfigError("agent_layout='flat': these envs have no agent axis (one agent each)")
        self.pool = pool
        self.num_agents = k = len(pool.agents)
        obs_spaces, act_spaces = pool.call("agent_observation_spaces", env_ids=[0])[0], pool.call(
            "agent_action_spaces", env_ids=[0])[0]
        if any(s != obs_spaces[0] for s in obs_spaces) or any(s != act_spaces[0] for s in act_spaces):
            raise ConfigError(
                f"agent_layout='flat' needs one observation and one action space for every agent "
                f"(rows of one batch), got {list(obs_spaces)} and {list(act_spaces)}"
            )
        self.agents: tuple[str, ...] = ()  # the view itself has no agent axis
        self.num_envs = pool.num_envs * k
        self.batch_size = pool.batch_size * k
        self.observation_space = obs_spaces[0]
        self.observation_spaces = (obs_spaces[0],) * self.num_envs
        self.action_space = act_spaces[0]
        self.autoreset, self.copy, self.resident = pool.autoreset, pool.copy, False
        self.props, self.executor = pool.props, pool.executor
        self._act_shape = (pool.num_envs, k)
        self._ended = np.zeros(pool.num_envs, np.bool_)  # each env's last row ended its episode
        self._last: Batch | None = None  # the last result of every env (for untouched rows)

    # ------------------------------------------------------------------ pool state
    @property
    def closed(self) -> bool:
        return bool(self.pool.closed)

    @property
    def env_steps(self) -> int:
        return int(self.pool.env_steps) * self.num_agents

    @property
    def pending(self) -> int:
        return int(self.pool.pending) * self.num_agents

    # ------------------------------------------------------------------ layout
    def _flat(self, b: Batch) -> Batch:
        k, ids = self.num_agents, np.asarray(b.env_ids)
        assert b.agents is not None
        touched = b.op != NO_OP
        self._ended[ids[touched]] = (b.terminated | b.truncated)[touched]
        rows = (ids[:, None] * k + np.arange(k)).ravel()
        fold = lambda a: a.reshape(a.shape[0] * k, *a.shape[2:])  # noqa: E731
        infos = _repeat(b.infos, k)
        active = b.agents.active.reshape(-1)
        every = np.ones(active.shape, np.bool_)
        infos["active"] = Column(active, every)
        # EnvPool's multi-player names: the env of each player row and its id within the env.
        infos["players.env_id"] = Column(np.repeat(ids, k).astype(np.int32), every)
        infos["players.id"] = Column(np.tile(np.arange(k, dtype=np.int32), ids.size), every)
        out = Batch(
            rows, tree_map(fold, b.obs), fold(b.reward), fold(b.agents.terminated),
            fold(b.agents.truncated), np.repeat(b.op, k),
            None if b.final_obs is None else tree_map(fold, b.final_obs),
            None if b.has_final is None else np.repeat(b.has_final, k), infos,
            _repeat(b.final_infos, k), None,
        )
        if rows.size == self.num_envs:
            self._last = out
        return out

    def _env_ids(self, env_id: Any) -> Any:
        """Envs of flat rows ``env_id`` (``None``: all), which must cover whole envs."""
        if env_id is None:
            return None
        rows = np.atleast_1d(np.asarray(env_id, np.int64))
        k = self.num_agents
        envs = rows[::k] // k
        if rows.size % k or not np.array_equal(rows, (envs[:, None] * k + np.arange(k)).ravel()):
            raise ConfigError(
                f"env_id: agent_layout='flat' sends whole envs: expected rows env*{k} ... "
                f"env*{k}+{k - 1} for each env, got {rows.tolist()}"
            )
        return envs

    def _unfold(self, actions: Any, count: int) -> Any:
        def unfold(a: Any) -> Any:
            a = np.asarray(a)
            return a.reshape(count, self.num_agents, *a.shape[1:])

        if isinstance(actions, (dict, tuple)):
            return tree_map(unfold, actions)
        return unfold(actions)

    # ------------------------------------------------------------------ the pool's calls
    def reset(self, seed: Any = None, options: dict[str, Any] | None = None) -> Batch:
        if options is not None and "reset_mask" in options:
            options = dict(options)
            mask = np.asarray(options.pop("reset_mask"), np.bool_).reshape(self._act_shape)
            envs = mask.all(axis=1) | (mask.any(axis=1) & self._ended)
            options["reset_mask"] = envs
            if not envs.any() and mask.any() and self._last is not None:
                # Only done agents of running envs: nothing to reset, every row untouched.
                last = self._last
                keep = {k: last.infos[k] for k in ("active", "players.env_id", "players.id")}
                return last._replace(op=np.full(self.num_envs, NO_OP, np.int8), final_obs=None,
                                     has_final=None, infos=keep, final_infos={})
        return self._flat(self.pool.reset(seed=seed, options=options))

    def step(self, actions: Any) -> Batch:
        return self._flat(self.pool.step(self._unfold(actions, self.pool.num_envs)))

    def send(self, actions: Any, env_id: Any = None) -> None:
        try:  # a Ctrl-C as the pool's call returns: see Pool.raised_around
            envs = self._env_ids(env_id)
            count = self.pool.num_envs if envs is None else len(envs)
            self.pool.send(self._unfold(actions, count), envs)
        except BaseException as err:
            self.pool.raised_around(err)
            raise

    def async_reset(self, env_id: Any = None, seed: Any = None, options: dict[str, Any] | None = None) -> None:
        try:
            self.pool.async_reset(self._env_ids(env_id), seed=seed, options=options)
        except BaseException as err:
            self.pool.raised_around(err)
            raise

    def recv(self) -> Batch:
        received = False
        try:
            batch = self.pool.recv()
            received = True
            return self._flat(batch)
        except BaseException as err:  # in the layout: as if it struck inside recv
            if received:
                self.pool.cut_short(err)
            else:
                self.pool.raised_around(err)
            raise

    def cut_short(self, err: BaseException) -> None:
        """The wrapped pool's :meth:`~envhive._pool.Pool.cut_short`."""
        self.pool.cut_short(err)

    def raised_around(self, err: BaseException) -> None:
        """The wrapped pool's :meth:`~envhive._pool.Pool.raised_around`."""
        self.pool.raised_around(err)

    def wait(self, timeout: float | None = None, *, caller: str = "wait") -> Batch:
        return self._flat(self.pool.wait(timeout, caller=caller))

    def call(self, name: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None,
             env_ids: Any = None) -> tuple[Any, ...]:
        """``pool.call`` on the envs of the rows (each env's result for each of its rows)."""
        envs = None if env_ids is None else np.unique(np.asarray(env_ids) // self.num_agents)
        got = self.pool.call(name, args, kwargs, envs)
        rows = range(self.num_envs) if env_ids is None else np.atleast_1d(np.asarray(env_ids)).tolist()
        by_env = dict(zip(range(self.pool.num_envs) if envs is None else envs.tolist(), got))
        return tuple(by_env[r // self.num_agents] for r in rows)

    def set_attr(self, name: str, values: Any, env_ids: Any = None) -> None:
        """``pool.set_attr`` on the envs of the rows (an env takes its first row's value)."""
        k = self.num_agents
        rows = list(range(self.num_envs)) if env_ids is None else np.atleast_1d(np.asarray(env_ids)).tolist()
        if isinstance(values, (list, tuple)):
            firsts = {r // k: v for r, v in reversed(list(zip(rows, values)))}
            self.pool.set_attr(name, list(firsts.values()), list(firsts))
        else:
            self.pool.set_attr(name, values, sorted({r // k for r in rows}))

    def describe(self) -> str:
        """The wrapped pool's :meth:`~envhive._pool.Pool.describe`."""
        return str(self.pool.describe())

    @property
    def executor_name(self) -> Any:
        """The wrapped pool's ``executor_name``."""
        return self.pool.executor_name

    def close(self) -> None:
        self.pool.close()


class OneAgent(FlatAgents):
    """A pool of one-agent multi-agent envs as a pool with no agent axis: what a single-agent
    front end takes (it is built by :func:`check_agent_axis`).

    Row ``i`` is env ``i``'s one agent: its observation, action, reward and infos (the agent's
    own info dict, beside the env's other keys), and the **env's** flags, which autoreset
    reads (an env whose agent is gone has ended, even if the agent's own flags say nothing).
    ``infos["active"]`` is set where the agent is in the op's result (a row without it is
    padding: zero observation, reward 0).

    Examples:
        >>> import envhive, numpy as np
        >>> from envhive.testing import TagTeamEnv
        >>> env = envhive.make(lambda: TagTeamEnv(length=2, agents=("a0",)), num_envs=2, seed=0)
        >>> obs, info = env.reset()
        >>> obs.shape, env.single_action_space, info["active"].tolist()
        ((2, 4), Discrete(3), [True, True])
        >>> _ = env.step(np.ones(2, np.int64))
        >>> obs, reward, terminated, truncated, info = env.step(np.ones(2, np.int64))
        >>> reward.tolist(), terminated.tolist(), truncated.tolist(), info["t"].tolist()
        ([2.0, 2.0], [False, False], [True, True], [2, 2])
        >>> env.close()
    """

    def __init__(self, pool: Any) -> None:
        if len(pool.agents) != 1:
            raise ConfigError(f"OneAgent: expected envs with one agent, got {len(pool.agents)} "
                              f"agents {list(pool.agents)[:4]}")
        super().__init__(pool)
        self._agent = str(pool.agents[0])

    def _own_infos(self, columns: InfoColumns) -> InfoColumns:
        """The env's info columns with the agent's own nested dict as top-level keys."""
        own = columns.get(self._agent)
        if own is None or not isinstance(own.values, dict):
            return columns
        out = {key: col for key, col in columns.items() if key != self._agent}
        out.update(own.values)
        return out

    def _flat(self, b: Batch) -> Batch:
        out = super()._flat(b)
        infos = self._own_infos(b.infos)
        infos["active"] = out.infos["active"]
        return out._replace(terminated=b.terminated, truncated=b.truncated, infos=infos,
                            final_infos=self._own_infos(b.final_infos))
