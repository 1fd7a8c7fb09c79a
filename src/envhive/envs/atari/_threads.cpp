/* envhive.envs.atari._alethreads: a batch of Atari games stepped by C++ threads, GIL released.
 * (Sources: this file, the Python type; _ale_batch.h, the batch; _ale_oldabi.cpp, ALE's string
 * calls for ale-py wheels built with libstdc++'s old string ABI; _area.h, the resize.)
 *
 * ale-py's Python binding holds the GIL in ``ALEInterface.act``, so Python threads cannot step
 * games in parallel; EnvPool and ale-py's own ``AtariVectorEnv`` step ALE from C++ threads.
 * This module does the same with the ALE that ale-py ships: ale-py's extension exports ALE's
 * C++ API (``ale::ALEInterface``'s member functions are dynamic symbols of ``_ale_py``), so the
 * games are built and stepped through those symbols, looked up with ``dlsym`` in the library
 * Python has already loaded. Nothing of ALE is compiled here. The member functions are called
 * as plain functions whose first argument is the object (the Itanium C++ ABI of non-virtual
 * member functions on Linux). ``Games.__init__`` fails with ``ImportError`` when a symbol is
 * missing, and the Python side (``_threads.py``) checks the whole thing against ale-py's own
 * binding on a real game once per process before using it.
 *
 * What runs in the threads is one env's whole op, as ``AtariEnv`` (``_env.py``) performs it
 * through ``EnvRunner``, rule for rule: STEP (``frame_skip`` frames of the action, stopping at
 * game over; the last two screens max-pooled, area-resized, pushed onto the stack), RESET (a
 * new game or, after a life loss with episodic life, the same game going on; the no-ops drawn
 * in Python beforehand; FIRE), STEP_RESET (``envhive._ops``: a step that ended is followed by a
 * reset, its terminal frame kept in ``final_obs``). Results go straight into the pool's
 * buffers (rows of ``obs``, ``reward``, flags) and into info columns the Python side owns.
 *
 * Work: ``start(ids)`` queues one job per env (RESET ops first: a reset costs ~10 steps, and
 * run first it cannot leave the other threads idle at the end of a batch) and returns;
 * ``num_threads`` threads take jobs first come, first served, so a batch is balanced whatever
 * its games do; finished envs go to a done ring in the order they finish. ``collect(k)``
 * takes finished envs until ``k`` are in, and while it waits the calling thread takes jobs
 * itself (its core would idle otherwise). Each env has at most one op in flight, so the
 * rings hold at most ``num_envs`` live entries; ``discard`` bumps an epoch, and queued jobs and
 * finished envs of an older epoch are dropped (a job still running finishes first: ops of one
 * env never overlap, see ``Game::busy``). No lock is taken on the way: jobs and completions
 * are claimed with atomic counters, and threads sleep on semaphores only when there is
 * nothing to do.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "_ale_batch.h"

namespace {

using namespace envhive_atari;

// ---------------------------------------------------------------- the Python type
struct GamesObject {
    PyObject_HEAD
    Batch *batch;
    std::vector<float> *scratch;  // the caller's rows and line for the area resize
    PyObject *keep;               // the bound buffers' owners
};

int resolve(Api *api, const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) {
        PyErr_Format(PyExc_ImportError, "ale-py's library %s is not loaded (import ale_py first)", path);
        return -1;
    }
    for (const auto &s : kSymbols) {
        void *f = dlsym(lib, s.name);
        if (f == nullptr) {
            PyErr_Format(PyExc_ImportError, "ale-py's library does not export %s", s.name);
            dlclose(lib);
            return -1;
        }
        memcpy(reinterpret_cast<char *>(api) + s.offset, &f, sizeof f);
    }
    // The string-taking three: all in the new libstdc++ ABI, or all in the old one.
    for (int abi = 0; abi < 2; abi++) {
        bool all = true;
        for (const auto &s : kStringSymbols) {
            void *f = dlsym(lib, s.name[abi]);
            all = all && f != nullptr;
            memcpy(reinterpret_cast<char *>(api) + s.offset, &f, sizeof f);
        }
        if (all) {
            api->old_abi = abi == 1;
            dlclose(lib);  // RTLD_NOLOAD took a reference; Python's import keeps the library
            return 0;
        }
    }
    dlclose(lib);
    PyErr_SetString(PyExc_ImportError, "ale-py's library exports ALEInterface::setInt/setFloat/loadROM "
                                       "in neither libstdc++ string ABI");
    return -1;
}

int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t bytes, const char *name, bool writable)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) != 0)
        return -1;
    if (view->len < bytes) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, needs %zd", name, view->len, bytes);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

template <typename T>
int copy_table(PyObject *obj, std::vector<T> &out, const char *name)
{
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_C_CONTIGUOUS) != 0)
        return -1;
    if (v.len % (Py_ssize_t)sizeof(T)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of items", name, v.len);
        PyBuffer_Release(&v);
        return -1;
    }
    out.resize((size_t)v.len / sizeof(T));
    memcpy(out.data(), v.buf, (size_t)v.len);
    PyBuffer_Release(&v);
    return 0;
}

void Games_dealloc(GamesObject *self)
{
    if (self->batch != nullptr) {
        Py_BEGIN_ALLOW_THREADS
        delete self->batch;
        Py_END_ALLOW_THREADS
    }
    delete self->scratch;
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

Batch *live(GamesObject *self)
{
    if (self->batch == nullptr)
        PyErr_SetString(PyExc_ValueError, "the games are closed");
    return self->batch;
}

// Config's fields from the dict ``config`` (see Games_init); -1 with an exception set.
int parse_config(PyObject *config, Config &c)
{
    struct {
        const char *key;
        int *field;
    } ints[] = {{"frame_skip", &c.frame_skip}, {"stack_num", &c.stack_num}, {"img_h", &c.img_h},
                {"img_w", &c.img_w}, {"channels", &c.channels}, {"noop_max", &c.noop_max},
                {"limit", &c.limit}, {"mode", &c.mode}, {"difficulty", &c.difficulty},
                {"fire_action", &c.fire_action}, {"noop_action", &c.noop_action},
                {"op_step", &c.op_step}, {"op_reset", &c.op_reset},
                {"op_step_reset", &c.op_step_reset}, {"xtaps", &c.xtaps}, {"ytaps", &c.ytaps}};
    struct {
        const char *key;
        bool *field;
    } flags[] = {{"maxpool", &c.maxpool}, {"episodic_life", &c.episodic_life},
                 {"reward_clip", &c.reward_clip}, {"fire_first", &c.fire_first},
                 {"pad_repeat", &c.pad_repeat}, {"pad_zeros", &c.pad_zeros},
                 {"loss_full", &c.loss_full}, {"resize", &c.resize}, {"use_fire", &c.fire},
                 {"full_action_space", &c.legal_actions}};
    struct {
        const char *key;
        double *field;
    } reals[] = {{"sticky", &c.sticky}, {"reset_reward", &c.reset_reward}};
    for (auto &f : ints) {
        PyObject *v = PyDict_GetItemString(config, f.key);
        if (v == nullptr)
            return PyErr_Format(PyExc_KeyError, "config needs %s", f.key), -1;
        *f.field = (int)PyLong_AsLong(v);
        if (PyErr_Occurred())
            return -1;
    }
    for (auto &f : flags) {
        PyObject *v = PyDict_GetItemString(config, f.key);
        if (v == nullptr)
            return PyErr_Format(PyExc_KeyError, "config needs %s", f.key), -1;
        *f.field = PyObject_IsTrue(v) == 1;
    }
    for (auto &f : reals) {
        PyObject *v = PyDict_GetItemString(config, f.key);
        if (v == nullptr)
            return PyErr_Format(PyExc_KeyError, "config needs %s", f.key), -1;
        *f.field = PyFloat_AsDouble(v);
        if (PyErr_Occurred())
            return -1;
    }
    if (c.channels != 1 && c.channels != 3)
        return PyErr_SetString(PyExc_ValueError, "channels must be 1 or 3"), -1;
    if (c.frame_skip < 1 || c.stack_num < 1 || c.img_h < 1 || c.img_w < 1)
        return PyErr_SetString(PyExc_ValueError, "sizes must be positive"), -1;
    if (!c.resize) {
        if (c.img_h != kRawH || c.img_w != kRawW)
            return PyErr_SetString(PyExc_ValueError, "without an area plan the frame must be the 210x160 screen"), -1;
        return 0;
    }
    const char *names[] = {"xi", "xw", "yi", "yw"};
    PyObject *tables[4];
    for (int k = 0; k < 4; k++)
        if ((tables[k] = PyDict_GetItemString(config, names[k])) == nullptr)
            return PyErr_Format(PyExc_KeyError, "config needs %s", names[k]), -1;
    if (copy_table(tables[0], c.xi, "xi") || copy_table(tables[1], c.xw, "xw") ||
        copy_table(tables[2], c.yi, "yi") || copy_table(tables[3], c.yw, "yw"))
        return -1;
    if (c.xtaps < 1 || c.ytaps < 1 || c.xi.size() != (size_t)c.xtaps * c.img_w || c.xw.size() != c.xi.size() ||
        c.yi.size() != (size_t)c.ytaps * c.img_h || c.yw.size() != c.yi.size())
        return PyErr_SetString(PyExc_ValueError, "the area plan's tables do not match the frame size"), -1;
    for (int64_t x : c.xi)
        if (x < 0 || x >= kRawW)
            return PyErr_SetString(PyExc_ValueError, "xi out of range"), -1;
    for (int64_t y : c.yi)
        if (y < 0 || y >= kRawH)
            return PyErr_SetString(PyExc_ValueError, "yi out of range"), -1;
    return 0;
}

/* Games(lib, rom, seeds, config, num_threads): ``len(seeds)`` games of ROM ``rom`` (a path),
 * each to be loaded with its ALE seed at its first reset unless that reset brings a seed of its
 * own (loading a ROM is slow: a seeded first reset would load it twice), stepped by ``num_threads`` threads (0: the
 * caller alone). ``config``: a dict of Config's fields (``xi``/``xw``/``yi``/``yw``: the area
 * plan's tables). */
int Games_init(GamesObject *self, PyObject *args, PyObject *kwds)
{
    static const char *kwlist[] = {"lib", "rom", "seeds", "config", "num_threads", nullptr};
    const char *lib, *rom;
    PyObject *seeds_obj, *config;
    int num_threads;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ssOO!i", const_cast<char **>(kwlist), &lib, &rom,
                                     &seeds_obj, &PyDict_Type, &config, &num_threads))
        return -1;
    if (self->batch != nullptr)
        return PyErr_SetString(PyExc_ValueError, "Games is already built"), -1;
    if (num_threads < 0)
        return PyErr_SetString(PyExc_ValueError, "num_threads must be >= 0"), -1;
    std::unique_ptr<Batch> b(new Batch());
    std::vector<int64_t> seeds;
    if (resolve(&b->api, lib) != 0 || parse_config(config, b->cfg) != 0 || copy_table(seeds_obj, seeds, "seeds"))
        return -1;
    if (seeds.empty() || seeds.size() > 0x7fffffff)
        return PyErr_SetString(PyExc_ValueError, "seeds: one per game, at least one"), -1;
    b->rom = rom;
    std::string error;
    Py_BEGIN_ALLOW_THREADS
    error = b->build(seeds, num_threads);
    Py_END_ALLOW_THREADS
    if (!error.empty())
        return PyErr_SetString(PyExc_RuntimeError, error.c_str()), -1;
    self->scratch = new std::vector<float>(b->rows_size() + b->line_size());
    self->batch = b.release();
    return 0;
}

/* bind(obs, final_obs, reward, terminated, truncated, ops, actions, reseed, has_reseed, stock,
 *      stock_used, infos, reset_after, failed): the arrays the ops read and write (kept alive
 * here). ``final_obs`` may be None; ``infos``: 12 arrays, (lives, reward, terminated,
 * elapsed_step) for step_, info_ and rep_ in that order. */
PyObject *Games_bind(GamesObject *self, PyObject *args)
{
    Batch *b = live(self);
    if (b == nullptr)
        return nullptr;
    PyObject *obs, *final_obs, *reward, *term, *trunc, *ops, *acts, *reseed, *has_reseed, *stock,
        *stock_used, *infos, *reset_after, *failed;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOO!OO", &obs, &final_obs, &reward, &term, &trunc, &ops,
                          &acts, &reseed, &has_reseed, &stock, &stock_used, &PyTuple_Type, &infos,
                          &reset_after, &failed))
        return nullptr;
    if (PyTuple_GET_SIZE(infos) != 12) {
        PyErr_SetString(PyExc_ValueError, "infos: 12 arrays");
        return nullptr;
    }
    const Py_ssize_t n = b->n, row = (Py_ssize_t)b->games[0].stack.size();
    struct Want {
        PyObject *obj;
        Py_ssize_t bytes;
        const char *name;
        bool writable;
        void **dst;
    };
    Columns c;
    Py_ssize_t stock_bytes = 0;
    std::vector<Want> wants = {
        {obs, n * row, "obs", true, reinterpret_cast<void **>(&c.obs)},
        {reward, n * 8, "reward", true, reinterpret_cast<void **>(&c.reward)},
        {term, n, "terminated", true, reinterpret_cast<void **>(&c.terminated)},
        {trunc, n, "truncated", true, reinterpret_cast<void **>(&c.truncated)},
        {ops, n, "ops", false, reinterpret_cast<void **>(const_cast<int8_t **>(&c.ops))},
        {acts, n * 8, "actions", false, reinterpret_cast<void **>(const_cast<int64_t **>(&c.actions))},
        {reseed, n * 8, "reseed", false, reinterpret_cast<void **>(const_cast<int64_t **>(&c.reseed))},
        {has_reseed, n, "has_reseed", true, reinterpret_cast<void **>(&c.has_reseed)},
        {stock, n * 4, "stock", false, reinterpret_cast<void **>(const_cast<int32_t **>(&c.stock))},
        {stock_used, n * 4, "stock_used", true, reinterpret_cast<void **>(&c.stock_used)},
        {reset_after, n, "reset_after", true, reinterpret_cast<void **>(&c.reset_after)},
        {failed, n, "failed", true, reinterpret_cast<void **>(&c.failed)},
    };
    if (final_obs != Py_None)
        wants.push_back({final_obs, n * row, "final_obs", true, reinterpret_cast<void **>(&c.final_obs)});
    for (int k = 0; k < 12; k++) {
        void **dst = k % 4 == 0 ? reinterpret_cast<void **>(&c.info_lives[k / 4])
                     : k % 4 == 1 ? reinterpret_cast<void **>(&c.info_reward[k / 4])
                     : k % 4 == 2 ? reinterpret_cast<void **>(&c.info_term[k / 4])
                                  : reinterpret_cast<void **>(&c.info_elapsed[k / 4]);
        wants.push_back({PyTuple_GET_ITEM(infos, k), n * 4, "an info column", true, dst});
    }
    for (auto &w : wants) {
        Py_buffer view;
        if (get_buffer(w.obj, &view, w.bytes, w.name, w.writable) != 0)
            return nullptr;
        *w.dst = view.buf;
        if (w.obj == stock)
            stock_bytes = view.len;
        PyBuffer_Release(&view);  // ``keep`` holds the owners: the memory stays put
    }
    c.stock_len = (int32_t)(stock_bytes / (n * 4));
    PyObject *keep = PyTuple_Pack(14, obs, final_obs, reward, term, trunc, ops, acts, reseed,
                                  has_reseed, stock, stock_used, infos, reset_after, failed);
    if (keep == nullptr)
        return nullptr;
    Py_XSETREF(self->keep, keep);
    b->col = c;
    b->bound = true;
    Py_RETURN_NONE;
}

Batch *bound(GamesObject *self)
{
    Batch *b = live(self);
    if (b != nullptr && !b->bound) {
        PyErr_SetString(PyExc_ValueError, "bind() the arrays first");
        return nullptr;
    }
    return b;
}

int check_ids(Batch *b, Py_buffer *ids)
{
    if (ids->len % 8) {
        PyErr_SetString(PyExc_ValueError, "ids: int64");
        return -1;
    }
    const int64_t *p = static_cast<const int64_t *>(ids->buf);
    for (Py_ssize_t j = 0; j < ids->len / 8; j++)
        if (p[j] < 0 || p[j] >= b->n) {
            PyErr_Format(PyExc_IndexError, "env id %lld is outside 0..%d", (long long)p[j], b->n - 1);
            return -1;
        }
    return 0;
}

// Wait (GIL released) until none of ``ids`` runs an op discarded earlier.
void wait_idle(Batch *b, const int64_t *ids, Py_ssize_t k)
{
    if (!b->any_busy(ids, k) || b->forked())  // a forked child: no thread runs anything
        return;
    Py_BEGIN_ALLOW_THREADS
    while (b->any_busy(ids, k))
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    Py_END_ALLOW_THREADS
}

/* start(ids): queue the ops of envs ``ids`` (int64); returns at once. */
PyObject *Games_start(GamesObject *self, PyObject *arg)
{
    Batch *b = bound(self);
    if (b == nullptr)
        return nullptr;
    Py_buffer ids;
    if (PyObject_GetBuffer(arg, &ids, PyBUF_C_CONTIGUOUS) != 0)
        return nullptr;
    PyObject *result = nullptr;
    if (check_ids(b, &ids) == 0) {
        wait_idle(b, static_cast<const int64_t *>(ids.buf), ids.len / 8);
        if (b->start(static_cast<const int64_t *>(ids.buf), ids.len / 8)) {
            result = Py_None;
            Py_INCREF(result);
        } else {
            PyErr_SetString(PyExc_RuntimeError, "the job ring is full (repeated interrupts?); close the pool");
        }
    }
    PyBuffer_Release(&ids);
    return result;
}

/* collect(min_count, out) -> count: finished envs into ``out`` (int64, num_envs long), waiting
 * (and stepping games in this thread) until ``min_count`` are in or none is outstanding. */
PyObject *Games_collect(GamesObject *self, PyObject *args)
{
    Batch *b = bound(self);
    if (b == nullptr)
        return nullptr;
    Py_ssize_t min_count;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "nw*", &min_count, &out))
        return nullptr;
    if (out.len < (Py_ssize_t)b->n * 8) {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "out: int64, num_envs long");
        return nullptr;
    }
    Py_ssize_t got;
    float *rows = self->scratch->data(), *line = rows + b->rows_size();
    int64_t *dst = static_cast<int64_t *>(out.buf);
    got = b->drain(dst, 0);
    if (got < min_count && b->outstanding > 0) {
        Py_ssize_t more;
        Py_BEGIN_ALLOW_THREADS
        more = b->collect(min_count - got, dst + got, rows, line);
        Py_END_ALLOW_THREADS
        got += more;
    }
    PyBuffer_Release(&out);
    return PyLong_FromSsize_t(got);
}

/* run(ids, out) -> count: the ops of ``ids``, all finished on return (start, then collect every
 * one into ``out``, the caller stepping games meanwhile). */
PyObject *Games_run(GamesObject *self, PyObject *args)
{
    Batch *b = bound(self);
    if (b == nullptr)
        return nullptr;
    Py_buffer ids, out;
    if (!PyArg_ParseTuple(args, "y*w*", &ids, &out))
        return nullptr;
    PyObject *result = nullptr;
    if (check_ids(b, &ids) == 0 && out.len >= (Py_ssize_t)b->n * 8) {
        if (b->outstanding) {
            PyErr_SetString(PyExc_RuntimeError, "run(): ops are in flight");
        } else if (wait_idle(b, static_cast<const int64_t *>(ids.buf), ids.len / 8),
                   !b->start(static_cast<const int64_t *>(ids.buf), ids.len / 8)) {
            PyErr_SetString(PyExc_RuntimeError, "the job ring is full (repeated interrupts?); close the pool");
        } else {
            const Py_ssize_t k = ids.len / 8;
            float *rows = self->scratch->data(), *line = rows + b->rows_size();
            Py_ssize_t got;
            Py_BEGIN_ALLOW_THREADS
            got = b->collect(k, static_cast<int64_t *>(out.buf), rows, line);
            Py_END_ALLOW_THREADS
            result = PyLong_FromSsize_t(got);
        }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "out: int64, num_envs long");
    }
    PyBuffer_Release(&ids);
    PyBuffer_Release(&out);
    return result;
}

/* wait_idle(): wait (GIL released) until no thread runs an op, e.g. one discarded earlier. */
PyObject *Games_wait_idle(GamesObject *self, PyObject *)
{
    Batch *b = live(self);
    if (b == nullptr)
        return nullptr;
    wait_idle(b, nullptr, b->n);
    Py_RETURN_NONE;
}

/* idle() -> bool: every job queued so far has run (or was skipped as discarded). */
PyObject *Games_idle(GamesObject *self, PyObject *)
{
    Batch *b = live(self);
    if (b == nullptr)
        return nullptr;
    return PyBool_FromLong(b->finished.load(std::memory_order_acquire) ==
                           b->job_tail.load(std::memory_order_acquire));
}

PyObject *Games_discard(GamesObject *self, PyObject *)
{
    Batch *b = live(self);
    if (b == nullptr)
        return nullptr;
    b->discard();
    Py_RETURN_NONE;
}

PyObject *Games_error(GamesObject *self, PyObject *arg)
{
    Batch *b = live(self);
    if (b == nullptr)
        return nullptr;
    const long i = PyLong_AsLong(arg);
    if (PyErr_Occurred())
        return nullptr;
    if (i < 0 || i >= b->n) {
        PyErr_SetString(PyExc_IndexError, "env id out of range");
        return nullptr;
    }
    return Py_BuildValue("(ss)", b->games[i].error_kind.c_str(), b->games[i].error.c_str());
}

/* screen(i, rgb) -> bytes: env i's raw screen (210 x 160, gray or RGB); only while env i has
 * no op in flight (the caller's duty, as for every read of a game). */
PyObject *Games_screen(GamesObject *self, PyObject *args)
{
    Batch *b = live(self);
    if (b == nullptr)
        return nullptr;
    int i, rgb;
    if (!PyArg_ParseTuple(args, "ip", &i, &rgb))
        return nullptr;
    if (i < 0 || i >= b->n) {
        PyErr_SetString(PyExc_IndexError, "env id out of range");
        return nullptr;
    }
    if (!b->games[i].loaded) {
        PyErr_SetString(PyExc_ValueError, "the env has no screen before its first reset");
        return nullptr;
    }
    Bytes screen;
    if (rgb)
        b->api.rgb(b->games[i].ale, screen);
    else
        b->api.gray(b->games[i].ale, screen);
    return PyBytes_FromStringAndSize(reinterpret_cast<const char *>(screen.data()), (Py_ssize_t)screen.size());
}

PyObject *Games_actions(GamesObject *self, PyObject *)
{
    Batch *b = live(self);
    if (b == nullptr)
        return nullptr;
    PyObject *out = PyList_New((Py_ssize_t)b->actions.size());
    for (size_t k = 0; out != nullptr && k < b->actions.size(); k++)
        PyList_SET_ITEM(out, (Py_ssize_t)k, PyLong_FromLong(b->actions[k]));
    return out;
}

PyObject *Games_close(GamesObject *self, PyObject *)
{
    if (self->batch != nullptr) {
        Batch *b = self->batch;
        self->batch = nullptr;
        Py_BEGIN_ALLOW_THREADS
        delete b;
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(self->keep);
    Py_RETURN_NONE;
}

PyObject *Games_num_threads(GamesObject *self, void *)
{
    Batch *b = live(self);
    return b == nullptr ? nullptr : PyLong_FromSize_t(b->threads.size());
}

PyMethodDef Games_methods[] = {
    {"bind", reinterpret_cast<PyCFunction>(Games_bind), METH_VARARGS, "Attach the arrays."},
    {"start", reinterpret_cast<PyCFunction>(Games_start), METH_O, "Queue the ops of ids."},
    {"collect", reinterpret_cast<PyCFunction>(Games_collect), METH_VARARGS, "Take finished envs."},
    {"run", reinterpret_cast<PyCFunction>(Games_run), METH_VARARGS, "The ops of ids, to the end."},
    {"discard", reinterpret_cast<PyCFunction>(Games_discard), METH_NOARGS, "Forget ops in flight."},
    {"wait_idle", reinterpret_cast<PyCFunction>(Games_wait_idle), METH_NOARGS, "Wait for running ops."},
    {"idle", reinterpret_cast<PyCFunction>(Games_idle), METH_NOARGS, "Every queued job has run."},
    {"error", reinterpret_cast<PyCFunction>(Games_error), METH_O, "Env i's last error: (kind, message)."},
    {"screen", reinterpret_cast<PyCFunction>(Games_screen), METH_VARARGS, "Env i's raw screen."},
    {"actions", reinterpret_cast<PyCFunction>(Games_actions), METH_NOARGS, "The action set."},
    {"close", reinterpret_cast<PyCFunction>(Games_close), METH_NOARGS, "Stop the threads, free the games."},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef Games_getset[] = {
    {"num_threads", reinterpret_cast<getter>(Games_num_threads), nullptr, "Worker threads.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject GamesType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_alethreads",
                          "A batch of Atari games stepped by C++ threads (see _threads.py).", -1,
                          nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__alethreads(void)
{
    GamesType.tp_name = "envhive.envs.atari._alethreads.Games";
    GamesType.tp_basicsize = sizeof(GamesObject);
    GamesType.tp_flags = Py_TPFLAGS_DEFAULT;
    GamesType.tp_doc = "Games(lib, rom, seeds, config, num_threads): a batch of Atari games.";
    GamesType.tp_new = PyType_GenericNew;
    GamesType.tp_init = reinterpret_cast<initproc>(Games_init);
    GamesType.tp_dealloc = reinterpret_cast<destructor>(Games_dealloc);
    GamesType.tp_methods = Games_methods;
    GamesType.tp_getset = Games_getset;
    if (PyType_Ready(&GamesType) < 0)
        return nullptr;
    PyObject *m = PyModule_Create(&module_def);
    if (m == nullptr)
        return nullptr;
    Py_INCREF(&GamesType);
    if (PyModule_AddObject(m, "Games", reinterpret_cast<PyObject *>(&GamesType)) < 0) {
        Py_DECREF(&GamesType);
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
