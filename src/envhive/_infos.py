"""Infos in columns: per-env ``info`` dicts batched into one typed column per key.

A batch's infos are a mapping ``key -> Column(values, mask)``: ``values`` has one slot per row
(a typed array for numbers and arrays, an object array for anything else, or nested columns
for a nested dict) and ``mask`` says which rows reported the key. This is the pool's neutral
form; each front end lays it out its own way (the gymnasium front end turns each column into
``key`` plus a ``_key`` mask, as gymnasium's vector envs do). The slot type follows
gymnasium's rules exactly (decided by the first row that reports the key), so the gymnasium
layout built from these columns is bit-identical to gymnasium's.

Examples:
    >>> cols = add_info({}, {"lives": 3}, 1, 3)
    >>> cols["lives"].values.tolist(), cols["lives"].mask.tolist()
    ([0, 3, 0], [False, True, False])
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from envhive._ops import RESET

__all__ = [
    "Column", "InfoColumns", "add_info", "batch_infos", "engine_columns", "patch_reset_rows",
    "split_rows", "take_infos", "InfoTable", "row_of",
]


class Column(NamedTuple):
    """One info key over a batch: a value slot and a reported flag per row."""

    #: ``(rows, ...)`` typed array, ``(rows,)`` object array, or nested columns (a dict info).
    values: np.ndarray | InfoColumns
    #: ``(rows,)`` bool: which rows reported the key.
    mask: np.ndarray


InfoColumns = dict[str, Column]

_SCALAR_TYPES = (int, float, bool)


def _new_slot_array(value: Any, n: int) -> np.ndarray:
    # The array type is decided by the first env that reports the key, as gymnasium does.
    if type(value) in _SCALAR_TYPES or isinstance(value, np.number):
        return np.zeros(n, dtype=type(value))
    if isinstance(value, np.ndarray):
        return np.zeros((n, *value.shape), dtype=value.dtype)
    return np.full(n, None, dtype=object)


def add_info(infos: InfoColumns, info: dict[str, Any], i: int, n: int) -> InfoColumns:
    """Merge row ``i``'s ``info`` into the columns ``infos`` of ``n`` rows (in place).

    Args:
        infos: the columns so far (mutated and returned).
        info: one env's info dict.
        i: the row of that env.
        n: the number of rows in the batch.

    Returns:
        ``infos``, updated.

    Examples:
        >>> cols = add_info({}, {"pos": np.zeros(2), "tag": "a"}, 0, 2)
        >>> cols["pos"].values.shape, cols["tag"].values.dtype, cols["tag"].mask.tolist()
        ((2, 2), dtype('O'), [True, False])
    """
    for key, value in info.items():
        col = infos.get(key)
        if isinstance(value, dict):
            nested = add_info(col.values if col is not None else {}, value, i, n)  # type: ignore[arg-type]
            if col is None:
                col = Column(nested, np.zeros(n, dtype=np.bool_))
        else:
            if col is None:
                col = Column(_new_slot_array(value, n), np.zeros(n, dtype=np.bool_))
            col.values[i] = value  # type: ignore[index]
        col.mask[i] = True
        infos[key] = col
    return infos


def batch_infos(items: list[tuple[int, dict[str, Any]]], n: int) -> InfoColumns:
    """Batch several envs' infos at once: the same result as ``add_info`` for each in order.

    Keys whose values are Python or numpy scalars (the common case: reward terms, positions,
    counters) are gathered per key and written with one numpy call each, instead of two
    scalar writes per env and key; other keys (nested dicts, arrays, objects) go through
    :func:`add_info`. The array type of a key is still decided by the first env that reports
    it, and keys keep the order in which they first appear.

    Args:
        items: ``(row, info)`` pairs, distinct rows in any order (``by_env`` takes give
            them in completion order).
        n: the number of rows in the batch.

    Examples:
        >>> out = batch_infos([(0, {"x": 1.5}), (2, {"x": 2.0, "tag": "a"})], 3)
        >>> out["x"].values.tolist(), out["x"].mask.tolist(), out["tag"].values.tolist()
        ([1.5, 0.0, 2.0], [True, False, True], [None, None, 'a'])
    """
    infos: InfoColumns = {}
    columns: dict[str, tuple[list[int], list[Any]]] = {}
    first_seen: list[str] = []
    scalar = _SCALAR_TYPES
    for slot, info in items:
        for key, value in info.items():
            col = columns.get(key)
            if col is not None:
                if type(value) not in scalar and not isinstance(value, np.number):
                    return _sequential(items, n)  # a rare mix: keep add_info's exact rules
                col[0].append(slot)
                col[1].append(value)
            elif key in infos:
                add_info(infos, {key: value}, slot, n)
            elif type(value) in scalar or isinstance(value, np.number):
                columns[key] = ([slot], [value])
                first_seen.append(key)
            else:
                add_info(infos, {key: value}, slot, n)
                first_seen.append(key)
    if not columns:
        return infos
    out: InfoColumns = {}
    for key in first_seen:
        col = columns.get(key)
        if col is None:
            out[key] = infos[key]
            continue
        slots, values = col
        array = _new_slot_array(values[0], n)
        mask = np.zeros(n, dtype=np.bool_)
        if len(slots) == n and slots == list(range(n)):
            where: Any = slice(None)  # every slot, in order
        else:
            where = slots
        try:
            array[where] = values
        except (TypeError, ValueError, OverflowError):  # mixed types: add_info's casts
            for i, v in zip(slots, values):
                array[i] = v
        mask[where] = True
        out[key] = Column(array, mask)
    return out


def _sequential(items: list[tuple[int, dict[str, Any]]], n: int) -> InfoColumns:
    infos: InfoColumns = {}
    for slot, info in items:
        add_info(infos, info, slot, n)
    return infos


# ------------------------------------------------------------------ engines' batched step infos
def engine_columns(step_infos: Any, n: int) -> InfoColumns:
    """An engine's step infos (``key -> (n, ...)`` array, every env reports every key) as columns.

    Examples:
        >>> cols = engine_columns({"x": np.arange(2.0)}, 2)
        >>> cols["x"].mask.tolist()
        [True, True]
    """
    if not step_infos:
        return {}
    masks = np.ones((len(step_infos), n), np.bool_)  # one allocation for every key's mask
    return {k: Column(v, mask) for (k, v), mask in zip(step_infos.items(), masks)}


def patch_reset_rows(
    step_infos: InfoColumns,
    reset_infos: dict[int, dict[str, Any]],
    special: np.ndarray,
    ended: np.ndarray | None,
) -> tuple[InfoColumns, InfoColumns, np.ndarray | None] | None:
    """The infos of an inline step whose ``special`` rows were reset, made by patching the
    engine's step-info columns at those rows only (the per-env way, :func:`split_rows` then
    :func:`batch_infos`, touches every env and key in Python).

    Each special row loses its step info and gets its reset info; with ``ended`` (same_step:
    the rows that ended, which are the special ones) its step info becomes its final info.
    Returns ``(infos, final_infos, has_final)``, or ``None`` where patching could not
    reproduce the per-env result exactly (no step infos, non-numeric columns, or a reset info
    value whose slot type differs from the step info's for the same key).

    Examples:
        >>> cols = engine_columns({"x": np.array([1.0, 2.0])}, 2)
        >>> infos, finals, has_final = patch_reset_rows(cols, {1: {"x": 0.5}}, np.array([1]), None)
        >>> infos["x"].values.tolist(), has_final is None
        ([1.0, 0.5], True)
    """
    if not step_infos:
        return None
    keys = [k for k, col in step_infos.items() if type(col.values) is np.ndarray]
    if len(keys) != len(step_infos) or any(step_infos[k].values.dtype.kind not in "iuf" for k in keys):  # type: ignore[union-attr]
        return None  # numbers only: other slot types decide differently per env
    for i in special.tolist():
        for key, value in reset_infos.get(i, {}).items():
            if key in step_infos:
                have = step_infos[key].values
                if type(value) in _SCALAR_TYPES or isinstance(value, np.number):
                    if np.dtype(type(value)) != have.dtype:  # type: ignore[union-attr]
                        return None
                else:
                    return None
    infos = step_infos
    n = next(iter(infos.values())).mask.shape[0]
    finals: InfoColumns = {}
    has_final = None
    if ended is not None and special.size:
        has_final = ended
        for k, c in infos.items():
            values = np.zeros_like(c.values)  # type: ignore[arg-type]
            values[ended] = c.values[ended]  # type: ignore[index]
            if np.count_nonzero(c.mask & ended):
                finals[k] = Column(values, c.mask & ended)
    for k in keys:
        infos[k].values[special] = 0  # type: ignore[index,assignment]
        infos[k].mask[special] = False
    for i in special.tolist():
        info = reset_infos.get(i)
        if info:
            add_info(infos, info, i, n)
    for k in keys:
        if not infos[k].mask.any():  # no env reported it: gymnasium has no such key
            del infos[k]
    return infos, finals, has_final


def split_rows(
    step_infos: InfoColumns,
    reset_infos: dict[int, dict[str, Any]],
    ops: list[int],
    ended: list[bool] | None,
) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """An inline step's infos per env, as the Python runner reports them: ``(infos,
    final_infos)`` by env id. Reset envs (op RESET, or same_step rows that ``ended``) report
    their reset info; a same_step row that ended reports its step info as its final info.

    Examples:
        >>> cols = engine_columns({"x": np.array([1.0, 2.0])}, 2)
        >>> split_rows(cols, {1: {"r": 1}}, [0, 1], None)
        ({0: {'x': np.float64(1.0)}, 1: {'r': 1}}, {})
    """
    keys = [(k, col.values, col.mask) for k, col in step_infos.items()]
    infos: dict[int, dict[str, Any]] = {}
    finals: dict[int, dict[str, Any]] = {}
    for i, op in enumerate(ops):
        info: dict[str, Any] | None
        if op == RESET or (ended is not None and ended[i]):  # reset, maybe in the same op
            if op != RESET:
                finals[i] = {k: v[i] for k, v, mask in keys if mask[i]}  # type: ignore[index]
            info = reset_infos.get(i)
        else:
            info = {k: v[i] for k, v, mask in keys if mask[i]}  # type: ignore[index]
        if info:
            infos[i] = info
    return infos, finals


def take_infos(
    kept: dict[int, dict[str, Any]], kept_finals: dict[int, dict[str, Any]],
    ids: Any, n: int, by_env: bool = False,
) -> tuple[InfoColumns, InfoColumns, np.ndarray | None]:
    """Take (pop) the infos and final infos kept per env for ``ids`` as columns:
    ``(infos, final_infos, has_final)``.

    Row = position in ``ids``, or the env id (``by_env``). ``has_final`` is ``None`` when no
    row ended in a STEP_RESET (the common case costs no array).

    Examples:
        >>> infos, finals, has_final = take_infos({1: {"a": 2}}, {}, [1], 1)
        >>> infos["a"].values.tolist(), has_final is None
        ([2], True)
    """
    if not kept and not kept_finals:
        return {}, {}, None
    items: list[tuple[int, dict[str, Any]]] = []
    finals: list[tuple[int, dict[str, Any]]] = []
    for pos, i in enumerate(ids):
        if by_env:
            pos = i
        final = kept_finals.pop(i, None)
        if final is not None:
            finals.append((pos, final))
        info = kept.pop(i, None)
        if info:
            items.append((pos, info))
    infos = add_info({}, items[0][1], items[0][0], n) if len(items) == 1 else batch_infos(items, n)
    if not finals:
        return infos, {}, None
    has_final = np.zeros(n, np.bool_)
    has_final[[pos for pos, _ in finals]] = True
    return infos, batch_infos([f for f in finals if f[1]], n), has_final


# ------------------------------------------------------------------ engines' per-env info columns
def row_of(column: np.ndarray, i: int) -> Any:
    """Row ``i`` of an info column, owned: a scalar as numpy gives it, an array field's row
    copied (the engine rewrites its column at the env's next op).

    Examples:
        >>> column = np.zeros((2, 3), np.uint8)
        >>> row = row_of(column, 1)
        >>> column[1] = 7
        >>> row.tolist(), row_of(np.array([5, 6], np.int32), 1)
        ([0, 0, 0], np.int32(6))
    """
    value = column[i]
    return value.copy() if column.ndim > 1 else value


class InfoTable:
    """Infos an engine keeps in columns indexed by env id, every env reporting every key: the
    pool's books take rows from here instead of per-env dicts (the async path of an engine
    whose infos are fixed, e.g. the native Atari engine's ``lives``, ``reward``, ...).

    The engine writes row ``i`` when env ``i``'s op finishes and leaves it alone until the
    row is handed out (an env is not sent again before), so the books read it at hand-out
    time. What a row says is what the per-env dicts of a :class:`~envhive._report.Completion`
    would: ``infos[key][i]``, the info of env ``i``'s op (its reset info after a RESET, or
    after a STEP_RESET that ended an episode; else its step info); ``finals[key][i]``, when
    ``ended[i]`` (a STEP_RESET whose step ended the episode), that step's info.
    :meth:`take` gives exactly the columns :func:`take_infos` makes of those dicts.

    Args:
        infos: ``key -> (n, ...)`` typed array: each env's info.
        finals: ``key -> (n, ...)`` typed array, the same keys: each env's final info.
        ended: ``(n,)`` bool: which envs have a final info.

    Examples:
        >>> table = InfoTable({"x": np.array([1, 2, 3], np.int32)},
        ...                   {"x": np.array([7, 8, 9], np.int32)}, np.array([False, True, False]))
        >>> infos, finals, has_final = table.take(np.array([1, 2]), slice(None), 2)
        >>> infos["x"].values.tolist(), finals["x"].values.tolist(), has_final.tolist()
        ([2, 3], [8, 0], [True, False])
        >>> table.as_dicts([1]) == ({1: {"x": np.int32(2)}}, {1: {"x": np.int32(8)}})
        True
    """

    def __init__(self, infos: dict[str, np.ndarray], finals: dict[str, np.ndarray], ended: np.ndarray) -> None:
        self.infos, self.finals, self.ended = infos, finals, ended
        self._keys = list(infos)

    def take(self, ids: np.ndarray, rows: Any, n: int) -> tuple[InfoColumns, InfoColumns, np.ndarray | None]:
        """The infos of envs ``ids`` as columns of ``n`` rows, env ``ids[j]`` at row
        ``rows[j]`` (``rows`` a slice: every row, in order): ``(infos, final_infos,
        has_final)`` as :func:`take_infos` returns them (rows not given report nothing;
        ``has_final`` is ``None`` when no env ended)."""
        k = len(self._keys)
        if isinstance(rows, slice):
            masks = np.ones((k, n), np.bool_)
            infos = {key: Column(self.infos[key][ids], mask) for key, mask in zip(self._keys, masks)}
        else:
            masks = np.zeros((k, n), np.bool_)
            masks[:, rows] = True
            infos = {}
            for key, mask in zip(self._keys, masks):
                column = self.infos[key]
                values = np.zeros((n, *column.shape[1:]), column.dtype)
                values[rows] = column[ids]
                infos[key] = Column(values, mask)
        ended = self.ended[ids]
        if not np.count_nonzero(ended):
            return infos, {}, None
        has_final = np.zeros(n, np.bool_)
        has_final[rows] = ended
        finals: InfoColumns = {}
        for key in self._keys:
            column = self.finals[key]
            values = np.zeros((n, *column.shape[1:]), column.dtype)
            values[rows] = column[ids]
            values[~has_final] = 0
            finals[key] = Column(values, has_final.copy())
        return infos, finals, has_final

    def as_dicts(self, ids: Any) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
        """The rows of ``ids`` as the per-env dicts a Completion carries: ``(infos,
        final_infos)`` by env id (for books that also keep dicts of other envs)."""
        infos: dict[int, dict[str, Any]] = {}
        finals: dict[int, dict[str, Any]] = {}
        for i in ids:
            infos[i] = {key: row_of(self.infos[key], i) for key in self._keys}
            if self.ended[i]:
                finals[i] = {key: row_of(self.finals[key], i) for key in self._keys}
        return infos, finals
