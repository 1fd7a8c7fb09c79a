/* The CPython glue of a threaded batch: a Python type over a ThreadedBatch<Game>, written once.
 *
 * A family's module file is a few lines:
 *
 *     #include "envhive/batch_module.h"
 *     #include "_counter.h"
 *     ENVHIVE_BATCH_MODULE(_counter, "envhive.testing.counter._counter", envhive_counter::Counter)
 *
 * and Python gets (see envhive/engines/_threaded.py, which drives it):
 *
 *     Batch(seeds, config, num_threads)   len(seeds) envs (env i built from seeds[i]), stepped by
 *                                         num_threads C++ threads and the caller; ``config``: a
 *                                         dict of the game's fields and the op codes of _ops
 *     bind(columns)                       the pool's buffers and the Python side's columns, by
 *                                         name (a dict; kept alive here)
 *     start(ids) / collect(min_count, out) -> count / run(ids, out) -> count
 *     discard() / wait_idle() / idle() -> bool / error(i) -> (kind, message) / facts() -> dict
 *     close() / num_threads / obs_bytes / c_api() -> PyCapsule (envhive/batch_api.h)
 *     render_bytes / render(i, out)       env i's image into ``out`` (a game that renders;
 *                                         between ops only)
 *     info_fields() -> [(name, dtype, bytes per env)],
 *     columns() -> [(name, item, per_env, writable)]
 *                                         (module functions: the game's declarations)
 *
 * Every wait releases the GIL and looks for Ctrl-C every few tens of milliseconds (also
 * inside long ops the caller runs itself, through Runner::poll), so an interrupt reaches
 * Python within a fraction of a second; the call then raises and the ops in flight stay
 * queued or running until Python discards them (the pool does, at once).
 */
#ifndef ENVHIVE_BATCH_MODULE_H
#define ENVHIVE_BATCH_MODULE_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>

#include <time.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "envhive/batch_api.h"
#include "envhive/threaded_batch.h"

namespace envhive {
namespace glue {

// ---------------------------------------------------------------- config from a dict
class DictSource : public Source {
public:
    explicit DictSource(PyObject *dict) : dict_(dict) {}
    std::string error;

    bool get(const char *key, int64_t &value) override {
        PyObject *v = item(key);
        if (v == nullptr)
            return false;
        if (PyBool_Check(v) || !PyLong_Check(v))
            return fail(std::string(key) + ": expected an int");
        int overflow = 0;
        value = (int64_t)PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (value == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return fail(std::string(key) + ": does not fit an int64");
        }
        return true;
    }
    bool get(const char *key, double &value) override {
        PyObject *v = item(key);
        if (v == nullptr)
            return false;
        value = PyFloat_AsDouble(v);
        if (value == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return fail(std::string(key) + ": expected a float");
        }
        return true;
    }
    bool get(const char *key, bool &value) override {
        PyObject *v = item(key);
        if (v == nullptr)
            return false;
        const int truth = PyObject_IsTrue(v);
        if (truth < 0) {
            PyErr_Clear();
            return fail(std::string(key) + ": expected a bool");
        }
        value = truth == 1;
        return true;
    }
    bool get(const char *key, std::vector<int64_t> &value) override { return table(key, value); }
    bool get(const char *key, std::vector<float> &value) override { return table(key, value); }
    bool get(const char *key, std::string &value) override {
        PyObject *v = item(key);
        if (v == nullptr)
            return false;
        const char *text = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : nullptr;
        if (text == nullptr) {
            PyErr_Clear();
            return fail(std::string(key) + ": expected a str");
        }
        value = text;
        return true;
    }
    bool fail(const std::string &why) override {
        if (error.empty())
            error = why;
        return false;
    }
    using Source::get;

private:
    PyObject *dict_;

    PyObject *item(const char *key) {
        PyObject *v = PyDict_GetItemString(dict_, key);  // borrowed
        if (v == nullptr)
            fail(std::string("the configuration needs ") + key);
        return v;
    }

    template <class T>
    bool table(const char *key, std::vector<T> &out) {
        PyObject *v = item(key);
        if (v == nullptr)
            return false;
        Py_buffer view;
        if (PyObject_GetBuffer(v, &view, PyBUF_C_CONTIGUOUS) != 0) {
            PyErr_Clear();
            return fail(std::string(key) + ": expected a contiguous array");
        }
        const bool whole = view.len % (Py_ssize_t)sizeof(T) == 0;
        if (whole) {
            out.resize((size_t)view.len / sizeof(T));
            memcpy(out.data(), view.buf, (size_t)view.len);
        }
        PyBuffer_Release(&view);
        return whole ? true : fail(std::string(key) + ": not a whole number of items");
    }
};

// ---------------------------------------------------------------- Ctrl-C from a GIL-free wait
inline int64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// Runner::poll for a call that released the GIL (``save``: its thread state meanwhile).
struct SignalPoll {
    PyThreadState *save = nullptr;
    int64_t last_ns = 0;
    unsigned ticks = 0;
    bool hit = false;
};

inline int poll_signals(void *p, int force) {
    SignalPoll *s = static_cast<SignalPoll *>(p);
    if (s->hit)
        return 1;
    if (!force && (++s->ticks & 255u) != 0)  // the clock is read every 256 checks of a loop
        return 0;
    const int64_t now = monotonic_ns();
    if (now - s->last_ns < 20000000LL)
        return 0;
    s->last_ns = now;
    PyEval_RestoreThread(s->save);
    // Python's handlers run here; KeyboardInterrupt (or whatever they raise) stays set on
    // this thread's state, and the call returns NULL with it once the GIL is back.
    if (PyErr_CheckSignals() != 0)
        s->hit = true;
    s->save = PyEval_SaveThread();
    return s->hit ? 1 : 0;
}

// ---------------------------------------------------------------- the Python type
// Whether a game renders (declares render_bytes and render: see threaded_batch.h).
template <class G, class = void>
struct Renders : std::false_type {};
template <class G>
struct Renders<G, std::void_t<decltype(std::declval<const G &>().render_bytes())>> : std::true_type {};

template <class Game>
struct Object {
    PyObject_HEAD
    ThreadedBatch<Game> *batch;
    PyObject *keep;   // the bound arrays' owners
    int calling;      // a method is inside: re-entry (a signal handler, a thread) is refused
    std::string *api_error;  // the C entry's last error
};

template <class Game>
struct Module {
    using Batch = ThreadedBatch<Game>;
    using Obj = Object<Game>;
    static PyTypeObject type;

    // A method's entry: the object's batch (open, and bound when ``bound``), marked busy.
    struct Call {
        Obj *self;
        Batch *b = nullptr;
        Call(Obj *s, bool need_bound) : self(s) {
            if (s->calling) {
                PyErr_SetString(PyExc_RuntimeError, "the batch is inside another call (from a signal handler "
                                                    "or another thread); one call at a time");
                return;
            }
            if (s->batch == nullptr) {
                PyErr_SetString(PyExc_ValueError, "the batch is closed");
                return;
            }
            if (need_bound && !s->batch->bound) {
                PyErr_SetString(PyExc_ValueError, "bind() the arrays first");
                return;
            }
            b = s->batch;
            s->calling = 1;
        }
        ~Call() {
            if (b != nullptr)
                self->calling = 0;
        }
    };

    // ------------------------------------------------------------ the GIL-free parts
    // Queue ``ids`` once none of them runs a discarded op; an error message, or "".
    static const char *start_ids(Batch *b, const int64_t *ids, int64_t k, SignalPoll *poll) {
        if (!wait_idle(b, ids, k, poll))
            return nullptr;  // interrupted
        if (!b->start(ids, k))
            return "the job ring is full (repeated interrupts?); close the pool";
        return "";
    }

    // Wait until none of ``ids`` (null: every env) runs an op; false when interrupted.
    static bool wait_idle(Batch *b, const int64_t *ids, int64_t k, SignalPoll *poll) {
        if (b->forked())  // a forked child: no thread runs anything
            return true;
        while (b->any_busy(ids, k)) {
            if (poll != nullptr && poll_signals(poll, 1))
                return false;
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        return true;
    }

    static int64_t collect_ids(Batch *b, int64_t min_count, int64_t *out, SignalPoll *poll) {
        Runner runner = b->caller_runner();
        if (poll != nullptr) {
            runner.poll = poll_signals;
            runner.poll_ctx = poll;
        }
        return b->collect(min_count, out, runner, b->caller_scratch);
    }

    // ------------------------------------------------------------ helpers
    static int ids_of(Batch *b, PyObject *obj, Py_buffer *view) {
        if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) != 0)
            return -1;
        if (view->len % 8) {
            PyBuffer_Release(view);
            PyErr_SetString(PyExc_ValueError, "ids: expected int64");
            return -1;
        }
        const int64_t *p = static_cast<const int64_t *>(view->buf);
        for (Py_ssize_t j = 0; j < view->len / 8; j++)
            if (p[j] < 0 || p[j] >= b->n) {
                PyBuffer_Release(view);
                PyErr_Format(PyExc_IndexError, "env id %lld is outside 0..%lld", (long long)p[j], (long long)b->n - 1);
                return -1;
            }
        return 0;
    }

    static int out_of(Batch *b, PyObject *obj, Py_buffer *view) {
        if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0)
            return -1;
        if (view->len < (Py_ssize_t)b->n * 8) {
            PyBuffer_Release(view);
            PyErr_SetString(PyExc_ValueError, "out: expected int64, num_envs long");
            return -1;
        }
        return 0;
    }

    // ------------------------------------------------------------ methods
    static int init(Obj *self, PyObject *args, PyObject *kwds) {
        static const char *kwlist[] = {"seeds", "config", "num_threads", nullptr};
        PyObject *seeds_obj, *config;
        int num_threads;
        if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!i", const_cast<char **>(kwlist), &seeds_obj, &PyDict_Type,
                                         &config, &num_threads))
            return -1;
        if (self->batch != nullptr)
            return PyErr_SetString(PyExc_ValueError, "the batch is already built"), -1;
        if (num_threads < 0)
            return PyErr_SetString(PyExc_ValueError, "num_threads must be >= 0"), -1;
        std::unique_ptr<Batch> b(new Batch());
        DictSource source(config);
        int64_t step, reset, step_reset;
        if (!source.get("op_step", step) || !source.get("op_reset", reset) ||
            !source.get("op_step_reset", step_reset) || !source.get("reset_reward", b->ops.reset_reward) ||
            !b->game.configure(source)) {
            PyErr_SetString(PyExc_ValueError, source.error.empty() ? "bad configuration" : source.error.c_str());
            return -1;
        }
        b->ops.step = (int)step;
        b->ops.reset = (int)reset;
        b->ops.step_reset = (int)step_reset;
        std::vector<int64_t> seeds;
        Py_buffer view;
        if (PyObject_GetBuffer(seeds_obj, &view, PyBUF_C_CONTIGUOUS) != 0)
            return -1;
        if (view.len % 8 == 0) {
            seeds.resize((size_t)view.len / 8);
            memcpy(seeds.data(), view.buf, (size_t)view.len);
        }
        PyBuffer_Release(&view);
        if (seeds.empty() || seeds.size() > 0x7fffffffu)
            return PyErr_SetString(PyExc_ValueError, "seeds: int64, one per env, at least one"), -1;
        std::string error;
        Py_BEGIN_ALLOW_THREADS
        error = b->build(seeds, num_threads);
        Py_END_ALLOW_THREADS
        if (!error.empty()) {
            PyErr_SetString(error == "out of memory" ? PyExc_MemoryError : PyExc_RuntimeError, error.c_str());
            return -1;
        }
        self->batch = b.release();
        return 0;
    }

    static void dealloc(Obj *self) {
        if (self->batch != nullptr) {
            Batch *b = self->batch;
            self->batch = nullptr;
            Py_BEGIN_ALLOW_THREADS
            delete b;
            Py_END_ALLOW_THREADS
        }
        delete self->api_error;
        Py_XDECREF(self->keep);
        Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
    }

    struct Want {
        const char *name;
        Py_ssize_t bytes;
        bool writable;
        void **dst;
        bool optional;
    };

    // bind(columns): see the file's comment; every array is checked for its size.
    static PyObject *bind(Obj *self, PyObject *columns) {
        Call call(self, false);
        Batch *b = call.b;
        if (b == nullptr)
            return nullptr;
        if (!PyDict_Check(columns))
            return PyErr_Format(PyExc_TypeError, "bind: expected a dict of arrays"), nullptr;
        if (b->outstanding() || !b->idle())
            return PyErr_Format(PyExc_RuntimeError, "bind: ops are in flight"), nullptr;
        const Py_ssize_t n = (Py_ssize_t)b->n, row = (Py_ssize_t)b->obs_bytes();
        Columns c;
        std::vector<Want> wants = {
            {"obs", n * row, true, reinterpret_cast<void **>(&c.obs), false},
            {"final_obs", n * row, true, reinterpret_cast<void **>(&c.final_obs), true},
            {"reward", n * 8, true, reinterpret_cast<void **>(&c.reward), false},
            {"terminated", n, true, reinterpret_cast<void **>(&c.terminated), false},
            {"truncated", n, true, reinterpret_cast<void **>(&c.truncated), false},
            {"ops", n, false, reinterpret_cast<void **>(const_cast<int8_t **>(&c.ops)), false},
            {"actions", n * (Py_ssize_t)sizeof(typename Game::Action), false,
             reinterpret_cast<void **>(const_cast<uint8_t **>(&c.actions)), false},
            {"reseed", n * 8, false, reinterpret_cast<void **>(const_cast<int64_t **>(&c.reseed)), false},
            {"has_reseed", n, true, reinterpret_cast<void **>(&c.has_reseed), false},
            {"reset_after", n, true, reinterpret_cast<void **>(&c.reset_after), false},
            {"failed", n, true, reinterpret_cast<void **>(&c.failed), false},
        };
        const size_t nf = Game::kNumColumns;
        c.family.assign(nf, nullptr);
        c.family_items.assign(nf, 0);
        for (size_t k = 0; k < nf; k++) {
            const ColumnSpec &spec = Game::kColumns[k];
            wants.push_back({spec.name, n * (Py_ssize_t)(spec.item * spec.per_env), spec.writable, &c.family[k], false});
        }
        for (auto &w : wants) {
            PyObject *obj = PyDict_GetItemString(columns, w.name);  // borrowed
            if (obj == nullptr || (obj == Py_None && w.optional)) {
                if (w.optional)
                    continue;
                return PyErr_Format(PyExc_KeyError, "bind: the column %s is missing", w.name), nullptr;
            }
            Py_buffer view;
            if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | (w.writable ? PyBUF_WRITABLE : 0)) != 0)
                return nullptr;
            const Py_ssize_t len = view.len;
            *w.dst = view.buf;
            PyBuffer_Release(&view);  // ``keep`` holds the owners: the memory stays put
            if (len < w.bytes)
                return PyErr_Format(PyExc_ValueError, "bind: %s holds %zd bytes, needs %zd", w.name, len, w.bytes),
                       nullptr;
            for (size_t k = 0; k < nf; k++)
                if (w.dst == &c.family[k])
                    c.family_items[k] = (size_t)len / Game::kColumns[k].item;
        }
        PyObject *infos = PyDict_GetItemString(columns, "infos");
        const Py_ssize_t ni = (Py_ssize_t)Game::kNumInfos;
        if (infos == nullptr || !PyTuple_Check(infos) || PyTuple_GET_SIZE(infos) != 3 * ni)
            return PyErr_Format(PyExc_ValueError, "bind: infos: a tuple of %zd arrays", 3 * ni), nullptr;
        for (int slot = 0; slot < 3; slot++) {
            c.info[slot].assign((size_t)ni, nullptr);
            for (Py_ssize_t k = 0; k < ni; k++) {
                Py_buffer view;
                if (PyObject_GetBuffer(PyTuple_GET_ITEM(infos, slot * ni + k), &view,
                                       PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0)
                    return nullptr;
                const Py_ssize_t len = view.len;
                c.info[slot][(size_t)k] = static_cast<uint8_t *>(view.buf);
                PyBuffer_Release(&view);
                if (len < n * (Py_ssize_t)Game::kInfos[k].size)
                    return PyErr_Format(PyExc_ValueError, "bind: the info column %s is too small",
                                        Game::kInfos[k].name), nullptr;
            }
        }
        PyObject *keep = PyDict_Copy(columns);
        if (keep == nullptr)
            return nullptr;
        Py_XSETREF(self->keep, keep);
        b->col = std::move(c);
        b->bound = true;
        Py_RETURN_NONE;
    }

    // start(ids): queue the ops of envs ``ids`` (int64); returns at once.
    static PyObject *start(Obj *self, PyObject *arg) {
        Call call(self, true);
        Batch *b = call.b;
        Py_buffer ids;
        if (b == nullptr || ids_of(b, arg, &ids) != 0)
            return nullptr;
        SignalPoll poll;
        const char *error;
        poll.save = PyEval_SaveThread();
        error = start_ids(b, static_cast<const int64_t *>(ids.buf), ids.len / 8, &poll);
        PyEval_RestoreThread(poll.save);
        PyBuffer_Release(&ids);
        if (error == nullptr)
            return nullptr;  // interrupted: the exception is set
        if (*error)
            return PyErr_SetString(PyExc_RuntimeError, error), nullptr;
        Py_RETURN_NONE;
    }

    // collect(min_count, out) -> count: finished envs into ``out`` (int64, num_envs long),
    // waiting (and running ops in this thread) until ``min_count`` are in or none is in flight.
    static PyObject *collect(Obj *self, PyObject *args) {
        Call call(self, true);
        Batch *b = call.b;
        Py_ssize_t min_count;
        PyObject *out_obj;
        Py_buffer out;
        if (b == nullptr || !PyArg_ParseTuple(args, "nO", &min_count, &out_obj) || out_of(b, out_obj, &out) != 0)
            return nullptr;
        int64_t *dst = static_cast<int64_t *>(out.buf);
        int64_t got = b->drain(dst, 0);
        bool interrupted = false;
        if (got < min_count && b->outstanding() > 0) {
            SignalPoll poll;
            poll.save = PyEval_SaveThread();
            got += collect_ids(b, min_count - got, dst + got, &poll);
            interrupted = poll.hit;
            PyEval_RestoreThread(poll.save);
        }
        PyBuffer_Release(&out);
        if (interrupted)
            return nullptr;
        return PyLong_FromLongLong(got);
    }

    // run(ids, out) -> count: the ops of ``ids``, all finished on return.
    static PyObject *run(Obj *self, PyObject *args) {
        Call call(self, true);
        Batch *b = call.b;
        PyObject *ids_obj, *out_obj;
        Py_buffer ids, out;
        if (b == nullptr || !PyArg_ParseTuple(args, "OO", &ids_obj, &out_obj))
            return nullptr;
        if (b->outstanding())
            return PyErr_SetString(PyExc_RuntimeError, "run(): ops are in flight"), nullptr;
        if (ids_of(b, ids_obj, &ids) != 0)
            return nullptr;
        if (out_of(b, out_obj, &out) != 0) {
            PyBuffer_Release(&ids);
            return nullptr;
        }
        const int64_t k = ids.len / 8;
        SignalPoll poll;
        int64_t got = 0;
        poll.save = PyEval_SaveThread();
        const char *error = start_ids(b, static_cast<const int64_t *>(ids.buf), k, &poll);
        if (error != nullptr && !*error)
            got = collect_ids(b, k, static_cast<int64_t *>(out.buf), &poll);
        PyEval_RestoreThread(poll.save);
        PyBuffer_Release(&ids);
        PyBuffer_Release(&out);
        if (error == nullptr || poll.hit)
            return nullptr;  // interrupted
        if (*error)
            return PyErr_SetString(PyExc_RuntimeError, error), nullptr;
        return PyLong_FromLongLong(got);
    }

    // wait_idle(): wait until no thread runs an op (e.g. one discarded earlier).
    static PyObject *wait_idle_m(Obj *self, PyObject *) {
        Call call(self, false);
        Batch *b = call.b;
        if (b == nullptr)
            return nullptr;
        if (!b->any_busy(nullptr, b->n))
            Py_RETURN_NONE;
        SignalPoll poll;
        poll.save = PyEval_SaveThread();
        const bool done = wait_idle(b, nullptr, b->n, &poll);
        PyEval_RestoreThread(poll.save);
        if (!done)
            return nullptr;
        Py_RETURN_NONE;
    }

    static PyObject *idle(Obj *self, PyObject *) {
        Call call(self, false);
        return call.b == nullptr ? nullptr : PyBool_FromLong(call.b->idle());
    }

    static PyObject *discard(Obj *self, PyObject *) {
        Call call(self, false);
        if (call.b == nullptr)
            return nullptr;
        call.b->discard();
        Py_RETURN_NONE;
    }

    static PyObject *error(Obj *self, PyObject *arg) {
        Call call(self, false);
        Batch *b = call.b;
        if (b == nullptr)
            return nullptr;
        const long long i = PyLong_AsLongLong(arg);
        if (i == -1 && PyErr_Occurred())
            return nullptr;
        if (i < 0 || i >= b->n)
            return PyErr_SetString(PyExc_IndexError, "env id out of range"), nullptr;
        return Py_BuildValue("(ss)", b->slot(i).error_kind.c_str(), b->slot(i).error.c_str());
    }

    // render(i, out): env i's image (Game::render) into ``out``, a writable buffer of
    // render_bytes; refused while an op is queued or running (the game writes the env then).
    static PyObject *render(Obj *self, PyObject *args) {
        Call call(self, false);
        Batch *b = call.b;
        long long i = 0;
        PyObject *out = nullptr;
        if (b == nullptr || !PyArg_ParseTuple(args, "LO", &i, &out))
            return nullptr;
        if constexpr (!Renders<Game>::value) {
            return PyErr_SetString(PyExc_NotImplementedError, "this game does not render"), nullptr;
        } else {
            if (i < 0 || i >= b->n)
                return PyErr_SetString(PyExc_IndexError, "env id out of range"), nullptr;
            const int64_t id = i;
            if (!b->idle() || b->any_busy(&id, 1))
                return PyErr_SetString(PyExc_RuntimeError, "render: an op is in flight"), nullptr;
            Py_buffer view;
            if (PyObject_GetBuffer(out, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0)
                return nullptr;
            const size_t want = b->game.render_bytes();
            if ((size_t)view.len != want) {
                PyBuffer_Release(&view);
                return PyErr_Format(PyExc_ValueError, "render: out holds %zd bytes, the image has %zu", view.len,
                                    want), nullptr;
            }
            std::string error;
            try {
                b->game.render(b->slot(i).env, static_cast<uint8_t *>(view.buf));
            } catch (const std::exception &e) {
                error = e.what();
            }
            PyBuffer_Release(&view);
            if (!error.empty())
                return PyErr_SetString(PyExc_RuntimeError, error.c_str()), nullptr;
            Py_RETURN_NONE;
        }
    }

    static PyObject *render_bytes(Obj *self, void *) {
        if constexpr (!Renders<Game>::value)
            return PyLong_FromLong(0);
        else
            return self->batch == nullptr ? PyLong_FromLong(0) : PyLong_FromSize_t(self->batch->game.render_bytes());
    }

    static PyObject *facts(Obj *self, PyObject *) {
        Call call(self, false);
        if (call.b == nullptr)
            return nullptr;
        Facts f;
        call.b->game.facts(f);
        PyObject *out = PyDict_New();
        for (size_t k = 0; out != nullptr && k < f.size(); k++) {
            PyObject *v = PyLong_FromLongLong(f[k].second);
            if (v == nullptr || PyDict_SetItemString(out, f[k].first.c_str(), v) != 0)
                Py_CLEAR(out);
            Py_XDECREF(v);
        }
        return out;
    }

    // close(): stop every op in flight at its next check, join the threads, free the envs.
    static PyObject *close(Obj *self, PyObject *) {
        if (self->calling)
            return PyErr_SetString(PyExc_RuntimeError, "close() from inside another call of the batch"), nullptr;
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

    static PyObject *num_threads(Obj *self, void *) {
        return self->batch == nullptr ? PyLong_FromLong(0) : PyLong_FromSize_t(self->batch->num_threads());
    }

    static PyObject *obs_bytes(Obj *self, void *) {
        return self->batch == nullptr ? PyLong_FromLong(0) : PyLong_FromSize_t(self->batch->obs_bytes());
    }

    // ------------------------------------------------------------ the C entry
    static Obj *handle_of(void *h, bool need_bound) {
        Obj *self = static_cast<Obj *>(h);
        const char *why = self->calling ? "the batch is inside another call"
                          : self->batch == nullptr ? "the batch is closed"
                          : need_bound && !self->batch->bound ? "the batch's arrays are not bound" : nullptr;
        if (why != nullptr) {
            *self->api_error = why;
            return nullptr;
        }
        return self;
    }

    static int c_start(void *h, const int64_t *ids, int64_t count) {
        Obj *self = handle_of(h, true);
        if (self == nullptr)
            return -1;
        Batch *b = self->batch;
        for (int64_t j = 0; j < count; j++)
            if (ids[j] < 0 || ids[j] >= b->n)
                return *self->api_error = "an env id is out of range", -1;
        const char *error = start_ids(b, ids, count, nullptr);
        if (*error)
            return *self->api_error = error, -1;
        return 0;
    }

    static int64_t c_collect(void *h, int64_t min_count, int64_t *out) {
        Obj *self = handle_of(h, true);
        return self == nullptr ? -1 : collect_ids(self->batch, min_count, out, nullptr);
    }

    static int64_t c_run(void *h, const int64_t *ids, int64_t count, int64_t *out) {
        Obj *self = handle_of(h, true);
        if (self == nullptr)
            return -1;
        if (self->batch->outstanding())
            return *self->api_error = "run(): ops are in flight", -1;
        if (c_start(h, ids, count) != 0)
            return -1;
        return collect_ids(self->batch, count, out, nullptr);
    }

    static void c_discard(void *h) {
        Obj *self = handle_of(h, false);
        if (self != nullptr)
            self->batch->discard();
    }

    static int c_wait_idle(void *h) {
        Obj *self = handle_of(h, false);
        return self == nullptr ? -1 : (wait_idle(self->batch, nullptr, self->batch->n, nullptr), 0);
    }

    static const char *c_last_error(void *h) { return static_cast<Obj *>(h)->api_error->c_str(); }

    static const char *c_env_error(void *h, int64_t i) {
        Obj *self = static_cast<Obj *>(h);
        if (self->batch == nullptr || i < 0 || i >= self->batch->n || !self->batch->bound || !self->batch->col.failed[i])
            return "";
        return self->batch->slot(i).error.c_str();
    }

    static void capsule_free(PyObject *capsule) {
        void *api = PyCapsule_GetPointer(capsule, ENVHIVE_BATCH_API_NAME);
        PyObject *owner = static_cast<PyObject *>(PyCapsule_GetContext(capsule));
        delete static_cast<envhive_batch_api *>(api);
        Py_XDECREF(owner);
    }

    // c_api() -> PyCapsule of an envhive_batch_api (it keeps this object alive).
    static PyObject *c_api(Obj *self, PyObject *) {
        Call call(self, false);
        if (call.b == nullptr)
            return nullptr;
        envhive_batch_api *api = new envhive_batch_api{};
        api->version = ENVHIVE_BATCH_API_VERSION;
        api->size = sizeof(envhive_batch_api);
        api->handle = self;
        api->num_envs = call.b->n;
        api->run = c_run;
        api->start = c_start;
        api->collect = c_collect;
        api->discard = c_discard;
        api->wait_idle = c_wait_idle;
        api->last_error = c_last_error;
        api->env_error = c_env_error;
        PyObject *capsule = PyCapsule_New(api, ENVHIVE_BATCH_API_NAME, capsule_free);
        if (capsule == nullptr) {
            delete api;
            return nullptr;
        }
        Py_INCREF(self);
        PyCapsule_SetContext(capsule, self);
        return capsule;
    }

    static PyObject *new_object(PyTypeObject *t, PyObject *, PyObject *) {
        Obj *self = reinterpret_cast<Obj *>(t->tp_alloc(t, 0));
        if (self != nullptr) {
            self->batch = nullptr;
            self->keep = nullptr;
            self->calling = 0;
            self->api_error = new std::string();
        }
        return reinterpret_cast<PyObject *>(self);
    }

    // ------------------------------------------------------------ module functions
    static PyObject *info_fields(PyObject *, PyObject *) {
        PyObject *out = PyList_New((Py_ssize_t)Game::kNumInfos);
        for (size_t k = 0; out != nullptr && k < Game::kNumInfos; k++) {
            PyObject *item = Py_BuildValue("(ssn)", Game::kInfos[k].name, Game::kInfos[k].dtype,
                                           (Py_ssize_t)Game::kInfos[k].size);
            if (item == nullptr)
                return Py_DECREF(out), nullptr;
            PyList_SET_ITEM(out, (Py_ssize_t)k, item);
        }
        return out;
    }

    static PyObject *columns(PyObject *, PyObject *) {
        PyObject *out = PyList_New((Py_ssize_t)Game::kNumColumns);
        for (size_t k = 0; out != nullptr && k < Game::kNumColumns; k++) {
            const ColumnSpec &c = Game::kColumns[k];
            PyObject *item = Py_BuildValue("(snnO)", c.name, (Py_ssize_t)c.item, (Py_ssize_t)c.per_env,
                                           c.writable ? Py_True : Py_False);
            if (item == nullptr)
                return Py_DECREF(out), nullptr;
            PyList_SET_ITEM(out, (Py_ssize_t)k, item);
        }
        return out;
    }

    static PyObject *create(const char *short_name, const char *type_name) {
        static PyMethodDef methods[] = {
            {"bind", reinterpret_cast<PyCFunction>(bind), METH_O, "Attach the columns (a dict of arrays)."},
            {"start", reinterpret_cast<PyCFunction>(start), METH_O, "Queue the ops of ids."},
            {"collect", reinterpret_cast<PyCFunction>(collect), METH_VARARGS, "Take finished envs."},
            {"run", reinterpret_cast<PyCFunction>(run), METH_VARARGS, "The ops of ids, to the end."},
            {"discard", reinterpret_cast<PyCFunction>(discard), METH_NOARGS, "Forget ops in flight."},
            {"wait_idle", reinterpret_cast<PyCFunction>(wait_idle_m), METH_NOARGS, "Wait for running ops."},
            {"idle", reinterpret_cast<PyCFunction>(idle), METH_NOARGS, "Every queued job has run."},
            {"error", reinterpret_cast<PyCFunction>(error), METH_O, "Env i's last error: (kind, message)."},
            {"facts", reinterpret_cast<PyCFunction>(facts), METH_NOARGS, "The game's facts (a dict)."},
            {"render", reinterpret_cast<PyCFunction>(render), METH_VARARGS, "Env i's image into out."},
            {"close", reinterpret_cast<PyCFunction>(close), METH_NOARGS, "Stop the threads, free the envs."},
            {"c_api", reinterpret_cast<PyCFunction>(c_api), METH_NOARGS, "The C entry (a PyCapsule)."},
            {nullptr, nullptr, 0, nullptr},
        };
        static PyGetSetDef getset[] = {
            {"num_threads", reinterpret_cast<getter>(num_threads), nullptr, "C++ threads.", nullptr},
            {"obs_bytes", reinterpret_cast<getter>(obs_bytes), nullptr, "One observation's bytes.", nullptr},
            {"render_bytes", reinterpret_cast<getter>(render_bytes), nullptr, "One image's bytes (0: none).",
             nullptr},
            {nullptr, nullptr, nullptr, nullptr, nullptr},
        };
        static PyMethodDef functions[] = {
            {"info_fields", info_fields, METH_NOARGS, "The game's info fields: [(name, dtype, bytes per env)]."},
            {"columns", columns, METH_NOARGS, "The game's own columns: [(name, item, per_env, writable)]."},
            {nullptr, nullptr, 0, nullptr},
        };
        static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, short_name,
                                         "A threaded batch (envhive/engines/include/envhive/batch_module.h).", -1,
                                         functions};
        type.tp_name = type_name;
        type.tp_basicsize = sizeof(Obj);
        type.tp_flags = Py_TPFLAGS_DEFAULT;
        type.tp_doc = "Batch(seeds, config, num_threads): a batch of envs stepped by C++ threads.";
        type.tp_new = new_object;
        type.tp_init = reinterpret_cast<initproc>(init);
        type.tp_dealloc = reinterpret_cast<destructor>(dealloc);
        type.tp_methods = methods;
        type.tp_getset = getset;
        if (PyType_Ready(&type) < 0)
            return nullptr;
        PyObject *m = PyModule_Create(&module_def);
        if (m == nullptr)
            return nullptr;
        Py_INCREF(&type);
        if (PyModule_AddObject(m, "Batch", reinterpret_cast<PyObject *>(&type)) < 0) {
            Py_DECREF(&type);
            Py_DECREF(m);
            return nullptr;
        }
        return m;
    }
};

template <class Game>
PyTypeObject Module<Game>::type = {PyVarObject_HEAD_INIT(nullptr, 0)};

}  // namespace glue
}  // namespace envhive

// The module init of a family: ``ENVHIVE_BATCH_MODULE(_name, "package._name", GameType)``.
#define ENVHIVE_BATCH_MODULE(NAME, QUALIFIED, GAME)                                            \
    PyMODINIT_FUNC PyInit_##NAME(void) {                                                        \
        return envhive::glue::Module<GAME>::create(#NAME, QUALIFIED ".Batch");                   \
    }

#endif /* ENVHIVE_BATCH_MODULE_H */
