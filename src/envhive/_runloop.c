/* envhive._runloop: the fast path of EnvRunner.run, in C.
 *
 * EnvRunner.run steps a slice of envs and gathers their results in lists. For a simple env
 * (CartPole) the Python bytecode around each env.step call costs ~0.7 us, about an eighth of
 * the step itself. This module runs the common case of that loop in C and hands every other
 * case back to Python, which keeps the one definition of what each op means:
 *
 *     step_slice(envs, ops, ids, actions, read, start,
 *                obs_list, rewards, terms, truncs, infos) -> (k, kind, got)
 *
 * From position ``start`` on, for each env whose op is STEP or STEP_RESET, it calls
 * ``env.step(actions[i])`` (``read(actions, i)`` when ``read`` is not None) and, when the
 * result is an exact 5-tuple with an exact dict info (and, for STEP_RESET, ``terminated`` and
 * ``truncated`` both exactly False), appends obs/reward/terminated/truncated to the four
 * lists and stores a non-empty info in ``infos[i]``. It stops at the first env it does not
 * finish and returns its position ``k`` with what happened to it:
 *
 *     kind 0 (NOT_CALLED): nothing was done for env k (a RESET op, or the action could not
 *                          be read); Python runs its op from scratch;
 *     kind 1 (RETURNED):   env.step returned ``got``, which Python finishes (an episode end
 *                          under STEP_RESET, a non-tuple result, a non-dict info, ...);
 *     kind 2 (RAISED):     env.step raised the Exception ``got``.
 *
 * At the end of the slice it returns ``(len(envs), 0, None)``. Exceptions that are not
 * ``Exception`` subclasses (KeyboardInterrupt, SystemExit) propagate, as in the Python loop.
 * The Python fallback (no compiler) simply runs every env through the Python path.
 *
 *     write_rows(start, obs_buf, obs_list, reward_buf, rewards, term_buf, terms,
 *                trunc_buf, truncs, ndarray) -> 0, 1 or 2
 *
 * Writes the gathered results of a contiguous run of envs into rows start, start+1, ... of
 * the pool's buffers, which is what numpy's ``buf[start:stop] = values`` does when nothing
 * needs converting. Stage 1: each observation must be an exact ``ndarray`` (``ndarray`` is
 * the type) of the buffer row's shape and dtype, C-contiguous; its bytes are copied. Stage 2:
 * rewards must be Python floats or ints (numpy's float64 is a float), one per env (no agent
 * axis), and the flags exactly True or False. It returns how many stages it completed; Python
 * does the rest with numpy, checking each value it writes (which also rewrites any row a stage
 * wrote before stopping, with the same values): a value of the wrong kind becomes its env's
 * error there, so this loop never needs to look at one twice.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum { OP_STEP = 0, OP_RESET = 1, OP_STEP_RESET = 2 };
enum { NOT_CALLED = 0, RETURNED = 1, RAISED = 2 };

static PyObject *str_step; /* interned "step" */

static PyObject *
stop_at(Py_ssize_t k, int kind, PyObject *got)
{
    /* Steals the reference to ``got`` (may be NULL: None). */
    PyObject *res = Py_BuildValue("(niO)", k, kind, got ? got : Py_None);
    Py_XDECREF(got);
    return res;
}

static PyObject *
fetch_exception(void)
{
    /* The raised exception as an object with its traceback, or NULL (error still set) when it
     * is not an Exception: those propagate. */
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return NULL;
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException(); /* carries its traceback */
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
#endif
}

static PyObject *
step_slice(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_Format(PyExc_TypeError, "step_slice() takes 11 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *envs = args[0], *ops = args[1], *ids = args[2], *actions = args[3];
    PyObject *read = args[4];
    PyObject *obs_list = args[6], *rewards = args[7], *terms = args[8], *truncs = args[9];
    PyObject *infos = args[10];
    if (!PyList_CheckExact(envs) || !PyList_CheckExact(ops) || !PyList_CheckExact(ids)
        || !PyList_CheckExact(obs_list) || !PyList_CheckExact(rewards)
        || !PyList_CheckExact(terms) || !PyList_CheckExact(truncs) || !PyDict_Check(infos)) {
        PyErr_SetString(PyExc_TypeError, "step_slice(): expected lists and a dict");
        return NULL;
    }
    Py_ssize_t k = PyLong_AsSsize_t(args[5]);
    if (k == -1 && PyErr_Occurred())
        return NULL;
    if (read == Py_None)
        read = NULL;

    /* The lists are re-read every iteration: an env's step runs arbitrary Python code. */
    for (;; k++) {
        Py_ssize_t n = PyList_GET_SIZE(envs);
        if (PyList_GET_SIZE(ops) < n || PyList_GET_SIZE(ids) < n) {
            PyErr_SetString(PyExc_ValueError, "step_slice(): ops and ids shorter than envs");
            return NULL;
        }
        if (k >= n)
            return stop_at(n, NOT_CALLED, NULL);
        long op = PyLong_AsLong(PyList_GET_ITEM(ops, k));
        if (op == -1 && PyErr_Occurred())
            return NULL;
        if (op != OP_STEP && op != OP_STEP_RESET)
            return stop_at(k, NOT_CALLED, NULL);

        PyObject *env = PyList_GET_ITEM(envs, k);
        PyObject *id = PyList_GET_ITEM(ids, k);
        Py_INCREF(env);
        Py_INCREF(id);
        PyObject *action;
        if (read == NULL) {
            action = PyObject_GetItem(actions, id);
        } else {
            PyObject *call_args[2] = {actions, id};
            action = PyObject_Vectorcall(read, call_args, 2, NULL);
        }
        if (action == NULL) {
            Py_DECREF(env);
            Py_DECREF(id);
            if (!PyErr_ExceptionMatches(PyExc_Exception))
                return NULL; /* KeyboardInterrupt & co. propagate */
            PyErr_Clear(); /* Python reads it again, inside its try, and reports it */
            return stop_at(k, NOT_CALLED, NULL);
        }
        /* Slot 0 is spare, so the call may borrow it (PY_VECTORCALL_ARGUMENTS_OFFSET). */
        PyObject *call_args[3] = {NULL, env, action};
        PyObject *result = PyObject_VectorcallMethod(
            str_step, call_args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(action);
        Py_DECREF(env);
        if (result == NULL) {
            Py_DECREF(id);
            PyObject *err = fetch_exception();
            return err == NULL ? NULL : stop_at(k, RAISED, err);
        }
        if (!PyTuple_CheckExact(result) || PyTuple_GET_SIZE(result) != 5) {
            Py_DECREF(id);
            return stop_at(k, RETURNED, result);
        }
        PyObject *term = PyTuple_GET_ITEM(result, 2), *trunc = PyTuple_GET_ITEM(result, 3);
        PyObject *info = PyTuple_GET_ITEM(result, 4);
        if ((op == OP_STEP_RESET && (term != Py_False || trunc != Py_False))
            || !PyDict_CheckExact(info)) {
            Py_DECREF(id);
            return stop_at(k, RETURNED, result);
        }
        int failed = (PyDict_GET_SIZE(info) > 0 && PyDict_SetItem(infos, id, info) < 0)
            || PyList_Append(obs_list, PyTuple_GET_ITEM(result, 0)) < 0
            || PyList_Append(rewards, PyTuple_GET_ITEM(result, 1)) < 0
            || PyList_Append(terms, term) < 0
            || PyList_Append(truncs, trunc) < 0;
        Py_DECREF(id);
        Py_DECREF(result);
        if (failed)
            return NULL;
    }
}

/* A writable, C-contiguous buffer with at least ``rows`` rows; 0 on success. */
static int
get_rows(PyObject *obj, Py_buffer *view, Py_ssize_t rows, const char *format)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS) < 0) {
        PyErr_Clear();
        return -1;
    }
    if (view->ndim < 1 || view->shape[0] < rows || !PyBuffer_IsContiguous(view, 'C')
        || (format != NULL && strcmp(view->format, format) != 0)) {
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int
write_obs(Py_ssize_t start, Py_buffer *buf, PyObject *obs_list, PyTypeObject *ndarray)
{
    Py_ssize_t n = PyList_GET_SIZE(obs_list), row = buf->len / buf->shape[0];
    char *dst = (char *)buf->buf + start * row;
    for (Py_ssize_t k = 0; k < n; k++, dst += row) {
        PyObject *obs = PyList_GET_ITEM(obs_list, k);
        if (Py_TYPE(obs) != ndarray)
            return -1;
        Py_buffer v;
        if (PyObject_GetBuffer(obs, &v, PyBUF_RECORDS_RO) < 0) {
            PyErr_Clear();
            return -1;
        }
        int ok = v.ndim == buf->ndim - 1 && v.len == row && v.itemsize == buf->itemsize
            && strcmp(v.format, buf->format) == 0 && PyBuffer_IsContiguous(&v, 'C');
        for (int d = 0; ok && d < v.ndim; d++)
            ok = v.shape[d] == buf->shape[d + 1];
        if (ok)
            memcpy(dst, v.buf, (size_t)row);
        PyBuffer_Release(&v);
        if (!ok)
            return -1;
    }
    return 0;
}

static int
write_scalars(Py_ssize_t start, Py_buffer *reward, PyObject *rewards, Py_buffer *term,
              PyObject *terms, Py_buffer *trunc, PyObject *truncs)
{
    Py_ssize_t n = PyList_GET_SIZE(rewards);
    if (reward->ndim != 1)
        return -1; /* rewards with an agent axis: numpy writes (and checks) them */
    double *r = (double *)reward->buf + start;
    char *te = (char *)term->buf + start, *tr = (char *)trunc->buf + start;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *x = PyList_GET_ITEM(rewards, k);
        PyObject *a = PyList_GET_ITEM(terms, k), *b = PyList_GET_ITEM(truncs, k);
        if ((a != Py_True && a != Py_False) || (b != Py_True && b != Py_False))
            return -1;
        double value;
        if (PyFloat_Check(x)) {
            value = PyFloat_AS_DOUBLE(x);
        } else if (PyLong_Check(x)) {
            value = PyLong_AsDouble(x);
            if (value == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return -1;
            }
        } else {
            return -1;
        }
        r[k] = value;
        te[k] = a == Py_True;
        tr[k] = b == Py_True;
    }
    return 0;
}

static PyObject *
write_rows(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "write_rows() takes 10 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[0]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    PyObject *obs_list = args[2], *rewards = args[4], *terms = args[6], *truncs = args[8];
    if (!PyType_Check(args[9]) || !PyList_CheckExact(obs_list) || !PyList_CheckExact(rewards)
        || !PyList_CheckExact(terms) || !PyList_CheckExact(truncs)) {
        PyErr_SetString(PyExc_TypeError, "write_rows(): expected lists and a type");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(obs_list);
    if (n == 0 || start < 0 || PyList_GET_SIZE(rewards) != n || PyList_GET_SIZE(terms) != n
        || PyList_GET_SIZE(truncs) != n)
        return PyLong_FromLong(0);
    long stages = 0;
    Py_buffer obs, reward, term, trunc;
    if (get_rows(args[1], &obs, start + n, NULL) == 0) {
        if (write_obs(start, &obs, obs_list, (PyTypeObject *)args[9]) == 0)
            stages = 1;
        PyBuffer_Release(&obs);
    }
    if (stages == 1 && get_rows(args[3], &reward, start + n, "d") == 0) {
        if (get_rows(args[5], &term, start + n, "?") == 0) {
            if (get_rows(args[7], &trunc, start + n, "?") == 0) {
                if (write_scalars(start, &reward, rewards, &term, terms, &trunc, truncs) == 0)
                    stages = 2;
                PyBuffer_Release(&trunc);
            }
            PyBuffer_Release(&term);
        }
        PyBuffer_Release(&reward);
    }
    return PyLong_FromLong(stages);
}

static PyMethodDef methods[] = {
    {"step_slice", (PyCFunction)(void (*)(void))step_slice, METH_FASTCALL,
     "step_slice(envs, ops, ids, actions, read, start, obs_list, rewards, terms, truncs, "
     "infos) -> (k, kind, got)\n\nThe fast path of EnvRunner.run; see envhive/_runner.py."},
    {"write_rows", (PyCFunction)(void (*)(void))write_rows, METH_FASTCALL,
     "write_rows(start, obs_buf, obs_list, reward_buf, rewards, term_buf, terms, trunc_buf, "
     "truncs, ndarray) -> stages written (0-2)\n\nSee envhive/_runner.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "envhive._runloop",
    "The fast path of EnvRunner.run, in C (private).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__runloop(void)
{
    str_step = PyUnicode_InternFromString("step");
    if (str_step == NULL)
        return NULL;
    return PyModule_Create(&module);
}
