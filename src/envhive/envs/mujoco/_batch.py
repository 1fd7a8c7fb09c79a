"""The physics of many MuJoCo envs in one GIL-free call (used by ``MujocoEnv.step_many``).

``mujoco.mj_step`` releases the GIL for each call; when a few Python threads step many envs,
one GIL release and re-acquisition per env per step costs more than the physics of a small
model (GIL hand-offs between threads). :func:`step_physics` instead runs, for a whole list
of envs, ``frame_skip`` calls of the C ``mj_step`` each (plus ``mj_rnePostConstraint`` for
the envs that call it) in a single numba ``nogil`` function that calls ``libmujoco``
directly through ctypes (``envhive.envs.mujoco._libmujoco``). The result is bit-identical to ``mujoco.mj_step(model, data,
frame_skip)`` (which loops ``mj_step`` in C) followed by ``mujoco.mj_rnePostConstraint``.

When ``libmujoco`` cannot be found next to the ``mujoco`` package, or numba is missing, or the
compilation fails, the envs are stepped one by one with ``mujoco.mj_step`` instead (same
results).

The one behavioural difference: in the batched call a MuJoCo *error* (``mju_error``, e.g. an
invalid model; not the warnings that ``mj_step`` handles by resetting ``data``) is not
turned into a Python exception by the ``mujoco`` bindings. MuJoCo's default handler prints
it and exits the process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive.envs.mujoco._libmujoco import (
    find_libmujoco,
    libmujoco_fns,
    mj_rne_post_constraint,
    mj_step,
)

if TYPE_CHECKING:
    from envhive.envs.mujoco._base import MujocoEnv

__all__ = ["batched_physics_available", "step_physics"]

_lock = threading.Lock()
_kernel: Callable[..., None] | None = None
_tried = False


def _build() -> Callable[..., None] | None:
    """Compile the batched kernel, or return ``None`` if anything is missing."""
    if find_libmujoco() is None:
        return None
    try:
        from envhive.engines._jit import jit  # imports numba: only when batching is asked for

        fns = libmujoco_fns()
        c_step, c_rne = fns["mj_step"], fns["mj_rnePostConstraint"]

        @jit(nogil=True)  # type: ignore[misc]
        def kernel(ms: Any, ds: Any, nsteps: Any, rnes: Any) -> None:  # pragma: no cover - jitted
            for k in range(ds.size):
                m = ms[k]
                d = ds[k]
                for _ in range(nsteps[k]):
                    c_step(m, d)
                if rnes[k]:
                    c_rne(m, d)

        # Compile now (for these argument types), so that a failure means "fall back".
        empty = np.zeros(0, dtype=np.int64)
        kernel(empty, empty, empty, np.zeros(0, dtype=np.bool_))
    except Exception:  # pragma: no cover - no numba, no symbol, or a compilation failure
        return None
    return kernel  # type: ignore[no-any-return]


def _get_kernel() -> Callable[..., None] | None:
    global _kernel, _tried
    if not _tried:
        with _lock:
            if not _tried:
                _kernel = _build()
                _tried = True
    return _kernel


def batched_physics_available() -> bool:
    """Whether :func:`step_physics` steps all envs in one GIL-free call (else one by one)."""
    return _get_kernel() is not None


def step_physics(envs: Sequence[MujocoEnv]) -> None:
    """Step each env's physics ``frame_skip`` times, then ``mj_rnePostConstraint`` if it uses it.

    Each env must have its own ``MjData`` (as every ``MujocoEnv`` has).

    Args:
        envs: the envs, whose controls were already written.
    """
    n = len(envs)
    if n == 0:
        return
    kernel = _get_kernel() if n > 1 else None
    if kernel is None:
        for env in envs:
            model, data = env.model, env.data
            mj_step(model, data, env._frame_skip)
            if env.rne_post_constraint:
                mj_rne_post_constraint(model, data)
        return
    ms: list[int] = []
    ds: list[int] = []
    nsteps: list[int] = []
    rnes: list[bool] = []
    for env in envs:
        ms.append(env.model._address)
        ds.append(env.data._address)
        nsteps.append(env._frame_skip)
        rnes.append(env.rne_post_constraint)
    kernel(
        np.array(ms, dtype=np.int64),
        np.array(ds, dtype=np.int64),
        np.array(nsteps, dtype=np.int64),
        np.array(rnes, dtype=np.bool_),
    )
