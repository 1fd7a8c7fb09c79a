"""Atari frame preprocessing in C: max-pool, ``INTER_AREA`` resize, stack push.

EnvPool, ale-py's vector env and gymnasium's ``AtariPreprocessing`` all shrink the 210x160
screen with OpenCV's ``cv2.resize(..., interpolation=cv2.INTER_AREA)``. For a non-integer
factor (210 -> 84 is 2.5, 160 -> 84 is 1.905) OpenCV takes its generic area path, which costs
about as much per agent step as a fifth of the four emulated frames. This module computes the
same thing in one C call (``_cframes.c``, an optional extension built at install) that also
max-pools the two captured screens and pushes the result onto the frame stack, and it gives
**bit-identical** frames: the same float32 weights, summed in the same order, rounded the same
way (``tests/atari/test_frames.py`` checks it against ``cv2.resize`` on random images of many
sizes, and on game frames). It is C, not numba, because it runs in every Atari worker
process, and numba would add ~100 MB to each.

What OpenCV computes for one axis (source size ``S``, destination ``D``, ``scale = S / D``):
destination pixel ``d`` covers the source interval ``[d * scale, (d + 1) * scale)``; each
source pixel it touches is weighted by the covered length over ``scale`` (weights below
``1e-3`` of a pixel are dropped), as a float32. A row is first summed horizontally
(``sum += pixel * weight`` in source order, from the first product), then destination rows
are summed vertically the same way over those horizontal sums, and the float32 result is
rounded half to even. :class:`AreaPlan` holds those weights as ``taps`` tables padded with
zero weights (adding ``0 * x`` leaves a non-negative float32 sum unchanged).

Where OpenCV does something else, :func:`area_plan` returns ``None`` and the env keeps
``cv2.resize``: upscaling along an axis, both factors integers (OpenCV's fast integer path),
RGB frames (the env resizes those with OpenCV), many taps (a factor above 4), and an install
without the C extension.

Examples:
    >>> import numpy as np, cv2
    >>> plan = area_plan((210, 160), (84, 84))
    >>> if plan is None:  # an install without a C compiler: the env keeps cv2.resize
    ...     plan = AreaPlan((210, 160), (84, 84), _reference=True)
    >>> screen = np.random.default_rng(0).integers(0, 256, (210, 160), dtype=np.uint8)
    >>> stack = np.zeros((4, 84, 84), np.uint8)
    >>> plan.push(screen, screen, False, stack)
    >>> ref = cv2.resize(screen, (84, 84), interpolation=cv2.INTER_AREA)
    >>> bool((stack[-1] == ref).all()), bool((stack[:-1] == 0).all())
    (True, True)
    >>> area_plan((210, 160), (105, 80)) is None  # integer factors: OpenCV's own fast path
    True
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

try:
    from envhive.envs.atari import _cframes  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: the env keeps cv2.resize
    _cframes = None


__all__ = ["AreaPlan", "area_plan", "area_taps"]

_MAX_TAPS = 5  # up to a factor of 4 per axis; beyond that the env keeps cv2.resize


def area_taps(src: int, dst: int, taps: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The area weights of one axis: ``(index, weight)``, each ``(taps, dst)``: destination
    pixel ``d`` is ``sum(pixel[index[t, d]] * weight[t, d] for t in range(taps))``, in that
    order, in float32; padding taps have weight 0 (and index of tap 0). ``taps``: at least
    this many rows (the C code has a fast path for three).

    Examples:
        >>> index, weight = area_taps(5, 2)  # scale 2.5
        >>> index.tolist(), weight.tolist()
        ([[0, 2], [1, 3], [2, 4]], [[0.4000000059604645, 0.20000000298023224], [0.4000000059604645, 0.4000000059604645], [0.20000000298023224, 0.4000000059604645]])
    """
    scale = src / dst
    columns: list[list[tuple[int, float]]] = []
    for d in range(dst):
        start = d * scale
        end = start + scale
        cell = min(scale, src - start)
        first, last = math.ceil(start), math.floor(end)
        last = min(last, src - 1)
        first = min(first, last)
        col: list[tuple[int, float]] = []
        if first - start > 1e-3:
            col.append((first - 1, (first - start) / cell))
        col.extend((s, 1.0 / cell) for s in range(first, last))
        if end - last > 1e-3:
            col.append((last, min(min(end - last, 1.0), cell) / cell))
        columns.append(col)
    taps = max(taps, *(len(c) for c in columns))
    index = np.zeros((taps, dst), np.int64)
    weight = np.zeros((taps, dst), np.float32)
    for d, col in enumerate(columns):
        index[:, d] = col[0][0]
        for t, (s, w) in enumerate(col):
            index[t, d], weight[t, d] = s, w
    return index, weight


class AreaPlan:
    """One resize (source and destination shape) planned: its weights (read only, so one
    plan serves every env of a process: :func:`area_plan` keeps one per shape pair).

    Args:
        src: the screen's ``(height, width)``.
        dst: the frame's ``(height, width)``.
    """

    def __init__(self, src: tuple[int, int], dst: tuple[int, int], _reference: bool = False) -> None:
        self.src, self.dst = src, dst
        yi, yw = area_taps(src[0], dst[0], taps=3)
        xi, xw = area_taps(src[1], dst[1], taps=3)
        self._taps = (xi, xw, xi.shape[0], yi, yw, yi.shape[0])
        for table in (xi, xw, yi, yw):
            table.flags.writeable = False
        self._sizes = (1, dst[0], dst[1], src[0], src[1])
        self._push = _reference_push if _reference or _cframes is None else _cframes.push

    def push(self, a: np.ndarray, b: np.ndarray, pool: bool, stack: np.ndarray) -> None:
        """Shift ``stack`` (``(depth, h, w)`` uint8, C order) down one frame and write the
        resize of screen ``a`` (max-pooled with ``b`` when ``pool``: the maximum is left in
        ``a``, as ``np.maximum(a, b, out=a)`` would) as its last frame."""
        _, h, w, height, width = self._sizes
        self._push(a, b, pool, stack, stack.shape[0], h, w, height, width, *self._taps)


def _reference_push(a: Any, b: Any, pool: bool, stack: np.ndarray, depth: int, h: int, w: int,
                    height: int, width: int, xi: np.ndarray, xw: np.ndarray, xtaps: int,
                    yi: np.ndarray, yw: np.ndarray, ytaps: int) -> None:
    """What ``_cframes.push`` computes, in numpy, in the same float32 order (the readable
    definition, and what the doctest runs without the C extension)."""
    if pool:
        np.maximum(a, b, out=a)
    src = a.astype(np.float32)
    hsum = src[:, xi[0]] * xw[0]
    for t in range(1, xtaps):
        hsum += src[:, xi[t]] * xw[t]
    vsum = yw[0][:, None] * hsum[yi[0]]
    for t in range(1, ytaps):
        vsum += yw[t][:, None] * hsum[yi[t]]
    stack[:-1] = stack[1:]
    stack[-1] = np.minimum(np.rint(vsum), 255).astype(np.uint8)


@functools.lru_cache(maxsize=16)
def area_plan(src: tuple[int, int], dst: tuple[int, int]) -> AreaPlan | None:
    """The C resize from ``src`` to ``dst`` (grayscale), or ``None`` where OpenCV's
    ``INTER_AREA`` takes another path, or without the C extension (see the module docstring).
    One plan per shape pair and process, shared by its envs."""
    (sh, sw), (dh, dw) = src, dst
    if _cframes is None or dh > sh or dw > sw or dh < 1 or dw < 1:
        return None
    if sh % dh == 0 and sw % dw == 0:  # integer factors (including no resize at all)
        return None
    if max(area_taps(sh, dh)[0].shape[0], area_taps(sw, dw)[0].shape[0]) > _MAX_TAPS:
        return None
    return AreaPlan(src, dst)


# ------------------------------------------------------------------ INTER_LINEAR
def linear_taps(src: int, dst: int) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV's ``INTER_LINEAR`` weights of one axis for 8-bit images: ``(index, weights)``:
    destination pixel ``d`` is ``p[index[d]] * weights[d, 0] + p[index[d] + 1] * weights[d, 1]``
    (the second pixel clamped to the last), weights in 11-bit fixed point, as
    ``cv::resize`` computes them (the float offset, its floor, the edge clamps, each weight
    rounded half to even on its own).

    Examples:
        >>> index, weights = linear_taps(4, 2)
        >>> index.tolist(), weights.tolist()
        ([0, 2], [[1024, 1024], [1024, 1024]])
    """
    scale = 1.0 / (dst / src)  # cv::resize: 1 / inv_scale
    index = np.zeros(dst, np.int64)
    weights = np.zeros((dst, 2), np.int32)
    for d in range(dst):
        fx = np.float32((d + 0.5) * scale - 0.5)
        sx = int(np.floor(fx))
        fx = np.float32(fx - np.float32(sx))
        if sx < 0:
            fx, sx = np.float32(0.0), 0
        if sx >= src - 1:
            fx, sx = np.float32(0.0), src - 1
        index[d] = sx
        weights[d] = [int(np.rint((np.float32(1.0) - fx) * np.float32(2048))), int(np.rint(fx * np.float32(2048)))]
    return index, weights


def linear_reference(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``cv2.resize(frame, (w, h), interpolation=cv2.INTER_LINEAR)`` of a uint8 ``frame``
    (``(H, W)`` or ``(H, W, C)``) as the threaded engine computes it (``_linear.h``): integer
    horizontal sums, then the vertical sum rounded as OpenCV's vector code rounds it. The
    readable definition, and what :func:`linear_matches_opencv` holds against OpenCV."""
    (h, w), (height, width) = size, frame.shape[:2]
    xi, xa = linear_taps(width, w)
    yi, yb = linear_taps(height, h)
    src = frame.astype(np.int64)
    x1 = np.minimum(xi + 1, width - 1)
    shape = (1, w) + ((1,) if frame.ndim == 3 else ())
    rows = src[:, xi] * xa[:, 0].reshape(shape) + src[:, x1] * xa[:, 1].reshape(shape)
    y1 = np.minimum(yi + 1, height - 1)
    col = (h, 1) + ((1,) if frame.ndim == 3 else ())
    top = ((rows[yi] >> 4) * yb[:, 0].reshape(col)) >> 16
    bottom = ((rows[y1] >> 4) * yb[:, 1].reshape(col)) >> 16
    return np.clip((top + bottom + 2) >> 2, 0, 255).astype(np.uint8)


@functools.lru_cache(maxsize=16)
def linear_matches_opencv(src: tuple[int, int], dst: tuple[int, int], channels: int) -> bool:
    """Whether the installed OpenCV's ``INTER_LINEAR`` gives :func:`linear_reference`'s frames
    for this resize (OpenCV rounds the vertical sum one way in its vector code and another in
    its scalar tails, and which pixels take which depends on its version and the CPU; where it
    differs, the engine leaves the resize to OpenCV), on random frames."""
    try:
        import cv2
    except ImportError:
        return False
    rng = np.random.default_rng(0)
    for _ in range(3):
        frame = rng.integers(0, 256, (*src, channels) if channels > 1 else src, dtype=np.uint8)
        want = cv2.resize(frame, (dst[1], dst[0]), interpolation=cv2.INTER_LINEAR)
        if not np.array_equal(linear_reference(frame, dst), want):
            return False
    return True
