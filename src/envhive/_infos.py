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

__all__ = ["add_info"]

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
