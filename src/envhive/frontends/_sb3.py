"""The Stable-Baselines3 front end: any envhive pool as a ``stable_baselines3`` ``VecEnv``.

``envhive.make(env, num_envs, api="sb3")`` (any env, any executor) gives a
:class:`SB3VecEnv`, a real ``stable_baselines3.common.vec_env.VecEnv``: SB3's algorithms,
``evaluate_policy`` and its ``VecEnvWrapper``\\ s (``VecNormalize``, ``VecMonitor``,
``VecFrameStack``, ``VecCheckNan``, ...) take it as they take a ``DummyVecEnv``.

SB3's step contract is DummyVecEnv's, and the pool runs in same_step mode to meet it in one
round trip: an env whose episode ended is reset in the same step, its row of ``obs`` is the
reset observation, ``infos[i]["terminal_observation"]`` the true terminal one and
``reset_infos[i]`` its reset info. Every step's ``infos[i]`` holds the env's step info plus
``"TimeLimit.truncated"`` (``truncated and not terminated``); ``dones`` is
``terminated | truncated`` and rewards are float32, as DummyVecEnv gives them.

Examples:
    >>> import envhive, numpy as np
    >>> venv = envhive.make("CartPole-v1", num_envs=2, api="sb3", max_episode_steps=2)
    >>> venv.seed(0)
    [0, 1]
    >>> venv.reset().shape
    (2, 4)
    >>> for _ in range(2):
    ...     obs, rewards, dones, infos = venv.step(np.array([0, 1]))
    >>> rewards, dones
    (array([1., 1.], dtype=float32), array([ True,  True]))
    >>> infos[0]["TimeLimit.truncated"], infos[0]["terminal_observation"].shape
    (True, (4,))
    >>> venv.close()
"""

from __future__ import annotations

import copy
import numbers
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envhive._extras import require
from envhive._infos import Column, InfoColumns
from envhive._pool import Pool
from envhive._spaces import ArrayCodec, codec_for
from envhive.errors import ActionError, ConfigError, ConfigTypeError, EnvWorkerError
from envhive.frontends._flat import check_agent_axis

require("stable_baselines3", "sb3", "api='sb3'")

from stable_baselines3.common.vec_env.base_vec_env import (  # noqa: E402
    VecEnv,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

__all__ = ["SB3VecEnv", "info_rows"]

#: Column dtypes that Python scalars make (``int``, ``float``, ``bool``): their values go
#: back to Python scalars, as the envs most often report them.
_PYTHON_DTYPES = (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_))
_WRAPPER_NAME = re.compile(r"<([A-Za-z_]\w*)")


def _reader(values: np.ndarray) -> Any:
    """Row ``i`` of a typed or object info column as one env's value (a callable of ``i``)."""
    if values.dtype == object:
        return values.__getitem__  # the reported objects themselves
    if values.ndim == 1:
        if values.dtype in _PYTHON_DTYPES:
            return values.tolist().__getitem__
        return values.__getitem__  # numpy scalars of the column's dtype
    return lambda i: values[i].copy()  # array infos: rows of the column, kept apart


def _fill(columns: InfoColumns, out: list[dict[str, Any]]) -> None:
    for key, col in columns.items():
        if not isinstance(col, Column):
            continue  # a raw slot under a dict column (see below): its parent sets it
        values, mask = col
        rows = np.flatnonzero(mask).tolist()
        if not rows:
            continue
        if isinstance(values, dict):
            nested: list[dict[str, Any]] = [{} for _ in out]
            _fill(values, nested)
            for i in rows:
                # An env that reported a plain value under a key an earlier env reported as
                # a dict: gymnasium's batching puts it in the dict under the row index.
                raw = values.get(i, nested[i])  # type: ignore[call-overload]
                out[i][key] = nested[i] if isinstance(raw, Column) else raw
        else:
            get = _reader(values)
            for i in rows:
                out[i][key] = get(i)


def info_rows(columns: InfoColumns, n: int) -> list[dict[str, Any]]:
    """A batch's info columns as one info dict per row (nested columns as nested dicts).

    Each row has the keys its env reported. Numbers whose column has a Python scalar's dtype
    (float64, int64, bool) come back as Python scalars, other numbers as numpy scalars of the
    column's dtype, arrays as copies of the row, anything else as reported.

    Examples:
        >>> from envhive._infos import add_info
        >>> cols = add_info({}, {"lives": 3, "pos": {"x": 0.5}}, 1, 2)
        >>> info_rows(cols, 2)
        [{}, {'lives': 3, 'pos': {'x': 0.5}}]
    """
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    if columns:
        _fill(columns, out)
    return out


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two envs' reset options are equal (options holding arrays: only if identical)."""
    try:
        return a is b or bool(a == b)
    except ValueError:  # arrays compared elementwise
        return False


def _check_observation_space(space: spaces.Space) -> None:
    """SB3 VecEnvs hold observations as arrays: one per env for Box, Discrete, MultiDiscrete
    and MultiBinary, a dict or tuple of such arrays for a flat Dict or Tuple space."""
    leaves = list(space.spaces.values()) if isinstance(space, spaces.Dict) else (
        list(space.spaces) if isinstance(space, spaces.Tuple) else [space])
    for leaf in leaves:
        if isinstance(leaf, (spaces.Dict, spaces.Tuple)):
            raise ConfigError(
                f"api='sb3': SB3 does not support nested observation spaces (got {space}); "
                "flatten it (gymnasium.wrappers.FlattenObservation) or use api='gymnasium'"
            )
        if not isinstance(codec_for(leaf), ArrayCodec):
            raise ConfigError(
                f"api='sb3': a {type(leaf).__name__} observation has no array form, and SB3 "
                "VecEnvs hold observations as arrays (Box, Discrete, MultiDiscrete, MultiBinary "
                "and flat Dict/Tuple of those); use api='gymnasium'"
            )


def _is_index(i: Any) -> bool:
    """An env index: an int or numpy integer (not a bool, not a float holding a whole number)."""
    return isinstance(i, numbers.Integral) and not isinstance(i, (bool, np.bool_))


def _stack(space: spaces.Space, rows: list[Any], where: str) -> Any:
    """One action per env (``rows``, as DummyVecEnv takes them) as one batch of ``space``:
    a dict of batches for a Dict space, a tuple of batches for a Tuple space, an array for a
    leaf (its values are checked by the pool afterwards)."""
    if isinstance(space, spaces.Dict):
        keys = list(space.spaces)
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping) or set(row) != set(keys):
                got = sorted(row) if isinstance(row, Mapping) else type(row).__name__
                raise ActionError(f"invalid actions (env {i}){where}: expected a dict with keys "
                                  f"{sorted(keys)}, got {got}; nothing was stepped")
        return {k: _stack(space.spaces[k], [row[k] for row in rows], f"{where}[{k!r}]")
                for k in keys}
    if isinstance(space, spaces.Tuple):
        k = len(space.spaces)
        for i, row in enumerate(rows):
            if not isinstance(row, (tuple, list)) or len(row) != k:
                got = f"length {len(row)}" if isinstance(row, (tuple, list)) else type(row).__name__
                raise ActionError(f"invalid actions (env {i}){where}: expected a tuple of {k}, "
                                  f"got {got}; nothing was stepped")
        return tuple(_stack(sub, [row[j] for row in rows], f"{where}[{j}]")
                     for j, sub in enumerate(space.spaces))
    try:
        return np.asarray(rows)
    except (ValueError, TypeError):  # ragged: the pool's check says what is wrong
        return rows


def _per_env(space: spaces.Space, actions: Any, n: int) -> bool:
    """Whether ``actions`` for a Dict or Tuple action space are one action per env (a sequence
    of ``n`` dicts or tuples, as DummyVecEnv takes them) rather than one batch per key or
    position. A sequence that reads both ways (a Tuple space of ``n`` leaves given as ``n``
    lists) is read as DummyVecEnv reads it: one action per env."""
    if isinstance(actions, Mapping) or not isinstance(actions, (Sequence, np.ndarray)):
        return False
    if len(actions) != n:
        return False
    if isinstance(space, spaces.Dict):
        return all(isinstance(a, Mapping) for a in actions)
    k = len(space.spaces) if isinstance(space, spaces.Tuple) else -1
    return all(isinstance(a, (tuple, list)) and len(a) == k for a in actions)


class SB3VecEnv(VecEnv):
    """A Stable-Baselines3 ``VecEnv`` over an envhive pool (see the module docstring).

    Built by ``envhive.make(..., api="sb3")``. Spaces are one env's (as SB3 wants them);
    ``obs`` is an array of shape ``(num_envs, *shape)``, a dict of such arrays for a Dict
    space, a tuple for a Tuple space. ``step_async`` keeps the actions and ``step_wait`` steps
    every env in one sync call of the pool (its fastest path on every executor); SB3 calls the
    two back to back.

    Args:
        pool: a pool in same_step autoreset mode with ``copy=True`` (SB3 keeps the last
            observations across steps, so they must not be views of buffers the next step
            overwrites).
        name: for ``repr``.

    Examples:
        >>> import envhive, numpy as np
        >>> venv = envhive.make("CartPole-v1", num_envs=3, api="sb3", seed=0)
        >>> isinstance(venv.observation_space, type(venv.get_attr("observation_space")[0]))
        True
        >>> obs = venv.reset()
        >>> venv.step_async(np.array([0, 1, 0]))
        >>> obs, rewards, dones, infos = venv.step_wait()
        >>> obs.dtype, len(infos), venv.env_method("get_wrapper_attr", "spec", indices=[2])[0].id
        (dtype('float32'), 3, 'CartPole-v1')
        >>> venv.close()
    """

    def __init__(self, pool: Pool, name: str = "") -> None:
        # A pool of one-agent envs comes as that agent's (OneAgent); several agents come
        # flattened (agent_layout="flat": FlatAgents) or are refused.
        pool = check_agent_axis(pool, "sb3")
        if pool.autoreset.name != "SAME_STEP" or not pool.copy:
            raise ConfigError("SB3VecEnv needs a pool in same_step mode with copy=True (use make(api='sb3'))")
        _check_observation_space(pool.observation_space)
        self.pool = pool
        self._name = name
        self._obs_codec = codec_for(pool.observation_space)
        act = codec_for(pool.action_space)
        # Integer action spaces take SB3's float actions of whole numbers (MultiBinary
        # policies sample floats), cast to the space's dtype.
        self._int_actions = act.dtype if isinstance(act, ArrayCodec) and act.integer else None
        self._actions: Any = None
        # Dict and Tuple action spaces also take one action per env (see _per_env).
        self._structured = isinstance(pool.action_space, (spaces.Dict, spaces.Tuple))
        self._started = False  # reset() (or the implicit one of step_wait) has run
        self._reads_wrappers = True  # get_attr through get_wrapper_attr (methods uncalled)
        # VecEnv's constructor reads render_mode from every env (get_attr).
        # Own copies of the spaces: seeding them (make(seed=), SB3's algorithms) leaves the
        # envs' spaces alone on in-process executors.
        super().__init__(pool.num_envs, copy.deepcopy(pool.observation_space),
                         copy.deepcopy(pool.action_space))
        self.metadata = dict(pool.props.metadata)  # the env's, as DummyVecEnv has it

    # -- VecEnv: stepping ---------------------------------------------------------------
    def reset(self) -> VecEnvObs:
        """Reset every env; return the observations (reset infos: ``reset_infos``).

        The seeds of ``seed()`` and options of ``set_options()`` are used by this reset
        only, as in DummyVecEnv; without them the first reset uses ``make(seed=...)`` and
        later ones continue each env's generator.
        """
        self._actions = None
        seeds = self._seeds if any(s is not None for s in self._seeds) else None
        groups: list[tuple[dict[str, Any], list[int]]] = []
        for i, opts in enumerate(self._options):
            for known, ids in groups:
                if _same(known, opts):
                    ids.append(i)
                    break
            else:
                groups.append((opts, [i]))
        if len(groups) == 1:
            b = self.pool.reset(seed=seeds, options=groups[0][0] or None)
            self.reset_infos = info_rows(b.infos, self.num_envs)
        else:
            # Options differ between envs: one masked reset per distinct options (the last
            # reset's rows repeat the current observations of the envs it leaves alone).
            for opts, ids in groups:
                mask = np.zeros(self.num_envs, np.bool_)
                mask[ids] = True
                b = self.pool.reset(seed=seeds, options={**opts, "reset_mask": mask})
                rows = info_rows(b.infos, self.num_envs)
                for i in ids:
                    self.reset_infos[i] = rows[i]
        self._reset_seeds()  # used once, as DummyVecEnv does
        self._reset_options()
        self._started = True
        return b.obs

    def set_options(self, options: list[dict[str, Any]] | dict[str, Any] | None = None) -> None:
        """Options for the next ``reset()`` only: one dict for every env, or one per env
        (``None``: none), as in SB3's VecEnvs.

        Raises:
            envhive.ConfigTypeError: ``options`` is neither a dict nor a sequence of dicts.
            envhive.ConfigError: a sequence whose length is not ``num_envs``.
        """
        if options is None or isinstance(options, Mapping):
            super().set_options(dict(options) if options is not None else None)
            return
        if not isinstance(options, Sequence) or isinstance(options, (str, bytes)):
            raise ConfigTypeError(
                f"set_options: expected a dict, a list of {self.num_envs} dicts or None, got "
                f"{type(options).__name__}"
            )
        if len(options) != self.num_envs:
            raise ConfigError(
                f"set_options: expected {self.num_envs} dicts (one per env), got {len(options)}"
            )
        for i, opts in enumerate(options):
            if opts is not None and not isinstance(opts, Mapping):
                raise ConfigTypeError(
                    f"set_options: expected a dict (or None) for env {i}, got "
                    f"{type(opts).__name__} {opts!r}"
                )
        super().set_options([dict(o) if o is not None else {} for o in options])

    def step_async(self, actions: np.ndarray) -> None:
        """Keep ``actions`` (one row per env) for ``step_wait``."""
        self._actions = actions

    def _action_batch(self, actions: Any) -> Any:
        if self._structured:
            space, n = self.pool.action_space, self.num_envs
            return _stack(space, list(actions), "") if _per_env(space, actions, n) else actions
        dtype = self._int_actions
        if dtype is not None and isinstance(actions, np.ndarray) and actions.dtype.kind == "f":
            whole = actions.astype(dtype)
            if np.array_equal(whole, actions):
                return whole
        return actions  # the pool says what is wrong with a bad batch

    def step_wait(self) -> VecEnvStepReturn:
        """Step every env with the actions of ``step_async``.

        Returns:
            ``(obs, rewards, dones, infos)``: reset observations for envs that ended (their
            terminal ones in ``infos[i]["terminal_observation"]``), float32 rewards, bool
            dones, one info dict per env.

        Raises:
            envhive.ActionError: the batch does not fit the action space (nothing stepped).
            envhive.ResetNeededError: an env raised in an earlier call and was not reset
                since (before the first ``reset()``, the envs are reset first: see
                ``_start``).
            envhive.EnvWorkerError: an env raised; it names the env and has its traceback.
        """
        if self._actions is None:
            raise ConfigError("step_wait(): no actions; call step_async(actions) first")
        actions, self._actions = self._actions, None
        if not self._started:
            self._start()
        b = self.pool.step(self._action_batch(actions))
        n = self.num_envs
        terminated, truncated = b.terminated, b.truncated
        cuts = (truncated & ~terminated).tolist()
        ended: list[int] = np.flatnonzero(b.has_final).tolist() if b.has_final is not None else []
        if not (b.infos or b.final_infos):
            # No env reported an info (the common step of many envs): each row's dict holds
            # only its flag, and a row reset in the same op had an empty reset info.
            infos = [{"TimeLimit.truncated": cut} for cut in cuts]
            for i in ended:
                self.reset_infos[i] = {}
        else:
            infos = info_rows(b.infos, n)
            # Rows reset in the same op: their infos are the reset infos, and the steps'
            # infos are their final infos.
            if ended:
                finals = info_rows(b.final_infos, n)
                for i in ended:
                    self.reset_infos[i] = infos[i]
                    infos[i] = finals[i]
            for info, cut in zip(infos, cuts):
                info["TimeLimit.truncated"] = cut
        single = self._obs_codec.single
        for i in ended:
            infos[i]["terminal_observation"] = single(b.final_obs, i)
        return b.obs, b.reward.astype(np.float32), terminated | truncated, infos

    def _start(self) -> None:
        """The reset of a step before the first ``reset()``: DummyVecEnv steps such envs as
        built (which gymnasium's own envs refuse); here they are reset first, with ``make``'s
        seeds. The seeds of ``seed()`` and options of ``set_options()`` stay for ``reset()``."""
        b = self.pool.reset()
        self.reset_infos = info_rows(b.infos, self.num_envs)
        self._started = True

    def close(self) -> None:
        """Close the pool (its envs, workers and buffers). Idempotent."""
        self.pool.close()

    # -- VecEnv: env access ---------------------------------------------------------------
    def _ids(self, indices: VecEnvIndices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        items: list[Any] | None = [indices]
        if not _is_index(indices):
            # Any iterable of ints, as DummyVecEnv takes (no int() cast: 0.5 is not env 0).
            iterable = not isinstance(indices, (str, bytes)) and hasattr(indices, "__iter__")
            items = list(indices) if iterable else None  # type: ignore[arg-type]
        if items is None or not all(_is_index(i) for i in items):
            raise ConfigTypeError(
                f"indices: expected None, an int or a sequence of ints (env indices), got "
                f"{indices!r}"
            )
        ids = [int(i) for i in items]
        for i in ids:
            if not -self.num_envs <= i < self.num_envs:
                raise IndexError(f"env index {i} is out of range for {self.num_envs} envs")
        return [i % self.num_envs for i in ids]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Attribute ``attr_name`` of each env (of ``indices``, in that order), looked up
        through its wrappers; methods come back uncalled, as DummyVecEnv gives them.

        Raises:
            AttributeError: an env has no such attribute.
        """
        ids = self._ids(indices)
        try:
            if self._reads_wrappers:
                try:
                    return list(self.pool.call("get_wrapper_attr", (attr_name,), env_ids=ids))
                except EnvWorkerError:
                    raise
                except (ConfigError, AttributeError):
                    # Envs without per-env gymnasium objects (native kernels, torch batched
                    # envs) expose attributes only by name.
                    self._reads_wrappers = False
            return list(self.pool.call(attr_name, env_ids=ids))
        except EnvWorkerError as err:
            if err.cause_type == "AttributeError":
                raise AttributeError(f"env {err.env_id}: {err.message}") from err
            raise
        except ConfigError as err:  # a name that envs without gymnasium objects do not have
            raise AttributeError(str(err)) from err

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set ``attr_name`` to ``value`` on each env (of ``indices``), through its wrappers
        (gymnasium's ``set_wrapper_attr``). Every env gets ``value`` itself, lists too."""
        ids = self._ids(indices)
        self.pool.set_attr(attr_name, [value] * len(ids), env_ids=ids)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """Call method ``method_name`` of each env (of ``indices``); results in that order."""
        ids = self._ids(indices)
        return list(self.pool.call(method_name, method_args, method_kwargs, env_ids=ids))

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Whether each env (of ``indices``) has a wrapper of class ``wrapper_class``.

        Read from each env's ``str()``, which lists its gymnasium wrappers by class name
        (``<Monitor<TimeLimit<...>>>``), so it works on every executor; a subclass of
        ``wrapper_class`` under another name does not count. Envs without gymnasium objects
        (native kernels) have no wrappers.
        """
        if not isinstance(wrapper_class, type):
            raise ConfigTypeError(
                f"env_is_wrapped: expected a wrapper class (e.g. stable_baselines3's Monitor), "
                f"got {type(wrapper_class).__name__} {wrapper_class!r}"
            )
        ids = self._ids(indices)
        try:
            chains = self.pool.call("__str__", env_ids=ids)
        except (ConfigError, AttributeError):
            return [False] * len(ids)
        name = wrapper_class.__name__
        return [name in _WRAPPER_NAME.findall(chain) if isinstance(chain, str) else False
                for chain in chains]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Each env's ``render()`` (render mode ``"rgb_array"``; ``None`` per env otherwise)."""
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but get_images() needs 'rgb_array'",
                stacklevel=2,
            )
            return [None] * self.num_envs
        return list(self.pool.call("render"))

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seeds for the next ``reset()`` only: env ``i`` gets ``seed + i`` (a random base
        when ``seed`` is ``None``), as in SB3's VecEnvs; returns them."""
        return super().seed(seed)

    def __repr__(self) -> str:
        return (f"envhive.SB3VecEnv({self._name!r}, num_envs={self.num_envs}, "
                f"executor={self.pool.describe()!r})")
