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

#include "_area.h"

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
