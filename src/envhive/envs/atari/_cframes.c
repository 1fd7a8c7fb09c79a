/* envhive.envs.atari._cframes: Atari frame preprocessing in C (see _frames.py).
 *
 *     push(a, b, pool, stack, depth, h, w, height, width,
 *          xi, xw, xtaps, yi, yw, ytaps) -> None
 *
 * Shifts ``stack`` (uint8, depth x h x w, C order) down one frame and writes into its last
 * frame OpenCV's INTER_AREA resize of screen ``a`` (uint8, height x width), max-pooled with
 * ``b`` when ``pool`` (the maximum is then left in ``a``, as ``np.maximum(a, b, out=a)``).
 * ``xi``/``xw`` (int64 / float32, xtaps x w) and ``yi``/``yw`` (ytaps x h) are the area weights
 * of each axis (``_frames.area_taps``, padded with zero weights). The scratch (float32 rows of
 * horizontal sums, height x w, and a line) is allocated per call: one plan serves every env
 * of a process, whatever thread runs it, and ~70 KB of scratch per env would add up.
 *
 * The arithmetic is OpenCV's, in the same order, in float32: each source row is summed
 * horizontally (``s = p0 * w0; s += p1 * w1; ...``), the destination rows vertically from
 * those sums the same way, and the result rounded half to even and saturated. setup.py
 * compiles this file with -ffp-contract=off so that no multiply-add is fused (a fused
 * multiply-add rounds once, OpenCV's code twice). tests/atari/test_frames.py checks the
 * frames against cv2.resize bit for bit.
 *
 * The arguments are buffers (the buffer protocol; no numpy C API), their sizes checked here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int
need(Py_buffer *buf, Py_ssize_t bytes, const char *name)
{
    if (buf->len < bytes) {
        PyErr_Format(PyExc_ValueError, "push: %s holds %zd bytes, needs %zd", name, buf->len, bytes);
        return 0;
    }
    return 1;
}

/* The arithmetic, on raw arrays (checked by push below). On x86-64 it is compiled twice, for
 * the baseline and for AVX2, and the loader picks by CPU (the horizontal pass gathers, which
 * AVX2 does in one instruction); no FMA either way. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef CLONES
#define CLONES
#endif

CLONES static void
area_push(uint8_t *restrict A, const uint8_t *restrict B, int pool, uint8_t *restrict S,
          Py_ssize_t depth, Py_ssize_t h, Py_ssize_t w, Py_ssize_t height, Py_ssize_t width,
          const int64_t *restrict XI, const float *restrict XW, Py_ssize_t xtaps,
          const int64_t *restrict YI, const float *restrict YW, Py_ssize_t ytaps,
          float *restrict R, float *restrict L)
{
    Py_ssize_t y, x, d, t;
    for (y = 0; y < height; y++) {
        uint8_t *restrict ar = A + y * width;
        const uint8_t *restrict br = B + y * width;
        float *restrict hr = R + y * w;
        if (pool) {
            for (x = 0; x < width; x++) {
                uint8_t m = ar[x] > br[x] ? ar[x] : br[x];
                ar[x] = m;
                L[x] = (float)m;
            }
        } else {
            for (x = 0; x < width; x++)
                L[x] = (float)ar[x];
        }
        if (xtaps == 3) { /* Atari's shrinks: three taps, written out */
            const int64_t *restrict i1 = XI + w, *restrict i2 = XI + 2 * w;
            const float *restrict w1 = XW + w, *restrict w2 = XW + 2 * w;
            for (d = 0; d < w; d++) {
                float s = L[XI[d]] * XW[d];
                s += L[i1[d]] * w1[d];
                s += L[i2[d]] * w2[d];
                hr[d] = s;
            }
        } else {
            for (d = 0; d < w; d++) {
                float s = L[XI[d]] * XW[d];
                for (t = 1; t < xtaps; t++)
                    s += L[XI[t * w + d]] * XW[t * w + d];
                hr[d] = s;
            }
        }
    }
    memmove(S, S + h * w, (size_t)((depth - 1) * h * w));
    {
        uint8_t *restrict out = S + (depth - 1) * h * w;
        const float big = 12582912.0f;
        for (y = 0; y < h; y++) {
            const float *restrict r0 = R + YI[y] * w;
            float c0 = YW[y];
            for (d = 0; d < w; d++)
                L[d] = c0 * r0[d];
            for (t = 1; t < ytaps; t++) {
                const float *restrict rt = R + YI[t * h + y] * w;
                float ct = YW[t * h + y];
                for (d = 0; d < w; d++)
                    L[d] += ct * rt[d];
            }
            for (d = 0; d < w; d++) {
                /* Round half to even, as cvRound: adding and removing 1.5 * 2^23 leaves the
                 * float rounded to an integer in the current (nearest-even) mode; exact for
                 * the sums here (0 <= v < 2^22), and no libm call per pixel. */
                float r = (L[d] + big) - big;
                out[y * w + d] = (uint8_t)(r > 255.0f ? 255.0f : r);
            }
        }
    }
}

static PyObject *
push(PyObject *self, PyObject *args)
{
    Py_buffer a, b, stack, xi, xw, yi, yw;
    int pool;
    Py_ssize_t depth, h, w, height, width, xtaps, ytaps, t;
    float *rows = NULL, *line = NULL;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "w*y*pw*nnnnny*y*ny*y*n", &a, &b, &pool, &stack, &depth, &h,
                          &w, &height, &width, &xi, &xw, &xtaps, &yi, &yw, &ytaps))
        return NULL;
    if (depth < 1 || h < 1 || w < 1 || height < 1 || width < 1 || xtaps < 1 || ytaps < 1) {
        PyErr_SetString(PyExc_ValueError, "push: sizes must be positive");
        goto done;
    }
    if (!need(&a, height * width, "a") || !need(&b, height * width, "b")
        || !need(&stack, depth * h * w, "stack") || !need(&xi, xtaps * w * 8, "xi")
        || !need(&xw, xtaps * w * 4, "xw") || !need(&yi, ytaps * h * 8, "yi")
        || !need(&yw, ytaps * h * 4, "yw"))
        goto done;
    for (t = 0; t < xtaps * w; t++)
        if (((const int64_t *)xi.buf)[t] < 0 || ((const int64_t *)xi.buf)[t] >= width) {
            PyErr_SetString(PyExc_ValueError, "push: xi out of range");
            goto done;
        }
    for (t = 0; t < ytaps * h; t++)
        if (((const int64_t *)yi.buf)[t] < 0 || ((const int64_t *)yi.buf)[t] >= height) {
            PyErr_SetString(PyExc_ValueError, "push: yi out of range");
            goto done;
        }
    if (a.buf == b.buf)
        pool = 0; /* max(a, a) is a; and the kernel's restrict needs distinct buffers */
    rows = PyMem_RawMalloc((size_t)(height * w) * sizeof(float));
    line = PyMem_RawMalloc((size_t)(width > w ? width : w) * sizeof(float));
    if (rows == NULL || line == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    area_push((uint8_t *)a.buf, (const uint8_t *)b.buf, pool, (uint8_t *)stack.buf, depth, h, w,
              height, width, (const int64_t *)xi.buf, (const float *)xw.buf, xtaps,
              (const int64_t *)yi.buf, (const float *)yw.buf, ytaps, rows, line);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_RawFree(rows);
    PyMem_RawFree(line);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    PyBuffer_Release(&stack);
    PyBuffer_Release(&xi);
    PyBuffer_Release(&xw);
    PyBuffer_Release(&yi);
    PyBuffer_Release(&yw);
    return result;
}

static PyMethodDef methods[] = {
    {"push", push, METH_VARARGS,
     "push(a, b, pool, stack, depth, h, w, height, width, xi, xw, xtaps, yi, yw, ytaps)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cframes", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__cframes(void)
{
    return PyModule_Create(&module);
}
