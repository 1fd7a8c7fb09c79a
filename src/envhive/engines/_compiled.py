"""numba helpers shared by every compiled engine (imported lazily: importing numba is slow).

* :func:`address_to_voidptr`: an int64 address as a ``void*``, so that compiled code can view
  memory bound by address (``numba.carray``) instead of taking arrays as arguments.
* The op rules of ``envhive._ops`` compiled from the very same function objects
  (:data:`resets_in_op`), so that the rule is written once for Python and compiled code.
* numpy's exact arithmetic where compiled code must reproduce it bit for bit:
  :func:`pairwise_sum` (numpy's pairwise summation) and :func:`clip` (numpy's NaN-propagating
  float clip); :func:`square` / :func:`square32` (numpy's scalar ``x**2``: the C library's
  ``pow``, see :data:`HAVE_LIBM_POW`); :func:`first_bad_action` checks a batch of Box actions.

Examples:
    >>> import numpy as np
    >>> a = np.arange(20, dtype=np.float32) / 7
    >>> bool(pairwise_sum(a, 0, a.size, np.float32(0)) == np.add.reduce(a))
    True
    >>> float(clip(float("nan"), -1.0, 1.0)), float(clip(3.0, -1.0, 1.0))
    (nan, 1.0)
    >>> resets_in_op.py_func is _ops.resets_in_op
    True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from typing import Any

import numpy as np
from numba.core import cgutils, types
from numba.extending import intrinsic

from envhive import _ops
from envhive.engines._jit import c_function, jit

__all__ = [
    "address_to_voidptr",
    "resets_in_op",
    "reset_rows",
    "pairwise_sum",
    "clip",
    "first_bad_action",
    "HAVE_LIBM_POW",
    "square",
    "square32",
]


@intrinsic
def address_to_voidptr(typingctx, address):  # type: ignore[no-untyped-def]  # pragma: no cover
    """An int64 address as a ``void*`` (for ``numba.carray``)."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(types.int64), codegen


#: ``envhive._ops.resets_in_op`` compiled (inlined into every driver loop that uses it).
resets_in_op = jit(nogil=True, inline="always")(_ops.resets_in_op)


@jit(nogil=True)
def reset_rows(ids: Any, ops: Any, terminated: Any, truncated: Any) -> Any:  # pragma: no cover - compiled
    """The envs of ``ids`` whose op reset them after their step (:data:`resets_in_op`), in
    ``ids`` order, as an int64 array."""
    out = np.empty(ids.size, np.int64)
    k = 0
    for j in range(ids.size):
        i = ids[j]
        if resets_in_op(ops[i], terminated[i], truncated[i]):
            out[k] = i
            k += 1
    return out[:k]


@jit(nogil=True, inline="always")
def _pairwise_leaf(a: Any, lo: int, n: int, zero: Any) -> Any:  # pragma: no cover - compiled
    """numpy's pairwise sum of ``a[lo:lo + n]`` for ``n <= 128``: one block of 8 partials."""
    if n < 8:
        res = zero
        for k in range(n):
            res += a[lo + k]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    k = 8
    m = n - n % 8
    while k < m:
        r0 += a[lo + k]
        r1 += a[lo + k + 1]
        r2 += a[lo + k + 2]
        r3 += a[lo + k + 3]
        r4 += a[lo + k + 4]
        r5 += a[lo + k + 5]
        r6 += a[lo + k + 6]
        r7 += a[lo + k + 7]
        k += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while k < n:
        res += a[lo + k]
        k += 1
    return res


@jit(nogil=True)
def pairwise_sum(a: Any, lo: int, n: int, zero: Any) -> Any:  # pragma: no cover - compiled
    """``numpy.add.reduce(a[lo:lo + n])``, bit for bit: numpy's pairwise summation.

    numpy sums float arrays from 0 in blocks of 8 partial sums, splitting above 128
    elements (left half rounded down to a multiple of 8); the result differs from a running
    sum in the last bits. ``zero`` is a zero of ``a``'s dtype (the result has that dtype).
    numpy recurses; this walks the same tree with explicit stacks (recursive functions cannot
    be cached by numba), adding each node's halves in the same order.
    """
    if n <= 128:
        return _pairwise_leaf(a, lo, n, zero)
    frames = np.empty((64, 3), np.int64)  # (lo, n, halves done); depth ~log2(n / 128) + 1
    values = np.full(64, zero)
    top, nv = 0, 0
    frames[0, 0], frames[0, 1], frames[0, 2] = lo, n, 0
    while top >= 0:
        f_lo, f_n, done = frames[top, 0], frames[top, 1], frames[top, 2]
        if f_n <= 128:
            values[nv] = _pairwise_leaf(a, f_lo, f_n, zero)
            nv += 1
            top -= 1
            continue
        half = f_n // 2
        half -= half % 8
        if done == 2:  # both halves summed: left + right, as numpy adds them
            values[nv - 2] = values[nv - 2] + values[nv - 1]
            nv -= 1
            top -= 1
            continue
        frames[top, 2] = done + 1
        top += 1
        if done == 0:
            frames[top, 0], frames[top, 1] = f_lo, half
        else:
            frames[top, 0], frames[top, 1] = f_lo + half, f_n - half
        frames[top, 2] = 0
    return values[0]


@jit(nogil=True)
def clip(x: float, lo: float, hi: float) -> float:  # pragma: no cover - compiled
    """numpy's float clip: NaN in ``x`` propagates, else ``min(max(x, lo), hi)``.

    Ties keep the first operand, as numpy's maximum/minimum do: that decides the sign of a
    zero result (``clip(0.0, -0.0, 1.0)`` is ``0.0``).
    """
    if x != x:
        return x
    t = x if x >= lo else lo
    if t != t:
        return t
    return t if t <= hi else hi


@jit(nogil=True)
def first_bad_action(actions: Any, lo: Any, hi: Any) -> int:  # pragma: no cover - compiled
    """The first row of ``actions`` with a value outside ``[lo, hi]`` (or NaN), else -1."""
    n, d = actions.shape
    for i in range(n):
        for j in range(d):
            v = actions[i, j]
            if not (v >= lo[j] and v <= hi[j]):
                return i
    return -1


# numpy's scalar x**2 is the C library's pow, not always the correctly rounded x * x.
def _libm_function(name: str, ctype: Any) -> Any:
    """The C library's ``name`` (the function numpy's scalar ``**`` calls), or ``None``.

    numba's own ``math.pow`` goes through LLVM, which rewrites ``pow(x, 2.0)`` as ``x * x``;
    the C function called under envhive's own symbol name (``_jit.c_function``) is called as
    it is.
    """
    libraries: list[Any] = []
    if sys.platform != "win32":
        try:
            libraries.append(ctypes.CDLL(None))  # the process's symbols: Python links libm
        except OSError:  # pragma: no cover - platform specific
            pass
    for lib in ("m", "ucrtbase", "msvcrt"):
        path = ctypes.util.find_library(lib)
        if path:
            try:
                libraries.append(ctypes.CDLL(path))
            except OSError:  # pragma: no cover - platform specific
                pass
    for library in libraries:
        fn = getattr(library, name, None)
        if fn is not None:
            fn.restype = ctype
            fn.argtypes = [ctype, ctype]
            return fn
    return None  # pragma: no cover - platform specific


_pow = _libm_function("pow", ctypes.c_double)
_powf = _libm_function("powf", ctypes.c_float)
# Called under envhive's own symbol names: cacheable, and LLVM does not know them as libm's.
_c_pow: Any = c_function("pow", _pow, types.float64(types.float64, types.float64)) if _pow else None
_c_powf: Any = c_function("powf", _powf, types.float32(types.float32, types.float32)) if _powf else None

#: Whether the kernels call the C library's ``pow``/``powf`` for gymnasium's ``x**2`` (as
#: numpy does). Without it, they square with ``x * x``, which differs in the last bit in
#: about 0.1% of cases.
HAVE_LIBM_POW = _c_pow is not None and _c_powf is not None

if HAVE_LIBM_POW:

    @jit(nogil=True, inline="always")
    def square(x: float) -> float:  # pragma: no cover - compiled
        """numpy's scalar ``x**2`` for a float64: the C library's ``pow(x, 2.0)``."""
        return _c_pow(x, 2.0)

    @jit(nogil=True, inline="always")
    def square32(x: np.float32) -> np.float32:  # pragma: no cover - compiled
        """numpy's scalar ``x**2`` for a float32: the C library's ``powf(x, 2.0f)``."""
        return _c_powf(x, np.float32(2.0))

else:  # pragma: no cover - platform specific

    @jit(nogil=True, inline="always")
    def square(x: float) -> float:
        """``x * x`` (no C library ``pow`` found)."""
        return x * x

    @jit(nogil=True, inline="always")
    def square32(x: np.float32) -> np.float32:
        """``x * x`` (no C library ``powf`` found)."""
        return x * x
