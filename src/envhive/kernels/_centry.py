"""The kernels' C entry: an ``envhive_batch_api`` whose ``run`` is the family's compiled op loop.

Code holding no GIL (``env.xla()``'s FFI handlers) runs a kernel's ops through the same C
struct as a threaded engine's (``engines/include/envhive/batch_api.h``), with ``run`` only
(kernels finish their ops inside the call): a numba ``cfunc`` that calls the family's driver
(:func:`~envhive.kernels._kernel.build_driver`) on the bound buffers. Its ``handle`` is a
small int64 block: the binding's table, the actions buffer and its row length.

A reset needs a row of the env's stock of draws. Stocks drawn by compiled generators refill
inside the loop; one drawn in Python (a generator asked for by ``call("np_random")``, a seed
beyond 2**64) may run out: then ``run`` returns ``-2`` before anything runs, the caller lets
Python restock (``CEntry.prepare``) and calls again.

Examples:
    >>> import envhive
    >>> env = envhive.make("envhive/CartPole-v1", num_envs=2, seed=0)
    >>> entry = env.pool.executor._engine.c_entry()
    >>> type(entry.capsule).__name__, entry.failed is None
    ('PyCapsule', True)
    >>> env.close()
"""

from __future__ import annotations

import ctypes
from typing import Any

import numba
import numpy as np
from numba import types

from envhive._ops import STEP
from envhive.engines._compiled import address_to_voidptr
from envhive.engines._jit import jit
from envhive.kernels._kernel import _N, _NOISE_POS, _OPS, _STOCK, _TABLE_SIZE, Kernel

__all__ = ["kernel_api"]

_API_NAME = b"envhive.batch_api"  # ENVHIVE_BATCH_API_NAME; the capsule keeps this pointer
_API_VERSION = 1
#: Slots of the handle block.
_TABLE, _ACTIONS, _ITEMS, _HANDLE_SIZE = range(4)


class _BatchApi(ctypes.Structure):
    """``envhive_batch_api`` (function pointers as addresses; NULL where a kernel has none)."""

    _fields_ = [("version", ctypes.c_uint32), ("size", ctypes.c_uint32), ("handle", ctypes.c_void_p),
                ("num_envs", ctypes.c_int64), ("run", ctypes.c_void_p), ("start", ctypes.c_void_p),
                ("collect", ctypes.c_void_p), ("discard", ctypes.c_void_p), ("wait_idle", ctypes.c_void_p),
                ("last_error", ctypes.c_void_p), ("env_error", ctypes.c_void_p)]


#: The C signature of ``run`` as numba compiles it: pointers passed as int64 (the same
#: registers on every 64-bit ABI), so the body is an ordinary cached function of integers.
_SIGNATURE = types.int64(types.int64, types.int64, types.int64, types.int64)
_RUNS: dict[tuple[type, np.dtype, int], Any] = {}


@jit(nogil=True)
def _ready(table, ids):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Whether every env of ``ids`` that may reset has a row of draws left."""
    n = table[_N]
    ops = numba.carray(address_to_voidptr(table[_OPS]), n, np.int8)
    noise_pos = numba.carray(address_to_voidptr(table[_NOISE_POS]), n, np.int64)
    stock = table[_STOCK]
    for k in range(ids.size):
        i = ids[k]
        if ops[i] != STEP and noise_pos[i] >= stock:  # it may reset: Python draws first
            return False
    return True


def _run_for(kernel: Kernel, dtype: np.dtype, ndim: int) -> Any:
    """The ``run`` cfunc of a kernel family for actions of ``dtype`` and ``ndim`` (1: one per
    env, 2: rows), compiled once per process; its body is cached on disk (``engines._jit``)."""
    key = (type(kernel), dtype, ndim)
    run = _RUNS.get(key)
    if run is not None:
        return run
    drive = type(kernel).driver()
    act = numba.from_dtype(dtype)
    two_d = ndim == 2

    @jit(nogil=True)
    def body(handle, ids_at, count, out_at):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        head = numba.carray(address_to_voidptr(handle), _HANDLE_SIZE, np.int64)
        table = numba.carray(address_to_voidptr(head[_TABLE]), _TABLE_SIZE, np.int64)
        ids = numba.carray(address_to_voidptr(ids_at), count, np.int64)
        if not _ready(table, ids):
            return -2
        if two_d:
            drive(ids, numba.carray(address_to_voidptr(head[_ACTIONS]), (table[_N], head[_ITEMS]), act), table, False)
        else:
            drive(ids, numba.carray(address_to_voidptr(head[_ACTIONS]), table[_N], act), table, False)
        out = numba.carray(address_to_voidptr(out_at), count, np.int64)
        out[:] = ids
        return count

    def entry(handle, ids_at, count, out_at):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        return body(handle, ids_at, count, out_at)

    compiled = numba.cfunc(_SIGNATURE)(entry)
    _RUNS[key] = compiled
    return compiled


def kernel_api(kernel: Kernel, table: np.ndarray, actions: np.ndarray) -> tuple[Any, tuple[Any, ...]]:
    """A PyCapsule of an ``envhive_batch_api`` running ``kernel``'s ops on the buffers bound
    in ``table`` (a :class:`~envhive.kernels._kernel.Binding`'s) with ``actions``; and what
    must stay alive as long as the capsule is used (the caller keeps it)."""
    if actions.ndim not in (1, 2) or not actions.flags.c_contiguous:
        raise ValueError(f"kernel C entry: expected C-contiguous actions of 1 or 2 dimensions, got {actions.shape}")
    run = _run_for(kernel, actions.dtype, actions.ndim)
    handle = np.zeros(_HANDLE_SIZE, np.int64)
    handle[_TABLE], handle[_ACTIONS] = table.ctypes.data, actions.ctypes.data
    handle[_ITEMS] = actions.shape[1] if actions.ndim == 2 else 1
    api = _BatchApi(version=_API_VERSION, size=ctypes.sizeof(_BatchApi), handle=handle.ctypes.data,
                    num_envs=kernel.num_envs, run=run.address)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new(ctypes.addressof(api), _API_NAME, None)
    return capsule, (api, handle, table, actions, run)
