// envhive's XLA FFI handlers: a pool's send / recv / step inside ``jax.jit``.
//
// Built against the vendored XLA FFI headers only (``include/xla``): no jax at build time.
// ``envhive.jax._ffi`` registers the three handlers with jax on the first ``xla()`` call and
// makes one *driver* per pool (``new_driver``): the pool's buffers and its per-env state
// arrays (the lifecycle's started / ended / broken flags, the books' status), shared with
// Python by address, and the engine's entry (``envhive_batch_api``; or, for an engine with no
// C entry, a Python ``run`` called under the GIL). A handler does what the pool's ``send`` and
// ``recv`` do, rule for rule: the checks (ids idle, envs steppable, actions in the space,
// nothing done when one fails), the autoreset plan (next_step: RESET for an env whose episode
// ended; same_step: STEP_RESET; disabled: STEP), the ops through the engine, and the
// bookkeeping of each finished op (steps, ended, started), writing the rows of the envs
// handed out into XLA's result buffers.
//
// Python and XLA take turns on one pool. A ``python_gen`` counter in the shared header moves
// whenever Python used the pool; the next handler call then calls ``adopt`` (Python, under
// the GIL) first, which hands over what Python left in flight. Likewise ``driver_gen`` moves
// with every handler call, and Python takes the state back before its next call
// (``envhive.jax._lease``). Drivers are never freed (a compiled XLA program keeps the
// address as an attribute); ``close_driver`` drops every reference and makes calls fail.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "envhive/batch_api.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Element types, as numpy and XLA name them (codes shared with ``_lease.py``).
enum Code : int { kBool = 0, kI8, kU8, kI32, kI64, kF32, kF64 };

// The shared header's slots (int64, ``_lease.HEADER``).
enum Slot : int { kDriverGen = 0, kPythonGen, kSeenPython, kSteps, kHead, kCount, kInCore, kClosed, kHeaderSize };

enum Mode : int { kNextStep = 0, kSameStep = 1, kDisabled = 2 };

int code_of(ffi::DataType t) {
    switch (t) {
    case ffi::DataType::PRED: return kBool;
    case ffi::DataType::S8: return kI8;
    case ffi::DataType::U8: return kU8;
    case ffi::DataType::S32: return kI32;
    case ffi::DataType::S64: return kI64;
    case ffi::DataType::F32: return kF32;
    case ffi::DataType::F64: return kF64;
    default: return -1;
    }
}

size_t width(int code) {
    static const size_t w[] = {1, 1, 1, 4, 8, 4, 8};
    return w[code];
}

template <typename T>
T load(const void *p, int code, size_t k) {
    switch (code) {
    case kBool: return static_cast<T>(static_cast<const bool *>(p)[k]);
    case kI8: return static_cast<T>(static_cast<const int8_t *>(p)[k]);
    case kU8: return static_cast<T>(static_cast<const uint8_t *>(p)[k]);
    case kI32: return static_cast<T>(static_cast<const int32_t *>(p)[k]);
    case kI64: return static_cast<T>(static_cast<const int64_t *>(p)[k]);
    case kF32: return static_cast<T>(static_cast<const float *>(p)[k]);
    default: return static_cast<T>(static_cast<const double *>(p)[k]);
    }
}

template <typename D>
void convert(D *dst, const void *src, int src_code, size_t count) {
    for (size_t k = 0; k < count; k++)
        dst[k] = load<D>(src, src_code, k);
}

// ``count`` items from ``src`` (numpy's type) into ``dst`` (XLA's), cast as numpy's astype
// casts (a plain C++ conversion); a copy when the types agree.
void copy_items(void *dst, int dst_code, const void *src, int src_code, size_t count) {
    if (dst_code == src_code) {
        std::memcpy(dst, src, count * width(dst_code));
        return;
    }
    switch (dst_code) {
    case kBool: {
        bool *d = static_cast<bool *>(dst);
        for (size_t k = 0; k < count; k++)
            d[k] = load<double>(src, src_code, k) != 0.0;
        return;
    }
    case kI8: return convert(static_cast<int8_t *>(dst), src, src_code, count);
    case kU8: return convert(static_cast<uint8_t *>(dst), src, src_code, count);
    case kI32: return convert(static_cast<int32_t *>(dst), src, src_code, count);
    case kI64: return convert(static_cast<int64_t *>(dst), src, src_code, count);
    case kF32: return convert(static_cast<float *>(dst), src, src_code, count);
    default: return convert(static_cast<double *>(dst), src, src_code, count);
    }
}

struct Driver {
    int64_t n = 0, batch = 0;
    int mode = kNextStep;
    int op_step = 0, op_reset = 1, op_step_reset = 2, idle = 0, pending = 1;
    // the pool's buffers
    int8_t *ops = nullptr;
    void *actions = nullptr;
    int act_code = kI64;
    int64_t act_items = 1;
    const double *act_low = nullptr, *act_high = nullptr;  // bounds per action item
    void *obs = nullptr, *final_obs = nullptr;
    int obs_code = kF32;
    int64_t obs_items = 1;
    double *reward = nullptr;
    int64_t reward_items = 1;
    bool *term = nullptr, *trunc = nullptr, *has_seed = nullptr;
    // the pool's state (Lifecycle, Books) and the driver's own
    bool *started = nullptr, *broken = nullptr, *ended = nullptr;
    int8_t *status = nullptr;
    int64_t *hdr = nullptr, *ring = nullptr, *ids = nullptr;
    // the engine: its C entry (start/collect, or run) or a Python run; its failed column;
    // a column that says when Python must work before ops run (``prepare``) and its limit
    envhive_batch_api *api = nullptr;
    bool *failed = nullptr;
    int32_t *watch = nullptr;
    int64_t limit = 0;
    PyObject *run_py = nullptr, *prepare_py = nullptr, *adopt_py = nullptr, *error_py = nullptr;
    PyObject *keep = nullptr;  // every object above and the arrays, alive until close
    std::string space, name;   // for messages
    std::vector<int64_t> out;
    std::vector<uint8_t> mark, resets;
    std::mutex lock;
};

std::vector<Driver *> &drivers() {
    static std::vector<Driver *> all;  // never freed: see the top of the file
    return all;
}

struct Gil {
    PyGILState_STATE state;
    Gil() : state(PyGILState_Ensure()) {}
    ~Gil() { PyGILState_Release(state); }
};

// The Python exception just raised, as "Type: message" (cleared). Call with the GIL.
std::string python_error() {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    std::string text = "a Python error";
    if (value != nullptr) {
        PyObject *name = PyObject_GetAttrString(reinterpret_cast<PyObject *>(Py_TYPE(value)), "__name__");
        PyObject *str = PyObject_Str(value);
        const char *n = name != nullptr ? PyUnicode_AsUTF8(name) : nullptr;
        const char *s = str != nullptr ? PyUnicode_AsUTF8(str) : nullptr;
        text = std::string(n != nullptr ? n : "Exception") + ": " + (s != nullptr ? s : "");
        Py_XDECREF(name);
        Py_XDECREF(str);
    }
    PyErr_Clear();
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return text;
}

// fn(k) under the GIL; "" or the error's text.
std::string call_python(PyObject *fn, int64_t k) {
    Gil gil;
    PyObject *r = PyObject_CallFunction(fn, "L", static_cast<long long>(k));
    if (r == nullptr)
        return python_error();
    Py_DECREF(r);
    return "";
}

ffi::Error fail(const Driver *d, const std::string &what) {
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition, d->name + ": " + what);
}

ffi::Error bad_input(const Driver *d, const std::string &what) {
    return ffi::Error::InvalidArgument(d->name + ": " + what);
}

// Python used the pool since the last call: it hands over what it left in flight.
ffi::Error adopt(Driver *d) {
    if (d->hdr[kClosed])
        return fail(d, "the pool is closed (ClosedError): make a new one with envhive.make() and call xla() on it");
    if (d->hdr[kPythonGen] == d->hdr[kSeenPython])
        return ffi::Error::Success();
    std::string err = call_python(d->adopt_py, 0);
    if (!err.empty())
        return fail(d, err);
    d->hdr[kSeenPython] = d->hdr[kPythonGen];
    return ffi::Error::Success();
}

// One finished op of env ``i``, booked as ``Lifecycle.finish`` books it, and queued for recv.
void finished(Driver *d, int64_t i) {
    int op = d->ops[i];
    if (op == d->op_reset) {
        d->started[i] = true;
        d->broken[i] = false;
    } else {
        d->hdr[kSteps] += 1;
    }
    if (d->mode != kSameStep)
        d->ended[i] = d->term[i] || d->trunc[i];
    d->ring[(d->hdr[kHead] + d->hdr[kCount]) % d->n] = i;
    d->hdr[kCount] += 1;
}

std::string env_error(Driver *d, int64_t i) {
    Gil gil;
    PyObject *r = PyObject_CallFunction(d->error_py, "L", static_cast<long long>(i));
    if (r == nullptr)
        return python_error();
    const char *s = PyUnicode_Check(r) ? PyUnicode_AsUTF8(r) : nullptr;
    std::string text = s != nullptr ? s : "the env raised";
    Py_DECREF(r);
    return text;
}

// The envs ``ids[0:k]`` came back from the engine (``out`` order): book them; an env whose op
// failed is marked broken and idle (as ``Books.absorb`` does) and its error returned.
ffi::Error came_back(Driver *d, const int64_t *got, int64_t k) {
    std::string first;
    for (int64_t j = 0; j < k; j++) {
        int64_t i = got[j];
        if (d->failed != nullptr && d->failed[i]) {
            d->broken[i] = true;
            d->status[i] = static_cast<int8_t>(d->idle);
            if (first.empty())
                first = "env " + std::to_string(i) + ": " + env_error(d, i);
            continue;
        }
        finished(d, i);
    }
    if (!first.empty())
        return fail(d, "EnvWorkerError: " + first + " (the env must be reset before it steps again)");
    return ffi::Error::Success();
}

ffi::Error run_ops(Driver *d, int64_t k) {
    const int64_t *ids = d->ids;
    if (d->watch != nullptr) {
        for (int64_t j = 0; j < k; j++)
            if (d->watch[ids[j]] >= d->limit) {
                std::string err = call_python(d->prepare_py, k);
                if (!err.empty())
                    return fail(d, err);
                break;
            }
    }
    envhive_batch_api *api = d->api;
    if (api != nullptr && api->start != nullptr) {  // runs beside the caller: recv collects
        if (api->start(api->handle, ids, k) != 0) {
            for (int64_t j = 0; j < k; j++)
                d->status[ids[j]] = static_cast<int8_t>(d->idle);
            return fail(d, api->last_error(api->handle));
        }
        d->hdr[kInCore] += k;
        return ffi::Error::Success();
    }
    if (api != nullptr) {  // a sync C entry: every op done on return
        int64_t got = api->run(api->handle, ids, k, d->out.data());
        if (got == -2 && d->prepare_py != nullptr) {  // Python's work first (nothing ran)
            std::string err = call_python(d->prepare_py, k);
            if (!err.empty())
                return fail(d, err);
            got = api->run(api->handle, ids, k, d->out.data());
        }
        if (got < 0) {
            for (int64_t j = 0; j < k; j++)
                d->status[ids[j]] = static_cast<int8_t>(d->idle);
            return fail(d, api->last_error != nullptr ? api->last_error(api->handle) : "the engine's run failed");
        }
        return came_back(d, d->out.data(), got);
    }
    // No C entry: the engine's own run, in Python (it marks failed envs broken and idle).
    std::string err = call_python(d->run_py, k);
    int64_t got = 0;
    for (int64_t j = 0; j < k; j++)
        if (d->status[ids[j]] == d->pending)
            d->out[got++] = ids[j];
    ffi::Error booked = came_back(d, d->out.data(), got);
    if (!err.empty())
        return fail(d, err);
    return booked;
}

std::string value_text(const void *src, int code, size_t k) {
    double v = load<double>(src, code, k);
    if (code == kF32 || code == kF64) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        return buf;
    }
    return std::to_string(static_cast<long long>(v));
}

// ``send``: the actions of envs ``env_id`` (checked, then planned and started); an env whose
// ``reset`` entry is set is reset instead (unseeded; its action is ignored): ``async_reset``.
ffi::Error send(Driver *d, const ffi::AnyBuffer &action, const ffi::AnyBuffer &env_id, const ffi::AnyBuffer *reset) {
    int act_code = code_of(action.element_type()), id_code = code_of(env_id.element_type());
    if (id_code != kI32 && id_code != kI64)
        return bad_input(d, "env_id: expected an integer array");
    if (act_code < 0)
        return bad_input(d, "actions: an element type envhive does not convert");
    int64_t k = static_cast<int64_t>(env_id.element_count());
    if (k < 1 || k > d->n)
        return bad_input(d, "env_id: expected 1 to " + std::to_string(d->n) + " env ids, got " + std::to_string(k));
    if (static_cast<int64_t>(action.element_count()) != k * d->act_items)
        return bad_input(d, "ActionError: expected " + std::to_string(k) + " actions of " +
                                std::to_string(d->act_items) + " item(s) each, got " +
                                std::to_string(action.element_count()) + " items; nothing was stepped");
    const void *src = action.untyped_data();
    const void *idp = env_id.untyped_data();
    int reset_code = reset != nullptr ? code_of(reset->element_type()) : kBool;
    if (reset != nullptr && (reset_code < 0 || static_cast<int64_t>(reset->element_count()) != k))
        return bad_input(d, "reset: expected one flag per env id");
    const void *rst = reset != nullptr ? reset->untyped_data() : nullptr;
    std::vector<uint8_t> &resets = d->resets;
    for (int64_t j = 0; j < k; j++)
        resets[j] = rst != nullptr && load<double>(rst, reset_code, static_cast<size_t>(j)) != 0.0;
    std::string error;
    for (int64_t j = 0; j < k && error.empty(); j++) {
        int64_t i = load<int64_t>(idp, id_code, static_cast<size_t>(j));
        if (i < 0 || i >= d->n) {
            error = "env_id: " + std::to_string(i) + " is outside [0, " + std::to_string(d->n) + ")";
            break;
        }
        d->ids[j] = i;
        if (d->mark[i])
            error = "env_id: env " + std::to_string(i) + " appears twice";
        else if (d->status[i] != d->idle)
            error = "PendingCallError: send: env " + std::to_string(i) + " is pending; recv() it before sending it again";
        else if (!d->started[i])
            error = "ResetNeededError: env " + std::to_string(i) + " has not been reset yet: call reset() (or async_reset()) first";
        // A reset takes any started env (async_reset's rule); a step, a steppable one.
        else if (!resets[j] && d->broken[i])
            error = "ResetNeededError: env " + std::to_string(i) + " raised during its last call: reset it before stepping it again";
        else if (!resets[j] && d->mode == kDisabled && d->ended[i])
            error = "ResetNeededError: env " + std::to_string(i) + " ended its episode and autoreset is disabled: reset it eagerly before stepping it";
        d->mark[i] = 1;
        for (int64_t q = 0; q < d->act_items && error.empty() && !resets[j]; q++) {
            size_t at = static_cast<size_t>(j * d->act_items + q);
            double v = load<double>(src, act_code, at);
            if (!(v >= d->act_low[q] && v <= d->act_high[q]))
                error = "ActionError: invalid actions (env " + std::to_string(i) + "): value " +
                        value_text(src, act_code, at) + " is outside " + d->space;
        }
    }
    for (int64_t j = 0; j < k; j++) {
        int64_t i = load<int64_t>(idp, id_code, static_cast<size_t>(j));
        if (i >= 0 && i < d->n)
            d->mark[i] = 0;
    }
    if (!error.empty())
        return bad_input(d, error + "; nothing was stepped");
    size_t row = static_cast<size_t>(d->act_items) * width(d->act_code);
    size_t in_row = static_cast<size_t>(d->act_items) * width(act_code);
    // Flagged resets go first, then the steps: what ``async_reset(flagged)`` then
    // ``send(the rest)`` do (the order envs come back in, when ops finish in call order).
    int64_t at = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (int64_t j = 0; j < k; j++) {
            if (resets[j] != pass)
                continue;
            int64_t i = load<int64_t>(idp, id_code, static_cast<size_t>(j));
            copy_items(static_cast<char *>(d->actions) + i * row, d->act_code,
                       static_cast<const char *>(src) + j * in_row, act_code, static_cast<size_t>(d->act_items));
            int op = pass ? d->op_reset
                     : d->mode == kSameStep ? d->op_step_reset
                     : (d->mode == kNextStep && d->ended[i]) ? d->op_reset : d->op_step;
            d->ops[i] = static_cast<int8_t>(op);
            if (op == d->op_reset)
                d->has_seed[i] = false;  // an autoreset takes no seed
            d->status[i] = static_cast<int8_t>(d->pending);
            d->ids[at++] = i;
        }
    return run_ops(d, k);
}

ffi::Error check_out(const Driver *d, const ffi::AnyBuffer &buf, int64_t count, const char *what) {
    if (code_of(buf.element_type()) < 0 || static_cast<int64_t>(buf.element_count()) != count)
        return fail(d, std::string("recv: the result buffer for ") + what + " has the wrong size or type");
    return ffi::Error::Success();
}

// ``recv``: the first ``batch`` envs to finish, their rows into ``rets[1:]``.
ffi::Error recv(Driver *d, ffi::RemainingRets &rets) {
    int64_t b = d->batch;
    envhive_batch_api *api = d->api;
    while (d->hdr[kCount] < b) {
        int64_t missing = b - d->hdr[kCount];
        if (api == nullptr || api->collect == nullptr || d->hdr[kInCore] < missing)
            return fail(d, "NothingPendingError: recv() returns batches of " + std::to_string(b) + " envs but only " +
                               std::to_string(d->hdr[kCount] + d->hdr[kInCore]) +
                               " are pending: send() actions (or async_reset()) first");
        int64_t got = api->collect(api->handle, missing, d->out.data());
        if (got < 0)
            return fail(d, api->last_error(api->handle));
        d->hdr[kInCore] -= got;
        ffi::Error e = came_back(d, d->out.data(), got);
        if (e.failure())
            return e;
    }
    size_t want = d->mode == kSameStep ? 8 : 6;
    if (rets.size() != want)
        return fail(d, "recv: expected " + std::to_string(want) + " results, got " + std::to_string(rets.size()));
    std::vector<ffi::AnyBuffer> outs;
    for (size_t r = 0; r < want; r++) {
        auto got = rets.get<ffi::AnyBuffer>(r);
        if (!got.has_value())
            return fail(d, "recv: a result buffer is missing");
        outs.push_back(**got);
    }
    const char *names[] = {"", "obs", "reward", "terminated", "truncated", "env_id", "final_obs", "_final_obs"};
    int64_t counts[] = {0, b * d->obs_items, b * d->reward_items, b, b, b, b * d->obs_items, b};
    for (size_t r = 1; r < want; r++) {
        ffi::Error e = check_out(d, outs[r], counts[r], names[r]);
        if (e.failure())
            return e;
    }
    int oc = code_of(outs[1].element_type()), rc = code_of(outs[2].element_type());
    int tc = code_of(outs[3].element_type()), uc = code_of(outs[4].element_type());
    int ic = code_of(outs[5].element_type());
    size_t obs_row = static_cast<size_t>(d->obs_items) * width(d->obs_code);
    size_t out_row = static_cast<size_t>(d->obs_items) * width(oc);
    size_t rew_row = static_cast<size_t>(d->reward_items);
    for (int64_t j = 0; j < b; j++) {
        int64_t i = d->ring[d->hdr[kHead]];
        d->hdr[kHead] = (d->hdr[kHead] + 1) % d->n;
        d->hdr[kCount] -= 1;
        d->status[i] = static_cast<int8_t>(d->idle);
        copy_items(static_cast<char *>(outs[1].untyped_data()) + j * out_row, oc,
                   static_cast<const char *>(d->obs) + i * obs_row, d->obs_code, static_cast<size_t>(d->obs_items));
        copy_items(static_cast<char *>(outs[2].untyped_data()) + j * rew_row * width(rc), rc,
                   d->reward + i * rew_row, kF64, rew_row);
        copy_items(static_cast<char *>(outs[3].untyped_data()) + j * width(tc), tc, d->term + i, kBool, 1);
        copy_items(static_cast<char *>(outs[4].untyped_data()) + j * width(uc), uc, d->trunc + i, kBool, 1);
        int64_t id = i;
        copy_items(static_cast<char *>(outs[5].untyped_data()) + j * width(ic), ic, &id, kI64, 1);
        if (want == 8) {
            bool has = d->term[i] || d->trunc[i];
            int fc = code_of(outs[6].element_type()), mc = code_of(outs[7].element_type());
            char *dst = static_cast<char *>(outs[6].untyped_data()) + j * out_row;
            if (has)
                copy_items(dst, fc, static_cast<const char *>(d->final_obs) + i * obs_row, d->obs_code,
                           static_cast<size_t>(d->obs_items));
            else
                std::memset(dst, 0, out_row);
            copy_items(static_cast<char *>(outs[7].untyped_data()) + j * width(mc), mc, &has, kBool, 1);
        }
    }
    return ffi::Error::Success();
}

Driver *driver_at(int64_t address) {
    return reinterpret_cast<Driver *>(static_cast<uintptr_t>(address));
}

// The handle result is the handle argument (aliased): copied only if XLA gave two buffers.
void pass_handle(ffi::RemainingArgs &args, ffi::RemainingRets &rets) {
    auto in = args.get<ffi::AnyBuffer>(0);
    auto out = rets.get<ffi::AnyBuffer>(0);
    if (in.has_value() && out.has_value() && (*in).untyped_data() != (**out).untyped_data())
        std::memcpy((**out).untyped_data(), (*in).untyped_data(), (*in).size_bytes());
}

enum Call : int { kSend = 0, kRecv = 1, kStep = 2 };

ffi::Error handle(int call, ffi::RemainingArgs args, ffi::RemainingRets rets, int64_t address) {
    Driver *d = driver_at(address);
    std::lock_guard<std::mutex> hold(d->lock);
    size_t want_args = call == kRecv ? 1 : 4;
    if (args.size() != want_args || rets.size() < 1)
        return fail(d, "expected " + std::to_string(want_args) + " arguments");
    pass_handle(args, rets);
    ffi::Error e = adopt(d);
    if (e.failure())
        return e;
    d->hdr[kDriverGen] += 1;
    if (call != kRecv) {
        auto action = args.get<ffi::AnyBuffer>(1);
        auto env_id = args.get<ffi::AnyBuffer>(2);
        auto reset = args.get<ffi::AnyBuffer>(3);
        if (!action.has_value() || !env_id.has_value() || !reset.has_value())
            return bad_input(d, "send: expected buffers for the actions, env ids and reset flags");
        ffi::AnyBuffer flags = *reset;
        e = send(d, *action, *env_id, &flags);
        if (e.failure() || call == kSend)
            return e;
    }
    return recv(d, rets);
}

ffi::Error send_impl(ffi::RemainingArgs args, ffi::RemainingRets rets, int64_t driver) {
    return handle(kSend, args, rets, driver);
}
ffi::Error recv_impl(ffi::RemainingArgs args, ffi::RemainingRets rets, int64_t driver) {
    return handle(kRecv, args, rets, driver);
}
ffi::Error step_impl(ffi::RemainingArgs args, ffi::RemainingRets rets, int64_t driver) {
    return handle(kStep, args, rets, driver);
}

XLA_FFI_DEFINE_HANDLER(send_handler, send_impl,
                       ffi::Ffi::Bind().RemainingArgs().RemainingRets().Attr<int64_t>("driver"));
XLA_FFI_DEFINE_HANDLER(recv_handler, recv_impl,
                       ffi::Ffi::Bind().RemainingArgs().RemainingRets().Attr<int64_t>("driver"));
XLA_FFI_DEFINE_HANDLER(step_handler, step_impl,
                       ffi::Ffi::Bind().RemainingArgs().RemainingRets().Attr<int64_t>("driver"));

// ---------------------------------------------------------------- the Python module
bool get_int(PyObject *spec, const char *key, int64_t *out) {
    PyObject *v = PyDict_GetItemString(spec, key);  // borrowed
    if (v == nullptr) {
        PyErr_Format(PyExc_KeyError, "new_driver: %s missing", key);
        return false;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred())
        return false;
    *out = x;
    return true;
}

template <typename T>
bool get_ptr(PyObject *spec, const char *key, T **out, bool optional = false) {
    PyObject *v = PyDict_GetItemString(spec, key);
    if (v == nullptr || v == Py_None) {
        if (optional) {
            *out = nullptr;
            return true;
        }
        PyErr_Format(PyExc_KeyError, "new_driver: %s missing", key);
        return false;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == static_cast<unsigned long long>(-1) && PyErr_Occurred())
        return false;
    *out = reinterpret_cast<T *>(static_cast<uintptr_t>(x));
    return true;
}

bool get_obj(PyObject *spec, const char *key, PyObject **out) {
    PyObject *v = PyDict_GetItemString(spec, key);
    *out = (v == nullptr || v == Py_None) ? nullptr : v;  // borrowed: ``keep`` holds them
    return true;
}

bool get_str(PyObject *spec, const char *key, std::string *out) {
    PyObject *v = PyDict_GetItemString(spec, key);
    const char *s = v != nullptr ? PyUnicode_AsUTF8(v) : nullptr;
    if (s == nullptr) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_KeyError, "new_driver: %s missing", key);
        return false;
    }
    *out = s;
    return true;
}

// new_driver(spec: dict) -> int: a driver over the addresses and objects in ``spec``
// (``envhive.jax._lease.Lease`` writes it; ``spec["keep"]`` keeps everything alive).
PyObject *new_driver(PyObject *, PyObject *spec) {
    if (!PyDict_Check(spec))
        return PyErr_SetString(PyExc_TypeError, "new_driver: expected a dict"), nullptr;
    Driver *d = new Driver();
    int64_t mode = 0, act_code = 0, obs_code = 0, ops[5];
    PyObject *capsule = nullptr;
    bool ok = get_int(spec, "num_envs", &d->n) && get_int(spec, "batch_size", &d->batch) &&
              get_int(spec, "mode", &mode) && get_int(spec, "op_step", &ops[0]) &&
              get_int(spec, "op_reset", &ops[1]) && get_int(spec, "op_step_reset", &ops[2]) &&
              get_int(spec, "idle", &ops[3]) && get_int(spec, "pending", &ops[4]) &&
              get_int(spec, "act_code", &act_code) && get_int(spec, "act_items", &d->act_items) &&
              get_int(spec, "obs_code", &obs_code) && get_int(spec, "obs_items", &d->obs_items) &&
              get_int(spec, "reward_items", &d->reward_items) && get_int(spec, "limit", &d->limit) &&
              get_ptr(spec, "ops", &d->ops) && get_ptr(spec, "actions", &d->actions) &&
              get_ptr(spec, "act_low", &d->act_low) && get_ptr(spec, "act_high", &d->act_high) &&
              get_ptr(spec, "obs", &d->obs) && get_ptr(spec, "final_obs", &d->final_obs, true) &&
              get_ptr(spec, "reward", &d->reward) && get_ptr(spec, "terminated", &d->term) &&
              get_ptr(spec, "truncated", &d->trunc) && get_ptr(spec, "has_seed", &d->has_seed) &&
              get_ptr(spec, "started", &d->started) && get_ptr(spec, "broken", &d->broken) &&
              get_ptr(spec, "ended", &d->ended) && get_ptr(spec, "status", &d->status) &&
              get_ptr(spec, "header", &d->hdr) && get_ptr(spec, "ring", &d->ring) &&
              get_ptr(spec, "ids", &d->ids) && get_ptr(spec, "failed", &d->failed, true) &&
              get_ptr(spec, "watch", &d->watch, true) && get_obj(spec, "run", &d->run_py) &&
              get_obj(spec, "prepare", &d->prepare_py) && get_obj(spec, "adopt", &d->adopt_py) &&
              get_obj(spec, "error", &d->error_py) && get_obj(spec, "capsule", &capsule) &&
              get_str(spec, "space", &d->space) && get_str(spec, "name", &d->name);
    if (ok && capsule != nullptr) {
        d->api = static_cast<envhive_batch_api *>(PyCapsule_GetPointer(capsule, ENVHIVE_BATCH_API_NAME));
        ok = d->api != nullptr;
        if (ok && (d->api->version != ENVHIVE_BATCH_API_VERSION || d->api->size < sizeof(envhive_batch_api) ||
                   d->api->num_envs != d->n)) {
            PyErr_SetString(PyExc_ValueError, "new_driver: the engine's C entry does not match this build or this pool");
            ok = false;
        }
    }
    if (ok && (d->adopt_py == nullptr || d->error_py == nullptr || (d->api == nullptr && d->run_py == nullptr) ||
               (d->watch != nullptr && d->prepare_py == nullptr) || d->n < 1 || d->batch < 1 || d->batch > d->n ||
               act_code < kBool || act_code > kF64 || obs_code < kBool || obs_code > kF64)) {
        PyErr_SetString(PyExc_ValueError, "new_driver: an inconsistent spec");
        ok = false;
    }
    if (!ok) {
        delete d;
        return nullptr;
    }
    d->mode = static_cast<int>(mode);
    d->act_code = static_cast<int>(act_code);
    d->obs_code = static_cast<int>(obs_code);
    d->op_step = static_cast<int>(ops[0]);
    d->op_reset = static_cast<int>(ops[1]);
    d->op_step_reset = static_cast<int>(ops[2]);
    d->idle = static_cast<int>(ops[3]);
    d->pending = static_cast<int>(ops[4]);
    d->out.assign(static_cast<size_t>(d->n), 0);
    d->mark.assign(static_cast<size_t>(d->n), 0);
    d->resets.assign(static_cast<size_t>(d->n), 0);
    d->keep = spec;
    Py_INCREF(spec);
    drivers().push_back(d);
    return PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(d)));
}

// close_driver(address): later calls fail ("closed"); every reference is dropped. Waits for a
// handler call in progress (without the GIL, which that call may need).
PyObject *close_driver(PyObject *, PyObject *arg) {
    unsigned long long address = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return nullptr;
    Driver *d = nullptr;
    for (Driver *x : drivers())
        if (reinterpret_cast<uintptr_t>(x) == address)
            d = x;
    if (d == nullptr)
        return PyErr_SetString(PyExc_ValueError, "close_driver: no such driver"), nullptr;
    PyObject *keep = nullptr;
    Py_BEGIN_ALLOW_THREADS
    d->lock.lock();
    Py_END_ALLOW_THREADS
    if (d->hdr != nullptr)
        d->hdr[kClosed] = 1;
    keep = d->keep;
    d->keep = nullptr;
    // The header lives in ``keep``: from here on the driver reads its own closed mark.
    static int64_t closed_header[kHeaderSize] = {0, 0, 0, 0, 0, 0, 0, 1};
    d->hdr = closed_header;
    d->api = nullptr;
    d->run_py = d->prepare_py = d->adopt_py = d->error_py = nullptr;
    d->lock.unlock();
    Py_XDECREF(keep);
    Py_RETURN_NONE;
}

PyObject *capsule_of(XLA_FFI_Handler *fn) {
    return PyCapsule_New(reinterpret_cast<void *>(fn), nullptr, nullptr);
}

PyObject *handlers(PyObject *, PyObject *) {
    return Py_BuildValue("{sNsNsN}", "send", capsule_of(send_handler), "recv", capsule_of(recv_handler), "step",
                         capsule_of(step_handler));
}

PyMethodDef methods[] = {
    {"new_driver", new_driver, METH_O, "A driver over a pool (a dict of addresses and objects)."},
    {"close_driver", close_driver, METH_O, "Close a driver: its calls fail from now on."},
    {"handlers", handlers, METH_NOARGS, "The FFI handlers, as PyCapsules: send, recv, step."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "envhive.jax._xla", "envhive's XLA FFI handlers.", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__xla() {
    PyObject *m = PyModule_Create(&module);
    if (m != nullptr) {
        PyModule_AddIntConstant(m, "HEADER_SIZE", kHeaderSize);
        PyModule_AddIntConstant(m, "FFI_API_MAJOR", XLA_FFI_API_MAJOR);
        PyModule_AddIntConstant(m, "FFI_API_MINOR", XLA_FFI_API_MINOR);
    }
    return m;
}
