"""EnvPool's arrays: one named state or action array (:class:`ArraySpec`), the spaces and dm_env
specs made from it, and the namedtuples EnvPool's observations and configs are.

Kept apart from the specs (``_spec``) so that the routes, which need these, and the specs,
which need the routes, do not import each other.

Examples:
    >>> to_namedtuple("State", nest({"obs": 1, "players.env_id": 2})).players.env_id
    2
"""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from envhive.errors import ConfigError

__all__ = ["ArraySpec", "space_arrays", "dm_spec", "gym_space", "to_namedtuple", "nest"]

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
    return _tuple_class(typename, tuple(fields))(*values)


@functools.cache
def _tuple_class(typename: str, fields: tuple[str, ...]) -> Any:
    """One namedtuple class per name and fields: the same type on every call (jax's pytrees
    match by type; a class per call would also cost more than the call's arrays)."""
    return namedtuple(typename, fields)  # type: ignore[misc]


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
