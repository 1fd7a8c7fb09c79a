/* The counter: envhive's test family for the threaded batch core, one env of it.
 *
 * A walker on a line of ``size`` cells starts on a cell drawn from its seed and must reach a
 * target cell, also drawn: action 0 moves left, 1 stays, 2 moves right; reward 1.0 on the
 * target (terminated), -0.01 otherwise; truncated after ``limit`` steps (0: never). Its
 * observation is int32 ``[position, target, steps, start]``; its infos ``steps`` (int32) and
 * ``distance`` (float64). _env.py's ``CounterEnv`` is the same game in Python, rule for rule
 * (the differential tests hold the two equal through every op and autoreset mode).
 *
 * For the core's tests it can be made slow: ``busy_us`` of busy work and ``sleep_us`` of sleep
 * per step, and a reset loop of ``reset_loop`` iterations (a huge one never ends by itself:
 * only a discard, a close or Ctrl-C do, through ``ctx.check()``).
 *
 * Randomness: splitmix64 over a 64-bit state; a seeded reset sets the state to the seed
 * (modulo 2**64), an unseeded one goes on from the state.
 */
#ifndef ENVHIVE_COUNTER_H
#define ENVHIVE_COUNTER_H

#include <time.h>

#include <cstdint>
#include <string>

#include "envhive/threaded_batch.h"

namespace envhive_counter {

using namespace envhive;

struct Counter {
    using Action = int64_t;

    struct Env {
        uint64_t rng = 0;
        int32_t pos = 0, target = 0, steps = 0, start = 0;
    };
    struct Scratch {};

    static constexpr InfoField kInfos[] = {{"steps", "int32", 4}, {"distance", "float64", 8}};
    static constexpr size_t kNumInfos = 2;
    static constexpr ColumnSpec kColumns[1] = {{"", 0, 0, false}};  // none of its own
    static constexpr size_t kNumColumns = 0;

    int size = 16, limit = 50, busy_us = 0, sleep_us = 0;
    int64_t reset_loop = 0;

    bool configure(Source &s) {
        if (!s.get("size", size) || !s.get("limit", limit) || !s.get("busy_us", busy_us) ||
            !s.get("sleep_us", sleep_us) || !s.get("reset_loop", reset_loop))
            return false;
        if (size < 2 || limit < 0 || busy_us < 0 || sleep_us < 0 || reset_loop < 0)
            return s.fail("counter: size >= 2, and limit, busy_us, sleep_us, reset_loop >= 0");
        return true;
    }

    size_t obs_bytes() const { return 4 * sizeof(int32_t); }
    void build(Env &e, int64_t, int64_t seed) { e.rng = (uint64_t)seed; }
    void built(Env &) {}
    void init_scratch(Scratch &) const {}
    void facts(Facts &out) const { out.emplace_back("num_actions", 3); }

    static uint64_t next(Env &e) {
        uint64_t z = (e.rng += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }

    void reset(Env &e, Context<Counter> &ctx, bool) {
        if (ctx.seed != nullptr)
            e.rng = (uint64_t)*ctx.seed;
        e.start = (int32_t)(next(e) % (uint64_t)size);
        e.target = (int32_t)((e.start + 1 + (int64_t)(next(e) % (uint64_t)(size - 1))) % size);
        e.pos = e.start;
        e.steps = 0;
        for (int64_t k = 0; k < reset_loop; k++)
            if ((k & 255) == 0)
                ctx.check();
    }

    double step(Env &e, Context<Counter> &ctx, const Action &a, bool &terminated, bool &truncated) {
        if (a < 0 || a > 2)
            throw ActionOutside("action " + std::to_string(a) + " is outside Discrete(3)");
        if (busy_us > 0)
            busy(ctx);
        if (sleep_us > 0)
            nap(ctx);
        const int32_t moved = e.pos + (int32_t)a - 1;
        e.pos = moved < 0 ? 0 : moved >= size ? size - 1 : moved;
        e.steps++;
        terminated = e.pos == e.target;
        truncated = limit > 0 && e.steps >= limit;
        return terminated ? 1.0 : -0.01;
    }

    void observe(const Env &e, uint8_t *dst) const {
        const int32_t obs[4] = {e.pos, e.target, e.steps, e.start};
        memcpy(dst, obs, sizeof obs);
    }

    void info(const Env &e, const InfoOut &out) const {
        out.put<int32_t>(0, e.steps);
        out.put<double>(1, (double)(e.pos > e.target ? e.pos - e.target : e.target - e.pos));
    }

private:
    static int64_t now_ns(clockid_t clock) {
        timespec ts;
        clock_gettime(clock, &ts);
        return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    }

    void busy(Context<Counter> &ctx) const {  // CPU time, as a real game's step would take
        const int64_t end = now_ns(CLOCK_THREAD_CPUTIME_ID) + (int64_t)busy_us * 1000;
        while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end)
            ctx.check();
    }

    void nap(Context<Counter> &ctx) const {  // wall time, in slices of at most 10 ms
        int64_t left = (int64_t)sleep_us * 1000;
        while (left > 0) {
            const int64_t slice = left < 10000000 ? left : 10000000;
            timespec ts{(time_t)(slice / 1000000000), (long)(slice % 1000000000)};
            nanosleep(&ts, nullptr);
            left -= slice;
            ctx.check();
        }
    }
};

}  // namespace envhive_counter

#endif /* ENVHIVE_COUNTER_H */
