"""EnvPool's specs: ``make_spec``, ``env.spec``, per-family spec classes (``AtariEnvSpec``).

An EnvPool spec is a config (a namedtuple of the family's config keys, ``gen_config``) plus
the arrays of its state and action (``state_array_spec``, ``action_array_spec``), seen three
ways: EnvPool's own :class:`ArraySpec`\\ s, dm_env specs (``observation_spec()``,
``action_spec()``) and gymnasium spaces (``observation_space``, ``action_space``).

Here a spec also knows which envhive engine runs it (its :class:`~envhive.envpool._routes.Route`,
decided from the config) and takes its arrays from there: the engine's own spaces and info
keys for envhive's engines, EnvPool's spec for EnvPool's engine. Each family's spec class is a
subclass of :class:`EnvSpec` with the family's config keys and defaults.

Examples:
    >>> from envhive.envpool.classic_control import CartPoleEnvSpec
    >>> config = CartPoleEnvSpec.gen_config(num_envs=2, max_episode_steps=500)
    >>> spec = CartPoleEnvSpec(config)
    >>> spec.config.num_envs, spec.action_space
    (2, Discrete(2))
"""

from __future__ import annotations

import pprint
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from envhive.errors import ConfigError

__all__ = ["ArraySpec", "EnvSpec", "spec_class", "space_arrays", "dm_spec", "gym_space", "to_namedtuple"]

#: Discrete ranges larger than this are Boxes (EnvPool's threshold).
_DISCRETE_LIMIT = 2**20


class ArraySpec:
    """One named array of a state or action: dtype, shape (``-1``: a row per player) and
    bounds, as EnvPool describes it.

    Examples:
        >>> ArraySpec(np.int32, [], (0, 5), ([], []), True).maximum
        5
    """

    def __init__(self, dtype: Any, shape: Sequence[int], bounds: tuple[Any, Any],
                 element_wise_bounds: tuple[Any, Any] = ([], []), is_discrete: bool = False) -> None:
        self.dtype = np.dtype(dtype)
        self.shape = list(shape)
        self.is_discrete = is_discrete
        low, high = element_wise_bounds
        self.minimum = np.array(low) if len(low) else bounds[0]
        self.maximum = np.array(high) if len(high) else bounds[1]

    def __repr__(self) -> str:
        return f"ArraySpec(shape={self.shape}, dtype={self.dtype}, minimum={self.minimum}, maximum={self.maximum})"


def _scalar(value: Any) -> Any:
    arr = np.asarray(value)
    if arr.size and np.all(arr == arr.flat[0]):
        return arr.flat[0].item()
    return None


def space_arrays(space: gym.Space, prefix: str) -> list[tuple[str, ArraySpec]]:
    """The named arrays of a gymnasium space (``prefix``, or ``prefix:<path>`` for the leaves
    of a ``Dict``), as EnvPool names its state keys.

    Examples:
        >>> [k for k, _ in space_arrays(gym.spaces.Dict({"a": gym.spaces.Discrete(2)}), "obs")]
        ['obs:a']
    """
    if isinstance(space, gym.spaces.Dict):
        out: list[tuple[str, ArraySpec]] = []
        for key, sub in space.spaces.items():
            name = f"{prefix}:{key}" if ":" not in prefix else f"{prefix}.{key}"
            out.extend(space_arrays(sub, name))
        return out
    if isinstance(space, gym.spaces.Discrete):
        low = int(space.start)
        return [(prefix, ArraySpec(space.dtype, [], (low, low + int(space.n) - 1), ([], []), True))]
    if isinstance(space, gym.spaces.MultiBinary):
        return [(prefix, ArraySpec(np.bool_, list(space.shape), (False, True)))]
    if isinstance(space, gym.spaces.Box):
        low, high = _scalar(space.low), _scalar(space.high)
        if low is not None and high is not None:
            return [(prefix, ArraySpec(space.dtype, list(space.shape), (low, high)))]
        return [(prefix, ArraySpec(space.dtype, list(space.shape), (0, 0), (space.low.tolist(), space.high.tolist())))]
    raise ConfigError(f"envhive.envpool: no EnvPool array for {space}")


def _discrete(spec: ArraySpec, action: bool) -> tuple[int, int] | None:
    """``(start, n)`` when EnvPool treats the array as discrete (one integer value)."""
    if int(np.prod(np.abs(spec.shape))) != 1 and spec.shape:
        return None
    low, high = _scalar(spec.minimum), _scalar(spec.maximum)
    if low is None or high is None or not float(low).is_integer() or not float(high).is_integer():
        return None
    if high >= _DISCRETE_LIMIT:
        return None
    if action and not (spec.is_discrete or np.issubdtype(spec.dtype, np.integer)):
        return None
    if not action and not np.issubdtype(spec.dtype, np.integer):
        return None
    return int(low), int(high) - int(low) + 1


def gym_space(spec: ArraySpec, action: bool) -> gym.Space:
    """The gymnasium space of one array, by EnvPool's rules (an integer scalar range is a
    ``Discrete``, a bool array ``MultiBinary``, anything else a ``Box``).

    Examples:
        >>> gym_space(ArraySpec(np.int32, [-1], (0, 5), ([], []), True), True)
        Discrete(6)
    """
    found = _discrete(spec, action)
    if found is not None:
        return gym.spaces.Discrete(found[1], start=found[0])
    shape = [s for s in spec.shape if s != -1]
    if spec.dtype == np.bool_:
        return gym.spaces.MultiBinary(shape)
    return gym.spaces.Box(low=spec.minimum, high=spec.maximum, shape=shape, dtype=spec.dtype)


def dm_spec(name: str, spec: ArraySpec, action: bool) -> Any:
    """The dm_env spec of one array, by EnvPool's rules (a zero-based discrete range is a
    ``DiscreteArray``, anything else a ``BoundedArray``)."""
    import dm_env

    found = _discrete(spec, action)
    if found is not None and found[0] == 0:
        dtype = spec.dtype if np.issubdtype(spec.dtype, np.integer) else np.int32
        return dm_env.specs.DiscreteArray(num_values=found[1], dtype=dtype, name=name)
    return dm_env.specs.BoundedArray(shape=[s for s in spec.shape if s != -1], dtype=spec.dtype,
                                     minimum=spec.minimum, maximum=spec.maximum, name=name)


def to_namedtuple(name: str, tree: dict[str, Any]) -> Any:
    """A (nested) dict as a (nested) namedtuple, field names made valid as EnvPool does.

    Examples:
        >>> to_namedtuple("State", {"obs": 1, "players": {"env_id": 2}}).players.env_id
        2
    """
    fields, values = [], []
    for key, value in tree.items():
        field = "".join(c if c.isalnum() or c == "_" else "_" for c in key)
        if not field or field[0].isdigit() or field in _KEYWORDS:
            field = f"_{field}"
        while field in fields:
            field += "_"
        fields.append(field)
        values.append(to_namedtuple(key, value) if isinstance(value, dict) else value)
    typename = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "_"
    if typename[0].isdigit() or typename in _KEYWORDS:
        typename = f"_{typename}"
    return namedtuple(typename, fields)(*values)  # type: ignore[misc]


_KEYWORDS = frozenset(__import__("keyword").kwlist)


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}``.

    Examples:
        >>> nest({"players.env_id": 1, "lives": 2})
        {'players': {'env_id': 1}, 'lives': 2}
    """
    out: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


class EnvSpec:
    """Base of the spec classes: a config plus the arrays of its state and action.

    A family's class (``AtariEnvSpec``, ``DmcCheetahEnvSpec``, ...) is made by
    :func:`spec_class`; an instance is built from a config tuple (``cls.gen_config(...)``) as
    in EnvPool. ``_route`` decides which engine runs it; the arrays come from there.
    """

    _config_keys: list[str] = []
    _default_config_values: tuple[Any, ...] = ()
    gen_config: Any = None
    #: The family (``"atari"``, ``"mujoco.dmc"``); set by :func:`spec_class`.
    family: str = ""

    def __init__(self, config: Sequence[Any], *, _task_id: str | None = None,
                 _wrapper: dict[str, Any] | None = None, _executor: str | None = None,
                 _built: Any = None) -> None:
        # envhive's: the id it was made for, EnvPool's render keywords, the executor asked for,
        # a pool built already (api="envpool").
        self._task_id, self._wrapper, self._executor = _task_id, dict(_wrapper or {}), _executor
        self._built = _built
        values = tuple(config)
        if "batch_size" in self._config_keys and "num_envs" in self._config_keys:
            # EnvPool's spec reads batch_size 0 as num_envs (sync mode) and says so
            b, n = self._config_keys.index("batch_size"), self._config_keys.index("num_envs")
            if len(values) == len(self._config_keys) and values[b] == 0:
                values = (*values[:b], values[n], *values[b + 1:])
        if len(values) != len(self._config_keys):
            raise ConfigError(f"{type(self).__name__}: expected {len(self._config_keys)} config values, "
                              f"got {len(values)}")
        self._config_values = values
        c = self.config
        if int(c.num_envs) < 1:
            raise ConfigError(f"{type(self).__name__}: num_envs must be >= 1, got {c.num_envs}")
        if not 0 <= int(c.batch_size) <= int(c.num_envs):
            raise ConfigError(f"{type(self).__name__}: batch_size must be in [0, num_envs={c.num_envs}], "
                             f"got {c.batch_size}")
        from envhive.envpool._routes import route_of

        self._route = route_of(self)
        self._arrays = self._route.arrays()

    # -- EnvPool's spec API -----------------------------------------------------------------
    @property
    def config(self) -> Any:
        """The config this spec was made with (a namedtuple of the family's keys)."""
        return self.gen_config(*self._config_values)

    @property
    def reward_threshold(self) -> float | None:
        """The id's reward threshold, ``None`` if it has none."""
        return getattr(self.config, "reward_threshold", None)

    @property
    def _state_keys(self) -> list[str]:
        return [k for k, _ in self._arrays.state]

    @property
    def _action_keys(self) -> list[str]:
        return [k for k, _ in self._arrays.action]

    @property
    def state_array_spec(self) -> dict[str, ArraySpec]:
        """Every state array: ``name -> ArraySpec``."""
        return dict(self._arrays.state)

    @property
    def action_array_spec(self) -> dict[str, ArraySpec]:
        """Every action array: ``name -> ArraySpec`` (``env_id``, ``players.env_id``, ``action``)."""
        return dict(self._arrays.action)

    def observation_spec(self) -> Any:
        """dm_env specs of the observation and infos, as EnvPool's ``State`` namedtuple."""
        flat = {k.split(":", 1)[1] if ":" in k else k: dm_spec(k.replace(":", ".").split(".")[-1], v, False)
                for k, v in self._arrays.state if k.startswith(("obs", "info"))}
        return to_namedtuple("State", nest(flat))

    def action_spec(self) -> Any:
        """The dm_env spec of the action."""
        name, spec = self._arrays.action[-1]
        return dm_spec(name, spec, True)

    @property
    def observation_space(self) -> gym.Space:
        """One env's observation space (gymnasium)."""
        return self._arrays.observation_space

    @property
    def action_space(self) -> gym.Space:
        """One env's action space (gymnasium)."""
        return self._arrays.action_space

    gymnasium_observation_space = observation_space
    gymnasium_action_space = action_space

    def __repr__(self) -> str:
        return f"{type(self).__name__}{pprint.pformat(self.config)[6:]}"


def spec_class(name: str, family: str, keys: Sequence[str], defaults: Sequence[Any]) -> type[EnvSpec]:
    """A family's spec class: ``name`` with config ``keys`` and their ``defaults``.

    Examples:
        >>> cls = spec_class("XEnvSpec", "x", ["num_envs", "batch_size"], [1, 0])
        >>> cls.gen_config(num_envs=3)
        Config(num_envs=3, batch_size=0)
    """
    fields = [k.replace(".", "_") for k in keys]
    config = namedtuple("Config", fields, defaults=tuple(defaults))  # type: ignore[misc]
    return type(name, (EnvSpec,), {"_config_keys": list(keys), "_default_config_values": tuple(defaults),
                                   "gen_config": config, "family": family,
                                   "__module__": f"envhive.envpool.{family}"})
