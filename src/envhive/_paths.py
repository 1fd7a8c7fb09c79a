"""The pool's fast paths: what a pool can take besides its general path, chosen at construction.

The general path is the definition: ``Pool.step``/``send``/``recv`` check everything (actions
with the codec, env ids, states), book the dispatch, let the executor ``send`` and ``recv``, book
the :class:`~envhive._report.Completion` (``Books.absorb``, ``drain``, ``take``, ``hand_out``)
and raise the precise error when something is wrong. It works for every executor and layout.
A fast path gives exactly what the general path gives, for the common case, in fewer moves;
anything else takes the general path. Each is run against the general path by a test.

* **inline step** (``Executor.step_all``: the native executor's engines). ``step`` with a
  batch of the action space's shape and dtype kind (numpy, or a tensor on a resident pool)
  plans the ops into the command block and lets the engine run every env inside one call, no
  completion, no per-env lists, the same bookkeeping (``Lifecycle.finish``). The engine checks
  the action values itself: on a bad one nothing ran and the codec names the env. Written out
  in ``Pool.step``, which it serves on every step of the cheapest envs.
  (``tests/kernels/test_native.py``, ``tests/test_batch.py``)
* **fused step** (``Executor.run_all``: serial, thread, process). ``step`` with one numpy
  array of valid actions (shape, dtype kind, ``in_bounds``) on host buffers: write, plan,
  ``run_all``, and when no env failed, the counts ``absorb`` + ``drain`` would reach
  (``Pool._step_fused``). The general sync step uses ``run_all`` too, for any batch.
  (``tests/test_fused_step.py``)
* **lean send** (every executor, host buffers). ``send(actions, env_ids)`` with a 1-d int array
  of at most 64 distinct idle envs in range, no env blocked, and one numpy array of valid
  actions (:meth:`FastPaths.send_ids`): the actions go straight into the buffers and, when no
  env has ended, every op is the mode's plain one, with no planning.
  (``tests/atari/test_atari_lean.py``)
* **lean recv** (``Executor.take_finished``: the native Atari engines). When the books hold
  nothing but envs in flight, the engine hands over the finished ids with an ``InfoTable``,
  no completion (``Books.absorb_finished``). (``tests/atari/test_atari_lean.py``)

Which of them a pool may take depends only on its executor and buffer layout, so it is decided
once (:meth:`FastPaths.choose`); whether a call qualifies is decided per call.

Examples:
    >>> import envhive
    >>> pool = envhive.make("CartPole-v1", 2, executor="serial").pool
    >>> paths = pool._paths
    >>> paths.step_all is None, paths.fused, paths.lean_send, paths.batch_shape
    (True, True, True, (2,))
    >>> pool.close()
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from envhive._buffers import is_tensor
from envhive._spaces import ArrayCodec, Codec
from envhive.executors._protocol import Executor

__all__ = ["FastPaths", "NO_ACTIONS"]

#: Stands for a batch that cannot take the inline step (numpy cannot make one array of it, a
#: tensor of another shape or dtype): the general path then says what is wrong.
NO_ACTIONS = np.empty(0)
NO_ACTIONS.flags.writeable = False

#: Lean sends take at most this many envs (``send_ids`` checks them as Python ints).
_LEAN_SEND_MAX = 64

# Action dtype chars an array batch may have, by the codec's kind: chars, not kinds, because
# compiled kernels take these (not float16 or long double).
_INTS, _FLOATS = "bBhHiIlLqQpP", "fd"


@dataclasses.dataclass(frozen=True, slots=True)
class FastPaths:
    """The fast paths one pool may take (see the module); ``FastPaths()``: none.

    Attributes:
        step_all: the inline step (``Executor.step_all``), or ``None``.
        run_all: the executor's fused sync call (``Executor.run_all``), or ``None``: every
            sync step uses it; with ``fused`` an array batch also skips the general checks.
        fused: array batches of valid actions take ``Pool._step_fused``.
        lean_send: ``send`` tries :meth:`send_ids` first.
        take_finished: the lean ``recv`` (``Executor.take_finished``), or ``None``.
        batch_shape: ``(num_envs, *action shape)``: an array batch for every env.
        chars: the dtype chars an array batch of actions may have.
        in_bounds: the action codec's value check of an array batch.
    """

    step_all: Callable[[Any], tuple[int, int, Any, Any]] | None = None
    run_all: Callable[[Any], Any] | None = None
    fused: bool = False
    lean_send: bool = False
    take_finished: Callable[[int], tuple[np.ndarray, int, Any] | None] | None = None
    batch_shape: tuple[int, ...] = ()
    chars: str = ""
    in_bounds: Callable[[np.ndarray], bool] | None = None

    @classmethod
    def choose(cls, executor: Executor, codec: Codec, num_envs: int, resident: bool) -> FastPaths:
        """The paths a pool of ``num_envs`` envs with actions of ``codec`` may take on
        ``executor`` (bound: its ``step_all``/``take_finished`` are set by ``bind``), with its
        results and actions on a device (``resident``) or not. Actions that are not one array
        (Dict, Tuple, object spaces) take the general path everywhere but through ``run_all``."""
        if type(codec) is not ArrayCodec:
            return cls(run_all=executor.run_all, take_finished=executor.take_finished)
        chars = "?" if codec.boolean else _INTS if codec.integer else _INTS + _FLOATS
        return cls(
            step_all=executor.step_all,
            run_all=executor.run_all,
            fused=executor.run_all is not None and not resident,
            lean_send=not resident,
            take_finished=executor.take_finished,
            batch_shape=(num_envs, *codec.shape),
            chars=chars,
            in_bounds=codec.in_bounds,
        )

    def without(self, *paths: str) -> FastPaths:
        """The same with ``paths`` (``"inline"``, ``"fused"``, ``"lean_send"``,
        ``"lean_recv"``) turned off: what tests compare each path with.

        Examples:
            >>> FastPaths(fused=True, lean_send=True).without("fused").fused
            False
        """
        names = {"inline": "step_all", "fused": "fused", "lean_send": "lean_send",
                 "lean_recv": "take_finished"}
        off: dict[str, Any] = {
            names[p]: False if names[p] in ("fused", "lean_send") else None for p in paths
        }
        return dataclasses.replace(self, **off)

    def inline_batch(self, actions: Any, device: Any) -> Any:
        """``actions`` as the inline step takes them when they are not a numpy array: a
        list as an array, a resident pool's tensor on ``device`` (``None``: not resident);
        :data:`NO_ACTIONS` when they cannot be one (the general path says why)."""
        if device is not None and is_tensor(actions):
            boolean = str(actions.dtype) == "torch.bool"
            if tuple(actions.shape) != self.batch_shape or actions.is_complex() or (
                boolean != (self.chars == "?")) or (
                actions.is_floating_point() and "d" not in self.chars
            ):
                return NO_ACTIONS
            return actions.to(device, non_blocking=True)
        try:
            return np.asarray(actions)
        except (ValueError, TypeError):  # ragged: the general path says so
            return NO_ACTIONS

    def send_ids(self, actions: Any, env_id: Any, status: np.ndarray) -> np.ndarray | None:
        """The lean send's check, in one go: the ids (a fresh int64 array) when ``env_id`` is
        a 1-d int array of distinct envs in range that are all idle (``status`` 0: see
        ``_books``) and ``actions`` one array of valid actions for them; else ``None`` (the
        general path raises the precise error)."""
        if type(env_id) is not np.ndarray or type(actions) is not np.ndarray or (
            env_id.ndim != 1 or env_id.dtype.kind not in "iu"
        ):
            return None
        k = env_id.size
        if not 0 < k <= _LEAN_SEND_MAX or actions.shape != (k, *self.batch_shape[1:]) or (
            actions.dtype.char not in self.chars
        ):
            return None
        values = env_id.tolist()
        if min(values) < 0 or max(values) >= self.batch_shape[0] or len(set(values)) != k:
            return None
        ids = np.array(values, np.int64)
        # IDLE is 0: any other status is an env still pending or ready.
        if np.count_nonzero(status[ids]) or not self.in_bounds(actions):  # type: ignore[misc]
            return None
        return ids
