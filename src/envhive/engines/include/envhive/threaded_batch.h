/* envhive's threaded batch core: a batch of one family's envs, each env's op run whole by
 * whichever thread is free, written once for every C++ family.
 *
 * A family supplies a *game* (one env: build, reset, step, its observation bytes, its info
 * fields and configuration; see "The Game contract" below) and gets everything else from
 * ThreadedBatch<Game>:
 *
 * - the op rule of ``envhive._ops`` (STEP, RESET, STEP_RESET: which obs goes where, the
 *   terminal obs kept in ``final_obs``, which info is the step's and which the reset's), with
 *   the op codes and the reset reward passed in from Python, so the rule has one source;
 * - the work: ``start(ids)`` queues one job per env on a ring (RESET ops first: a reset costs
 *   many steps, and run first it cannot leave the other threads idle at a batch's end) and
 *   returns; ``num_threads`` threads take jobs first come, first served (one atomic add per
 *   claim, no lock); finished envs go to a ring of completions in the order they finish;
 *   ``collect(k)`` takes them until ``k`` are in, the calling thread taking jobs itself
 *   while it waits (its core would idle otherwise), except RESETs in an async wait (they
 *   would hold back the caller's next send);
 * - ``want``: the caller asks for one wake-up once enough envs are in, instead of one per env;
 * - ``discard``: an epoch bump; queued jobs and completions of older epochs are dropped, and an
 *   op still running sees the epoch change at its next check (``Runner::check``) and stops;
 *   ops of one env never overlap (``Slot::busy``), so ``wait_idle`` after a discard waits
 *   only for the few ops still unwinding;
 * - ``stop``: ``close`` (the destructor) makes every running op stop at its next check, then
 *   joins the threads, so a close never waits out a long op;
 * - fork: a child forked from the process that built the batch has its memory but none of its
 *   threads; there the caller runs every job and nothing is joined;
 * - the caller's signal check: a callback the CPython glue installs (``Runner::poll``), run
 *   from the caller's waits and from the long loops of ops the caller runs, so Ctrl-C reaches
 *   Python within a fraction of a second whatever the op.
 *
 * No Python object is touched here (the CPython glue is envhive/batch_module.h; foreign
 * callers use envhive/batch_api.h), so the core also builds into plain C++ programs.
 *
 * The Game contract (a struct; see envhive/testing/counter/_counter.h for a small one):
 *
 *     using Action = int64_t;                        // one env's action (a POD)
 *     struct Env { ... };                            // one env's state: default-constructed,
 *                                                    // built in place, never moved
 *     struct Scratch { ... };                        // a runner's scratch (one per thread)
 *     static constexpr InfoField kInfos[] = {...};   // the info fields (step and reset alike)
 *     static constexpr ColumnSpec kColumns[] = {...};// the family's own columns (may be empty:
 *                                                    // declare kNumColumns = 0 then)
 *     bool configure(Source &config);                // false: config.fail() was called
 *     size_t obs_bytes() const;                      // one observation's bytes
 *     void build(Env &env, int64_t i, int64_t seed); // may throw
 *     void built(Env &first);                        // after every env was built (e.g. load
 *                                                    // env 0 to learn the action set); may throw
 *     void init_scratch(Scratch &s) const;
 *     void reset(Env &, Context<Game> &, bool fresh);// fresh: the env's first reset, or the one
 *                                                    // after an op that did not finish
 *     double step(Env &, Context<Game> &, const Action &, bool &terminated, bool &truncated);
 *     void observe(const Env &, uint8_t *dst) const; // the observation, obs_bytes() of it
 *     void info(const Env &, const InfoOut &out) const; // out.put<T>(k, value) per field k
 *                                                    // (out.put_bytes for an array field)
 *     void facts(Facts &out) const;                  // key -> int64 for Python (action count...)
 *
 * Optional (the glue's ``render(i, out)`` raises NotImplementedError without it):
 *
 *     size_t render_bytes() const;                   // one env's rendered image's bytes
 *     void render(Env &, uint8_t *dst);              // the image (between ops only; may throw)
 *
 * Long loops in reset or step call ``ctx.check()`` (it throws Stopped when the op must end);
 * an action the game cannot take throws ActionOutside (reported as envhive's ActionError).
 */
#ifndef ENVHIVE_THREADED_BATCH_H
#define ENVHIVE_THREADED_BATCH_H

#include <semaphore.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace envhive {

// ---------------------------------------------------------------- what a family declares
// What a family reads its configuration from (the CPython glue implements it over a dict).
// Each ``get`` returns false, with the reason kept by the source, when the key is missing or
// its value does not fit.
class Source {
public:
    virtual ~Source() = default;
    virtual bool get(const char *key, int64_t &value) = 0;
    virtual bool get(const char *key, double &value) = 0;
    virtual bool get(const char *key, bool &value) = 0;
    virtual bool get(const char *key, std::vector<int64_t> &value) = 0;
    virtual bool get(const char *key, std::vector<float> &value) = 0;
    virtual bool get(const char *key, std::string &value) = 0;
    // Record why the configuration is refused; returns false (``return config.fail(...)``).
    virtual bool fail(const std::string &why) = 0;

    bool get(const char *key, int &value) {
        int64_t v = 0;
        if (!get(key, v))
            return false;
        if (v < INT32_MIN || v > INT32_MAX)
            return fail(std::string(key) + ": " + std::to_string(v) + " does not fit an int32");
        value = (int)v;
        return true;
    }
};

// An info field: its name, numpy dtype and bytes per env (the same fields for steps and
// resets): one item of the dtype, or an array of them (e.g. Atari's 128 bytes of RAM, a
// ``(num_envs, 128)`` column in Python).
struct InfoField {
    const char *name;
    const char *dtype;
    size_t size;
};

// A column of the family's own (e.g. Atari's no-op counts drawn ahead in Python): its name,
// item size, the least items per env, whether ops write it.
struct ColumnSpec {
    const char *name;
    size_t item;
    size_t per_env;
    bool writable;
};

using Facts = std::vector<std::pair<std::string, int64_t>>;

// An action the game cannot take (the pool checks actions first: only one written past its
// check gets here). Reported as envhive's ActionError.
struct ActionOutside : std::out_of_range {
    using std::out_of_range::out_of_range;
};

// Thrown by Runner::check when the op must end now: discarded, the batch closing, or Ctrl-C
// in the caller. The env then needs a fresh reset.
struct Stopped : std::exception {
    const char *what() const noexcept override { return "the op was stopped (discarded, interrupted or closed)"; }
};

// ---------------------------------------------------------------- the columns ops use
enum InfoSlot { kStepInfo = 0, kResetInfo = 1, kReported = 2 };

struct Columns {
    // The pool's buffers.
    uint8_t *obs = nullptr, *final_obs = nullptr;  // final_obs: null when the pool has none
    double *reward = nullptr;
    uint8_t *terminated = nullptr, *truncated = nullptr;
    const int8_t *ops = nullptr;
    const uint8_t *actions = nullptr;  // Game::Action items
    // The Python side's: a seeded reset's seed, what each op ended with.
    const int64_t *reseed = nullptr;
    uint8_t *has_reseed = nullptr;
    uint8_t *reset_after = nullptr, *failed = nullptr;
    // Info columns: [slot][field] (step_, reset_, and as an op reports them: the reset's after
    // a reset, else the step's).
    std::vector<uint8_t *> info[3];
    // The family's own columns (ColumnSpec order), and their lengths in items.
    std::vector<void *> family;
    std::vector<size_t> family_items;
};

// Where a game writes one env's info fields (Game::info: out.put<T>(k, value), T the field's
// type).
class InfoOut {
public:
    InfoOut(uint8_t *const *cols, int64_t i) : cols_(cols), i_(i) {}
    template <class T>
    void put(size_t k, T value) const { memcpy(cols_[k] + (size_t)i_ * sizeof(T), &value, sizeof(T)); }
    // An array field: ``size`` bytes (the field's InfoField::size) from ``src``.
    void put_bytes(size_t k, const void *src, size_t size) const { memcpy(cols_[k] + (size_t)i_ * size, src, size); }

private:
    uint8_t *const *cols_;
    int64_t i_;
};

// ---------------------------------------------------------------- who runs an op
// A thread taking jobs (a C++ thread, or the caller). ``check`` ends the op in hand when the
// batch closes, its epoch moved on (discarded), or the caller's poll says Ctrl-C came.
struct Runner {
    const std::atomic<bool> *stop = nullptr;
    const std::atomic<uint32_t> *epoch_now = nullptr;
    uint32_t epoch = 0;  // the job's epoch
    // The caller's signal check: nonzero when Ctrl-C came (``force``: look now; else it may
    // skip looking when it looked a moment ago).
    int (*poll)(void *, int force) = nullptr;
    void *poll_ctx = nullptr;
    bool interrupted = false;

    bool stopped() {
        if (stop->load(std::memory_order_relaxed) || epoch_now->load(std::memory_order_relaxed) != epoch)
            return true;
        if (poll != nullptr && poll(poll_ctx, 0)) {
            interrupted = true;
            return true;
        }
        return false;
    }
    void check() {
        if (stopped())
            throw Stopped();
    }
};

// What an op of env ``i`` sees besides its env: the seed of a seeded reset, the family's
// columns, its runner's scratch, and the stop check for long loops.
template <class Game>
struct Context {
    int64_t i;
    const int64_t *seed;  // a seeded RESET's seed, else null
    const Columns &col;
    Runner &runner;
    typename Game::Scratch &scratch;

    void check() { runner.check(); }
    template <class T>
    T *column(size_t k) const { return static_cast<T *>(col.family[k]); }
    size_t column_items(size_t k) const { return col.family_items[k]; }
};

// The op codes of envhive._ops and the reset reward (passed in from Python).
struct OpCodes {
    int step = 0, reset = 1, step_reset = 2;
    double reset_reward = 0.0;
};

constexpr int64_t kNoWant = INT64_MAX;

inline void make_deadline(timespec *ts, long ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (ms % 1000) * 1000000L;
    ts->tv_sec += ms / 1000 + ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

// ---------------------------------------------------------------- the batch
template <class Game>
class ThreadedBatch {
public:
    using Env = typename Game::Env;
    using Action = typename Game::Action;
    using Scratch = typename Game::Scratch;

    struct Slot {
        Env env;
        std::atomic<int> busy{0};
        bool started = false;  // reset at least once, and its last op finished
        std::string error, error_kind;  // the last op's error: message, Python's class name
    };

    struct CompletionSlot {
        std::atomic<uint64_t> seq{0};
        int64_t value = 0;
    };

    Game game;
    OpCodes ops;
    int64_t n = 0;
    Columns col;
    bool bound = false;
    Scratch caller_scratch;  // the calling thread's (the glue and foreign callers use it)

    ThreadedBatch() = default;
    ThreadedBatch(const ThreadedBatch &) = delete;
    ThreadedBatch &operator=(const ThreadedBatch &) = delete;

    size_t obs_bytes() const { return game.obs_bytes(); }
    Slot &slot(int64_t i) { return slots_[i]; }
    const Slot &slot(int64_t i) const { return slots_[i]; }
    size_t num_threads() const { return threads_.size(); }
    int64_t outstanding() const { return outstanding_; }
    // Every job queued so far has run (or was skipped as discarded).
    bool idle() const { return finished_.load(std::memory_order_acquire) == job_tail_.load(std::memory_order_acquire); }

    // Build ``seeds.size()`` envs (env i from seed i) and start ``k`` threads; an error
    // message, or "" (the destructor frees whatever was built).
    std::string build(const std::vector<int64_t> &seeds, int k) {
        n = (int64_t)seeds.size();
        try {
            slots_.reset(new Slot[(size_t)n]);
            jobs_ = std::vector<std::atomic<int64_t>>(4 * (size_t)n + 64);
            done_ = std::vector<CompletionSlot>(2 * (size_t)n + 64);
            if (sem_init(&work_sem_, 0, 0) != 0 || sem_init(&done_sem_, 0, 0) != 0)
                return std::string("sem_init: ") + strerror(errno);
            sems_ = true;
            for (int64_t i = 0; i < n; i++)
                game.build(slots_[i].env, i, seeds[(size_t)i]);
            if (n > 0)
                game.built(slots_[0].env);
            game.init_scratch(caller_scratch);
            owner_ = getpid();
            for (int t = 0; t < k; t++)
                threads_.emplace_back(&ThreadedBatch::worker, this);
        } catch (const std::bad_alloc &) {
            return "out of memory";
        } catch (const std::exception &e) {
            return std::string("building the envs: ") + e.what();
        }
        return "";
    }

    // A runner for the calling thread (stop checks against this batch; no signal poll).
    Runner caller_runner() {
        Runner r;
        r.stop = &stop_;
        r.epoch_now = &epoch_;
        return r;
    }

    // ------------------------------------------------------------ the op rule (envhive._ops)
    void perform(int64_t i, Runner &runner, Scratch &scratch) {
        Slot &s = slots_[i];
        const int op = col.ops[i];
        col.failed[i] = 0;
        col.reset_after[i] = 0;
        Context<Game> ctx{i, nullptr, col, runner, scratch};
        const size_t row = game.obs_bytes();
        try {
            if (op == ops.reset) {
                const bool seeded = col.has_reseed[i] != 0;
                ctx.seed = seeded ? &col.reseed[i] : nullptr;
                const bool fresh = !s.started;
                s.started = false;  // until the reset is through
                game.reset(s.env, ctx, fresh);
                if (seeded)
                    col.has_reseed[i] = 0;
                s.started = true;
                game.observe(s.env, col.obs + (size_t)i * row);
                write_info(kResetInfo, i);
                copy_info(kResetInfo, kReported, i);
                col.reward[i] = ops.reset_reward;
                col.terminated[i] = 0;
                col.truncated[i] = 0;
                return;
            }
            if (op != ops.step && op != ops.step_reset)
                throw std::runtime_error("unknown op " + std::to_string(op));
            if (!s.started)
                throw std::runtime_error("a step before the env's first reset");
            Action a;
            memcpy(&a, col.actions + (size_t)i * sizeof(Action), sizeof(Action));
            bool term = false, trunc = false;
            s.started = false;  // until the step is through
            const double reward = game.step(s.env, ctx, a, term, trunc);
            s.started = true;
            col.reward[i] = reward;
            col.terminated[i] = term;
            col.truncated[i] = trunc;
            write_info(kStepInfo, i);
            if (op == ops.step_reset && (term || trunc)) {  // _ops.resets_in_op
                if (col.final_obs != nullptr)
                    game.observe(s.env, col.final_obs + (size_t)i * row);
                s.started = false;
                game.reset(s.env, ctx, false);
                s.started = true;
                game.observe(s.env, col.obs + (size_t)i * row);
                write_info(kResetInfo, i);
                copy_info(kResetInfo, kReported, i);
                col.reset_after[i] = 1;
            } else {
                game.observe(s.env, col.obs + (size_t)i * row);
                copy_info(kStepInfo, kReported, i);
            }
        } catch (const ActionOutside &e) {
            s.started = true;  // refused before anything ran
            fail(s, i, "ActionError", e.what());
        } catch (const Stopped &e) {
            fail(s, i, "Interrupted", e.what());
        } catch (const std::bad_alloc &) {
            fail(s, i, "MemoryError", "out of memory");
        } catch (const std::exception &e) {
            fail(s, i, "RuntimeError", e.what());
        } catch (...) {
            fail(s, i, "RuntimeError", "an unknown C++ exception");
        }
    }

    // ------------------------------------------------------------ the caller's side
    // Queue the ops of ``ids``; false when the job ring is full (ops of discarded epochs
    // still queued: only repeated interrupts get there).
    bool start(const int64_t *ids, int64_t k) {
        const uint64_t cap = jobs_.size();
        uint64_t tail = job_tail_.load(std::memory_order_relaxed);
        if (tail + (uint64_t)k - job_read_.load(std::memory_order_acquire) > cap)
            return false;
        const int64_t e = (int64_t)epoch_.load(std::memory_order_relaxed) << 32;
        for (int pass = 0; pass < 2; pass++)  // RESET ops first, in id order otherwise
            for (int64_t j = 0; j < k; j++) {
                const int64_t i = ids[j];
                if ((col.ops[i] == ops.reset) == (pass == 0))
                    jobs_[tail++ % cap].store(i | e, std::memory_order_relaxed);
            }
        job_tail_.store(tail, std::memory_order_release);
        outstanding_ += k;
        for (int64_t j = 0; j < k; j++)
            sem_post(&work_sem_);
        return true;
    }

    // Finished envs of this epoch into ``out`` from ``got``; how many there are now.
    int64_t drain(int64_t *out, int64_t got) {
        const uint32_t e = epoch_.load(std::memory_order_relaxed);
        for (;;) {
            CompletionSlot &s = done_[done_head_ % done_.size()];
            if (s.seq.load(std::memory_order_acquire) != done_head_ + 1)
                return got;
            const int64_t job = s.value;
            done_head_++;
            done_read_.store(done_head_, std::memory_order_release);
            if ((uint32_t)(job >> 32) == e) {
                out[got++] = job & 0xffffffffLL;
                outstanding_--;
            }
        }
    }

    // Wait until ``min_count`` envs finished or none is outstanding, the caller running jobs
    // meanwhile (``helps``); how many were taken into ``out``. Returns early, with
    // ``runner.interrupted`` set, when the runner's poll reports Ctrl-C. Call it with the GIL
    // released.
    int64_t collect(int64_t min_count, int64_t *out, Runner &runner, Scratch &scratch) {
        int64_t got = drain(out, 0);
        const bool all = got + outstanding_ <= min_count;
        while (got < min_count && outstanding_ > 0 && !runner.interrupted) {
            if ((threads_.empty() || helps(all) || forked()) && sem_trywait(&work_sem_) == 0) {
                run_job(claim(), runner, scratch);
                got = drain(out, got);
                continue;
            }
            // Ask for a post once enough envs are in, then look again: one may have finished
            // before the request was visible (run_job reads ``want`` after publishing).
            want_.store((int64_t)done_head_ + (min_count - got), std::memory_order_seq_cst);
            got = drain(out, got);
            if (got >= min_count || outstanding_ == 0)
                break;
            timespec ts;
            make_deadline(&ts, 50);
            sem_timedwait(&done_sem_, &ts);  // EINTR (a signal) or timeout: poll below
            got = drain(out, got);
            if (runner.poll != nullptr && runner.poll(runner.poll_ctx, 1))
                runner.interrupted = true;
        }
        want_.store(kNoWant, std::memory_order_seq_cst);
        return got;
    }

    // Whether any env of ``ids`` (null: 0..k-1) still runs an op (a discarded one).
    bool any_busy(const int64_t *ids, int64_t k) const {
        for (int64_t j = 0; j < k; j++)
            if (slots_[ids ? ids[j] : j].busy.load(std::memory_order_acquire))
                return true;
        return false;
    }

    void discard() {
        epoch_.fetch_add(1, std::memory_order_acq_rel);
        outstanding_ = 0;
    }

    // A child forked from the process that built the batch has its memory but none of its
    // threads: there the caller runs every job, and close leaves the thread objects alone.
    bool forked() const { return getpid() != owner_; }

    // Stop every running op at its next check, and join the threads.
    void shutdown() {
        stop_.store(true, std::memory_order_release);
        if (!threads_.empty() && forked()) {
            new std::vector<std::thread>(std::move(threads_));  // no thread to join or detach here
            threads_.clear();
        }
        if (!threads_.empty()) {
            for (size_t t = 0; t < threads_.size(); t++)
                sem_post(&work_sem_);
            for (auto &t : threads_)
                t.join();
            threads_.clear();
        }
    }

    ~ThreadedBatch() {
        shutdown();
        slots_.reset();  // the envs' destructors (the games' resources)
        if (sems_) {
            sem_destroy(&work_sem_);
            sem_destroy(&done_sem_);
        }
    }

private:
    std::unique_ptr<Slot[]> slots_;
    // Jobs: env | epoch << 32, claimed by whoever took a token of work_sem_.
    std::vector<std::atomic<int64_t>> jobs_;
    std::atomic<uint64_t> job_head_{0}, job_tail_{0}, job_read_{0};
    std::atomic<uint64_t> finished_{0};  // jobs run to the end or skipped
    // Finished envs (env | epoch << 32), in the order they finish.
    std::vector<CompletionSlot> done_;
    std::atomic<uint64_t> done_tail_{0};
    uint64_t done_head_ = 0;              // the caller's
    std::atomic<uint64_t> done_read_{0};  // done_head_ as the producers see it
    std::atomic<int64_t> want_{kNoWant};
    std::atomic<uint32_t> epoch_{0};
    int64_t outstanding_ = 0;  // started ops of this epoch not collected (the caller's)
    sem_t work_sem_, done_sem_;
    bool sems_ = false;
    std::atomic<bool> stop_{false};
    std::vector<std::thread> threads_;
    pid_t owner_ = 0;

    void fail(Slot &s, int64_t i, const char *kind, const char *what) {
        s.error_kind = kind;
        s.error = what;
        col.failed[i] = 1;
    }

    void write_info(int slot, int64_t i) { game.info(slots_[i].env, InfoOut(col.info[slot].data(), i)); }

    void copy_info(int from, int to, int64_t i) {
        for (size_t k = 0; k < Game::kNumInfos; k++) {
            const size_t size = Game::kInfos[k].size;
            memcpy(col.info[to][k] + (size_t)i * size, col.info[from][k] + (size_t)i * size, size);
        }
    }

    // Run job ``job`` (env | epoch << 32) unless it belongs to an older epoch.
    void run_job(int64_t job, Runner &runner, Scratch &scratch) {
        const int64_t i = job & 0xffffffffLL;
        const uint32_t e = (uint32_t)(job >> 32);
        Slot &s = slots_[i];
        // An op of this env discarded while it ran may still be unwinding: ops of one env
        // never overlap (the next one waits here). The env is marked busy before the epoch
        // is read, so that start() after a discard can wait for the env's old op
        // (``any_busy``) knowing that no thread will begin it.
        while (s.busy.exchange(1, std::memory_order_acq_rel) && !forked())
            std::this_thread::yield();  // (in a forked child, a busy mark is the parent's thread's)
        if (e != epoch_.load(std::memory_order_acquire)) {
            s.busy.store(0, std::memory_order_release);
            finished_.fetch_add(1, std::memory_order_release);
            return;  // discarded
        }
        runner.epoch = e;
        perform(i, runner, scratch);
        s.busy.store(0, std::memory_order_release);
        const uint64_t pos = done_tail_.fetch_add(1, std::memory_order_acq_rel);
        // The ring holds every live completion (one op per env in flight); only completions
        // of discarded ops can pile up, and only until the caller's next collect.
        while (pos >= done_read_.load(std::memory_order_acquire) + done_.size() &&
               !stop_.load(std::memory_order_relaxed))
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        CompletionSlot &c = done_[pos % done_.size()];
        c.value = job;
        c.seq.store(pos + 1, std::memory_order_release);
        finished_.fetch_add(1, std::memory_order_release);
        int64_t w = want_.load(std::memory_order_seq_cst);
        if ((int64_t)(pos + 1) >= w && want_.compare_exchange_strong(w, kNoWant))
            sem_post(&done_sem_);
    }

    // Take one token's job off the ring (a token was taken: the job is there).
    int64_t claim() {
        const uint64_t h = job_head_.fetch_add(1, std::memory_order_acq_rel);
        const int64_t job = jobs_[h % jobs_.size()].load(std::memory_order_acquire);
        job_read_.fetch_add(1, std::memory_order_release);
        return job;
    }

    // Whether the waiting caller takes the next queued job itself. When it waits for every op
    // in flight (a sync call), always: it has nothing else to do until they are all done.
    // When it waits for some (an async recv), not a RESET: a reset costs many steps, and the
    // caller would hold back its next send that long while the threads run out of work.
    bool helps(bool all) const {
        if (all)
            return true;
        const uint64_t h = job_head_.load(std::memory_order_acquire);
        if (h >= job_tail_.load(std::memory_order_acquire))
            return false;
        const int64_t i = jobs_[h % jobs_.size()].load(std::memory_order_relaxed) & 0xffffffffLL;
        return col.ops[i] != ops.reset;
    }

    void worker() {
        Scratch scratch;
        game.init_scratch(scratch);
        Runner runner;
        runner.stop = &stop_;
        runner.epoch_now = &epoch_;
        for (;;) {
            while (sem_wait(&work_sem_) != 0 && errno == EINTR) {
            }
            if (stop_.load(std::memory_order_acquire))
                return;
            run_job(claim(), runner, scratch);
        }
    }
};

}  // namespace envhive

#endif /* ENVHIVE_THREADED_BATCH_H */
