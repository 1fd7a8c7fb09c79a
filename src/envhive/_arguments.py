"""Checks of what users pass to the pool's calls: seeds and reset options.

Examples:
    >>> normalize_seeds(7, 2)
    [7, 8]
    >>> check_options({"mode": 1})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from envhive.errors import ConfigError, SpaceMismatchError

__all__ = [
    "normalize_seeds", "check_options", "reset_mask_ids", "check_seconds", "check_count", "check_spaces",
]


def normalize_seeds(seed: Any, n: int) -> list[int | None]:
    """``None`` → no seeds; an int ``s`` → ``s + i`` for env ``i``; a sequence → one per env.

    Examples:
        >>> normalize_seeds(7, 3)
        [7, 8, 9]
        >>> normalize_seeds([1, None], 2)
        [1, None]
    """
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        seeds: list[Any] = [int(seed) + i for i in range(n)]
    elif isinstance(seed, (Sequence, np.ndarray)) and not isinstance(seed, (str, bytes)):
        if len(seed) != n:
            raise ConfigError(f"seed: expected {n} seeds (one per env), got {len(seed)}")
        seeds = list(seed)
    else:
        raise ConfigError(
            f"seed: expected None, an int or a list of {n} ints, got {type(seed).__name__}"
        )
    for i, s in enumerate(seeds):
        if s is None:
            continue
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0:
            raise ConfigError(f"seed for env {i}: expected a non-negative int or None, got {s!r}")
        seeds[i] = int(s)
    return seeds


def check_options(options: Any) -> None:
    """Reset options must be a dict (or ``None``), as gymnasium's ``reset`` takes them."""
    if options is not None and not isinstance(options, Mapping):
        raise ConfigError(
            f"options: expected a dict (or None), got {type(options).__name__}; nothing was reset"
        )


def reset_mask_ids(mask: Any, n: int) -> np.ndarray:
    """The env ids of ``options["reset_mask"]``: a bool array of shape ``(n,)``, not all False.

    Examples:
        >>> reset_mask_ids(np.array([False, True, True]), 3).tolist()
        [1, 2]
    """
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (n,):
        got = f"{type(mask).__name__} {getattr(mask, 'dtype', '')} {getattr(mask, 'shape', '')}"
        raise ConfigError(f"options['reset_mask']: expected a bool array of shape ({n},), got {got}")
    if not mask.any():
        raise ConfigError("options['reset_mask']: expected at least one True entry, got none")
    return np.flatnonzero(mask)


def _is_number(x: Any) -> bool:
    """A real number (not a bool, not a string), finite or not."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def check_seconds(value: Any, name: str, zero_ok: bool = False) -> None:
    """``value`` is ``None`` or a number of seconds, positive (or ``>= 0`` if ``zero_ok``).

    Examples:
        >>> check_seconds(None, "step_timeout"); check_seconds(0, "spin_s", zero_ok=True)
        >>> check_seconds("1", "step_timeout")
        Traceback (most recent call last):
        envhive.errors.ConfigError: step_timeout: expected a positive number of seconds or None, got '1'
    """
    if value is None or (_is_number(value) and (value >= 0 if zero_ok else value > 0)):
        return
    kind = "a number of seconds >= 0" if zero_ok else "a positive number of seconds"
    raise ConfigError(f"{name}: expected {kind} or None, got {value!r}")


def check_count(value: Any, name: str) -> None:
    """``value`` is ``None`` or an int >= 1 (not a bool)."""
    if value is None or (
        isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1
    ):
        return
    raise ConfigError(f"{name}: expected a positive int or None, got {value!r}")


def check_spaces(props: Sequence[Any]) -> None:
    """Every env's spaces equal env 0's (``props``: one ``EnvProps`` per env), else a
    ``SpaceMismatchError`` naming the env."""
    first = props[0]
    for j, p in enumerate(props[1:], start=1):
        if p is first:  # executors that build one batch (native) report one object
            continue
        for what in ("observation_space", "action_space"):
            got, want = getattr(p, what), getattr(first, what)
            if got != want:
                raise SpaceMismatchError(
                    f"env {j} has {what} {got}, expected {want} (the {what} of env 0): "
                    "all envs of a pool must share both spaces"
                )
