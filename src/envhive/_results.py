"""What an env's ``step()`` and ``reset()`` may return, and the error for what they may not.

The runner writes results in batches (its C loop, then numpy), and these checks run only off
that path: on an env the C loop hands back to Python, or when a batched write refuses a value,
to find which env gave it. So the common step pays nothing for them, and every wrong value
becomes an :class:`~envhive.errors.EnvWorkerError` naming the env and the field, on every
executor, instead of a bare numpy error in the caller or a dead worker process.

What counts as valid (docs/semantics.md, "What an env may return"):

* the step result: a tuple (or list) of five, the reset result a tuple (or list) of two;
* ``terminated``/``truncated``: ``bool``, ``numpy.bool_``, a 0-d bool array, or an integer
  0 or 1 (stored as False/True). ``None``, strings, floats, other integers and arrays of one
  or more elements are refused: gymnasium's ``SyncVectorEnv`` would store their truth value,
  which hides the env's bug (a flag per agent, ``None`` from an old API);
* the reward: a real number (``int``, ``float``, ``bool``, a numpy integer, float or bool
  scalar, or a 0-d array of one), or with an agent axis an array of that shape; ``None``,
  strings, complex numbers and arrays of another shape are refused;
* the info: a ``dict``.

Examples:
    >>> flag_value(np.bool_(True)), flag_value(0), flag_value(np.array(False))
    (True, False, False)
    >>> flag_value(np.array([True, False])) is None
    True
    >>> step_tuple((1, 2.0, False, False, {}), "step", 0)[1]
    2.0
    >>> try:
    ...     reset_pair(np.zeros(4), 3)
    ... except EnvWorkerError as err:
    ...     print(err)
    env 3: reset() returned ndarray (shape (4,), dtype float64), expected a tuple (obs, info)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envhive.errors import EnvWorkerError

__all__ = [
    "batch_fits", "check_info", "describe", "flag_value", "reset_pair", "result_error",
    "reward_value", "step_tuple",
]

_FLAG_TYPES = (bool, np.bool_)


def describe(value: Any) -> str:
    """A short text for a returned value: its type, and its shape and dtype for arrays."""
    if isinstance(value, np.ndarray):
        return f"{type(value).__name__} (shape {value.shape}, dtype {value.dtype})"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def result_error(call: str, what: str, value: Any, expected: str, env_id: int) -> EnvWorkerError:
    """The error for env ``env_id`` whose ``call()`` returned ``value`` as ``what``."""
    got = describe(value) if what == "" else f"{what}={describe(value)}"
    return EnvWorkerError(
        f"{call}() returned {got}, expected {expected}",
        env_id=env_id,
        cause_type="InvalidResultError",
    )


def flag_value(value: Any) -> bool | None:
    """``value`` as a terminated/truncated flag, or ``None`` when it is not a valid one."""
    if isinstance(value, _FLAG_TYPES):
        return bool(value)
    if isinstance(value, np.ndarray):
        return bool(value) if value.shape == () and value.dtype == np.bool_ else None
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    return None


def reward_value(value: Any, shape: tuple[int, ...]) -> Any:
    """``value`` as one env's reward of ``shape`` (``()``: a number), or ``None`` if it is not one."""
    if not shape and isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        return value
    try:
        arr = np.asarray(value)
    except Exception:  # an object numpy cannot read is not a reward
        return None
    if arr.shape != shape or arr.dtype.kind not in "biuf":
        return None
    return arr


def batch_fits(values: list[Any], buf: np.ndarray) -> np.ndarray | None:
    """``values`` (one per env) as one array that fits ``buf``'s rows and kind exactly, or
    ``None``: then some value needs a look of its own (:func:`flag_value`, :func:`reward_value`)."""
    try:
        arr = np.asarray(values)
    except Exception:  # ragged or unreadable: checked env by env
        return None
    if arr.shape != (len(values), *buf.shape[1:]):
        return None
    kind = arr.dtype.kind
    return arr if (kind == "b" if buf.dtype == np.bool_ else kind in "biuf") else None


def step_tuple(result: Any, call: str, env_id: int) -> tuple[Any, ...]:
    """A step result as its five parts; anything else is the env's error."""
    if type(result) is tuple and len(result) == 5:
        return result
    if isinstance(result, (tuple, list)) and len(result) == 5:
        return tuple(result)
    raise result_error(call, "", result, "a tuple (obs, reward, terminated, truncated, info)", env_id)


def reset_pair(result: Any, env_id: int) -> tuple[Any, Any]:
    """A reset result as ``(obs, info)`` with a dict info; anything else is the env's error."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise result_error("reset", "", result, "a tuple (obs, info)", env_id)
    obs, info = result
    if type(info) is not dict:
        check_info(info, "reset", env_id)
    return obs, info


def check_info(info: Any, call: str, env_id: int) -> None:
    """Raise the env's error unless ``info`` is a dict."""
    if not isinstance(info, dict):
        raise result_error(call, "info", info, "a dict", env_id)
