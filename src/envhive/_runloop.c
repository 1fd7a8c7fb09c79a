/* envhive._runloop: the fast path of EnvRunner.run, in C.
 *
 * EnvRunner.run steps a slice of envs and gathers their results in lists. For a simple env
 * (CartPole) the Python bytecode around each env.step call is a sizeable share of the step
 * itself (docs/benchmarks.md). This module runs the common case of that loop in C and hands
 * every other case back to Python, which keeps the one definition of what each op means:
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

/* Copy the observations of ``obs_list`` into rows start, start+1, ... of ``buf`` (write_rows's
 * stage 1); 1 if all were copied, 0 if Python must write them. */
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
    long stages = copy_obs(start, args[1], obs_list, args[9]);
    Py_buffer reward, term, trunc;
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

/* step_rows: the whole-slice loop, writing each env's reward and flags as soon as it has
 * stepped.
 *
 *     step_rows(envs, ops, actions, read, row0, id0, obs_list, reward_buf, term_buf,
 *               trunc_buf, infos, env_ids, finish) -> ended
 *
 * For k in range(len(envs)), env k (id id0 + k) has its row r = row0 + k in every buffer.
 * When its op (ops[r], int8) is STEP or STEP_RESET, it calls ``env.step(actions[r])``
 * (``read(actions, r)`` when ``read`` is not None); when the result is an exact 5-tuple whose
 * reward is a Python float or int, whose flags are exactly True or False (both False for
 * STEP_RESET) and whose info is an exact dict, it writes the reward and flags into row r,
 * stores a non-empty info in ``infos[id]``, appends the observation to ``obs_list`` and
 * ``id`` to ``env_ids``. Every other env is handed to ``finish(k, kind, got)`` (kinds as for
 * step_slice), which performs its op in Python, writes its reward and flags, appends its
 * observation to ``obs_list`` (None if it has none) and returns 1 (its episode ended), 0 (it
 * did not) or -1 (the env's error was recorded: its id is not appended). ``obs_list`` thus
 * gets one entry per env, in order. Observations are written after the loop, as
 * gymnasium's SyncVectorEnv stacks them after all envs stepped (an env that rewrites an array
 * it returned shows the last write either way): ``write_obs_rows``. Returns how many envs
 * appended ended their episode. Exceptions that are not ``Exception`` subclasses
 * (KeyboardInterrupt) propagate, as do exceptions ``finish`` raises.
 *
 *     write_obs_rows(start, obs_buf, obs_list, ndarray) -> bool
 *
 * write_rows's stage 1 alone: copies the observations into rows start, start+1, ... when each
 * is an exact C-contiguous ``ndarray`` of the row's shape and dtype (False: Python writes them).
 */

typedef struct {
    Py_buffer ops, reward, term, trunc;
} Rows;

static void
release_rows(Rows *b, int held)
{
    Py_buffer *views[4] = {&b->ops, &b->reward, &b->term, &b->trunc};
    for (int j = 0; j < held; j++)
        PyBuffer_Release(views[j]);
}

static int
get_all_rows(Rows *b, PyObject *const *bufs, Py_ssize_t rows)
{
    const char *formats[4] = {"b", "d", "?", "?"};
    Py_buffer *views[4] = {&b->ops, &b->reward, &b->term, &b->trunc};
    for (int j = 0; j < 4; j++) {
        if (get_rows(bufs[j], views[j], rows, formats[j]) < 0) {
            release_rows(b, j);
            PyErr_SetString(PyExc_TypeError,
                            "step_rows(): expected C-contiguous buffers with enough rows");
            return -1;
        }
    }
    if (b->reward.ndim != 1 || b->term.ndim != 1 || b->trunc.ndim != 1 || b->ops.ndim != 1) {
        release_rows(b, 4);
        PyErr_SetString(PyExc_TypeError, "step_rows(): expected one reward and flag per row");
        return -1;
    }
    return 0;
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
        return 0;
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

static PyObject *
step_rows(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 13) {
        PyErr_Format(PyExc_TypeError, "step_rows() takes 13 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *envs = args[0], *actions = args[2], *read = args[3], *obs_list = args[6];
    PyObject *infos = args[10], *env_ids = args[11], *finish = args[12];
    if (!PyList_CheckExact(envs) || !PyList_CheckExact(obs_list) || !PyDict_Check(infos)
        || !PyList_CheckExact(env_ids)) {
        PyErr_SetString(PyExc_TypeError, "step_rows(): expected lists and a dict");
        return NULL;
    }
    Py_ssize_t row0 = PyLong_AsSsize_t(args[4]), id0 = PyLong_AsSsize_t(args[5]);
    if ((row0 == -1 || id0 == -1) && PyErr_Occurred())
        return NULL;
    if (read == Py_None)
        read = NULL;
    Py_ssize_t n = PyList_GET_SIZE(envs);
    PyObject *const bufs[4] = {args[1], args[7], args[8], args[9]};
    Rows b;
    if (row0 < 0 || get_all_rows(&b, bufs, row0 + n) < 0)
        return row0 < 0 ? (PyErr_SetString(PyExc_ValueError, "step_rows(): row0 < 0"), NULL) : NULL;
    long ended = 0;
    PyObject *res = NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (PyList_GET_SIZE(envs) != n) {
            PyErr_SetString(PyExc_RuntimeError, "step_rows(): the env list changed size");
            goto done;
        }
        Py_ssize_t r = row0 + k;
        long op = ((signed char *)b.ops.buf)[r];
        PyObject *id = PyLong_FromSsize_t(id0 + k);
        if (id == NULL)
            goto done;
        int kind = NOT_CALLED, fin = 0;
        PyObject *got = NULL;
        if (op == OP_STEP || op == OP_STEP_RESET) {
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
                if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                    Py_DECREF(id);
                    goto done;
                }
                PyErr_Clear(); /* finish reads it again, inside its try, and reports it */
            } else {
                PyObject *env = PyList_GET_ITEM(envs, k);
                Py_INCREF(env);
                PyObject *call_args[3] = {NULL, env, action};
                PyObject *result = PyObject_VectorcallMethod(
                    str_step, call_args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
                Py_DECREF(action);
                Py_DECREF(env);
                if (result == NULL) {
                    got = fetch_exception();
                    if (got == NULL) {
                        Py_DECREF(id);
                        goto done;
                    }
                    kind = RAISED;
                } else {
                    int flag = 0;
                    fin = write_result(&b, r, op, result, obs_list, infos, id, &flag);
                    if (fin == 1) {
                        Py_DECREF(result);
                        ended += flag;
                        fin = PyList_Append(env_ids, id);
                        Py_DECREF(id);
                        if (fin < 0)
                            goto done;
                        continue;
                    }
                    if (fin < 0) {
                        Py_DECREF(result);
                        Py_DECREF(id);
                        goto done;
                    }
                    kind = RETURNED;
                    got = result;
                }
            }
        }
        /* The Python path performs this env's op (and writes its row). */
        PyObject *kk = PyLong_FromSsize_t(k), *kd = PyLong_FromLong(kind);
        PyObject *fargs[3] = {kk, kd, got ? got : Py_None};
        PyObject *rc = (kk && kd) ? PyObject_Vectorcall(finish, fargs, 3, NULL) : NULL;
        Py_XDECREF(kk);
        Py_XDECREF(kd);
        Py_XDECREF(got);
        if (rc == NULL) {
            Py_DECREF(id);
            goto done;
        }
        long v = PyLong_AsLong(rc);
        Py_DECREF(rc);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(id);
            goto done;
        }
        if (v >= 0) {
            ended += v;
            if (PyList_Append(env_ids, id) < 0) {
                Py_DECREF(id);
                goto done;
            }
        }
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
    {"step_slice", (PyCFunction)(void (*)(void))step_slice, METH_FASTCALL,
     "step_slice(envs, ops, ids, actions, read, start, obs_list, rewards, terms, truncs, "
     "infos) -> (k, kind, got)\n\nThe fast path of EnvRunner.run; see envhive/_runner.py."},
    {"write_rows", (PyCFunction)(void (*)(void))write_rows, METH_FASTCALL,
     "write_rows(start, obs_buf, obs_list, reward_buf, rewards, term_buf, terms, trunc_buf, "
     "truncs, ndarray) -> stages written (0-2)\n\nSee envhive/_runner.py."},
    {"step_rows", (PyCFunction)(void (*)(void))step_rows, METH_FASTCALL,
     "step_rows(envs, ops, actions, read, row0, id0, obs_list, reward_buf, term_buf, "
     "trunc_buf, infos, env_ids, finish) -> ended\n\nSee envhive/_runner.py."},
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
