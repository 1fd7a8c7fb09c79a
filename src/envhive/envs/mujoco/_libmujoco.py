"""MuJoCo's physics calls, in one place: the ``mujoco`` binding's (:data:`mj_step`,
:data:`mj_rne_post_constraint`, for Python) and the one loader of ``libmujoco`` (the C library
the ``mujoco`` package ships), through ctypes, for compiled code.

Compiled MuJoCo code (the native engine's families, ``MujocoEnv.step_many``'s batched
physics) calls MuJoCo's C functions on the raw ``MjModel``/``MjData`` addresses of envs built
by the ``mujoco`` package, with no Python in between. Every such caller takes the functions
from here, so the library is opened once and the argument types are declared once. They are
handed out as ``numba`` external functions under envhive's own symbol names
(``envhive.engines._jit.c_function``), so that compiled code calling them can be cached on disk.

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
from collections.abc import Callable
from typing import Any

from envhive.errors import ConfigError

try:
    import mujoco
except ImportError:  # pragma: no cover - exercised only where mujoco is missing
    mujoco = None

__all__ = ["find_libmujoco", "libmujoco_fns", "mj_step", "mj_rne_post_constraint"]

if mujoco is not None:
    mj_step: Callable[..., None] = mujoco.mj_step
    mj_rne_post_constraint: Callable[..., None] = mujoco.mj_rnePostConstraint
else:  # pragma: no cover

    def _missing(*args: Any, **kwargs: Any) -> None:
        from gymnasium import error

        raise error.DependencyNotInstalled('MuJoCo is not installed, run `pip install "mujoco"`')

    mj_step = mj_rne_post_constraint = _missing

#: The ``(const mjModel*, mjData*) -> void`` functions compiled code calls.
_NAMES = ("mj_step", "mj_rnePostConstraint", "mj_resetData", "mj_forward")

_FNS: dict[str, Any] = {}
_lock = threading.Lock()


def find_libmujoco() -> str | None:
    """The path of the ``libmujoco`` shared library next to the ``mujoco`` package, or ``None``."""
    if mujoco is None:  # pragma: no cover
        return None
    here = os.path.dirname(mujoco.__file__)
    names = sorted(glob.glob(os.path.join(here, "libmujoco.so*")))
    names += sorted(glob.glob(os.path.join(here, "libmujoco*.dylib")))
    names += sorted(glob.glob(os.path.join(here, "mujoco*.dll")))
    return names[0] if names else None


def libmujoco_fns() -> dict[str, Any]:
    """``libmujoco``'s ``(model, data) -> void`` functions by name, as numba external functions
    (compiled code calls them; see ``engines._jit.c_function``).

    Raises:
        ConfigError: the library was not found.
    """
    if not _FNS:
        with _lock:
            if not _FNS:
                path = find_libmujoco()
                if path is None:  # pragma: no cover - every mujoco wheel ships it
                    raise ConfigError("compiled MuJoCo code needs libmujoco, which was not found")
                from numba.core import types

                from envhive.engines._jit import c_function

                lib = ctypes.CDLL(path)
                signature = types.void(types.int64, types.int64)  # (model, data) addresses
                fns = {name: c_function(name, getattr(lib, name), signature) for name in _NAMES}
                _FNS.update(fns)
    return _FNS
