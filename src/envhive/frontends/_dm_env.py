"""The dm_env front end: a pool behind DeepMind's ``dm_env`` API, batched, with send/recv.

Built only from the pool's neutral :class:`~envhive._batch.Batch`: each row's step type
and discount come from ``Batch.step_types_and_discounts``. The step type is FIRST for reset
observations, LAST when the episode ended, MID otherwise; the discount is ``0.0`` when the
episode terminated (no value beyond it), ``1.0`` when it was truncated (a time limit: the
next state still has value) and on every other row. FIRST rows carry reward 0 and discount 1 (dm_env leaves them ``None``; a
batch needs numbers; EnvPool does the same).

dm_env's protocol is next_step autoreset: after a LAST, the next ``step`` of that env returns
the FIRST of a new episode (its action is ignored). ``disabled`` also works (reset ended envs
with ``reset(env_ids)``); ``same_step`` is refused, because a row cannot be both LAST and FIRST.

Specs are those of one env (``observation_spec()`` mirrors the observation space: Box ->
``BoundedArray``, Discrete -> ``DiscreteArray``, Dict/Tuple -> dicts/tuples of specs).

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("CartPole-v1", num_envs=2, seed=0, api="dm_env")
    >>> ts = env.reset()
    >>> ts.step_type.tolist(), ts.observation.shape
    ([0, 0], (2, 4))
    >>> ts = env.step(np.array([0, 1]))
    >>> ts.step_type.tolist(), ts.discount.tolist()
    ([1, 1], [1.0, 1.0])
    >>> env.action_spec()
    DiscreteArray(shape=(), dtype=int64, name=action, minimum=0, maximum=1, num_values=2)
    >>> env.close()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from envhive._arguments import env_ids_of
from envhive._batch import Batch
from envhive._extras import require
from envhive._pool import Pool
from envhive._spaces import tree_map
from envhive.errors import ConfigError
from envhive.frontends._flat import check_agent_axis

__all__ = ["DmEnv", "spec_for"]


def _dm_env() -> Any:
    return require("dm_env", "dm_env", "api='dm_env'")


def spec_for(space: spaces.Space, name: str) -> Any:
    """The ``dm_env.specs`` spec of one env's ``space``.

    Examples:
        >>> spec_for(spaces.Box(-1.0, 1.0, (2,)), "obs").maximum.tolist()
        [1.0, 1.0]
        >>> sorted(spec_for(spaces.Dict({"a": spaces.Discrete(3)}), "obs"))
        ['a']
    """
    specs = _dm_env().specs
    if isinstance(space, spaces.Box):
        return specs.BoundedArray(space.shape, space.dtype, space.low, space.high, name)
    if isinstance(space, spaces.Discrete):
        if int(space.start) == 0:
            return specs.DiscreteArray(int(space.n), space.dtype, name)
        low = int(space.start)
        return specs.BoundedArray((), space.dtype, low, low + int(space.n) - 1, name)
    if isinstance(space, spaces.MultiDiscrete):
        start = np.asarray(getattr(space, "start", 0))
        return specs.BoundedArray(space.shape, space.dtype, start, start + space.nvec - 1, name)
    if isinstance(space, spaces.MultiBinary):
        return specs.BoundedArray(space.shape, space.dtype, 0, 1, name)
    if isinstance(space, spaces.Dict):
        return {k: spec_for(s, f"{name}/{k}") for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(spec_for(s, f"{name}/{j}") for j, s in enumerate(space.spaces))
    raise ConfigError(f"dm_env front end: no dm_env spec for {space} (no fixed array form)")


class DmEnv:
    """A batch of envs behind ``dm_env``'s API: ``reset``/``step`` return batched ``TimeStep``\\ s.

    Built by ``envhive.make(..., api="dm_env")``. Every array of a ``TimeStep`` has one row per
    env (``recv`` rows: the envs in ``env_ids``). Async use is EnvPool's: ``async_reset()``, then
    ``ts, env_ids = recv()`` and ``send(actions, env_ids)``.

    Args:
        pool: the pool (next_step or disabled autoreset).
        name: a display name.

    Examples:
        >>> import envhive, numpy as np
        >>> env = envhive.make("CartPole-v1", num_envs=4, batch_size=2, seed=0, api="dm_env")
        >>> env.async_reset()
        >>> ts, ids = env.recv()
        >>> ts.first().tolist(), len(ids)
        ([True, True], 2)
        >>> env.send(np.zeros(2, np.int64), ids)
        >>> env.close()
    """

    def __init__(self, pool: Pool, *, name: str) -> None:
        # A pool of one-agent envs comes as that agent's (OneAgent); several agents come
        # flattened (agent_layout="flat": FlatAgents) or are refused.
        pool = check_agent_axis(pool, "dm_env")
        if pool.autoreset is AutoresetMode.SAME_STEP:
            pool.close()
            raise ConfigError(
                "api='dm_env' needs autoreset='next_step' (dm_env's protocol: after a LAST, the "
                "next step starts a new episode) or 'disabled', got 'same_step': a row cannot be "
                "both the LAST of one episode and the FIRST of the next"
            )
        self._dm = _dm_env()
        self._pool = pool
        self._name = name
        self.num_envs = pool.num_envs
        self._obs_spec = spec_for(pool.observation_space, "observation")
        self._act_spec = spec_for(pool.action_space, "action")

    def _timestep(self, batch: Batch) -> Any:
        step_type, discount = batch.step_types_and_discounts()
        return self._dm.TimeStep(
            step_type=step_type,
            reward=batch.reward,
            discount=discount,
            observation=batch.obs,
        )

    def reset(self, env_ids: Any = None, *, seed: Any = None) -> Any:
        """Reset every env, or only ``env_ids``: FIRST rows, one per reset env (in env order,
        as EnvPool's ``reset(env_id)``). ``seed``: an int ``s`` (env ``i`` gets ``s + i``) or
        one seed per env of the pool."""
        if env_ids is None:
            return self._timestep(self._pool.reset(seed=seed))
        mask = np.zeros(self.num_envs, np.bool_)
        mask[env_ids_of(env_ids, self.num_envs)] = True  # checked as send() checks them
        batch = self._pool.reset(seed=seed, options={"reset_mask": mask})
        rows = np.flatnonzero(mask)
        return self._timestep(Batch(
            batch.env_ids[rows], tree_map(lambda a: a[rows], batch.obs), batch.reward[rows],
            batch.terminated[rows], batch.truncated[rows], batch.op[rows], None, None, {}, {},
        ))

    def step(self, actions: Any) -> Any:
        """Step every env; an env whose last step was LAST starts a new episode (FIRST)."""
        return self._timestep(self._pool.step(actions))

    def async_reset(self, env_ids: Any = None, *, seed: Any = None) -> None:
        """Start resetting ``env_ids`` (default: every env); collect with :meth:`recv`."""
        try:  # a Ctrl-C as the pool's call returns: see Pool.raised_around
            self._pool.async_reset(env_ids, seed=seed)
        except BaseException as err:
            self._pool.raised_around(err)
            raise

    def send(self, actions: Any, env_ids: Any = None) -> None:
        """Start stepping ``env_ids`` (default: every env) with ``actions``, one row each."""
        try:
            self._pool.send(actions, env_ids)
        except BaseException as err:
            self._pool.raised_around(err)
            raise

    def recv(self) -> tuple[Any, np.ndarray]:
        """``(timestep, env_ids)`` for the first ``batch_size`` envs to finish."""
        received = False
        try:
            batch = self._pool.recv()
            received = True
            return self._timestep(batch), batch.env_ids
        except BaseException as err:  # in the layout: as if it struck inside recv
            if received:
                self._pool.cut_short(err)
            else:
                self._pool.raised_around(err)
            raise

    def observation_spec(self) -> Any:
        """The spec of one env's observation."""
        return self._obs_spec

    def action_spec(self) -> Any:
        """The spec of one env's action."""
        return self._act_spec

    def reward_spec(self) -> Any:
        """The spec of one env's reward (a float64 scalar)."""
        return self._dm.specs.Array((), np.dtype(np.float64), "reward")

    def discount_spec(self) -> Any:
        """The spec of one env's discount (a float64 in [0, 1])."""
        return self._dm.specs.BoundedArray((), np.dtype(np.float64), 0.0, 1.0, "discount")

    @property
    def pool(self) -> Pool:
        """The pool behind this front end."""
        return self._pool

    @property
    def batch_size(self) -> int:
        """How many envs ``recv`` returns."""
        return self._pool.batch_size

    def close(self) -> None:
        """Close every env and release the executor. Idempotent."""
        self._pool.close()

    def __enter__(self) -> DmEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"envhive.DmEnv({self._name!r}, num_envs={self.num_envs}, executor={self._pool.describe()!r})"
