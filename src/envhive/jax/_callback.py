"""EnvPool's ``(handle, recv, send, step)`` for any pool, through an ordered ``io_callback``.

What ``api="jax"``'s ``xla()`` returns when the pool cannot be lent to XLA (Python envs, the
thread/process/Ray executors, engines with no C entry): the same functions and layout as the
FFI path (``envhive.jax._ffi``), each one a ``jax.experimental.io_callback(ordered=True)``
that calls the pool's own ``recv``/``send``/``async_reset``. ``ordered`` keeps the calls in
program order (the handle is threaded through for the same signature). Slower than the FFI
path: every call leaves the compiled program, takes the GIL and runs the pool's Python.

Examples:
    >>> import envhive, jax, numpy as np
    >>> env = envhive.make("CartPole-v1", num_envs=2, batch_size=1, executor="thread", seed=0)
    >>> handle, recv, send, step = callback_functions(env.pool)
    >>> env.async_reset()
    >>> handle, (obs, reward, term, trunc, info) = jax.jit(recv)(handle)
    >>> obs.shape, reward.tolist()
    ((1, 4), [0.0])
    >>> env.close()
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from envhive._pool import Pool
from envhive.jax._signature import Signature

__all__ = ["callback_functions"]


def callback_functions(pool: Pool, name: str = "") -> tuple[np.ndarray, Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """``(handle, recv, send, step)`` over ``pool``'s eager calls (see the module docstring
    and ``envhive.jax._ffi.xla_functions`` for the functions)."""
    sig = Signature(pool, name)
    from jax.experimental import io_callback

    k = pool.batch_size

    def rows(handle: np.ndarray) -> tuple[np.ndarray, ...]:
        b = pool.recv()
        out = [np.asarray(handle), b.obs.astype(sig.obs_dtype), b.reward.astype(sig.reward_dtype),
               b.terminated.copy(), b.truncated.copy(), b.env_ids.astype(np.int32)]
        if sig.same_step:
            has = b.has_final if b.has_final is not None else np.zeros(k, np.bool_)
            final = np.zeros((k, *sig.obs_shape), sig.obs_dtype)
            if b.final_obs is not None and has.any():
                final[has] = b.final_obs[has]
            out += [final, has.copy()]
        return tuple(out)

    def sent(action: np.ndarray, env_id: np.ndarray, reset: np.ndarray) -> None:
        ids = np.asarray(env_id, np.int64)
        flags = np.asarray(reset, np.bool_)
        if flags.any():
            pool.async_reset(ids[flags])
        if not flags.all():
            pool.send(np.asarray(action)[~flags], ids[~flags])

    def host_send(handle: np.ndarray, action: np.ndarray, env_id: np.ndarray, reset: np.ndarray) -> np.ndarray:
        sent(action, env_id, reset)
        return np.asarray(handle)

    def host_step(handle: np.ndarray, action: np.ndarray, env_id: np.ndarray, reset: np.ndarray) -> tuple[np.ndarray, ...]:
        sent(action, env_id, reset)
        return rows(handle)

    def recv(handle: Any) -> tuple[Any, tuple[Any, ...]]:
        """The first ``batch_size`` envs to finish (the pool's ``recv``)."""
        return sig.layout(io_callback(rows, sig.results, handle, ordered=True))

    def send(handle: Any, action: Any, env_id: Any = None, reset: Any = None) -> Any:
        """The pool's ``send`` (``async_reset`` for envs flagged in ``reset``); the handle."""
        return io_callback(host_send, sig.handle, handle, *sig.arguments(action, env_id, reset), ordered=True)

    def step(handle: Any, action: Any, env_id: Any = None, reset: Any = None) -> tuple[Any, tuple[Any, ...]]:
        """``recv(send(...))`` in one callback."""
        return sig.layout(io_callback(host_step, sig.results, handle, *sig.arguments(action, env_id, reset),
                                      ordered=True))

    handle = np.frombuffer(id(pool).to_bytes(8, sys.byteorder), np.uint8).copy()
    return handle, recv, send, step
