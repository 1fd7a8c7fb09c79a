"""The one loader of ``libmujoco`` (the C library the ``mujoco`` package ships), through ctypes.

Compiled MuJoCo code (the native engine's families, ``MujocoEnv.step_many``'s batched
physics) calls MuJoCo's C functions on the raw ``MjModel``/``MjData`` addresses of envs built
by the ``mujoco`` package, with no Python in between: numba calls ctypes function pointers
directly. Every such caller takes the functions from here, so the library is opened once and
the argument types are declared once.

Examples:
    >>> fns = libmujoco_fns()
    >>> sorted(fns)
    ['mj_forward', 'mj_resetData', 'mj_rnePostConstraint', 'mj_step']
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from typing import Any

from envhive.errors import ConfigError

__all__ = ["find_libmujoco", "libmujoco_fns"]

#: The ``(const mjModel*, mjData*) -> void`` functions compiled code calls.
_NAMES = ("mj_step", "mj_rnePostConstraint", "mj_resetData", "mj_forward")

_FNS: dict[str, Any] = {}
_lock = threading.Lock()


def find_libmujoco() -> str | None:
    """The path of the ``libmujoco`` shared library next to the ``mujoco`` package, or ``None``."""
    try:
        import mujoco
    except ImportError:  # pragma: no cover
        return None
    here = os.path.dirname(mujoco.__file__)
    names = sorted(glob.glob(os.path.join(here, "libmujoco.so*")))
    names += sorted(glob.glob(os.path.join(here, "libmujoco*.dylib")))
    names += sorted(glob.glob(os.path.join(here, "mujoco*.dll")))
    return names[0] if names else None


def libmujoco_fns() -> dict[str, Any]:
    """``libmujoco``'s ``(model, data) -> void`` functions by name, as ctypes function pointers
    (numba calls them from compiled code).

    Raises:
        ConfigError: the library was not found.
    """
    if not _FNS:
        with _lock:
            if not _FNS:
                path = find_libmujoco()
                if path is None:  # pragma: no cover - every mujoco wheel ships it
                    raise ConfigError("compiled MuJoCo code needs libmujoco, which was not found")
                lib = ctypes.CDLL(path)
                fns = {}
                for name in _NAMES:
                    fn = getattr(lib, name)
                    fn.restype = None
                    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
                    fns[name] = fn
                _FNS.update(fns)
    return _FNS
