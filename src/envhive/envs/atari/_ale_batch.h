/* The threaded Atari engine's core: a batch of ALE games, the op of one env, the job and
 * completion rings and the worker threads (see _threads.cpp for the whole picture; this file
 * is included there only, and holds no Python object). */
#ifndef ENVHIVE_ALE_BATCH_H
#define ENVHIVE_ALE_BATCH_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>  // Py_ssize_t (no Python object is touched here: the threads hold no GIL)

#include <dlfcn.h>
#include <semaphore.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "_area.h"

namespace envhive_atari {

// ---------------------------------------------------------------- ale-py's exported C++ API
using Bytes = std::vector<unsigned char>;

struct Api {
    void (*construct)(void *);
    void (*destroy)(void *);
    int (*act)(void *, int, float);
    bool (*game_over)(const void *, bool);
    int (*lives)(void *);
    void (*gray)(const void *, Bytes &);
    void (*rgb)(const void *, Bytes &);
    void (*reset_game)(void *);
    // The three that take a string or a path: in libstdc++'s new ABI (ale-py 0.12) or its old
    // one (0.10, 0.11: called through _ale_oldabi.cpp); ``old_abi`` says which was found.
    void *set_int, *set_float, *load_rom;
    bool old_abi;
    void (*set_mode)(void *, unsigned);
    void (*set_difficulty)(void *, unsigned);
    // ActionVect (std::vector<ale::Action>, an int enum) returned by value.
    std::vector<int> (*minimal_actions)(const void *);
    std::vector<int> (*legal_actions)(const void *);
};

const struct {
    const char *name;
    size_t offset;
} kSymbols[] = {
    {"_ZN3ale12ALEInterfaceC1Ev", offsetof(Api, construct)},
    {"_ZN3ale12ALEInterfaceD1Ev", offsetof(Api, destroy)},
    {"_ZN3ale12ALEInterface3actENS_6ActionEf", offsetof(Api, act)},
    {"_ZNK3ale12ALEInterface9game_overEb", offsetof(Api, game_over)},
    {"_ZN3ale12ALEInterface5livesEv", offsetof(Api, lives)},
    {"_ZNK3ale12ALEInterface18getScreenGrayscaleERSt6vectorIhSaIhEE", offsetof(Api, gray)},
    {"_ZNK3ale12ALEInterface12getScreenRGBERSt6vectorIhSaIhEE", offsetof(Api, rgb)},
    {"_ZN3ale12ALEInterface10reset_gameEv", offsetof(Api, reset_game)},
    {"_ZN3ale12ALEInterface7setModeEj", offsetof(Api, set_mode)},
    {"_ZN3ale12ALEInterface13setDifficultyEj", offsetof(Api, set_difficulty)},
    {"_ZNK3ale12ALEInterface19getMinimalActionSetEv", offsetof(Api, minimal_actions)},
    {"_ZNK3ale12ALEInterface17getLegalActionSetEv", offsetof(Api, legal_actions)},
};

// setInt, setFloat, loadROM: {new ABI, old ABI} names.
const struct {
    const char *name[2];
    size_t offset;
} kStringSymbols[] = {
    {{"_ZN3ale12ALEInterface6setIntERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEi",
      "_ZN3ale12ALEInterface6setIntERKSsi"}, offsetof(Api, set_int)},
    {{"_ZN3ale12ALEInterface8setFloatERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEf",
      "_ZN3ale12ALEInterface8setFloatERKSsf"}, offsetof(Api, set_float)},
    {{"_ZN3ale12ALEInterface7loadROMENSt10filesystem7__cxx114pathE",
      "_ZN3ale12ALEInterface7loadROMENSt10filesystem4pathE"}, offsetof(Api, load_rom)},
};

}  // namespace envhive_atari

extern "C" {  // _ale_oldabi.cpp
void envhive_ale_set_int_old(void *fn, void *ale, const char *key, int value);
void envhive_ale_set_float_old(void *fn, void *ale, const char *key, float value);
void envhive_ale_load_rom_old(void *fn, void *ale, const char *path);
}

namespace envhive_atari {

// An ALEInterface (four unique_ptrs and an int in ale-py 0.10-0.12) is built in place in
// storage far larger than that, so a later version may add members.
constexpr size_t kAleBytes = 1024;

constexpr int kRawH = 210, kRawW = 160;
constexpr int64_t kNoWant = INT64_MAX;

// ---------------------------------------------------------------- configuration
struct Config {
    int frame_skip = 4, stack_num = 4, img_h = 84, img_w = 84, channels = 1;
    int noop_max = 30, limit = 0, mode = -1, difficulty = -1;
    bool maxpool = true, episodic_life = false, reward_clip = false, fire = false;
    bool fire_first = false, pad_repeat = true, pad_zeros = false, loss_full = false;
    double sticky = 0.0;
    bool legal_actions = false;  // full_action_space: all 18 actions
    int fire_action = 1, noop_action = 0;
    // envhive._ops, passed in (the rule is the Python module's).
    int op_step = 0, op_reset = 1, op_step_reset = 2;
    double reset_reward = 0.0;
    // The area plan (_frames.AreaPlan's taps); resize == false: the frame is the screen.
    bool resize = true;
    int xtaps = 0, ytaps = 0;
    std::vector<int64_t> xi, yi;
    std::vector<float> xw, yw;
};

struct Game {
    alignas(64) unsigned char ale[kAleBytes];
    bool built = false;
    Bytes screen[2];           // the last two screens of a skip (gray, or RGB interleaved)
    std::vector<uint8_t> plane[2];  // RGB: one channel of each screen
    std::vector<uint8_t> stack;     // the frame stack (stack_num * channels, h, w)
    int64_t first_seed = 0;  // the ALE seed of its first load, unless a seeded reset comes first
    bool loaded = false;     // a ROM is loaded (at the first reset: see Games_init)
    int elapsed = 0, lives = 0;
    bool started = false, life_lost = false;
    double raw_reward = 0.0;
    std::atomic<int> busy{0};
    std::string error, error_kind;  // the last op's error: message, and Python's class name
};

// An action outside the action set (the pool checks actions first: only an action written
// past its check gets here); reported as envhive's ActionError.
struct ActionOutside : std::out_of_range {
    using std::out_of_range::out_of_range;
};

// The arrays the ops read and write (the pool's buffers and the Python side's columns).
struct Columns {
    uint8_t *obs = nullptr, *final_obs = nullptr;
    double *reward = nullptr;
    uint8_t *terminated = nullptr, *truncated = nullptr;
    const int8_t *ops = nullptr;
    const int64_t *actions = nullptr;
    // Python's side: the ALE seed of a seeded reset, the no-op counts drawn ahead.
    const int64_t *reseed = nullptr;
    uint8_t *has_reseed = nullptr;
    const int32_t *stock = nullptr;
    int32_t *stock_used = nullptr;
    int32_t stock_len = 0;
    // Infos (EnvPool's lives, reward, terminated, elapsed_step) of a step (step_), of a
    // reset (info_), and as an async op reports them (rep_: the reset's after a reset).
    int32_t *info_lives[3] = {}, *info_term[3] = {}, *info_elapsed[3] = {};
    float *info_reward[3] = {};
    uint8_t *reset_after = nullptr, *failed = nullptr;
};
enum { kStepInfo = 0, kResetInfo = 1, kReported = 2 };

struct Slot {
    std::atomic<uint64_t> seq{0};
    int64_t value = 0;
};

void make_deadline(timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (ms % 1000) * 1000000L;
    ts->tv_sec += ms / 1000 + ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

// ---------------------------------------------------------------- the batch
struct Batch {
    Api api{};
    Config cfg;
    std::string rom;
    int n = 0;
    std::unique_ptr<Game[]> games;
    std::vector<int> actions;  // the action set (ale::Action values)
    Columns col;
    bool bound = false;

    // Jobs: env | epoch << 32, claimed by whoever took a token of work_sem.
    std::vector<std::atomic<int64_t>> jobs;
    std::atomic<uint64_t> job_head{0}, job_tail{0}, job_read{0};
    std::atomic<uint64_t> finished{0};  // jobs run to the end or skipped (idle(): all of them)
    // Finished envs (env | epoch << 32), in the order they finish.
    std::vector<Slot> done;
    std::atomic<uint64_t> done_tail{0};
    uint64_t done_head = 0;  // the caller's
    std::atomic<uint64_t> done_read{0};  // done_head as the producers see it
    std::atomic<int64_t> want{kNoWant};
    std::atomic<uint32_t> epoch{0};
    int64_t outstanding = 0;  // started ops of this epoch not collected (the caller's)
    sem_t work_sem, done_sem;
    bool sems = false;
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    pid_t owner = 0;  // the process that started the threads (a forked child has none of them)
    std::vector<int64_t> order;  // start()'s scratch

    // The area resize's scratch: horizontal sums of every source row, and one line.
    size_t rows_size() const { return (size_t)kRawH * (size_t)cfg.img_w; }
    size_t line_size() const { return (size_t)(cfg.img_w > kRawW ? cfg.img_w : kRawW); }

    // ------------------------------------------------------------ one game
    int act(Game &g, int a) { return api.act(g.ale, a, 1.0f); }

    void grab(Game &g, int k) {
        if (cfg.channels == 1)
            api.gray(g.ale, g.screen[k]);
        else
            api.rgb(g.ale, g.screen[k]);
    }

    // Shift the stack down one plane and write screen ``a``, max-pooled with ``b`` when ``pool``
    // and resized, as its last plane.
    void push_plane(uint8_t *a, const uint8_t *b, bool pool, uint8_t *stack, int depth, float *rows,
                    float *line) {
        const int h = cfg.img_h, w = cfg.img_w;
        if (cfg.resize) {
            area_push(a, b, pool && a != b, stack, depth, h, w, kRawH, kRawW, cfg.xi.data(), cfg.xw.data(),
                      cfg.xtaps, cfg.yi.data(), cfg.yw.data(), cfg.ytaps, rows, line);
            return;
        }
        const size_t frame = (size_t)h * w;
        memmove(stack, stack + frame, (size_t)(depth - 1) * frame);
        uint8_t *out = stack + (size_t)(depth - 1) * frame;
        for (size_t p = 0; p < frame; p++)
            out[p] = pool && b[p] > a[p] ? b[p] : a[p];
    }

    // AtariEnv._push: max-pool the two screens (if asked), resize, push onto the stack; a new
    // game pads the rest of the stack.
    void push(Game &g, bool new_game, bool pool, float *rows, float *line) {
        const int c = cfg.channels, depth = cfg.stack_num * c;
        uint8_t *stack = g.stack.data();
        const size_t frame = (size_t)cfg.img_h * cfg.img_w;
        if (c == 1) {
            push_plane(g.screen[0].data(), g.screen[1].data(), pool, stack, depth, rows, line);
        } else {  // RGB: each channel as a plane, pushed in order (channels first, as EnvPool)
            const size_t raw = (size_t)kRawH * kRawW;
            const uint8_t *a = g.screen[0].data(), *b = g.screen[1].data();
            for (int ch = 0; ch < 3; ch++) {
                uint8_t *pa = g.plane[0].data(), *pb = g.plane[1].data();
                for (size_t p = 0; p < raw; p++) {
                    pa[p] = a[3 * p + ch];
                    pb[p] = b[3 * p + ch];
                }
                push_plane(pa, pb, pool, stack, depth, rows, line);
            }
        }
        if (new_game && depth > c) {
            const size_t last = (size_t)c * frame, before = (size_t)(depth - c) * frame;
            if (cfg.pad_zeros) {
                memset(stack, 0, before);
            } else if (cfg.pad_repeat) {
                for (int k = 0; k < cfg.stack_num - 1; k++)
                    memcpy(stack + (size_t)k * last, stack + before, last);
            }
        }
    }

    void write_info(int slot, int64_t i, const Game &g, float reward) {
        col.info_lives[slot][i] = g.lives;
        col.info_reward[slot][i] = reward;
        col.info_term[slot][i] = api.game_over(g.ale, true) ? 1 : 0;
        col.info_elapsed[slot][i] = g.elapsed;
    }

    void copy_info(int from, int to, int64_t i) {
        col.info_lives[to][i] = col.info_lives[from][i];
        col.info_reward[to][i] = col.info_reward[from][i];
        col.info_term[to][i] = col.info_term[from][i];
        col.info_elapsed[to][i] = col.info_elapsed[from][i];
    }

    // A fresh ROM with this seed (AtariEnv.reset(seed=...): ALE reads its seed at load).
    void load(Game &g, int64_t seed) {
        const float sticky = (float)cfg.sticky;
        if (api.old_abi) {
            envhive_ale_set_float_old(api.set_float, g.ale, "repeat_action_probability", sticky);
            envhive_ale_set_int_old(api.set_int, g.ale, "random_seed", (int)seed);
            envhive_ale_load_rom_old(api.load_rom, g.ale, rom.c_str());
        } else {
            using SetInt = void (*)(void *, const std::string &, int);
            using SetFloat = void (*)(void *, const std::string &, float);
            using LoadRom = void (*)(void *, std::filesystem::path);
            reinterpret_cast<SetFloat>(api.set_float)(g.ale, std::string("repeat_action_probability"), sticky);
            reinterpret_cast<SetInt>(api.set_int)(g.ale, std::string("random_seed"), (int)seed);
            reinterpret_cast<LoadRom>(api.load_rom)(g.ale, std::filesystem::path(rom));
        }
        g.loaded = true;
        if (cfg.mode >= 0)
            api.set_mode(g.ale, (unsigned)cfg.mode);
        if (cfg.difficulty >= 0)
            api.set_difficulty(g.ale, (unsigned)cfg.difficulty);
    }

    // AtariEnv.reset, writing the frames into the game's stack; ``seeded``: after load().
    void reset(int64_t i, Game &g, bool seeded, float *rows, float *line) {
        const bool full = !g.started || seeded;
        int noops = 0;
        if (cfg.noop_max) {
            int32_t used = col.stock_used[i];
            if (used >= col.stock_len)
                throw std::runtime_error("the no-op stock ran out (the engine's restock failed)");
            noops = col.stock[i * col.stock_len + used] - (cfg.fire ? 1 : 0);
            col.stock_used[i] = used + 1;
        }
        g.started = true;
        bool new_game = full || !cfg.episodic_life || api.game_over(g.ale, true) || !g.life_lost ||
                        cfg.loss_full || (cfg.limit && g.elapsed >= cfg.limit);
        if (new_game) {
            api.reset_game(g.ale);
            g.elapsed = 0;
        }
        if (cfg.fire && cfg.fire_first)
            act(g, cfg.fire_action);
        for (int k = 0; k < noops; k++) {
            act(g, cfg.noop_action);
            if (api.game_over(g.ale, true)) {
                api.reset_game(g.ale);
                new_game = true;
            }
        }
        if (cfg.fire && !cfg.fire_first)
            act(g, cfg.fire_action);
        grab(g, 0);
        push(g, new_game, false, rows, line);
        g.life_lost = false;
        g.lives = api.lives(g.ale);
        g.raw_reward = 0.0;
    }

    // AtariEnv.advance: returns the (clipped) reward; sets the flags.
    double step(Game &g, int a, bool *terminated, bool *truncated, float *rows, float *line) {
        const int action = actions[a];
        const int pooled = cfg.frame_skip < 2 ? cfg.frame_skip : 2;
        int skip = cfg.frame_skip, reward = 0;
        bool over = false;
        while (skip > 0 && !over) {
            reward += act(g, action);
            over = api.game_over(g.ale, true);
            if (skip <= pooled)
                grab(g, pooled - skip);
            skip--;
        }
        push(g, false, cfg.maxpool && cfg.frame_skip > 1 && skip == 0, rows, line);
        g.elapsed++;
        const bool trunc = cfg.limit && g.elapsed >= cfg.limit;
        const int lives = api.lives(g.ale);
        g.life_lost = 0 < lives && lives < g.lives;
        const bool ended = over || trunc || (cfg.episodic_life && g.life_lost);
        g.lives = lives;
        g.raw_reward = (double)reward;
        *terminated = ended && !trunc;  // EnvPool: truncated wins when both happen
        *truncated = trunc;
        if (cfg.reward_clip)
            return reward > 0 ? 1.0 : reward < 0 ? -1.0 : 0.0;
        return (double)reward;
    }

    void frames_to(uint8_t *dst, const Game &g) { memcpy(dst, g.stack.data(), g.stack.size()); }

    // One env's whole op (envhive._ops), as EnvRunner performs it for AtariEnv.
    void perform(int64_t i, float *rows, float *line) {
        Game &g = games[i];
        const size_t row = g.stack.size();
        const int op = col.ops[i];
        col.failed[i] = 0;
        col.reset_after[i] = 0;
        try {
            if (op == cfg.op_reset) {
                const bool seeded = col.has_reseed[i] != 0;
                if (seeded) {
                    load(g, col.reseed[i]);
                    col.has_reseed[i] = 0;
                } else if (!g.loaded) {
                    load(g, g.first_seed);
                }
                reset(i, g, seeded, rows, line);
                frames_to(col.obs + i * row, g);
                write_info(kResetInfo, i, g, 0.0f);
                copy_info(kResetInfo, kReported, i);
                col.reward[i] = cfg.reset_reward;
                col.terminated[i] = 0;
                col.truncated[i] = 0;
                return;
            }
            if (!g.loaded)
                throw std::runtime_error("a step before the env's first reset");
            const int64_t a = col.actions[i];
            if (a < 0 || a >= (int64_t)actions.size())
                throw ActionOutside("action " + std::to_string(a) + " is outside Discrete(" +
                                    std::to_string(actions.size()) + ")");
            bool term = false, trunc = false;
            col.reward[i] = step(g, (int)a, &term, &trunc, rows, line);
            col.terminated[i] = term;
            col.truncated[i] = trunc;
            write_info(kStepInfo, i, g, (float)g.raw_reward);
            if (op == cfg.op_step_reset && (term || trunc)) {  // _ops.resets_in_op
                if (col.final_obs)
                    frames_to(col.final_obs + i * row, g);
                reset(i, g, false, rows, line);
                frames_to(col.obs + i * row, g);
                write_info(kResetInfo, i, g, 0.0f);
                copy_info(kResetInfo, kReported, i);
                col.reset_after[i] = 1;
            } else {
                frames_to(col.obs + i * row, g);
                copy_info(kStepInfo, kReported, i);
            }
        } catch (const ActionOutside &e) {
            g.error_kind = "ActionError";
            g.error = e.what();
            col.failed[i] = 1;
        } catch (const std::exception &e) {
            g.error_kind = "RuntimeError";
            g.error = e.what();
            col.failed[i] = 1;
        } catch (...) {
            g.error_kind = "RuntimeError";
            g.error = "an unknown C++ exception";
            col.failed[i] = 1;
        }
    }

    // ------------------------------------------------------------ the queues
    // Run job ``job`` (env | epoch << 32) unless it belongs to an older epoch.
    void run_job(int64_t job, float *rows, float *line) {
        const int64_t i = job & 0xffffffffLL;
        const uint32_t e = (uint32_t)(job >> 32);
        Game &g = games[i];
        // An op of this env discarded while it ran may still be running: ops of one env
        // never overlap (the next one waits here; a discarded op finishes within one op).
        // The env is marked busy before the epoch is read, so that start() after a discard
        // can wait for the env's old op (``wait_idle``) knowing that no thread will begin it.
        while (g.busy.exchange(1, std::memory_order_acq_rel) && !forked())
            std::this_thread::yield();  // (in a forked child, a busy mark is the parent's thread's)
        if (e != epoch.load(std::memory_order_acquire)) {
            g.busy.store(0, std::memory_order_release);
            finished.fetch_add(1, std::memory_order_release);
            return;  // discarded
        }
        perform(i, rows, line);
        g.busy.store(0, std::memory_order_release);
        const uint64_t pos = done_tail.fetch_add(1, std::memory_order_acq_rel);
        // The ring holds every live completion (one op per env in flight); only completions
        // of discarded ops can pile up, and only until the caller's next collect.
        while (pos >= done_read.load(std::memory_order_acquire) + done.size() &&
               !stop.load(std::memory_order_relaxed))
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        Slot &s = done[pos % done.size()];
        s.value = job;
        s.seq.store(pos + 1, std::memory_order_release);
        finished.fetch_add(1, std::memory_order_release);
        int64_t w = want.load(std::memory_order_seq_cst);
        if ((int64_t)(pos + 1) >= w && want.compare_exchange_strong(w, kNoWant))
            sem_post(&done_sem);
    }

    // Take one token's job off the ring (a token was taken: the job is there).
    int64_t claim() {
        const uint64_t h = job_head.fetch_add(1, std::memory_order_acq_rel);
        const int64_t job = jobs[h % jobs.size()].load(std::memory_order_acquire);
        job_read.fetch_add(1, std::memory_order_release);
        return job;
    }

    void worker() {
        std::vector<float> rows(rows_size()), line(line_size());
        for (;;) {
            while (sem_wait(&work_sem) != 0 && errno == EINTR) {
            }
            if (stop.load(std::memory_order_acquire))
                return;
            run_job(claim(), rows.data(), line.data());
        }
    }

    // The caller's side (GIL held, or released inside collect).
    bool start(const int64_t *ids, Py_ssize_t k) {
        const uint64_t cap = jobs.size();
        uint64_t tail = job_tail.load(std::memory_order_relaxed);
        if (tail + (uint64_t)k - job_read.load(std::memory_order_acquire) > cap)
            return false;
        const int64_t e = (int64_t)epoch.load(std::memory_order_relaxed) << 32;
        // RESET ops first (see the module comment), in id order otherwise.
        for (int pass = 0; pass < 2; pass++)
            for (Py_ssize_t j = 0; j < k; j++) {
                const int64_t i = ids[j];
                if ((col.ops[i] == cfg.op_reset) == (pass == 0))
                    jobs[tail++ % cap].store(i | e, std::memory_order_relaxed);
            }
        job_tail.store(tail, std::memory_order_release);
        outstanding += k;
        for (Py_ssize_t j = 0; j < k; j++)
            sem_post(&work_sem);
        return true;
    }

    // Finished envs of this epoch into ``out`` (from ``got``); how many now.
    Py_ssize_t drain(int64_t *out, Py_ssize_t got) {
        const uint32_t e = epoch.load(std::memory_order_relaxed);
        for (;;) {
            Slot &s = done[done_head % done.size()];
            if (s.seq.load(std::memory_order_acquire) != done_head + 1)
                return got;
            const int64_t job = s.value;
            done_head++;
            done_read.store(done_head, std::memory_order_release);
            if ((uint32_t)(job >> 32) == e) {
                out[got++] = job & 0xffffffffLL;
                outstanding--;
            }
        }
    }

    // Whether the waiting caller takes the next queued job itself. When it waits for every op
    // in flight (a sync call), always: it has nothing else to do until they are all done.
    // When it waits for some (an async recv), not a RESET: a reset costs many steps, and
    // the caller would hold back its next send that long while the threads run out of work.
    bool helps(bool all) const {
        if (all)
            return true;
        const uint64_t h = job_head.load(std::memory_order_acquire);
        if (h >= job_tail.load(std::memory_order_acquire))
            return false;
        const int64_t i = jobs[h % jobs.size()].load(std::memory_order_relaxed) & 0xffffffffLL;
        return col.ops[i] != cfg.op_reset;
    }

    // Wait (GIL released) until ``min_count`` envs finished or none is outstanding; the
    // caller steps games itself while it waits (``helps``). Returns how many were taken.
    Py_ssize_t collect(Py_ssize_t min_count, int64_t *out, float *rows, float *line) {
        Py_ssize_t got = drain(out, 0);
        const bool all = got + outstanding <= min_count;
        while (got < min_count && outstanding > 0) {
            if ((threads.empty() || helps(all) || forked()) && sem_trywait(&work_sem) == 0) {  // run it here
                run_job(claim(), rows, line);
                got = drain(out, got);
                continue;
            }
            // Ask for a post once enough envs are in, then look again: one may have finished
            // before the request was visible (run_job reads ``want`` after publishing).
            want.store((int64_t)done_head + (min_count - got), std::memory_order_seq_cst);
            got = drain(out, got);
            if (got >= min_count || outstanding == 0)
                break;
            timespec ts;
            make_deadline(&ts, 100);
            sem_timedwait(&done_sem, &ts);
            got = drain(out, got);
        }
        want.store(kNoWant, std::memory_order_seq_cst);
        return got;
    }

    // Before start() queues envs again after a discard: wait until none of them is still
    // running its discarded op (a few milliseconds at most), GIL released by the caller.
    bool any_busy(const int64_t *ids, Py_ssize_t k) const {  // ids == nullptr: 0..k-1
        for (Py_ssize_t j = 0; j < k; j++)
            if (games[ids ? ids[j] : j].busy.load(std::memory_order_acquire))
                return true;
        return false;
    }

    void discard() {
        epoch.fetch_add(1, std::memory_order_acq_rel);
        outstanding = 0;
    }

    // Allocate and build the games (game 0 loaded: the action set), start ``k`` threads; an
    // error message, or "" (the destructor frees whatever was built).
    std::string build(const std::vector<int64_t> &seeds, int k) {
        n = (int)seeds.size();
        games.reset(new Game[n]);
        jobs = std::vector<std::atomic<int64_t>>(4 * (size_t)n + 64);
        done = std::vector<Slot>(2 * (size_t)n + 64);
        if (sem_init(&work_sem, 0, 0) != 0 || sem_init(&done_sem, 0, 0) != 0)
            return std::string("sem_init: ") + strerror(errno);
        sems = true;
        const size_t raw = (size_t)kRawH * kRawW;
        try {
            for (int i = 0; i < n; i++) {
                Game &g = games[i];
                g.screen[0].assign(raw * cfg.channels, 0);
                g.screen[1].assign(raw * cfg.channels, 0);
                if (cfg.channels == 3) {
                    g.plane[0].assign(raw, 0);
                    g.plane[1].assign(raw, 0);
                }
                g.stack.assign((size_t)cfg.stack_num * cfg.channels * cfg.img_h * cfg.img_w, 0);
                api.construct(g.ale);
                g.built = true;
                g.first_seed = seeds[i];
            }
            load(games[0], seeds[0]);  // the others load at their first reset
            actions = cfg.legal_actions ? api.legal_actions(games[0].ale) : api.minimal_actions(games[0].ale);
            // AtariEnv: a fire reset only in games whose action set has FIRE.
            bool has_fire = false;
            for (int a : actions)
                has_fire = has_fire || a == cfg.fire_action;
            cfg.fire = cfg.fire && has_fire;
            owner = getpid();
            for (int t = 0; t < k; t++)
                threads.emplace_back(&Batch::worker, this);
        } catch (const std::exception &e) {
            return std::string("building the games: ") + e.what();
        }
        return "";
    }

    // A child forked from the process that built the batch has its memory but none of its
    // threads: there the caller runs every job, and close() leaves the thread objects alone.
    bool forked() const { return getpid() != owner; }

    void shutdown() {
        if (!threads.empty() && forked()) {
            new std::vector<std::thread>(std::move(threads));  // no thread to join or detach here
            threads.clear();
        }
        if (!threads.empty()) {
            stop.store(true, std::memory_order_release);
            for (size_t t = 0; t < threads.size(); t++)
                sem_post(&work_sem);
            for (auto &t : threads)
                t.join();
            threads.clear();
        }
    }

    ~Batch() {
        shutdown();
        if (games)
            for (int i = 0; i < n; i++)
                if (games[i].built)
                    api.destroy(games[i].ale);
        if (sems) {
            sem_destroy(&work_sem);
            sem_destroy(&done_sem);
        }
    }
};

}  // namespace envhive_atari

#endif /* ENVHIVE_ALE_BATCH_H */
