"""Record what a vector env returns over a run, and compare two runs exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["transcript", "assert_same_transcript"]


def _snapshot(value: Any) -> Any:
    # Copy everything: envs run with copy=False hand out buffers that the next step overwrites.
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_snapshot(v) for v in value)
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            out = np.empty(value.shape, dtype=object)
            for idx, v in np.ndenumerate(value):
                out[idx] = _snapshot(v)
            return out
        return value.copy()
    return value


def transcript(
    env: Any,
    steps: int,
    actions: Callable[[int], Any],
    seed: int | list[int] | None = 0,
) -> list[tuple[Any, ...]]:
    """Reset with ``seed`` then take ``steps`` steps; return every output, deep-copied.

    ``actions(t)`` gives the batch of actions for step ``t``.

    Examples:
        >>> import envhive, numpy as np
        >>> env = envhive.make("CartPole-v1", num_envs=2)
        >>> rec = transcript(env, 3, lambda t: np.array([t % 2, 1]))
        >>> len(rec), rec[0][0].shape
        (4, (2, 4))
        >>> env.close()
    """
    out: list[tuple[Any, ...]] = [_snapshot(env.reset(seed=seed))]
    for t in range(steps):
        out.append(_snapshot(env.step(actions(t))))
    return out


def _same(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict), f"{where}: dict vs {type(b).__name__}"
        assert set(a) == set(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (tuple, list)) and not isinstance(b, np.ndarray):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), f"{where}: {a!r} != {b!r}"
        for j, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{j}]")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        if a_arr.dtype == object or b_arr.dtype == object:
            assert a_arr.shape == b_arr.shape, f"{where}: shape {a_arr.shape} != {b_arr.shape}"
            for idx in np.ndindex(a_arr.shape):
                _same(a_arr[idx], b_arr[idx], f"{where}[{idx}]")
        else:
            assert a_arr.shape == b_arr.shape, f"{where}: shape {a_arr.shape} != {b_arr.shape}"
            assert a_arr.dtype == b_arr.dtype, f"{where}: dtype {a_arr.dtype} != {b_arr.dtype}"
            assert np.array_equal(a_arr, b_arr, equal_nan=True), f"{where}: {a_arr!r} != {b_arr!r}"
    else:
        assert a == b or (a is None and b is None), f"{where}: {a!r} != {b!r}"


def assert_same_transcript(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> None:
    """Assert two transcripts are identical: values, shapes, dtypes, info keys and masks.

    Examples:
        >>> assert_same_transcript([(np.zeros(2), {})], [(np.zeros(2), {})])
    """
    assert len(a) == len(b), f"transcripts differ in length: {len(a)} != {len(b)}"
    for t, (x, y) in enumerate(zip(a, b)):
        _same(x, y, f"call {t}")
