"""``envhive_batch_api`` (``engines/include/envhive/batch_api.h``) through ctypes, for the tests
that drive an engine's C entry as a foreign caller would (ctypes releases the GIL around each
call)."""

from __future__ import annotations

import ctypes

import numpy as np

_i64p = ctypes.POINTER(ctypes.c_int64)


class BatchApi(ctypes.Structure):
    """``envhive_batch_api``, field for field."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("handle", ctypes.c_void_p),
        ("num_envs", ctypes.c_int64),
        ("run", ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, _i64p, ctypes.c_int64, _i64p)),
        ("start", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, _i64p, ctypes.c_int64)),
        ("collect", ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, _i64p)),
        ("discard", ctypes.CFUNCTYPE(None, ctypes.c_void_p)),
        ("wait_idle", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)),
        ("last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)),
        ("env_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64)),
    ]


def api_of(capsule) -> BatchApi:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    api = BatchApi.from_address(get(capsule, b"envhive.batch_api"))
    assert api.version == 1 and api.size == ctypes.sizeof(BatchApi)
    return api


def ptr(a: np.ndarray):
    return a.ctypes.data_as(_i64p)
