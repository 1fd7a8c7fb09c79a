"""Space codecs: how one gymnasium space maps onto preallocated batch arrays.

A *codec* is built once per space tree (with :func:`functools.singledispatch`, as gymnasium's
own vector utilities do) and then used on the hot path without any further dispatch. It knows
how to allocate the batched arrays for ``n`` envs, write one env's value into slot ``i``, read
slot ``i`` back as a single-env value, and validate a batch of actions.

Leaf spaces with a fixed array form (Box, Discrete, MultiDiscrete, MultiBinary) become one
array each with a leading env axis; Dict and Tuple become dicts and tuples of their children;
every other space (Text, Sequence, Graph, OneOf, user-defined) becomes a 1-d object array.

Examples:
    >>> import numpy as np
    >>> from gymnasium import spaces
    >>> codec = codec_for(spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "id": spaces.Discrete(3)}))
    >>> buf = codec.allocate(4)
    >>> codec.write(buf, 1, {"pos": np.array([0.5, -0.5], np.float32), "id": 2})
    >>> buf["id"].tolist(), buf["pos"][1].tolist()
    ([0, 2, 0, 0], [0.5, -0.5])
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

try:  # the compiled check of in_bounds (an optional extension built at install)
    from envhive._runloop import within as _within
except ImportError:  # pragma: no cover - built without a compiler
    _within = None

__all__ = ["BadBatch", "Codec", "ArrayCodec", "ObjectCodec", "codec_for", "tree_map", "tree_leaves"]

Tree = Any  # np.ndarray | dict[str, Tree] | tuple[Tree, ...]
Allocator = Callable[[tuple[int, ...], np.dtype], np.ndarray]


def _zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def tree_map(fn: Callable[..., Any], tree: Tree, *rest: Tree) -> Tree:
    """Apply ``fn`` leaf-wise over one or more trees of identical structure.

    Examples:
        >>> tree_map(lambda a: a * 2, {"a": np.ones(2), "b": (np.zeros(1),)})
        {'a': array([2., 2.]), 'b': (array([0.]),)}
    """
    if isinstance(tree, dict):
        return {k: tree_map(fn, v, *(r[k] for r in rest)) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(tree_map(fn, v, *(r[j] for r in rest)) for j, v in enumerate(tree))
    return fn(tree, *rest)


def tree_leaves(tree: Tree) -> list[np.ndarray]:
    """Flatten a tree into its leaf arrays, in a deterministic order.

    Examples:
        >>> [a.shape for a in tree_leaves({"a": np.ones(2), "b": (np.zeros((1, 3)),)})]
        [(2,), (1, 3)]
    """
    if isinstance(tree, dict):
        return [leaf for v in tree.values() for leaf in tree_leaves(v)]
    if isinstance(tree, tuple):
        return [leaf for v in tree for leaf in tree_leaves(v)]
    return [tree]


@dataclass(frozen=True)
class BadBatch:
    """Why a batch does not fit its space: the batch position of the first bad value
    (``index``; ``None`` when the batch as a whole is wrong: its type, length, shape or dtype)
    and the reason, for a person (``str()`` of it).

    Examples:
        >>> bad = codec_for(spaces.Discrete(3)).validate(np.array([0, 5, 1]), 3)[1]
        >>> bad.index, str(bad)
        (1, 'value 5 at [1] is outside Discrete(3)')
        >>> codec_for(spaces.Discrete(3)).validate(np.zeros(2, np.int64), 3)[1].index is None
        True
    """

    index: int | None
    reason: str

    def __str__(self) -> str:
        return self.reason

    def inside(self, where: str) -> BadBatch:
        """The same, found in a part of a larger batch (``where``: ``"['key']"``, ``"[0]"``)."""
        return BadBatch(self.index, f"{where}: {self.reason}")


class Codec:
    """Maps one space onto batch arrays. Subclasses implement each operation for their kind."""

    space: spaces.Space

    def allocate(self, n: int, alloc: Allocator = _zeros) -> Tree:
        """Allocate the batch arrays for ``n`` envs (``alloc`` makes the fixed-form leaves)."""
        raise NotImplementedError

    def write(self, buf: Tree, i: int, value: Any) -> None:
        """Write one env's value into slot ``i``; raise ``ValueError`` if it does not fit."""
        raise NotImplementedError

    def read(self, buf: Tree, i: int) -> Any:
        """Slot ``i`` as a single-env value (views, not copies: for feeding actions to envs)."""
        raise NotImplementedError

    def single(self, buf: Tree, i: int) -> Any:
        """Slot ``i`` as an independent single-env value (copies: safe to keep)."""
        raise NotImplementedError

    def validate(self, batch: Any, n: int) -> tuple[Tree, BadBatch | None]:
        """Check a batch of ``n`` values; return (normalized tree, ``None`` or why it does
        not fit: a :class:`BadBatch` with the batch position of the first bad value)."""
        raise NotImplementedError

    def has_objects(self) -> bool:
        """Whether any leaf is an object array (no fixed array form)."""
        raise NotImplementedError


class ArrayCodec(Codec):
    """A space with a fixed shape and dtype: Box, Discrete, MultiDiscrete, MultiBinary."""

    def __init__(
        self, space: spaces.Space, low: np.ndarray | None, high: np.ndarray | None
    ) -> None:
        self.space = space
        self.shape: tuple[int, ...] = tuple(space.shape or ())
        self.dtype = np.dtype(space.dtype)
        self.integer = np.issubdtype(self.dtype, np.integer)
        self.boolean = self.dtype.kind == "b"
        self.low = low
        self.high = high
        # Bounds that are +-inf everywhere need no range check (saves a reduction per call);
        # a bool Box is bounded by its dtype (gymnasium's Box.contains checks the dtype only).
        self._check_low = not self.boolean and low is not None and bool(np.any(np.isfinite(low)))
        self._check_high = not self.boolean and high is not None and bool(np.any(np.isfinite(high)))
        # (low, high) as Python numbers when both bounds are the same everywhere and finite.
        self._scalar_bounds: tuple[Any, Any] | None = None
        if self._check_low and self._check_high:
            lo_arr, hi_arr = np.asarray(low), np.asarray(high)
            uniform = lo_arr.size and (lo_arr == lo_arr.flat[0]).all() and (hi_arr == hi_arr.flat[0]).all()
            if uniform and np.isfinite(lo_arr.flat[0]) and np.isfinite(hi_arr.flat[0]):
                self._scalar_bounds = (lo_arr.flat[0].item(), hi_arr.flat[0].item())

    def allocate(self, n: int, alloc: Allocator = _zeros) -> np.ndarray:
        return alloc((n, *self.shape), self.dtype)

    def write(self, buf: np.ndarray, i: int, value: Any) -> None:
        arr = value if type(value) is np.ndarray else np.asarray(value)
        if arr.shape != self.shape:
            raise ValueError(f"expected shape {self.shape} for {self.space}, got {arr.shape}")
        if arr.dtype != self.dtype and not np.can_cast(arr.dtype, self.dtype, "same_kind"):
            # What gymnasium's concatenate (np.stack with out=) refuses: floats into an
            # integer space, objects, strings; a silent cast would hide the env's bug.
            raise ValueError(f"expected dtype {self.dtype} for {self.space}, got {arr.dtype}")
        buf[i] = arr

    def read(self, buf: np.ndarray, i: int) -> Any:
        return buf[i]

    def single(self, buf: np.ndarray, i: int) -> Any:
        value = buf[i]
        if not self.shape:
            return value
        return value.copy() if type(value) is np.ndarray else value.clone()  # a tensor

    def has_objects(self) -> bool:
        return False

    def in_bounds(self, arr: np.ndarray) -> bool:
        """Whether every value of ``arr`` (a batch of this space's shape and dtype kind) lies
        in the space's bounds (a NaN does not): ``validate``'s check of values alone.

        Examples:
            >>> codec = ArrayCodec(spaces.Discrete(3), np.array(0), np.array(2))
            >>> codec.in_bounds(np.array([0, 2])), codec.in_bounds(np.array([3]))
            (True, False)
        """
        if self._scalar_bounds:
            lo, hi = self._scalar_bounds
            if _within is not None:  # the same check, compiled (None: not an array it reads)
                ok = _within(arr, lo, hi)
                if ok is not None:
                    return bool(ok)
            if arr.size <= 32:
                # Small batches (the common per-call case): Python comparisons beat numpy's
                # per-call overhead. Integers: their min and max; floats one by one, where a
                # NaN fails both comparisons.
                values = arr.ravel().tolist()
                if arr.dtype.kind in "iu":
                    return bool(values) and lo <= min(values) and max(values) <= hi
                return all(lo <= v <= hi for v in values)
            return bool(lo <= arr.min() and arr.max() <= hi)  # a NaN makes min/max NaN: False
        bad = self._out_of_bounds(arr)
        return bad is None or not np.count_nonzero(bad)

    def _out_of_bounds(self, arr: np.ndarray) -> np.ndarray | None:
        """The mask of values outside the bounds (NaN included); ``None``: nothing to check."""
        # NaN fails every comparison, so it is caught as out of bounds.
        if self._check_low and self._check_high:
            return ~((arr >= self.low) & (arr <= self.high))
        if self._check_low:
            return ~(arr >= self.low)
        if self._check_high:
            return ~(arr <= self.high)
        if arr.dtype.kind == "f":
            return np.isnan(arr)
        return None

    def validate(self, batch: Any, n: int) -> tuple[np.ndarray, BadBatch | None]:
        if type(batch) is np.ndarray:
            arr = batch
        else:
            try:
                arr = np.asarray(batch)
            except (ValueError, TypeError) as err:  # ragged lists, objects numpy cannot take
                return np.empty(0), BadBatch(None, (
                    f"expected a batch of {n} from {self.space} (an array of shape "
                    f"{(n, *self.shape)}), got a {type(batch).__name__} numpy cannot make into "
                    f"one array: {err}"
                ))
        want = (n, *self.shape)
        if arr.shape != want:
            return arr, BadBatch(
                None, f"expected shape {want} for a batch of {n} from {self.space}, got {arr.shape}"
            )
        kind = arr.dtype.kind
        if self.boolean:
            ok = kind == "b"
        else:
            ok = kind in "iu" if self.integer else kind in "iuf"
        if not ok:
            need = "bool" if self.boolean else "integer" if self.integer else "integer or floating"
            return arr, BadBatch(None, f"expected {need} dtype for {self.space}, got dtype {arr.dtype}")
        if self._scalar_bounds and self.in_bounds(arr):
            return arr, None
        bad = self._out_of_bounds(arr)
        if bad is None:
            return arr, None
        if np.count_nonzero(bad):
            k = int(np.argwhere(bad.reshape(n, -1).any(axis=1))[0, 0])
            return arr, BadBatch(k, f"value {arr[k].tolist()!r} at [{k}] is outside {self.space}")
        return arr, None


class ObjectCodec(Codec):
    """A space with no fixed array form; values travel as Python objects."""

    def __init__(self, space: spaces.Space) -> None:
        self.space = space

    def allocate(self, n: int, alloc: Allocator = _zeros) -> np.ndarray:
        # Object leaves never go through ``alloc``: they cannot live in shared memory.
        return np.full(n, None, dtype=object)

    def write(self, buf: np.ndarray, i: int, value: Any) -> None:
        buf[i] = value

    def read(self, buf: np.ndarray, i: int) -> Any:
        return buf[i]

    def single(self, buf: np.ndarray, i: int) -> Any:
        return buf[i]

    def has_objects(self) -> bool:
        return True

    def validate(self, batch: Any, n: int) -> tuple[Any, BadBatch | None]:
        if isinstance(batch, (str, bytes)) or not isinstance(batch, (Sequence, np.ndarray)):
            return batch, BadBatch(
                None, f"expected a sequence of {n} values of {self.space}, got {type(batch).__name__}"
            )
        if len(batch) != n:
            return batch, BadBatch(None, f"expected {n} values of {self.space}, got {len(batch)}")
        out = np.full(n, None, dtype=object)
        for k, value in enumerate(batch):
            try:
                inside = self.space.contains(value)
            except Exception as err:  # a user-defined space's contains() may raise instead
                return batch, BadBatch(k, f"value {value!r} at [{k}] is not in {self.space} (its "
                                          f"contains() raised {type(err).__name__}: {err})")
            if not inside:
                return batch, BadBatch(k, f"value {value!r} at [{k}] is not in {self.space}")
            out[k] = value
        return out, None


class DictCodec(Codec):
    """A Dict space: a dict of child trees keyed like the space."""

    def __init__(self, space: spaces.Dict) -> None:
        self.space = space
        self.children = {k: codec_for(s) for k, s in space.spaces.items()}

    def allocate(self, n: int, alloc: Allocator = _zeros) -> dict[str, Tree]:
        return {k: c.allocate(n, alloc) for k, c in self.children.items()}

    def write(self, buf: dict[str, Tree], i: int, value: Any) -> None:
        if not isinstance(value, Mapping) or value.keys() != self.children.keys():
            got = sorted(value) if isinstance(value, Mapping) else type(value).__name__
            raise ValueError(f"expected a dict with keys {sorted(self.children)}, got {got}")
        for k, c in self.children.items():
            try:
                c.write(buf[k], i, value[k])
            except ValueError as err:
                raise ValueError(f"[{k!r}]: {err}") from None

    def read(self, buf: dict[str, Tree], i: int) -> dict[str, Any]:
        return {k: c.read(buf[k], i) for k, c in self.children.items()}

    def single(self, buf: dict[str, Tree], i: int) -> dict[str, Any]:
        return {k: c.single(buf[k], i) for k, c in self.children.items()}

    def has_objects(self) -> bool:
        return any(c.has_objects() for c in self.children.values())

    def validate(self, batch: Any, n: int) -> tuple[Tree, BadBatch | None]:
        if not isinstance(batch, Mapping) or set(batch.keys()) != set(self.children):
            got = sorted(batch) if isinstance(batch, Mapping) else type(batch).__name__
            return batch, BadBatch(None, f"expected a dict with keys {sorted(self.children)}, got {got}")
        out = {}
        for k, c in self.children.items():
            out[k], bad = c.validate(batch[k], n)
            if bad is not None:
                return batch, bad.inside(f"[{k!r}]")
        return out, None


class TupleCodec(Codec):
    """A Tuple space: a tuple of child trees."""

    def __init__(self, space: spaces.Tuple) -> None:
        self.space = space
        self.children = tuple(codec_for(s) for s in space.spaces)

    def allocate(self, n: int, alloc: Allocator = _zeros) -> tuple[Tree, ...]:
        return tuple(c.allocate(n, alloc) for c in self.children)

    def write(self, buf: tuple[Tree, ...], i: int, value: Any) -> None:
        if not isinstance(value, (tuple, list)) or len(value) != len(self.children):
            got = f"length {len(value)}" if isinstance(value, (tuple, list)) else type(value).__name__
            raise ValueError(f"expected a tuple of {len(self.children)}, got {got}")
        for j, c in enumerate(self.children):
            try:
                c.write(buf[j], i, value[j])
            except ValueError as err:
                raise ValueError(f"[{j}]: {err}") from None

    def read(self, buf: tuple[Tree, ...], i: int) -> tuple[Any, ...]:
        return tuple(c.read(buf[j], i) for j, c in enumerate(self.children))

    def single(self, buf: tuple[Tree, ...], i: int) -> tuple[Any, ...]:
        return tuple(c.single(buf[j], i) for j, c in enumerate(self.children))

    def has_objects(self) -> bool:
        return any(c.has_objects() for c in self.children)

    def validate(self, batch: Any, n: int) -> tuple[Tree, BadBatch | None]:
        if not isinstance(batch, (tuple, list)) or len(batch) != len(self.children):
            got = f"length {len(batch)}" if isinstance(batch, (tuple, list)) else type(batch).__name__
            return batch, BadBatch(None, f"expected a tuple of {len(self.children)} batches, got {got}")
        out = []
        for j, c in enumerate(self.children):
            sub, bad = c.validate(batch[j], n)
            if bad is not None:
                return batch, bad.inside(f"[{j}]")
            out.append(sub)
        return tuple(out), None


@functools.singledispatch
def _build(space: spaces.Space) -> Codec:
    # Text, Sequence, Graph, OneOf and user-defined spaces have no fixed array form.
    return ObjectCodec(space)


@_build.register
def _(space: spaces.Box) -> Codec:
    return ArrayCodec(space, space.low, space.high)


@_build.register
def _(space: spaces.Discrete) -> Codec:
    return ArrayCodec(space, np.asarray(space.start), np.asarray(space.start + space.n - 1))


@_build.register
def _(space: spaces.MultiDiscrete) -> Codec:
    return ArrayCodec(space, space.start, space.start + space.nvec - 1)


@_build.register
def _(space: spaces.MultiBinary) -> Codec:
    return ArrayCodec(space, np.zeros(space.shape, np.int8), np.ones(space.shape, np.int8))


@_build.register
def _(space: spaces.Dict) -> Codec:
    return DictCodec(space)


@_build.register
def _(space: spaces.Tuple) -> Codec:
    return TupleCodec(space)


def codec_for(space: spaces.Space) -> Codec:
    """Build the codec of a space tree (once; reuse it on the hot path).

    Examples:
        >>> codec_for(spaces.Text(5)).has_objects(), codec_for(spaces.Discrete(2)).has_objects()
        (True, False)
    """
    if not isinstance(space, spaces.Space):
        raise TypeError(f"expected a gymnasium.spaces.Space, got {type(space).__name__}")
    return _build(space)
