"""``env.xla()``: a pool's ``send``/``recv``/``step`` as jax functions that run inside ``jit``.

EnvPool's protocol (``env.xla() -> (handle, recv, send, step)``): ``handle`` is a small array
(the driver's address as 8 bytes) threaded through every call, so that XLA orders the calls
as the data flow orders them; each call is an FFI custom call (``jax.ffi.ffi_call``) with its
side effects declared and the handle aliased from its input to its output. The three FFI
targets (``envhive_send``, ``envhive_recv``, ``envhive_step``, compiled into
``envhive.jax._xla`` against vendored headers) are registered with jax on the first call
here; one registration serves every pool (the driver is an attribute of each call).

Examples:
    >>> import envhive, jax, numpy as np
    >>> env = envhive.make("envhive/CartPole-v1", num_envs=4, seed=0)
    >>> handle, recv, send, step = env.xla()
    >>> env.async_reset()
    >>> @jax.jit
    ... def rollout(handle):
    ...     def body(_, carry):
    ...         handle, total = carry
    ...         handle, (obs, reward, term, trunc, info) = recv(handle)
    ...         handle = send(handle, (obs[:, 2] > 0).astype(np.int32), info["env_id"])
    ...         return handle, total + reward.sum()
    ...     return jax.lax.fori_loop(0, 10, body, (handle, np.float32(0)))
    >>> handle, total = rollout(handle)
    >>> float(total)  # ten batches: one of resets (reward 0), nine of steps
    36.0
    >>> env.close()
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from envhive._extras import require
from envhive._pool import Pool
from envhive.jax._lease import Lease
from envhive.jax._signature import Signature

__all__ = ["xla_functions", "register_targets", "TARGETS"]

#: The FFI targets' names, registered with jax on the first ``xla()``.
TARGETS = {"send": "envhive_send", "recv": "envhive_recv", "step": "envhive_step"}
_registered = False
_lock = threading.Lock()


def register_targets() -> None:
    """Register envhive's FFI handlers with jax for the CPU (once per process).

    Examples:
        >>> register_targets(); register_targets()  # idempotent
    """
    global _registered
    with _lock:
        if _registered:
            return
        jax = require("jax", "jax", "env.xla()")
        from envhive.jax import _xla  # type: ignore[attr-defined]

        for call, capsule in _xla.handlers().items():
            jax.ffi.register_ffi_target(TARGETS[call], capsule, platform="cpu", api_version=1)
        _registered = True


def xla_functions(pool: Pool, name: str = "") -> tuple[np.ndarray, Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """``(handle, recv, send, step)`` for ``pool`` (see the module docstring).

    * ``recv(handle) -> (handle, (obs, reward, terminated, truncated, info))``: the first
      ``batch_size`` envs to finish; ``info["env_id"]`` (int32) says which, and in same_step
      mode ``info["final_obs"]`` (zeros where ``info["_final_obs"]`` is False) holds the
      terminal observations.
    * ``send(handle, action, env_id=None, reset=None) -> handle``: start stepping ``env_id``
      (default: every env); autoreset as the pool's mode plans it. ``reset`` (envhive's
      addition: one bool per env of ``env_id``) resets the flagged envs instead, unseeded, as
      ``async_reset`` does: the way to reset single envs inside ``jit`` (disabled autoreset).
    * ``step(handle, action, env_id=None, reset=None)``: ``recv(send(...))`` in one call.

    Raises:
        envhive.ConfigError: jax is missing, or the pool cannot be lent to XLA (not on the
            native executor, an engine with no C entry, observations that are not one
            array); the message says what to use instead.
    """
    sig = Signature(pool, name)
    lease = Lease.of(pool, name)
    register_targets()
    call = sig.jax.ffi.ffi_call
    _send = call(TARGETS["send"], sig.handle, has_side_effect=True, input_output_aliases={0: 0})
    _recv = call(TARGETS["recv"], sig.results, has_side_effect=True, input_output_aliases={0: 0})
    _step = call(TARGETS["step"], sig.results, has_side_effect=True, input_output_aliases={0: 0})
    driver = int(lease.address)  # an i64 attribute (a Python int: 64 bits whatever jax_enable_x64 says)

    def recv(handle: Any) -> tuple[Any, tuple[Any, ...]]:
        """The first ``batch_size`` envs to finish (inside or outside ``jit``)."""
        return sig.layout(_recv(handle, driver=driver))

    def send(handle: Any, action: Any, env_id: Any = None, reset: Any = None) -> Any:
        """Start stepping ``env_id`` (default: every env) with ``action``; envs whose ``reset``
        flag is set are reset instead (``async_reset``); the new handle."""
        return _send(handle, *sig.arguments(action, env_id, reset), driver=driver)

    def step(handle: Any, action: Any, env_id: Any = None, reset: Any = None) -> tuple[Any, tuple[Any, ...]]:
        """``recv(send(handle, action, env_id, reset))``, one call."""
        return sig.layout(_step(handle, *sig.arguments(action, env_id, reset), driver=driver))

    handle = np.frombuffer(int(lease.address).to_bytes(8, sys.byteorder), np.uint8).copy()
    return handle, recv, send, step
