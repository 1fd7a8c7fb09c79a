"""Batching of per-env ``info`` dicts into gymnasium's vector-info layout.

gymnasium's vector envs turn each env's ``info`` into arrays with one slot per env, plus a
boolean mask ``_key`` telling which envs set ``key``; nested dicts recurse and ``final_obs`` is
kept as an object array of single-env observations. envhive reproduces that layout exactly so
that code written for gymnasium's vector envs reads envhive infos unchanged.

Examples:
    >>> infos = add_info({}, {"lives": 3}, 1, 3)
    >>> infos["lives"].tolist(), infos["_lives"].tolist()
    ([0, 3, 0], [False, True, False])
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["add_info", "batch_infos"]

_SCALAR_TYPES = (int, float, bool)


def _new_slot_array(value: Any, n: int) -> np.ndarray:
    # The array type is decided by the first env that reports the key, as gymnasium does.
    if type(value) in _SCALAR_TYPES or isinstance(value, np.number):
        return np.zeros(n, dtype=type(value))
    if isinstance(value, np.ndarray):
        return np.zeros((n, *value.shape), dtype=value.dtype)
    return np.full(n, None, dtype=object)


def add_info(infos: dict[str, Any], info: dict[str, Any], i: int, n: int) -> dict[str, Any]:
    """Merge env ``i``'s ``info`` into the batched ``infos`` of ``n`` slots (in place).

    Args:
        infos: the batched infos so far (mutated and returned).
        info: one env's info dict.
        i: the slot (batch position) of that env.
        n: the number of slots in the batch.

    Returns:
        ``infos``, updated.

    Examples:
        >>> infos = add_info({}, {"final_obs": np.zeros(2)}, 0, 2)
        >>> infos["final_obs"].dtype, infos["_final_obs"].tolist()
        (dtype('O'), [True, False])
    """
    for key, value in info.items():
        if key == "final_obs":
            array = infos.get(key)
            if array is None:
                array = np.full(n, None, dtype=object)
            array[i] = value
        elif isinstance(value, dict):
            array = add_info(infos.get(key, {}), value, i, n)
        else:
            array = infos.get(key)
            if array is None:
                array = _new_slot_array(value, n)
            array[i] = value
        mask = infos.get(f"_{key}")
        if mask is None:
            mask = np.zeros(n, dtype=np.bool_)
        mask[i] = True
        infos[key] = array
        infos[f"_{key}"] = mask
    return infos


def batch_infos(items: list[tuple[int, dict[str, Any]]], n: int) -> dict[str, Any]:
    """Batch several envs' infos at once: the same result as ``add_info`` for each in order.

    Keys whose values are Python or numpy scalars (the common case: reward terms, positions,
    counters) are gathered per key and written with one numpy call each, instead of two
    scalar writes per env and key; other keys (nested dicts, arrays, objects, ``final_obs``)
    go through :func:`add_info`. The array type of a key is still decided by the first env
    that reports it, and keys keep the order in which they first appear.

    Args:
        items: ``(slot, info)`` pairs, in env order.
        n: the number of slots in the batch.

    Examples:
        >>> out = batch_infos([(0, {"x": 1.5}), (2, {"x": 2.0, "tag": "a"})], 3)
        >>> out["x"].tolist(), out["_x"].tolist(), out["tag"].tolist()
        ([1.5, 0.0, 2.0], [True, False, True], [None, None, 'a'])
    """
    infos: dict[str, Any] = {}
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
            elif key != "final_obs" and (type(value) in scalar or isinstance(value, np.number)):
                columns[key] = ([slot], [value])
                first_seen.append(key)
            else:
                add_info(infos, {key: value}, slot, n)
                first_seen.append(key)
    if not columns:
        return infos
    out: dict[str, Any] = {}
    for key in first_seen:
        col = columns.get(key)
        if col is None:
            out[key] = infos[key]
            out[f"_{key}"] = infos[f"_{key}"]
            continue
        slots, values = col
        array = _new_slot_array(values[0], n)
        mask = np.zeros(n, dtype=np.bool_)
        if len(slots) == n and slots[0] == 0 and slots[-1] == n - 1:
            where: Any = slice(None)  # every slot, in order (slots are distinct, ascending)
        else:
            where = slots
        try:
            array[where] = values
        except (TypeError, ValueError, OverflowError):  # mixed types: add_info's casts
            for i, v in zip(slots, values):
                array[i] = v
        mask[where] = True
        out[key] = array
        out[f"_{key}"] = mask
    return out


def _sequential(items: list[tuple[int, dict[str, Any]]], n: int) -> dict[str, Any]:
    infos: dict[str, Any] = {}
    for slot, info in items:
        add_info(infos, info, slot, n)
    return infos
