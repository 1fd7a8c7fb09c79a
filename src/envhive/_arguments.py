"""Checks of what users pass to the pool's calls: seeds, reset options, spaces, actions.

Examples:
    >>> normalize_seeds(7, 2)
    [7, 8]
    >>> check_options({"mode": 1})
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import Space
from gymnasium.spaces.utils import is_space_dtype_shape_equiv

from envhive.errors import (
    ActionError,
    ActionTypeError,
    ConfigError,
    ConfigTypeError,
    SpaceMismatchError,
)

__all__ = [
    "normalize_seeds", "check_options", "reset_mask_ids", "env_ids_of", "check_seconds", "check_count",
    "check_observation_mode", "check_spaces", "check_agents", "action_error",
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
        if seed < 0:
            raise ConfigError(f"seed for env 0: expected a non-negative int or None, got {seed!r}")
        return list(range(int(seed), int(seed) + n))  # all valid: no per-env check (10**6 envs)
    seeds: list[Any]
    if isinstance(seed, (Sequence, np.ndarray)) and not isinstance(seed, (str, bytes)):
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

    The messages begin with gymnasium's vector envs' own, which code may match on; a mask that
    is not a bool array is a :class:`~envhive.errors.ConfigTypeError` (also a ``TypeError``).

    Examples:
        >>> reset_mask_ids(np.array([False, True, True]), 3).tolist()
        [1, 2]
        >>> reset_mask_ids(np.array([1, 0, 1]), 3)
        Traceback (most recent call last):
        envhive.errors.ConfigTypeError: `options['reset_mask']` must have `dtype=np.bool_`, got int64 (expected a bool array of shape (3,)); nothing was reset
    """
    want = f"(expected a bool array of shape ({n},))"
    if not isinstance(mask, np.ndarray):
        raise ConfigTypeError(
            f"`options['reset_mask']` must be a numpy array, got {type(mask).__name__} {want}; "
            "nothing was reset"
        )
    if mask.shape != (n,):
        raise ConfigError(
            f"`options['reset_mask']` must have shape `({n},)`, got {mask.shape} {want}; "
            "nothing was reset"
        )
    if mask.dtype != np.bool_:
        raise ConfigTypeError(
            f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype} {want}; "
            "nothing was reset"
        )
    if not mask.any():
        raise ConfigError(
            "`options['reset_mask']` must contain a boolean array with at least one True value, "
            f"got reset_mask={mask}; nothing was reset"
        )
    return np.flatnonzero(mask)


def env_ids_of(env_id: Any, n: int) -> np.ndarray:
    """Env ids a caller chose (an int or a 1-d sequence of ints in ``[0, n)``, each once), as
    a fresh int64 array: executors may rely on ids not changing.

    Examples:
        >>> env_ids_of([2, 0], 3).tolist(), env_ids_of(1, 3).tolist()
        ([2, 0], [1])
        >>> env_ids_of([0.7], 3)
        Traceback (most recent call last):
        envhive.errors.ConfigError: env_id: expected a 1-d array of int env ids, got [0.7]
    """
    ids = np.asarray(env_id)
    if ids.ndim == 0:
        ids = ids.reshape(1)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ConfigError(f"env_id: expected a 1-d array of int env ids, got {env_id!r}")
    if ids.size <= 64:
        # A receive's batch (the common case): Python's min, max and set on the list beat
        # numpy's reductions and sort at this size.
        values = ids.tolist()
        out_of_range = bool(values) and (min(values) < 0 or max(values) >= n)
        repeated = len(set(values)) != len(values)
    else:
        out_of_range = bool(ids.min() < 0 or ids.max() >= n)
        repeated = np.unique(ids).size != ids.size
    if out_of_range:
        raise ConfigError(f"env_id: expected ids in [0, {n}), got {ids.tolist()}")
    if repeated:
        raise ConfigError(f"env_id: each env may appear once, got {ids.tolist()}")
    return ids.astype(np.int64)


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


def check_observation_mode(mode: Any) -> None:
    """``mode`` is ``"same"``, ``"different"`` or a tuple ``(batched space, single space)``,
    as gymnasium's vector envs take ``observation_mode``.

    Examples:
        >>> check_observation_mode("different")
        >>> check_observation_mode("mixed")
        Traceback (most recent call last):
        envhive.errors.ConfigError: Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and batch observation space, actual got mixed (a tuple is (batched space, single space), as gymnasium takes it)
    """
    if isinstance(mode, tuple) and len(mode) == 2:
        if not all(isinstance(space, Space) for space in mode):
            raise ConfigTypeError(
                "observation_mode: expected a tuple (batched space, single space) of gymnasium "
                f"spaces, got ({type(mode[0]).__name__}, {type(mode[1]).__name__})"
            )
        return
    if not (isinstance(mode, str) and mode in ("same", "different")):
        raise ConfigError(
            "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and "
            f"batch observation space, actual got {mode} (a tuple is (batched space, single "
            "space), as gymnasium takes it)"
        )


def _same_layout(space: Space, other: Space) -> bool:
    """One shape and dtype (gymnasium's ``is_space_dtype_shape_equiv``); equality for spaces
    it does not know."""
    try:
        return bool(is_space_dtype_shape_equiv(space, other))
    except (NotImplementedError, TypeError):
        return bool(space == other)


def check_spaces(props: Sequence[Any], observation_mode: Any = "same") -> Space:
    """Check every env's spaces (``props``: one ``EnvProps`` per env) and return the single
    observation space the pool's buffers are laid out for; a ``SpaceMismatchError`` names
    the env that does not fit.

    Action spaces must equal env 0's. Observation spaces too with ``observation_mode="same"``;
    with ``"different"`` they need only share env 0's shape and dtype; with a tuple
    ``(batched, single)``, ``single``'s.
    """
    first = props[0]
    custom = isinstance(observation_mode, tuple)
    single = observation_mode[1] if custom else first.observation_space
    same = observation_mode == "same"
    for j, p in enumerate(props):
        if p is first and j:  # executors that build one batch (native) report one object
            continue
        got = p.observation_space
        if same and got != single:
            raise SpaceMismatchError(
                f"env {j} has observation_space {got}, expected {single} (the observation_space "
                "of env 0): the sub-environments observation spaces are not equivalent. All "
                "envs of a pool must share both spaces. If this is intentional, use "
                "`observation_mode='different'` instead (spaces of one shape and dtype)"
            )
        if not same and (j or custom) and not _same_layout(got, single):
            whose = "the single space of observation_mode" if custom else "env 0's"
            raise SpaceMismatchError(
                f"env {j} has observation_space {got}, expected the shape and dtype of {whose}, "
                f"{single}: with observation_mode={observation_mode!r} the envs' observation "
                "spaces may differ in bounds only"
            )
        if j and p.action_space != first.action_space:
            raise SpaceMismatchError(
                f"env {j} has action_space {p.action_space}, expected {first.action_space} (the "
                "action_space of env 0): all envs of a pool must share both spaces"
            )
    return single


def check_agents(props: Sequence[Any]) -> tuple[str, ...]:
    """The possible agents every env of a pool shares (``props``: one ``EnvProps`` each),
    ``()`` for single-agent envs; a ``SpaceMismatchError`` names the env that differs."""
    first = props[0].agents
    for j, p in enumerate(props):
        if p.agents != first:
            raise SpaceMismatchError(
                f"env {j} has the agents {list(p.agents)}, expected {list(first)} (those of env "
                "0): all envs of a pool must share one set of possible agents"
            )
    return tuple(first)


def action_error(message: str, actions: Any) -> ActionError:
    """The error for an action batch that does not fit: an :class:`ActionTypeError` (also a
    ``TypeError``) when ``actions`` is not a batch at all (a scalar), else an ``ActionError``.

    Examples:
        >>> type(action_error("invalid actions", 0)).__name__
        'ActionTypeError'
        >>> type(action_error("invalid actions", np.zeros(3))).__name__
        'ActionError'
    """
    scalar = isinstance(actions, (numbers.Number, np.generic, str, bytes)) or (
        getattr(actions, "ndim", None) == 0
    )
    return (ActionTypeError if scalar else ActionError)(message)
