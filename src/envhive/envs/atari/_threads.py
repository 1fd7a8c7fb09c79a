"""Atari games stepped by C++ threads: the compiled side of the threaded Atari engine.

ALE's ``act`` holds the GIL in ale-py's Python binding, so a batch of games needs C++ threads
(EnvPool, ale-py's ``AtariVectorEnv``) or processes. ale-py's extension exports ALE's C++ API,
and ``_threads.cpp`` (the optional extension ``_alethreads``, built at install where a C++
compiler is found) steps the games through it from its own threads, with the GIL released:
each thread performs whole ops (step, reset, step then reset) of whichever env is next, rule
for rule as :class:`~envhive.envs.atari.AtariEnv` does, and writes the results into the
pool's buffers. This module says whether that path can run a set of options
(:func:`unsupported`), builds its configuration, and checks it once per process against
:class:`AtariEnv` itself (:func:`self_check`): the library's symbols are looked up by name, so
an ale-py whose C++ API differs fails that check and the engine falls back to worker
processes.

What the C++ side cannot take: frames resized other than by OpenCV's generic area path
(``use_inter_area_resize=False``, or a size that divides the screen exactly, which OpenCV
shrinks by its integer path), and platforms other than Linux.

Examples:
    >>> from envhive.envs.atari._options import AtariOptions
    >>> unsupported(AtariOptions("pong", use_inter_area_resize=False)) is not None
    True
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np

from envhive._extras import require
from envhive._ops import RESET, RESET_REWARD, STEP, STEP_RESET
from envhive.envs.atari._frames import area_plan
from envhive.envs.atari._options import AtariOptions

try:
    from envhive.envs.atari import _alethreads  # type: ignore[attr-defined]
except ImportError:  # no C++ compiler at install, or not Linux
    _alethreads = None

__all__ = ["unsupported", "games_config", "new_games", "self_check", "RAW_SHAPE"]

RAW_SHAPE = (210, 160)


def unsupported(options: AtariOptions) -> str | None:
    """Why the C++ threads cannot run games with ``options`` (``None``: they can)."""
    if _alethreads is None:
        return "the C++ extension envhive.envs.atari._alethreads is not built"
    if not sys.platform.startswith("linux"):  # pragma: no cover - Linux here
        return f"the threaded engine runs on Linux only (this is {sys.platform})"
    if not options.use_inter_area_resize:
        return "frames resized with INTER_LINEAR (the threaded engine computes INTER_AREA only)"
    if (options.img_height, options.img_width) != RAW_SHAPE and area_plan(
            RAW_SHAPE, (options.img_height, options.img_width)) is None:
        return (f"frames of {options.img_height}x{options.img_width}: OpenCV takes another path "
                "than its generic area resize for them")
    return None


def games_config(options: AtariOptions) -> dict[str, Any]:
    """The configuration ``_alethreads.Games`` takes: ``options`` and the op codes and area
    tables it must use (``envhive._ops``, ``_frames.area_taps``), so nothing is written twice."""
    ale_py = require("ale_py", "atari", "envhive's Atari envs")
    o = options
    config: dict[str, Any] = {
        "frame_skip": o.frame_skip, "stack_num": o.stack_num, "img_h": o.img_height,
        "img_w": o.img_width, "channels": 1 if o.gray_scale else 3, "noop_max": o.noop_max,
        "limit": o.max_episode_steps or 0, "mode": o.mode, "difficulty": o.difficulty,
        "fire_action": int(ale_py.Action.FIRE.value), "noop_action": int(ale_py.Action.NOOP.value),
        "op_step": STEP, "op_reset": RESET, "op_step_reset": STEP_RESET,
        "reset_reward": float(RESET_REWARD), "sticky": float(o.repeat_action_probability),
        "maxpool": o.maxpool, "episodic_life": o.episodic_life, "reward_clip": o.reward_clip,
        "fire_first": o.reset_order == "fire_noop", "pad_repeat": o.stack_padding == "repeat",
        "pad_zeros": o.stack_padding == "zeros", "loss_full": o.life_loss_reset == "full",
        "use_fire": o.use_fire_reset, "full_action_space": o.full_action_space,
    }
    plan = area_plan(RAW_SHAPE, (o.img_height, o.img_width))
    if plan is None:
        config.update(resize=False, xtaps=0, ytaps=0)
    else:
        xi, xw, xtaps, yi, yw, ytaps = plan._taps
        config.update(resize=True, xi=xi, xw=xw, xtaps=xtaps, yi=yi, yw=yw, ytaps=ytaps)
    return config


def new_games(options: AtariOptions, ale_seeds: list[int], num_threads: int) -> Any:
    """``len(ale_seeds)`` games of ``options``, each loaded with its ALE seed, stepped by
    ``num_threads`` C++ threads (``0``: by the caller alone)."""
    ale_py = require("ale_py", "atari", "envhive's Atari envs")
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # ALE's logger is global
    rom = str(ale_py.roms.get_rom_path(options.game))
    return _alethreads.Games(ale_py._ale_py.__file__, rom, np.asarray(ale_seeds, np.int64),
                             games_config(options), num_threads)


@functools.lru_cache(maxsize=1)
def self_check() -> str | None:
    """Check the C++ path once per process against :class:`AtariEnv` itself (``None``: it
    agrees; else what failed): a Pong game with sticky actions, reset with a seed, then
    stepped and reset through every op, must give the very frames, rewards and infos the
    Python env gives. It catches an ale-py whose exported C++ API changed meaning."""
    try:
        from envhive.envs.atari._env import AtariEnv, draw_noops, seed_words

        options = AtariOptions.parse("pong", {"repeat_action_probability": 0.25, "max_episode_steps": 40})
        env = AtariEnv("pong", repeat_action_probability=0.25, max_episode_steps=40)
        games = new_games(options, [seed_words(None)[1]], 0)
        shape = (1, *options.obs_shape)
        obs, final_obs = np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)
        reward, term, trunc = np.zeros(1), np.zeros(1, np.bool_), np.zeros(1, np.bool_)
        ops, actions = np.zeros(1, np.int8), np.zeros(1, np.int64)
        np_seed, ale_seed = seed_words(7)
        rng = np.random.default_rng(np_seed)
        stock = np.array([[draw_noops(rng, options.noop_max) for _ in range(4)]], np.int32)
        infos = tuple(np.zeros(1, t) for _ in range(3) for t in (np.int32, np.float32, np.int32, np.int32))
        flags = np.zeros(1, np.bool_), np.zeros(1, np.bool_)
        games.bind(obs, final_obs, reward, term, trunc, ops, actions, np.array([ale_seed], np.int64),
                   np.ones(1, np.bool_), stock, np.zeros(1, np.int32), infos, *flags)
        out = np.zeros(1, np.int64)
        want_obs, _ = env.reset(seed=7)
        ops[0] = RESET
        games.run(np.zeros(1, np.int64), out)
        if not np.array_equal(obs[0], want_obs):
            return "the reset frames differ from AtariEnv's"
        for t in range(45):
            a = (t * 7) % len(env._actions)
            want = env.step(a)
            ops[0], actions[0] = STEP_RESET, a
            games.run(np.zeros(1, np.int64), out)
            if flags[1][0]:
                return f"step {t} failed: {games.error(0)[1]}"
            got = (reward[0], bool(term[0]), bool(trunc[0]), int(infos[0][0]), int(infos[3][0]))
            expect = (want[1], want[2], want[3], int(want[4]["lives"]), int(want[4]["elapsed_step"]))
            frames = final_obs[0] if want[2] or want[3] else obs[0]
            if got != expect or not np.array_equal(frames, want[0]):
                return f"step {t} differs from AtariEnv's: {got} != {expect}"
            if want[2] or want[3]:
                want_obs, _ = env.reset()
                if not np.array_equal(obs[0], want_obs):
                    return f"the reset after step {t} differs from AtariEnv's"
        games.close()
        return None
    except Exception as err:  # any failure means: do not use the C++ path
        return f"{type(err).__name__}: {err}"
