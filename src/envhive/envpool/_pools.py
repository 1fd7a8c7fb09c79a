"""EnvPool's pool classes over envhive's pool: ``envpool.make_gym(...)`` is a
:class:`GymnasiumEnvPool` (a ``gymnasium.Env`` and ``VectorEnv``), ``make_dm(...)`` a
:class:`DMEnvPool` (a ``dm_env.Environment``). Each family's classes (``AtariGymnasiumEnvPool``,
...) are these with the family's name.

The pool behind them is an envhive :class:`~envhive.frontends.Pool` in next_step autoreset mode
(EnvPool's: an env whose episode ended is reset by its next ``send``, its action ignored), built
by the spec's route on any executor. EnvPool's calls map onto it:

* ``send(action, env_id)``: ``Pool.send`` (envs never reset are reset instead, as EnvPool resets
  every env on its first ``send``); ``recv()``: ``Pool.recv`` in async mode (``batch_size <
  num_envs``: the first ``batch_size`` envs done). In sync mode EnvPool's ``recv`` returns the
  envs of the last ``send``, in its order: ``Pool.wait`` and those rows.
* ``step(action, env_id)`` = ``send`` + ``recv``; with every env, a started pool and nothing in
  flight it is one ``Pool.step`` (the engines' inline path).
* ``reset(env_id)``: ``Pool.reset`` of those envs (``reset_mask``) in sync mode, rows in
  ``env_id``'s order; in async mode ``async_reset`` + ``recv``, as EnvPool.
* actions: an array is cast to the spec's dtype (float actions for a ``Discrete`` space, as
  EnvPool casts them); a dict (``{"env_id", "players.env_id", "action"}``) is checked against
  the spec's dtypes on its first use (EnvPool's ``RuntimeError``).

Examples:
    >>> import envhive.envpool as envpool
    >>> env = envpool.make_gym("CartPole-v1", num_envs=2)
    >>> obs, info = env.reset()
    >>> obs.shape, sorted(info)
    ((2, 4), ['elapsed_step', 'env_id', 'players'])
    >>> env.close()
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector import VectorEnv as GymVectorEnv

from envhive.envpool._errors import EnvPoolActionError
from envhive.envpool._layouts import Layouter
from envhive.errors import ConfigError

__all__ = ["EnvPoolBase", "GymnasiumEnvPool", "DMEnvPool", "pool_class"]


def _env_ids(env_id: Any, n: int) -> np.ndarray:
    ids = np.asarray(env_id).astype(np.int64).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise ConfigError(f"env_id: expected ids in [0, {n}), got {ids.tolist()}")
    return ids


class EnvPoolBase:
    """What both APIs share: the pool, EnvPool's calls, its properties (module docstring)."""

    spec: Any

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        c = spec.config
        n = int(c.num_envs)
        batch = int(c.batch_size) or n
        seeds = [int(s) for s in c.env_seed] if list(c.env_seed) else [int(c.seed) + i for i in range(n)]
        self._route = route = spec._route
        self._pool = route.pool(n, batch, seeds, int(c.num_threads), getattr(spec, "_executor", None))
        self._layout = Layouter(spec._arrays, route, n)
        self._n, self._batch = n, batch
        self._all = np.arange(n, dtype=np.int32)
        self._started = np.zeros(n, np.bool_)
        self._order: list[int] = []  # sync mode: the envs sent since the last recv, in order
        action = spec.action_array_spec["action"]
        self._action_dtype = np.dtype(action.dtype)
        self._players = spec._arrays.players
        self._checked = False
        self._wrapper: dict[str, Any] = dict(getattr(spec, "_wrapper", {}))
        #: Sync mode with every env started: ``step(actions)`` is one ``Pool.step``.
        self._sync_ready = False

    # -- EnvPool's properties -------------------------------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
        """The config as a dict."""
        return dict(zip(self.spec._config_keys, self.spec._config_values))

    def __len__(self) -> int:
        return self._n

    @property
    def all_env_ids(self) -> np.ndarray:
        """Every env id (int32)."""
        return self._all

    @property
    def is_async(self) -> bool:
        """Whether ``recv`` returns fewer envs than the pool has (``batch_size < num_envs``)."""
        return self._batch != self._n

    @property
    def pool(self) -> Any:
        """envhive's pool behind this front end."""
        return self._pool

    def seed(self, seed: Any = None) -> None:
        """EnvPool seeds at ``make``: this only warns (as EnvPool does)."""
        warnings.warn("The `seed` function in envpool is abandoned. You can set seed by "
                      "envpool.make(..., seed=seed) instead.", UserWarning, stacklevel=2)

    def xla(self) -> Any:
        """EnvPool's ``(handle, recv, send, step)``: jax functions that run this pool's calls
        inside ``jax.jit``, returning what the eager calls return (``envhive.envpool._xla``).

        Examples:
            >>> import envhive.envpool as envpool
            >>> env = envpool.make_dm("CartPole-v1", num_envs=2, seed=0)
            >>> handle, recv, send, step = env.xla()
            >>> env.async_reset()
            >>> handle, ts = recv(handle)
            >>> ts.observation.obs.shape, ts.step_type.tolist()
            ((2, 4), [0, 0])
            >>> env.close()
        """
        from envhive.envpool._xla import xla_functions

        return xla_functions(self)

    # -- actions --------------------------------------------------------------------------------
    def _from(self, action: Any, env_id: Any) -> tuple[np.ndarray, Any]:
        """``(env ids, actions in the pool's layout)`` from EnvPool's action forms."""
        if isinstance(action, Mapping):
            flat = {}
            for key, value in action.items():
                if isinstance(value, Mapping):
                    flat.update({f"{key}.{k}": v for k, v in value.items()})
                else:
                    flat[key] = value
            self._check_dtypes(flat)
            acts = np.asarray(flat["action"])
            if env_id is None and "env_id" in flat:
                env_id = flat["env_id"]
        else:
            acts = np.asarray(action).astype(self._action_dtype, copy=False)
        ids = self._all if env_id is None else np.asarray(env_id)
        ids = _env_ids(ids, self._n)
        if self._players > 1:
            acts = self._player_actions(acts, ids.size)
        return ids, acts

    def _player_actions(self, acts: np.ndarray, k: int) -> np.ndarray:
        """EnvPool's multi-player actions on the agent axis: one row per player of each env
        (env by env), or one per env (the current player's, as turn-based games take them:
        every player's slot gets it, the engine sends the current one's)."""
        if acts.shape[0] == k * self._players:
            return acts.reshape(k, self._players, *acts.shape[1:])
        if acts.shape[0] == k:
            return np.repeat(acts[:, None], self._players, axis=1)
        raise EnvPoolActionError(f"expected {k} actions (one per env) or {k * self._players} (one per player), "
                                 f"got {acts.shape[0]}")

    def _check_dtypes(self, flat: dict[str, Any]) -> None:
        if self._checked:
            return
        self._checked = True
        for key, spec in self.spec.action_array_spec.items():
            if key in flat and np.asarray(flat[key]).dtype != spec.dtype:
                raise EnvPoolActionError(f'Expected dtype {spec.dtype} with action "{key}", '
                                         f"got {np.asarray(flat[key]).dtype}")

    # -- EnvPool's calls ------------------------------------------------------------------------
    def send(self, action: Any, env_id: Any = None) -> None:
        """Start stepping envs ``env_id`` (default: all); an env never reset is reset instead."""
        ids, acts = self._from(action, env_id)
        fresh = ~self._started[ids]
        if np.count_nonzero(fresh):
            self._pool.async_reset(ids[fresh])
            self._started[ids[fresh]] = True
            keep = ~fresh
            ids, acts, order = ids[keep], acts[keep], ids
        else:
            order = ids
        if ids.size:
            self._pool.send(acts, ids)
        if not self.is_async:
            self._order.extend(order.tolist())

    def async_reset(self) -> None:
        """Start resetting every env; collect with ``recv``."""
        self._pool.async_reset()
        self._started[:] = True
        if not self.is_async:
            self._order.extend(range(self._n))

    def _received(self) -> Any:
        """The batch ``recv`` hands out (see the module docstring)."""
        if self.is_async:
            return self._pool.recv()
        order, self._order = self._order, []
        b = self._pool.wait()
        return _rows(b, np.array(order, np.int64))

    def recv(self, reset: bool = False, return_info: bool = True) -> Any:
        """The envs done: EnvPool's layout of their rows."""
        return self._out(self._received(), reset)

    def step(self, action: Any, env_id: Any = None) -> Any:
        """``send`` + ``recv``."""
        if env_id is None and self._sync_ready and type(action) is np.ndarray and not self._order:
            # Every env, started, sync, nothing in flight: one Pool.step (the engines' inline path).
            acts = action if action.dtype == self._action_dtype else action.astype(self._action_dtype)
            if self._players > 1:
                acts = self._player_actions(acts, self._n)
            return self._out(self._pool.step(acts), False)
        if env_id is None and not self.is_async and not self._order and self._started.all() and not isinstance(action, Mapping):
            self._sync_ready = True
            return self.step(np.asarray(action))
        self.send(action, env_id)
        return self.recv()

    def _reset_envs(self, env_id: Any) -> Any:
        if self.is_async:
            ids = self._all if env_id is None else _env_ids(env_id, self._n)
            self._pool.async_reset(ids)
            self._started[ids] = True
            return self._out(self._pool.recv(), True)
        if env_id is None:
            self._started[:] = True
            return self._out(self._pool.reset(), True)
        ids = _env_ids(env_id, self._n)
        mask = np.zeros(self._n, np.bool_)
        mask[ids] = True
        self._started[ids] = True
        b = self._pool.reset(options={"reset_mask": mask})
        return self._out(_rows(b, ids), True)

    def render(self, env_ids: Any = None, camera_id: int | None = None) -> np.ndarray | None:
        """Frames of envs ``env_ids`` (default: ``render_env_id``, else 0): ``(n, H, W, 3)``."""
        mode = self._wrapper.get("render_mode")
        if mode not in ("rgb_array", "human"):
            raise RuntimeError("render_mode must be set to 'rgb_array' or 'human' when creating this env")
        if env_ids is None:
            env_ids = [int(self._wrapper.get("render_env_id", 0))]
        ids = _env_ids(env_ids, self._n).tolist()
        frames = self._pool.call("render", env_ids=ids)
        return np.stack([np.asarray(f) for f in frames])

    def close(self, **kwargs: Any) -> None:
        """Close the pool (idempotent)."""
        self._pool.close()

    def __repr__(self) -> str:
        config = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"{type(self).__name__}({config})"

    def __str__(self) -> str:
        return self.__repr__()

    def _out(self, b: Any, reset: bool) -> Any:
        raise NotImplementedError

    def _out_layout(self, layout: Layouter, b: Any, reset: bool = False) -> Any:
        """``_out`` with another layouter (``xla()``'s template)."""
        raise NotImplementedError


def _rows(b: Any, ids: np.ndarray) -> Any:
    """Batch ``b`` (every env, env order) cut to envs ``ids``, in that order."""
    from envhive._batch import Batch
    from envhive._infos import Column
    from envhive._spaces import tree_map

    def cut(cols: Any) -> Any:
        out = {}
        for key, col in cols.items():
            values = cut(col.values) if isinstance(col.values, dict) else col.values[ids]
            out[key] = Column(values, col.mask[ids])
        return out

    agents = None
    if b.agents is not None:
        agents = type(b.agents)(*(a[ids] for a in b.agents))
    return Batch(b.env_ids[ids], tree_map(lambda a: a[ids], b.obs), b.reward[ids], b.terminated[ids],
                 b.truncated[ids], b.op[ids], None, None, cut(b.infos), {}, agents)


class GymnasiumEnvPool(EnvPoolBase, GymVectorEnv, gym.Env):  # type: ignore[misc]
    """EnvPool's gymnasium pool (``make_gym``/``make_gymnasium``): ``observation_space`` and
    ``action_space`` are one env's (EnvPool's), ``single_*`` the same objects."""

    metadata = {"render_modes": ["rgb_array"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, spec: Any) -> None:
        EnvPoolBase.__init__(self, spec)
        self.closed = False

    @property
    def num_envs(self) -> int:  # type: ignore[override]
        """How many envs."""
        return self._n

    @property
    def is_vector_env(self) -> bool:
        """EnvPool's flag for vector-aware wrappers."""
        return True

    @property
    def observation_space(self) -> gym.Space:  # type: ignore[override]
        """One env's observation space."""
        return self.spec.observation_space

    @property
    def action_space(self) -> gym.Space:  # type: ignore[override]
        """One env's action space."""
        return self._action_space

    @property
    def single_observation_space(self) -> gym.Space:  # type: ignore[override]
        """The same as ``observation_space`` (EnvPool's)."""
        return self.observation_space

    @property
    def single_action_space(self) -> gym.Space:  # type: ignore[override]
        """The same as ``action_space`` (EnvPool's)."""
        return self.action_space

    @property
    def _action_space(self) -> gym.Space:
        space = self.__dict__.get("_cached_action_space")
        if space is None:
            space = self.__dict__["_cached_action_space"] = self.spec.action_space
        return space

    @property
    def render_mode(self) -> str | None:  # type: ignore[override]
        """The render mode given at ``make``."""
        return self._wrapper.get("render_mode")

    def reset(self, env_id: Any = None, *, seed: Any = None, options: dict[str, Any] | None = None) -> Any:  # type: ignore[override]
        """Reset envs ``env_id`` (default: all; or ``options["reset_mask"]``); ``seed`` is
        ignored with a warning, as in EnvPool (it seeds at ``make``)."""
        if seed is not None:
            warnings.warn("EnvPool seeds are fixed when the environment is created. reset(seed=...) is "
                          "ignored; pass seed to envpool.make instead.", UserWarning, stacklevel=2)
        if options is not None:
            unknown = set(options) - {"reset_mask"}
            if unknown:
                raise ConfigError(f"Unsupported Gymnasium reset options for EnvPool: {sorted(unknown)}")
            mask = options.get("reset_mask")
            if mask is not None:
                if env_id is not None:
                    raise ConfigError("Pass either env_id or options['reset_mask'], not both.")
                mask = np.asarray(mask, np.bool_)
                if mask.shape != (self._n,) or not mask.any():
                    raise ConfigError(f"reset_mask must be a bool array of shape ({self._n},) selecting "
                                      f"at least one env, got {mask!r}")
                env_id = np.flatnonzero(mask)
        return self._reset_envs(env_id)

    def _out(self, b: Any, reset: bool) -> Any:
        return self._layout.gym(b, reset)

    def _out_layout(self, layout: Layouter, b: Any, reset: bool = False) -> Any:
        return layout.gym(b, reset)

    def close(self, **kwargs: Any) -> None:
        """Close the pool (idempotent)."""
        self.closed = True
        self._pool.close()


def _dm_base() -> type:
    try:
        import dm_env
    except ImportError:  # pragma: no cover - the dm_env extra
        return object
    return dm_env.Environment  # type: ignore[no-any-return]


class DMEnvPool(EnvPoolBase, _dm_base()):  # type: ignore[misc]
    """EnvPool's dm_env pool (``make_dm``): ``recv``/``step``/``reset`` return a batched
    ``TimeStep`` whose observation is EnvPool's ``State`` namedtuple."""

    def reset(self, env_id: Any = None) -> Any:
        """Reset envs ``env_id`` (default: all)."""
        return self._reset_envs(env_id)

    def observation_spec(self) -> Any:
        """dm_env specs of the observation and infos (EnvPool's ``State``)."""
        return self.spec.observation_spec()

    def action_spec(self) -> Any:
        """The dm_env spec of the action."""
        return self.spec.action_spec()

    def _out(self, b: Any, reset: bool) -> Any:
        return self._layout.dm(b)

    def _out_layout(self, layout: Layouter, b: Any, reset: bool = False) -> Any:
        return layout.dm(b)


def pool_class(name: str, base: type, module: str) -> type:
    """A family's pool class: ``base`` under the family's name.

    Examples:
        >>> pool_class("XGymnasiumEnvPool", GymnasiumEnvPool, "envhive.envpool.x").__name__
        'XGymnasiumEnvPool'
    """
    return type(name, (base,), {"__module__": module})


def from_pool(pool: Any, name: str, api: str) -> EnvPoolBase:
    """EnvPool's API over a pool built by ``envhive.make(..., api="envpool" | "envpool_dm")``:
    a generic spec (EnvPool's common config keys) of the pool's spaces; infos as the engine
    reports them.

    Examples:
        >>> import envhive
        >>> env = envhive.make("CartPole-v1", 2, api="envpool", seed=0)
        >>> obs, info = env.reset()
        >>> type(env).__name__, obs.shape
        ('GymnasiumEnvPool', (2, 4))
        >>> env.close()
    """
    from envhive.envpool._families import COMMON
    from envhive.envpool._spec import spec_class

    if pool.agents:
        raise ConfigError(f"api={api!r}: lays out single-agent pools; for EnvPool's multi-player ids use "
                          "envhive.envpool.make_gym(...) or agent_layout='flat' with api='gymnasium'")
    cls = spec_class("EnvSpec", "pool", list(COMMON), list(COMMON.values()))
    config = cls.gen_config(num_envs=pool.num_envs, batch_size=pool.batch_size if pool.batch_size != pool.num_envs else 0)
    spec = cls(config, _task_id=name, _built=pool)
    return (GymnasiumEnvPool if api == "envpool" else DMEnvPool)(spec)
