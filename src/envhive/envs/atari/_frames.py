"""Atari frame preprocessing in compiled code: max-pool, ``INTER_AREA`` resize, stack push.

EnvPool, ale-py's vector env and gymnasium's ``AtariPreprocessing`` all shrink the 210x160
screen with OpenCV's ``cv2.resize(..., interpolation=cv2.INTER_AREA)``. For a non-integer
factor (210 -> 84 is 2.5, 160 -> 84 is 1.905) OpenCV takes its generic area path, which costs
about as much per agent step as a fifth of the four emulated frames. This module computes the
same thing in one compiled call that also max-pools the two captured screens and pushes the
result onto the frame stack, and it gives **bit-identical** frames: the same float32 weights,
summed in the same order, rounded the same way (``tests/atari/test_frames.py`` checks it
against ``cv2.resize`` on random images of many sizes, and on game frames).

What OpenCV computes for one axis (source size ``S``, destination ``D``, ``scale = S / D``):
destination pixel ``d`` covers the source interval ``[d * scale, (d + 1) * scale)``; each
source pixel it touches is weighted by the covered length over ``scale`` (weights below
``1e-3`` of a pixel are dropped), as a float32. A row is first summed horizontally
(``sum += pixel * weight`` in source order, from the first product), then destination rows
are summed vertically the same way over those horizontal sums, and the float32 result is
rounded half to even. :class:`AreaPlan` holds those weights as ``taps`` tables padded with
zero weights (adding ``0 * x`` leaves a non-negative float32 sum unchanged), so the compiled
loops have a fixed shape and vectorize.

Where OpenCV does something else, :func:`area_plan` returns ``None`` and the env keeps
``cv2.resize``: upscaling along an axis, both factors integers (OpenCV's fast integer path),
RGB frames (the env resizes those with OpenCV), or many taps (a factor above 4).

Examples:
    >>> import numpy as np, cv2
    >>> plan = area_plan((210, 160), (84, 84))
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

import math

import numpy as np

from envhive.engines._jit import jit

__all__ = ["AreaPlan", "area_plan", "area_taps"]

_MAX_TAPS = 5  # up to a factor of 4 per axis; beyond that the env keeps cv2.resize


def area_taps(src: int, dst: int) -> tuple[np.ndarray, np.ndarray]:
    """The area weights of one axis: ``(index, weight)``, each ``(taps, dst)``: destination
    pixel ``d`` is ``sum(pixel[index[t, d]] * weight[t, d] for t in range(taps))``, in that
    order, in float32; padding taps have weight 0 (and index of tap 0).

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
    taps = max(len(c) for c in columns)
    index = np.zeros((taps, dst), np.int64)
    weight = np.zeros((taps, dst), np.float32)
    for d, col in enumerate(columns):
        index[:, d] = col[0][0]
        for t, (s, w) in enumerate(col):
            index[t, d], weight[t, d] = s, w
    return index, weight


def _pad(index: np.ndarray, weight: np.ndarray, taps: int) -> tuple[np.ndarray, np.ndarray]:
    """Tables padded to ``taps`` rows with zero weights (adding ``0 * x`` changes no sum)."""
    extra = taps - index.shape[0]
    return (np.concatenate([index, np.repeat(index[:1], extra, 0)]),
            np.concatenate([weight, np.zeros((extra, weight.shape[1]), np.float32)]))


@jit(nogil=True, error_model="numpy")
def _push(a, b, pool, stack, xi, xw, yi, yw, rows, line):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Shift ``stack`` down one frame and write into its last frame the area resize of ``a``
    (max-pooled with ``b`` when ``pool``, the maximum left in ``a``); ``rows`` and ``line`` are
    float32 scratch."""
    depth = stack.shape[0]
    for k in range(depth - 1):
        stack[k] = stack[k + 1]
    out = stack[depth - 1]
    h, w = out.shape
    height, width = a.shape
    xtaps, ytaps = xi.shape[0], yi.shape[0]
    for y in range(height):
        if pool:
            for x in range(width):
                m = max(a[y, x], b[y, x])
                a[y, x] = m  # pooled in place, as OpenCV callers do (an early game over reuses it)
                line[x] = np.float32(m)
        else:
            for x in range(width):
                line[x] = np.float32(a[y, x])
        hrow = rows[y]
        for d in range(w):
            hrow[d] = line[xi[0, d]] * xw[0, d]
        for t in range(1, xtaps):
            for d in range(w):
                hrow[d] += line[xi[t, d]] * xw[t, d]
    for dy in range(h):
        o = out[dy]
        r = rows[yi[0, dy]]
        c = yw[0, dy]
        for d in range(w):
            line[d] = c * r[d]
        for t in range(1, ytaps):
            r = rows[yi[t, dy]]
            c = yw[t, dy]
            for d in range(w):
                line[d] += c * r[d]
        for d in range(w):
            o[d] = np.uint8(min(np.float32(255.0), np.rint(line[d])))


@jit(nogil=True, error_model="numpy")
def _push3(a, b, pool, stack, xi, xw, yi, yw, rows, line):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """:func:`_push` for exactly three taps per axis (a shrink by at most 2: Atari's 84x84),
    written out so that the loops keep their sums in registers and vectorize."""
    height, width = a.shape
    depth, h, w = stack.shape
    x0, x1, x2, a0, a1, a2 = xi[0], xi[1], xi[2], xw[0], xw[1], xw[2]
    for y in range(height):
        if pool:
            for x in range(width):
                m = max(a[y, x], b[y, x])
                a[y, x] = m  # pooled in place, as OpenCV callers do (an early game over reuses it)
                line[x] = np.float32(m)
        else:
            for x in range(width):
                line[x] = np.float32(a[y, x])
        hrow = rows[y]
        for d in range(w):
            s = line[x0[d]] * a0[d]
            s += line[x1[d]] * a1[d]
            s += line[x2[d]] * a2[d]
            hrow[d] = s
    for k in range(depth - 1):
        stack[k] = stack[k + 1]
    out = stack[depth - 1]
    for dy in range(h):
        o = out[dy]
        r0, r1, r2 = rows[yi[0, dy]], rows[yi[1, dy]], rows[yi[2, dy]]
        c0, c1, c2 = yw[0, dy], yw[1, dy], yw[2, dy]
        for d in range(w):
            v = c0 * r0[d]
            v += c1 * r1[d]
            v += c2 * r2[d]
            o[d] = np.uint8(min(np.float32(255.0), np.rint(v)))


class AreaPlan:
    """One resize (source and destination shape) planned: its weights and scratch rows.

    Args:
        src: the screen's ``(height, width)``.
        dst: the frame's ``(height, width)``.
    """

    def __init__(self, src: tuple[int, int], dst: tuple[int, int]) -> None:
        self.src, self.dst = src, dst
        self._yi, self._yw = area_taps(src[0], dst[0])
        self._xi, self._xw = area_taps(src[1], dst[1])
        if max(self._yi.shape[0], self._xi.shape[0]) <= 3:  # pad to three taps: _push3
            self._yi, self._yw = _pad(self._yi, self._yw, 3)
            self._xi, self._xw = _pad(self._xi, self._xw, 3)
            self._kernel = _push3
        else:
            self._kernel = _push
        self._rows = np.zeros((src[0], dst[1]), np.float32)
        self._line = np.zeros(max(src[1], dst[1]), np.float32)

    def push(self, a: np.ndarray, b: np.ndarray, pool: bool, stack: np.ndarray) -> None:
        """Shift ``stack`` (``(depth, h, w)`` uint8) down one frame and write the resize of
        screen ``a`` (max-pooled with ``b`` when ``pool``: the maximum is left in ``a``, as
        ``np.maximum(a, b, out=a)`` would) as its last frame."""
        self._kernel(a, b, pool, stack, self._xi, self._xw, self._yi, self._yw, self._rows, self._line)


def area_plan(src: tuple[int, int], dst: tuple[int, int]) -> AreaPlan | None:
    """The compiled resize from ``src`` to ``dst`` (grayscale), or ``None`` where OpenCV's
    ``INTER_AREA`` takes another path (see the module docstring)."""
    (sh, sw), (dh, dw) = src, dst
    if dh > sh or dw > sw or dh < 1 or dw < 1:
        return None
    if sh % dh == 0 and sw % dw == 0:  # integer factors (including no resize at all)
        return None
    if max(area_taps(sh, dh)[0].shape[0], area_taps(sw, dw)[0].shape[0]) > _MAX_TAPS:
        return None
    return AreaPlan(src, dst)
