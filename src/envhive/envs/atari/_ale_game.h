/* The Atari game of the threaded engine: one ALE game with EnvPool's preprocessing, rule for
 * rule as ``AtariEnv`` (``_env.py``) does it, for envhive's ThreadedBatch core
 * (envhive/threaded_batch.h holds the op rule, the threads and everything else).
 *
 * - step: ``frame_skip`` frames of the action, stopping at game over; the last two screens
 *   max-pooled (when the skip ran to its end), resized (OpenCV's INTER_AREA, bit for bit:
 *   ``_area.h``, the tables from ``_frames.area_taps``; or its INTER_LINEAR: ``_linear.h``),
 *   pushed onto the frame stack;
 * - reset: a new game, or after a life loss with episodic life the same game going on; the
 *   no-op count drawn in Python beforehand (a column of counts drawn ahead); FIRE;
 * - infos: EnvPool's lives, reward (unclipped), terminated (game over), elapsed_step, and with
 *   ``ram_info`` its ram (ALE's 128 bytes of RAM);
 * - render: the RGB screen (AtariEnv.render), between ops.
 *
 * The screen is the ROM's whole screen (``screen_h`` rows: 210, or up to 250 for 13 ROMs);
 * ``raw_h`` rows of it are resized (all of them, or EnvPool's top 210 with its crop).
 */
#ifndef ENVHIVE_ALE_GAME_H
#define ENVHIVE_ALE_GAME_H

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "envhive/threaded_batch.h"

#include "_ale_api.h"
#include "_area.h"
#include "_linear.h"

namespace envhive_atari {

using envhive::ColumnSpec;
using envhive::Context;
using envhive::Facts;
using envhive::InfoField;
using envhive::InfoOut;
using envhive::Source;

// An ALEInterface (four unique_ptrs and an int in ale-py 0.10-0.12) is built in place in
// storage far larger than that, so a later version may add members.
constexpr size_t kAleBytes = 1024;
constexpr int kScreenW = 160;
constexpr size_t kRamBytes = 128;  // the Atari 2600's RAM (ALE's ALERAM)

struct Config {
    int frame_skip = 4, stack_num = 4, img_h = 84, img_w = 84, channels = 1;
    int noop_max = 30, limit = 0, mode = -1, difficulty = -1, stock_len = 1;
    int screen_h = 210, raw_h = 210;  // the ROM's screen rows; the rows resized (top ones)
    bool maxpool = true, episodic_life = false, reward_clip = false, fire = false;
    bool fire_first = false, pad_repeat = true, pad_zeros = false, loss_full = false;
    double sticky = 0.0;
    bool legal_actions = false;  // full_action_space: all 18 actions
    bool ram_info = false;       // the ram info (else its column is left alone: Python hides it)
    int fire_action = 1, noop_action = 0;
    std::string lib, rom;
    // The area plan (_frames.AreaPlan's taps); resize == false: the frame is the screen.
    bool resize = true;
    int xtaps = 0, ytaps = 0;
    std::vector<int64_t> xi, yi;
    std::vector<float> xw, yw;
    // INTER_LINEAR instead (_frames.linear_taps: an index and two fixed-point weights per pixel).
    bool linear = false;
    std::vector<int64_t> lxi, lyi;
    std::vector<int32_t> lxa, lyb;
};

struct Atari {
    using Action = int64_t;

    struct Env {
        alignas(64) unsigned char ale[kAleBytes];
        const Api *api = nullptr;
        bool built = false, loaded = false;
        Bytes screen[2];                // the last two screens of a skip (gray, or RGB interleaved)
        std::vector<uint8_t> plane[2];  // RGB: one channel of each screen
        std::vector<uint8_t> stack;     // the frame stack (stack_num * channels, h, w)
        int64_t first_seed = 0;  // the ALE seed of its first load, unless a seeded reset comes first
        int elapsed = 0, lives = 0;
        bool life_lost = false;
        double raw_reward = 0.0;

        ~Env() {
            if (built)
                api->destroy(ale);
        }
    };

    // The area resize's scratch: horizontal sums of every resized row, and one line; the
    // linear resize's: two rows of sums.
    struct Scratch {
        std::vector<float> rows, line;
        std::vector<int32_t> r0, r1;
    };

    static constexpr InfoField kInfos[] = {{"lives", "int32", 4},
                                           {"reward", "float32", 4},
                                           {"terminated", "int32", 4},
                                           {"ram", "uint8", kRamBytes},
                                           {"elapsed_step", "int32", 4}};
    static constexpr size_t kNumInfos = 5;
    // The no-op counts drawn ahead in Python (``stock_len`` per env) and how many each env used.
    static constexpr ColumnSpec kColumns[] = {{"stock", 4, 1, false}, {"stock_used", 4, 1, true}};
    static constexpr size_t kNumColumns = 2;
    enum { kStock = 0, kStockUsed = 1 };

    Api api{};
    Config cfg;
    std::vector<int> actions;  // the action set (ale::Action values)

    // ------------------------------------------------------------ configuration
    bool configure(Source &s) {
        Config &c = cfg;
        struct {
            const char *key;
            int *field;
        } ints[] = {{"frame_skip", &c.frame_skip}, {"stack_num", &c.stack_num}, {"img_h", &c.img_h},
                    {"img_w", &c.img_w}, {"channels", &c.channels}, {"noop_max", &c.noop_max},
                    {"limit", &c.limit}, {"mode", &c.mode}, {"difficulty", &c.difficulty},
                    {"fire_action", &c.fire_action}, {"noop_action", &c.noop_action},
                    {"stock_len", &c.stock_len}, {"screen_h", &c.screen_h}, {"raw_h", &c.raw_h},
                    {"xtaps", &c.xtaps}, {"ytaps", &c.ytaps}};
        struct {
            const char *key;
            bool *field;
        } flags[] = {{"maxpool", &c.maxpool}, {"episodic_life", &c.episodic_life},
                     {"reward_clip", &c.reward_clip}, {"fire_first", &c.fire_first},
                     {"pad_repeat", &c.pad_repeat}, {"pad_zeros", &c.pad_zeros},
                     {"loss_full", &c.loss_full}, {"resize", &c.resize}, {"use_fire", &c.fire},
                     {"full_action_space", &c.legal_actions}, {"linear", &c.linear},
                     {"ram_info", &c.ram_info}};
        for (auto &f : ints)
            if (!s.get(f.key, *f.field))
                return false;
        for (auto &f : flags)
            if (!s.get(f.key, *f.field))
                return false;
        if (!s.get("sticky", c.sticky) || !s.get("lib", c.lib) || !s.get("rom", c.rom))
            return false;
        if (c.channels != 1 && c.channels != 3)
            return s.fail("channels must be 1 or 3");
        if (c.frame_skip < 1 || c.stack_num < 1 || c.img_h < 1 || c.img_w < 1 || c.stock_len < 1 || c.noop_max < 0)
            return s.fail("sizes must be positive");
        if (c.raw_h < 1 || c.raw_h > c.screen_h)
            return s.fail("raw_h must be in 1..screen_h");
        if (c.linear) {
            std::vector<int64_t> xa, yb;
            if (!s.get("lxi", c.lxi) || !s.get("lxa", xa) || !s.get("lyi", c.lyi) || !s.get("lyb", yb))
                return false;
            if (c.lxi.size() != (size_t)c.img_w || xa.size() != 2 * c.lxi.size() || c.lyi.size() != (size_t)c.img_h ||
                yb.size() != 2 * c.lyi.size())
                return s.fail("the linear plan's tables do not match the frame size");
            for (int64_t x : c.lxi)
                if (x < 0 || x >= kScreenW)
                    return s.fail("lxi out of range");
            for (int64_t y : c.lyi)
                if (y < 0 || y >= c.raw_h)
                    return s.fail("lyi out of range");
            for (int64_t v : xa)
                if (v < 0 || v > 4096)
                    return s.fail("lxa out of range");
            for (int64_t v : yb)
                if (v < 0 || v > 4096)
                    return s.fail("lyb out of range");
            c.lxa.assign(xa.begin(), xa.end());
            c.lyb.assign(yb.begin(), yb.end());
        } else if (!c.resize) {
            if (c.img_h != c.raw_h || c.img_w != kScreenW)
                return s.fail("without an area plan the frame must be the screen (raw_h x 160)");
        } else {
            if (!s.get("xi", c.xi) || !s.get("xw", c.xw) || !s.get("yi", c.yi) || !s.get("yw", c.yw))
                return false;
            if (c.xtaps < 1 || c.ytaps < 1 || c.xi.size() != (size_t)c.xtaps * c.img_w ||
                c.xw.size() != c.xi.size() || c.yi.size() != (size_t)c.ytaps * c.img_h || c.yw.size() != c.yi.size())
                return s.fail("the area plan's tables do not match the frame size");
            for (int64_t x : c.xi)
                if (x < 0 || x >= kScreenW)
                    return s.fail("xi out of range");
            for (int64_t y : c.yi)
                if (y < 0 || y >= c.raw_h)
                    return s.fail("yi out of range");
        }
        const std::string error = resolve(&api, c.lib);
        return error.empty() ? true : s.fail(error);
    }

    size_t obs_bytes() const { return (size_t)cfg.stack_num * cfg.channels * cfg.img_h * cfg.img_w; }

    void init_scratch(Scratch &s) const {
        s.rows.assign((size_t)cfg.raw_h * cfg.img_w, 0.0f);
        s.line.assign((size_t)(cfg.img_w > kScreenW ? cfg.img_w : kScreenW), 0.0f);
        if (cfg.linear) {
            s.r0.assign((size_t)cfg.img_w, 0);
            s.r1.assign((size_t)cfg.img_w, 0);
        }
    }

    // ------------------------------------------------------------ building
    void build(Env &e, int64_t, int64_t seed) {
        const size_t screen = (size_t)cfg.screen_h * kScreenW;
        e.api = &api;
        e.screen[0].assign(screen * cfg.channels, 0);
        e.screen[1].assign(screen * cfg.channels, 0);
        if (cfg.channels == 3) {
            e.plane[0].assign((size_t)cfg.raw_h * kScreenW, 0);
            e.plane[1].assign((size_t)cfg.raw_h * kScreenW, 0);
        }
        e.stack.assign(obs_bytes(), 0);
        api.construct(e.ale);
        e.built = true;
        e.first_seed = seed;
    }

    // Env 0 is loaded now (the action set; the screen's size checked); the others load at
    // their first reset (loading a ROM is slow: a seeded first reset would load it twice).
    void built(Env &first) {
        load(first, first.first_seed);
        actions = cfg.legal_actions ? api.legal_actions(first.ale) : api.minimal_actions(first.ale);
        bool has_fire = false;  // AtariEnv: a fire reset only in games whose action set has FIRE
        for (int a : actions)
            has_fire = has_fire || a == cfg.fire_action;
        cfg.fire = cfg.fire && has_fire;
        grab(first, 0);
        const size_t want = (size_t)cfg.screen_h * kScreenW * cfg.channels;
        if (first.screen[0].size() != want)
            throw std::runtime_error("the ROM's screen has " + std::to_string(first.screen[0].size()) +
                                     " bytes, the configuration says " + std::to_string(want));
    }

    void facts(Facts &out) const {
        out.emplace_back("num_actions", (int64_t)actions.size());
        out.emplace_back("screen_h", cfg.screen_h);
    }

    // ------------------------------------------------------------ one game
    int act(Env &e, int a) { return api.act(e.ale, a, 1.0f); }

    void grab(Env &e, int k) {
        if (cfg.channels == 1)
            api.gray(e.ale, e.screen[k]);
        else
            api.rgb(e.ale, e.screen[k]);
    }

    // A fresh ROM with this seed (AtariEnv.reset(seed=...): ALE reads its seed at load).
    void load(Env &e, int64_t seed) {
        api.set_float_value(e.ale, "repeat_action_probability", (float)cfg.sticky);
        api.set_int_value(e.ale, "random_seed", (int)seed);
        api.load(e.ale, cfg.rom.c_str());
        e.loaded = true;
        if (cfg.mode >= 0)
            api.set_mode(e.ale, (unsigned)cfg.mode);
        if (cfg.difficulty >= 0)
            api.set_difficulty(e.ale, (unsigned)cfg.difficulty);
    }

    // Shift the stack down one plane and write screen ``a``, max-pooled with ``b`` when ``pool``
    // and resized, as its last plane.
    void push_plane(uint8_t *a, const uint8_t *b, bool pool, uint8_t *stack, int depth, Scratch &s) {
        const int h = cfg.img_h, w = cfg.img_w;
        if (cfg.linear) {
            linear_push(a, b, pool && a != b, stack, depth, h, w, cfg.raw_h, kScreenW, cfg.lxi.data(), cfg.lxa.data(),
                        cfg.lyi.data(), cfg.lyb.data(), s.r0.data(), s.r1.data());
            return;
        }
        if (cfg.resize) {
            area_push(a, b, pool && a != b, stack, depth, h, w, cfg.raw_h, kScreenW, cfg.xi.data(), cfg.xw.data(),
                      cfg.xtaps, cfg.yi.data(), cfg.yw.data(), cfg.ytaps, s.rows.data(), s.line.data());
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
    void push(Env &e, bool new_game, bool pool, Scratch &s) {
        const int c = cfg.channels, depth = cfg.stack_num * c;
        uint8_t *stack = e.stack.data();
        const size_t frame = (size_t)cfg.img_h * cfg.img_w;
        if (c == 1) {
            push_plane(e.screen[0].data(), e.screen[1].data(), pool, stack, depth, s);
        } else {  // RGB: each channel as a plane, pushed in order (channels first, as EnvPool)
            const size_t raw = (size_t)cfg.raw_h * kScreenW;
            const uint8_t *a = e.screen[0].data(), *b = e.screen[1].data();
            for (int ch = 0; ch < 3; ch++) {
                uint8_t *pa = e.plane[0].data(), *pb = e.plane[1].data();
                for (size_t p = 0; p < raw; p++) {
                    pa[p] = a[3 * p + ch];
                    pb[p] = b[3 * p + ch];
                }
                push_plane(pa, pb, pool, stack, depth, s);
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

    // AtariEnv.reset, into the env's stack (``fresh``: its first reset, or after an op that did
    // not finish; a seeded reset reloads the ROM with the seed).
    void reset(Env &e, Context<Atari> &ctx, bool fresh) {
        const int64_t i = ctx.i;
        if (ctx.seed != nullptr)
            load(e, *ctx.seed);
        else if (!e.loaded)
            load(e, e.first_seed);
        const bool full = fresh || ctx.seed != nullptr;
        int noops = 0;
        if (cfg.noop_max) {
            const int32_t *stock = ctx.column<const int32_t>(kStock);
            int32_t *used = ctx.column<int32_t>(kStockUsed);
            if (ctx.column_items(kStock) < (size_t)(i + 1) * cfg.stock_len)
                throw std::runtime_error("the no-op stock column is too short");
            if (used[i] >= cfg.stock_len)
                throw std::runtime_error("the no-op stock ran out (the engine's restock failed)");
            noops = stock[(size_t)i * cfg.stock_len + used[i]] - (cfg.fire ? 1 : 0);
            used[i]++;
        }
        bool new_game = full || !cfg.episodic_life || api.game_over(e.ale, true) || !e.life_lost ||
                        cfg.loss_full || (cfg.limit && e.elapsed >= cfg.limit);
        if (new_game) {
            api.reset_game(e.ale);
            e.elapsed = 0;
        }
        if (cfg.fire && cfg.fire_first)
            act(e, cfg.fire_action);
        for (int k = 0; k < noops; k++) {
            ctx.check();  // noop_max may be huge: a discard, a close or Ctrl-C ends the loop
            act(e, cfg.noop_action);
            if (api.game_over(e.ale, true)) {
                api.reset_game(e.ale);
                new_game = true;
            }
        }
        if (cfg.fire && !cfg.fire_first)
            act(e, cfg.fire_action);
        grab(e, 0);
        push(e, new_game, false, ctx.scratch);
        e.life_lost = false;
        e.lives = api.lives(e.ale);
        e.raw_reward = 0.0;
    }

    // AtariEnv.advance: returns the (clipped) reward; sets the flags.
    double step(Env &e, Context<Atari> &ctx, const Action &a, bool &terminated, bool &truncated) {
        if (a < 0 || a >= (int64_t)actions.size())
            throw envhive::ActionOutside("action " + std::to_string(a) + " is outside Discrete(" +
                                         std::to_string(actions.size()) + ")");
        const int action = actions[(size_t)a];
        const int pooled = cfg.frame_skip < 2 ? cfg.frame_skip : 2;
        int skip = cfg.frame_skip, reward = 0;
        bool over = false;
        while (skip > 0 && !over) {
            reward += act(e, action);
            over = api.game_over(e.ale, true);
            if (skip <= pooled)
                grab(e, pooled - skip);
            skip--;
            if ((skip & 63) == 0)
                ctx.check();  // a huge frame_skip
        }
        push(e, false, cfg.maxpool && cfg.frame_skip > 1 && skip == 0, ctx.scratch);
        e.elapsed++;
        const bool trunc = cfg.limit && e.elapsed >= cfg.limit;
        const int lives = api.lives(e.ale);
        e.life_lost = 0 < lives && lives < e.lives;
        const bool ended = over || trunc || (cfg.episodic_life && e.life_lost);
        e.lives = lives;
        e.raw_reward = (double)reward;
        terminated = ended && !trunc;  // EnvPool: truncated wins when both happen
        truncated = trunc;
        if (cfg.reward_clip)
            return reward > 0 ? 1.0 : reward < 0 ? -1.0 : 0.0;
        return (double)reward;
    }

    void observe(const Env &e, uint8_t *dst) const { memcpy(dst, e.stack.data(), e.stack.size()); }

    void info(const Env &e, const InfoOut &out) const {
        out.put<int32_t>(0, e.lives);
        out.put<float>(1, (float)e.raw_reward);
        out.put<int32_t>(2, api.game_over(e.ale, true) ? 1 : 0);
        if (cfg.ram_info)
            out.put_bytes(3, api.ram(e.ale), kRamBytes);
        out.put<int32_t>(4, e.elapsed);
    }

    // AtariEnv.render: the RGB screen's rows frames are made of (raw_h: all of them, or
    // EnvPool's top 210), (raw_h, 160, 3). An env not reset yet loads its ROM first, as
    // AtariEnv has it loaded from the start (its reset then loads nothing more).
    size_t render_bytes() const { return (size_t)cfg.raw_h * kScreenW * 3; }

    void render(Env &e, uint8_t *dst) {
        if (!e.loaded)
            load(e, e.first_seed);
        const size_t screen = (size_t)cfg.screen_h * kScreenW * 3;
        Bytes rgb(screen);
        api.rgb(e.ale, rgb);
        if (rgb.size() != screen)
            throw std::runtime_error("ALE's RGB screen has " + std::to_string(rgb.size()) + " bytes, expected " +
                                     std::to_string(screen));
        memcpy(dst, rgb.data(), render_bytes());  // the top rows
    }
};

}  // namespace envhive_atari

#endif /* ENVHIVE_ALE_GAME_H */
