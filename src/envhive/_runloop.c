/* envhive._runloop: the common case of EnvRunner's loop, in C.
 *
 * EnvRunner runs the ops of a slice of Python envs. For a simple env (CartPole) the Python
 * bytecode around each env.step call is a sizeable share of the step itself
 * (docs/benchmarks.md). This module runs the common case of that loop in C and hands every
 * other case to Python's definition of an op (``envhive._perform.perform``), so that an op
 * means the same either way. It is ONE loop, for every call: the whole slice in order (every
 * sync step), a contiguous run or any list of envs (async sends), with or without results
 * computed beforehand (``step_many``):
 *
 *     step_rows(envs, ops, actions, read, rows, ids, stepped, obs_list, reward_buf,
 *               term_buf, trunc_buf, infos, env_ids, finish) -> ended
 *
 * For env k of ``envs`` (the call's envs, in call order), its row r in every buffer is
 * ``rows + k`` (``rows`` an int: a contiguous run) or ``rows[k]`` (a list), and its id is
 * ``ids + k`` or ``ids[k]`` likewise. When its op (``ops[r]``, int8) is STEP or STEP_RESET,
 * its step result is ``stepped[k]`` (a result, or the exception its step raised) when
 * ``stepped`` is a list, else what ``env.step(actions[r])`` returns (``read(actions, r)``
 * when ``read`` is not None). When that result is an exact 5-tuple whose reward is a Python
 * float or int, whose flags are exactly True or False (both False for STEP_RESET: an episode
 * end there resets the env) and whose info is an exact dict, it writes the reward and flags
 * into row r, stores a non-empty info in ``infos[id]``, appends the observation to
 * ``obs_list`` and ``id`` to ``env_ids``: what ``perform`` does with such a result. Every
 * other env is handed to ``finish(k, kind, got)``:
 *
 *     kind 0 (NOT_CALLED): nothing was done for env k (a RESET op, or the action could not
 *                          be read); Python runs its op from scratch;
 *     kind 1 (RETURNED):   its step returned ``got``, which Python finishes (an episode end
 *                          under STEP_RESET, a non-tuple result, a non-dict info, ...);
 *     kind 2 (RAISED):     its step raised the Exception ``got``.
 *
 * ``finish`` performs its op in Python, writes its reward and flags, appends its observation
 * to ``obs_list`` (None if it has none) and returns 1 (its episode ended), 0 (it did not) or
 * -1 (the env's error was recorded: its id is not appended). ``obs_list`` thus gets one entry
 * per env, in order. Observations are written after the loop, as gymnasium's SyncVectorEnv
 * stacks them after all envs stepped (an env that rewrites an array it returned shows the
 * last write either way): ``write_obs_rows``. Returns how many envs appended ended their
 * episode. Exceptions that are not ``Exception`` subclasses (KeyboardInterrupt, SystemExit)
 * propagate, as do exceptions ``finish`` raises. ``envhive._runner.step_rows_py`` is the same
 * loop in Python with every env handed to ``finish`` (what runs without a C compiler), and
 * tests/test_runloop.py holds the two equal over every odd step result.
 *
 *     write_obs_rows(start, obs_buf, obs_list, ndarray) -> bool
 *
 * Copies the observations into rows start, start+1, ... when each is an exact C-contiguous
 * ``ndarray`` (``ndarray`` is the type) of the row's shape and dtype, compared through the
 * buffer protocol (no numpy C API, so the extension does not depend on numpy's version);
 * False: Python writes them with numpy, checking each.
 *
 *     within(array, lo, hi) -> True, False or None
 *
 * Whether every value of a contiguous array lies in ``[lo, hi]`` (a NaN does not): the value
 * check of ``ArrayCodec.in_bounds`` for bounds that are one number each, which a sync step of
 * a cheap env pays on every call. Integer arrays compare as integers, float arrays as doubles.
 * ``None``: not an array this function reads (another byte order, half floats, bools, objects,
 * a non-contiguous view, bounds that are not numbers of the array's kind); the caller then
 * checks with numpy, the definition this follows.
 *
 *     step_kinds(terminated, truncated, op, has_final, kinds, discounts) -> True or None
 *
 * ``Batch.step_type`` (and dm_env's discount) per row, written into ``kinds`` (int8) and, unless
 * it is None, ``discounts`` (float64): FIRST (0) for a reset row (op RESET, or op STEP_RESET
 * with ``has_final`` set, when ``has_final`` is not None), else LAST (2) if terminated or
 * truncated, else MID (1); the discount is 0.0 on LAST rows that terminated, else 1.0. ``None``:
 * some array is not contiguous, of that dtype and length; nothing was written, and the caller
 * runs the Python definition in ``envhive/_batch.py``.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum { OP_STEP = 0, OP_RESET = 1, OP_STEP_RESET = 2 };
enum { NOT_CALLED = 0, RETURNED = 1, RAISED = 2 };

static PyObject *str_step; /* interned "step" */

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

/* Copy the observations of ``obs_list`` into rows start, start+1, ... of ``buf``; 1 if all
 * were copied, 0 if Python must write them. */
static int
copy_obs(Py_ssize_t start, PyObject *buf, PyObject *obs_list, PyObject *ndarray)
{
    Py_ssize_t n = PyList_GET_SIZE(obs_list);
    int ok = 0;
    Py_buffer obs;
    if (n > 0 && start >= 0 && get_rows(buf, &obs, start + n, NULL) == 0) {
        ok = write_obs(start, &obs, obs_list, (PyTypeObject *)ndarray) == 0;
        PyBuffer_Release(&obs);
    }
    return ok;
}

typedef struct {
    Py_buffer ops, reward, term, trunc;
    Py_ssize_t nrows; /* rows every one of them has */
} Rows;

static void
release_rows(Rows *b, int held)
{
    Py_buffer *views[4] = {&b->ops, &b->reward, &b->term, &b->trunc};
    for (int j = 0; j < held; j++)
        PyBuffer_Release(views[j]);
}

static int
get_all_rows(Rows *b, PyObject *const *bufs)
{
    const char *formats[4] = {"b", "d", "?", "?"};
    Py_buffer *views[4] = {&b->ops, &b->reward, &b->term, &b->trunc};
    for (int j = 0; j < 4; j++) {
        if (get_rows(bufs[j], views[j], 0, formats[j]) < 0) {
            release_rows(b, j);
            PyErr_SetString(PyExc_TypeError, "step_rows(): expected C-contiguous buffers");
            return -1;
        }
    }
    if (b->reward.ndim != 1 || b->term.ndim != 1 || b->trunc.ndim != 1 || b->ops.ndim != 1) {
        release_rows(b, 4);
        PyErr_SetString(PyExc_TypeError, "step_rows(): expected one reward and flag per row");
        return -1;
    }
    b->nrows = b->ops.shape[0];
    for (int j = 1; j < 4; j++)
        if (views[j]->shape[0] < b->nrows)
            b->nrows = views[j]->shape[0];
    return 0;
}

/* Item k of ``seq``: ``base + k`` when ``seq`` is an int, else the int ``seq[k]``; -1 with an
 * error set when it is not one. */
static Py_ssize_t
nth(PyObject *seq, Py_ssize_t base, Py_ssize_t k)
{
    if (base >= 0)
        return base + k;
    Py_ssize_t v = PyLong_AsSsize_t(PyList_GET_ITEM(seq, k));
    if (v < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "step_rows(): a negative row or id");
    return v;
}

/* ``seq`` as ``base`` (an int >= 0) or a list of ``n`` entries (``*base`` = -1); -1 if neither. */
static int
int_or_list(PyObject *seq, Py_ssize_t n, Py_ssize_t *base, const char *what)
{
    if (PyList_CheckExact(seq)) {
        *base = -1;
        if (PyList_GET_SIZE(seq) == n)
            return 0;
    } else if (PyLong_Check(seq)) {
        *base = PyLong_AsSsize_t(seq);
        if (*base >= 0)
            return 0;
        if (PyErr_Occurred())
            return -1;
    }
    PyErr_Format(PyExc_ValueError, "step_rows(): %s must be an int >= 0 or a list of one per env", what);
    return -1;
}

/* Write env r's reward and flags and keep its observation, if the result is of the plain
 * kind; 1 written (*ended set), 0 not (nothing written), -1 error (an exception other than
 * the value not being plain). */
static int
write_result(Rows *b, Py_ssize_t r, long op, PyObject *result, PyObject *obs_list,
             PyObject *infos, PyObject *id, int *ended)
{
    if (!PyTuple_CheckExact(result) || PyTuple_GET_SIZE(result) != 5)
        return 0;
    PyObject *x = PyTuple_GET_ITEM(result, 1);
    PyObject *term = PyTuple_GET_ITEM(result, 2), *trunc = PyTuple_GET_ITEM(result, 3);
    PyObject *info = PyTuple_GET_ITEM(result, 4);
    if (!PyDict_CheckExact(info) || (term != Py_True && term != Py_False)
        || (trunc != Py_True && trunc != Py_False))
        return 0;
    if (op == OP_STEP_RESET && (term == Py_True || trunc == Py_True))
        return 0; /* resets_in_op: the reset is Python's */
    double value;
    if (PyFloat_Check(x)) {
        value = PyFloat_AS_DOUBLE(x);
    } else if (PyLong_Check(x)) {
        value = PyLong_AsDouble(x);
        if (value == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    } else {
        return 0;
    }
    if (PyDict_GET_SIZE(info) > 0 && PyDict_SetItem(infos, id, info) < 0)
        return -1;
    if (PyList_Append(obs_list, PyTuple_GET_ITEM(result, 0)) < 0)
        return -1;
    ((double *)b->reward.buf)[r] = value;
    ((char *)b->term.buf)[r] = term == Py_True;
    ((char *)b->trunc.buf)[r] = trunc == Py_True;
    *ended = term == Py_True || trunc == Py_True;
    return 1;
}

/* Env k's step: its result (new reference) with *kind = RETURNED, the Exception it raised
 * with *kind = RAISED, or NULL with *kind = NOT_CALLED (its action could not be read: Python
 * reads it again and reports it). NULL with an error set: an exception that propagates. */
static PyObject *
step_env(PyObject *envs, PyObject *actions, PyObject *read, PyObject *stepped, Py_ssize_t k,
         Py_ssize_t r, int *kind)
{
    *kind = NOT_CALLED;
    if (stepped != NULL) {
        PyObject *got = PyList_GET_ITEM(stepped, k);
        *kind = PyExceptionInstance_Check(got) ? RAISED : RETURNED;
        Py_INCREF(got);
        return got;
    }
    PyObject *action;
    if (read == NULL) {
        action = PySequence_GetItem(actions, r);
    } else {
        PyObject *row = PyLong_FromSsize_t(r);
        PyObject *call_args[2] = {actions, row};
        action = row == NULL ? NULL : PyObject_Vectorcall(read, call_args, 2, NULL);
        Py_XDECREF(row);
    }
    if (action == NULL) {
        if (PyErr_ExceptionMatches(PyExc_Exception))
            PyErr_Clear(); /* finish reads it again, inside its try, and reports it */
        return NULL;
    }
    PyObject *env = PyList_GET_ITEM(envs, k);
    Py_INCREF(env);
    /* Slot 0 is spare, so the call may borrow it (PY_VECTORCALL_ARGUMENTS_OFFSET). */
    PyObject *call_args[3] = {NULL, env, action};
    PyObject *result = PyObject_VectorcallMethod(
        str_step, call_args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(action);
    Py_DECREF(env);
    if (result != NULL) {
        *kind = RETURNED;
        return result;
    }
    PyObject *err = fetch_exception();
    if (err != NULL)
        *kind = RAISED;
    return err;
}

/* Hand env k to Python's finish(k, kind, got); its return value (1, 0 or -1), or -2 with an
 * error set. Steals ``got``. */
static long
finish_env(PyObject *finish, Py_ssize_t k, int kind, PyObject *got)
{
    PyObject *kk = PyLong_FromSsize_t(k), *kd = PyLong_FromLong(kind);
    PyObject *fargs[3] = {kk, kd, got ? got : Py_None};
    PyObject *rc = (kk && kd) ? PyObject_Vectorcall(finish, fargs, 3, NULL) : NULL;
    Py_XDECREF(kk);
    Py_XDECREF(kd);
    Py_XDECREF(got);
    if (rc == NULL)
        return -2;
    long v = PyLong_AsLong(rc);
    Py_DECREF(rc);
    return v == -1 && PyErr_Occurred() ? -2 : v;
}

static PyObject *
step_rows(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 14) {
        PyErr_Format(PyExc_TypeError, "step_rows() takes 14 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *envs = args[0], *actions = args[2], *read = args[3], *rows = args[4];
    PyObject *ids = args[5], *stepped = args[6], *obs_list = args[7];
    PyObject *infos = args[11], *env_ids = args[12], *finish = args[13];
    if (!PyList_CheckExact(envs) || !PyList_CheckExact(obs_list) || !PyDict_Check(infos)
        || !PyList_CheckExact(env_ids)) {
        PyErr_SetString(PyExc_TypeError, "step_rows(): expected lists and a dict");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(envs), row0, id0;
    if (int_or_list(rows, n, &row0, "rows") < 0 || int_or_list(ids, n, &id0, "ids") < 0)
        return NULL;
    if (stepped == Py_None) {
        stepped = NULL;
    } else if (!PyList_CheckExact(stepped) || PyList_GET_SIZE(stepped) != n) {
        PyErr_SetString(PyExc_ValueError, "step_rows(): stepped must be None or one entry per env");
        return NULL;
    }
    if (read == Py_None)
        read = NULL;
    PyObject *const bufs[4] = {args[1], args[8], args[9], args[10]};
    Rows b;
    if (get_all_rows(&b, bufs) < 0)
        return NULL;
    long ended = 0;
    PyObject *res = NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        /* The lists are re-checked every iteration: an env's step runs arbitrary Python. */
        if (PyList_GET_SIZE(envs) != n || (row0 < 0 && PyList_GET_SIZE(rows) != n)
            || (id0 < 0 && PyList_GET_SIZE(ids) != n)
            || (stepped != NULL && PyList_GET_SIZE(stepped) != n)) {
            PyErr_SetString(PyExc_RuntimeError, "step_rows(): a list changed size");
            goto done;
        }
        Py_ssize_t r = nth(rows, row0, k), i = nth(ids, id0, k);
        if (r < 0 || i < 0)
            goto done;
        if (r >= b.nrows) {
            PyErr_SetString(PyExc_IndexError, "step_rows(): a row beyond the buffers");
            goto done;
        }
        long op = ((signed char *)b.ops.buf)[r];
        PyObject *id = PyLong_FromSsize_t(i);
        if (id == NULL)
            goto done;
        int kind = NOT_CALLED;
        PyObject *got = NULL;
        if (op == OP_STEP || op == OP_STEP_RESET) {
            got = step_env(envs, actions, read, stepped, k, r, &kind);
            if (got == NULL && PyErr_Occurred()) {
                Py_DECREF(id);
                goto done;
            }
            if (kind == RETURNED) {
                int flag = 0;
                int fin = write_result(&b, r, op, got, obs_list, infos, id, &flag);
                if (fin == 1) {
                    Py_DECREF(got);
                    ended += flag;
                    fin = PyList_Append(env_ids, id);
                    Py_DECREF(id);
                    if (fin < 0)
                        goto done;
                    continue;
                }
                if (fin < 0) {
                    Py_DECREF(got);
                    Py_DECREF(id);
                    goto done;
                }
            }
        }
        /* Python's definition performs this env's op (and writes its row). */
        long v = finish_env(finish, k, kind, got);
        if (v == -2 || (v >= 0 && PyList_Append(env_ids, id) < 0)) {
            Py_DECREF(id);
            goto done;
        }
        if (v > 0)
            ended += v;
        Py_DECREF(id);
    }
    res = PyLong_FromLong(ended);
done:
    release_rows(&b, 4);
    return res;
}

static PyObject *
write_obs_rows(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "write_obs_rows() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[0]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    if (!PyType_Check(args[3]) || !PyList_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "write_obs_rows(): expected a list and a type");
        return NULL;
    }
    return PyBool_FromLong(copy_obs(start, args[1], args[2], args[3]));
}

/* ``view``'s struct code without a native byte-order prefix ("@", "=", or "<" on a
 * little-endian machine); another prefix stays, so callers that read native items decline. */
static const char *
native_format(const Py_buffer *view)
{
    const char *fmt = view->format ? view->format : "B";
    if (*fmt == '@' || *fmt == '=' || (*fmt == '<' && PY_LITTLE_ENDIAN))
        fmt++;
    return fmt;
}

static PyObject *
within(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "within() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const char *fmt = native_format(&view);
    char code = fmt[0];
    PyObject *res = Py_None;
    if (code == '\0' || fmt[1] != '\0' || view.itemsize <= 0) {
        goto done;
    }
    Py_ssize_t n = view.len / view.itemsize, k;
    int ok = 1;
    if (n == 0)
        goto done; /* the caller's rule for an empty batch */
    if (code == 'f' || code == 'd') {
        double lo = PyFloat_AsDouble(args[1]), hi = PyFloat_AsDouble(args[2]);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            goto done;
        }
        if (code == 'f') {
            const float *v = (const float *)view.buf;
            for (k = 0; k < n && ok; k++)
                ok = lo <= (double)v[k] && (double)v[k] <= hi;
        } else {
            const double *v = (const double *)view.buf;
            for (k = 0; k < n && ok; k++)
                ok = lo <= v[k] && v[k] <= hi;
        }
    } else if (strchr("bhilq", code) && PyLong_Check(args[1]) && PyLong_Check(args[2])) {
        int overflow_lo, overflow_hi;
        long long lo = PyLong_AsLongLongAndOverflow(args[1], &overflow_lo);
        long long hi = PyLong_AsLongLongAndOverflow(args[2], &overflow_hi);
        if (PyErr_Occurred() || overflow_lo || overflow_hi) {
            PyErr_Clear();
            goto done;
        }
#define WITHIN_SIGNED(T) { const T *v = (const T *)view.buf; \
            for (k = 0; k < n && ok; k++) ok = lo <= (long long)v[k] && (long long)v[k] <= hi; }
        switch (view.itemsize) {
        case 1: WITHIN_SIGNED(signed char) break;
        case 2: WITHIN_SIGNED(short) break;
        case 4: WITHIN_SIGNED(int) break;
        case 8: WITHIN_SIGNED(long long) break;
        default: goto done;
        }
#undef WITHIN_SIGNED
    } else if (strchr("BHILQ", code) && PyLong_Check(args[1]) && PyLong_Check(args[2])) {
        /* Unsigned values against signed bounds: a bound below 0 admits every value's lower
         * side, one above the type's range every value's upper side. */
        int overflow_lo, overflow_hi;
        long long lo = PyLong_AsLongLongAndOverflow(args[1], &overflow_lo);
        long long hi = PyLong_AsLongLongAndOverflow(args[2], &overflow_hi);
        if (PyErr_Occurred() || overflow_lo > 0 || overflow_hi < 0) {
            PyErr_Clear();
            goto done;
        }
        unsigned long long ulo = (overflow_lo < 0 || lo < 0) ? 0ULL : (unsigned long long)lo;
        int no_hi = overflow_hi > 0;
        if (!no_hi && hi < 0) { /* no unsigned value is that small */
            ok = 0;
            goto answer;
        }
        unsigned long long uhi = no_hi ? ~0ULL : (unsigned long long)hi;
#define WITHIN_UNSIGNED(T) { const T *v = (const T *)view.buf; \
            for (k = 0; k < n && ok; k++) ok = ulo <= (unsigned long long)v[k] && (unsigned long long)v[k] <= uhi; }
        switch (view.itemsize) {
        case 1: WITHIN_UNSIGNED(unsigned char) break;
        case 2: WITHIN_UNSIGNED(unsigned short) break;
        case 4: WITHIN_UNSIGNED(unsigned int) break;
        case 8: WITHIN_UNSIGNED(unsigned long long) break;
        default: goto done;
        }
#undef WITHIN_UNSIGNED
    } else {
        goto done;
    }
answer:
    res = ok ? Py_True : Py_False;
done:
    PyBuffer_Release(&view);
    Py_INCREF(res);
    return res;
}

/* A contiguous view of ``obj`` with ``n`` items of struct code ``code`` (``n < 0``: any n,
 * set on success); 0 if it is not one (no error left set). */
static int
column(PyObject *obj, char code, int writable, Py_ssize_t *n, Py_buffer *view)
{
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        return 0;
    }
    const char *fmt = native_format(view);
    Py_ssize_t size = code == '?' || code == 'b' ? 1 : 8;
    if (fmt[0] != code || fmt[1] != '\0' || view->itemsize != size
            || (*n >= 0 && view->len != *n * size)) {
        PyBuffer_Release(view);
        return 0;
    }
    *n = view->len / size;
    return 1;
}

static PyObject *
step_kinds(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "step_kinds() takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_buffer v[6];
    int got = 0, ok = 1;
    Py_ssize_t n = -1;
    const char codes[6] = {'?', '?', 'b', '?', 'b', 'd'};
    for (int a = 0; a < 6 && ok; a++) {
        if ((a == 3 || a == 5) && args[a] == Py_None)
            continue;
        ok = column(args[a], codes[a], a >= 4, &n, &v[a]);
        if (ok)
            got |= 1 << a;
    }
    if (ok) {
        const char *term = v[0].buf, *trunc = v[1].buf, *op = v[2].buf;
        const char *fin = (got & 8) ? v[3].buf : NULL;
        signed char *kind = v[4].buf;
        double *disc = (got & 32) ? v[5].buf : NULL;
        for (Py_ssize_t k = 0; k < n; k++) {
            int first = op[k] == OP_RESET || (fin != NULL && op[k] == OP_STEP_RESET && fin[k]);
            int last = !first && (term[k] || trunc[k]);
            kind[k] = first ? 0 : (last ? 2 : 1);
            if (disc != NULL)
                disc[k] = last && term[k] ? 0.0 : 1.0;
        }
    }
    for (int a = 0; a < 6; a++)
        if (got & (1 << a))
            PyBuffer_Release(&v[a]);
    if (!ok)
        Py_RETURN_NONE;
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"step_rows", (PyCFunction)(void (*)(void))step_rows, METH_FASTCALL,
     "step_rows(envs, ops, actions, read, rows, ids, stepped, obs_list, reward_buf, term_buf, "
     "trunc_buf, infos, env_ids, finish) -> ended\n\nEnvRunner's loop; see envhive/_runner.py."},
    {"write_obs_rows", (PyCFunction)(void (*)(void))write_obs_rows, METH_FASTCALL,
     "write_obs_rows(start, obs_buf, obs_list, ndarray) -> bool\n\nSee envhive/_runner.py."},
    {"within", (PyCFunction)(void (*)(void))within, METH_FASTCALL,
     "within(array, lo, hi) -> True, False or None\n\nSee envhive/_spaces.py (ArrayCodec.in_bounds)."},
    {"step_kinds", (PyCFunction)(void (*)(void))step_kinds, METH_FASTCALL,
     "step_kinds(terminated, truncated, op, has_final, kinds, discounts) -> True or None\n\n"
     "See envhive/_batch.py (Batch.step_type)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "envhive._runloop",
    "The common case of EnvRunner's loop, in C (private).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__runloop(void)
{
    str_step = PyUnicode_InternFromString("step");
    if (str_step == NULL)
        return NULL;
    return PyModule_Create(&module);
}
