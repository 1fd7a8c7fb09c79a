"""The Atari engine: every game of the batch in this process, stepped by C++ threads.

This is what the native executor runs for ``envhive/<Game>-v5`` (``_factory.py`` decides
where it can: :func:`unsupported` here, and ``_ale.binding_problem``): the games live in one
process and are stepped by ``num_threads`` runners with the GIL released, as EnvPool and
ale-py's ``AtariVectorEnv`` do. ALE's ``act`` holds the GIL in ale-py's Python binding, so the
C++ side (``_alethreads``: the game ``_ale_game.h`` on envhive's threaded batch core,
``engines/include/envhive/threaded_batch.h``) calls ALE's C++ API directly, through the
symbols ale-py's extension exports (``_ale_api.h``; nothing of ALE is compiled here).

The core runs each env's whole op (``envhive._ops``: STEP, RESET, STEP_RESET with its terminal
frame kept) as :class:`~envhive.envs.atari.AtariEnv` does through ``EnvRunner``; everything
around it in Python is the shared :class:`~envhive.engines._threaded.ThreadedEngine`; this
module adds what needs Python: the configuration (options, op codes, the area tables of
``_frames.area_taps``), and the seeds: a seeded reset's ALE seed and no-op generator, drawn as
``AtariEnv.reset(seed=)`` draws them, and the no-op counts drawn ahead from each env's own
generator in the order ``AtariEnv`` would draw them, so a seed gives the same episode on every
executor.

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0)
    >>> obs, info = env.reset()
    >>> obs, rew, term, trunc, info = env.step(np.zeros(4, np.int64))
    >>> obs.shape, info["elapsed_step"].tolist()
    ((4, 4, 84, 84), [1, 1, 1, 1])
    >>> env.close()
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive._extras import require
from envhive._report import EnvProps
from envhive.engines._threaded import ThreadedEngine
from envhive.envs.atari._ale import rom_facts
from envhive.envs.atari._frames import AreaPlan, area_plan, linear_matches_opencv, linear_taps
from envhive.envs.atari._options import AtariOptions, game_name, rom_of_game

try:
    from envhive.envs.atari import _alethreads  # type: ignore[attr-defined]
except ImportError:  # no C++ compiler at install, or not Linux
    _alethreads = None

if TYPE_CHECKING:
    from envhive.engines import AsyncEngine, Engine

__all__ = ["AtariThreadEngine", "STOCK", "unsupported", "games_config", "raw_rows"]

#: No-op counts drawn ahead per env (one per reset); refilled when used up.
STOCK = 32
_WIDTH = 160  # every ROM's screen


def raw_rows(options: AtariOptions, screen_rows: int) -> int:
    """The screen rows frames are made of: all ``screen_rows``, or EnvPool's top 210."""
    return min(screen_rows, 210) if options.envpool_crop else screen_rows


def unsupported(options: AtariOptions, screen_rows: int | None = None) -> str | None:
    """Why the threaded engine cannot run games with ``options`` on a screen of
    ``screen_rows`` lines (``None``: it can; ``screen_rows=None``: what does not depend on the
    screen only).

    Examples:
        >>> unsupported(AtariOptions("pong", img_height=105, img_width=80), 210)  # integer factors
        'frames of 105x80 from 210x160 screens: OpenCV takes another path than its generic area resize for them'
        >>> unsupported(AtariOptions("pong", use_inter_area_resize=False), 210) is None  # OpenCV 5 here
        True
    """
    if _alethreads is None:
        return "the C++ extension envhive.envs.atari._alethreads is not built (no C++ compiler at install?)"
    if not sys.platform.startswith("linux"):  # pragma: no cover - Linux here
        return f"the threaded engine runs on Linux only (this is {sys.platform})"
    if screen_rows is None:
        return None
    size, rows = (options.img_height, options.img_width), raw_rows(options, screen_rows)
    if size == (rows, _WIDTH):
        return None  # the screen itself
    if not options.use_inter_area_resize:
        if linear_matches_opencv((rows, _WIDTH), size, 1 if options.gray_scale else 3):
            return None
        return (f"frames of {size[0]}x{size[1]} from {rows}x{_WIDTH} screens with INTER_LINEAR: this OpenCV "
                "rounds them otherwise than the engine")
    if area_plan((rows, _WIDTH), size) is None:
        return (f"frames of {size[0]}x{size[1]} from {rows}x{_WIDTH} screens: OpenCV takes another path "
                "than its generic area resize for them")
    return None


def games_config(options: AtariOptions, screen_rows: int) -> dict[str, Any]:
    """The game's configuration (``_ale_game.h``'s ``Config``): the options, the screen, the
    resize's tables (``_frames.area_taps`` or ``linear_taps``, so nothing is written twice)
    and ALE's library and ROM files."""
    ale_py = require("ale_py", "atari", "envhive's Atari envs")
    o, rows = options, raw_rows(options, screen_rows)
    config: dict[str, Any] = {
        "frame_skip": o.frame_skip, "stack_num": o.stack_num, "img_h": o.img_height,
        "img_w": o.img_width, "channels": 1 if o.gray_scale else 3, "noop_max": o.noop_max,
        "limit": o.max_episode_steps or 0, "mode": o.mode, "difficulty": o.difficulty,
        "fire_action": int(ale_py.Action.FIRE.value), "noop_action": int(ale_py.Action.NOOP.value),
        "stock_len": STOCK, "screen_h": screen_rows, "raw_h": rows,
        "sticky": float(o.repeat_action_probability), "maxpool": o.maxpool,
        "episodic_life": o.episodic_life, "reward_clip": o.reward_clip,
        "fire_first": o.reset_order == "fire_noop", "pad_repeat": o.stack_padding == "repeat",
        "pad_zeros": o.stack_padding == "zeros", "loss_full": o.life_loss_reset == "full",
        "use_fire": o.use_fire_reset, "full_action_space": o.full_action_space, "ram_info": o.ram_info,
        "lib": ale_py._ale_py.__file__, "rom": str(ale_py.roms.get_rom_path(o.game)),
    }
    config["linear"] = False
    if (o.img_height, o.img_width) == (rows, _WIDTH):
        config.update(resize=False, xtaps=0, ytaps=0)
    elif not o.use_inter_area_resize:
        lxi, lxa = linear_taps(_WIDTH, o.img_width)
        lyi, lyb = linear_taps(rows, o.img_height)
        config.update(resize=False, xtaps=0, ytaps=0, linear=True, lxi=lxi, lxa=lxa.astype(np.int64).ravel(),
                      lyi=lyi, lyb=lyb.astype(np.int64).ravel())
    else:
        xi, xw, xtaps, yi, yw, ytaps = AreaPlan((rows, _WIDTH), (o.img_height, o.img_width))._taps
        config.update(resize=True, xi=xi, xw=xw, xtaps=xtaps, yi=yi, yw=yw, ytaps=ytaps)
    return config


class AtariThreadEngine(ThreadedEngine):
    """A batch of Atari games stepped by C++ threads in this process (see the module docstring).

    Args:
        num_envs: batch size.
        kwargs: ``AtariEnv`` keywords (``game`` and the options).
        num_threads: runners (``None``: one per usable core, at most ``num_envs``): the
            caller, which steps games while it waits, and ``num_threads - 1`` C++ threads; one
            env runs in the caller alone.
    """

    what = "the native Atari engine (use executor='process' for reset options)"

    def __init__(self, num_envs: int, kwargs: dict[str, Any], num_threads: int | None = None) -> None:
        from envhive.envs.atari._env import draw_noops, noop_rng, seed_words

        rest = dict(kwargs)
        self.options = options = AtariOptions.parse(rom_of_game(rest.pop("game", "pong")), rest)
        n = int(num_envs)
        self._draw = draw_noops
        self._seed_words = functools.partial(seed_words, envpool=options.envpool_seeding)
        self._noop_rng = functools.partial(noop_rng, envpool=options.envpool_seeding)
        # Each env's no-op generator and ALE seed, unseeded until a reset brings a seed (as
        # AtariEnv.__init__ draws them).
        words = [seed_words(None) for _ in range(n)]
        self._rngs = [self._noop_rng(np_seed) for np_seed, _ in words]
        ale_py = require("ale_py", "atari", "envhive's Atari envs")
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # ALE's logger is global
        config = games_config(options, rom_facts(options.game).screen[0])
        super().__init__(_alethreads, n, num_threads, config, [ale for _, ale in words],
                         f"envhive/{game_name(options.game)}-v5")
        self.props = _props(options, int(self._games.facts()["num_actions"]))
        self._stock = np.zeros((n, STOCK), np.int32)
        self._stock_used = np.zeros(n, np.int32)
        self._noops = options.noop_max > 0
        for i in range(n):
            self._restock(i)

    def _columns(self) -> dict[str, np.ndarray]:
        return {"stock": self._stock, "stock_used": self._stock_used}

    def _shows_info(self, name: str) -> bool:
        return name != "ram" or self.options.ram_info

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
             env_ids: Sequence[int] | None = None) -> list[Any]:
        """``render`` (as :meth:`AtariEnv.render`: each env's RGB screen, ``(height, 160, 3)``,
        with ``render_mode="rgb_array"``, else ``None``), or the shared answers."""
        if name != "render":
            return super().call(name, args, kwargs, env_ids)
        ids = range(self.num_envs) if env_ids is None else list(env_ids)
        if self.options.render_mode != "rgb_array":
            return [None] * len(ids)
        if self._discarded:
            self._settle()  # a discarded op may still be writing its env
        shape = (int(self._games.render_bytes) // (3 * _WIDTH), _WIDTH, 3)
        frames = []
        for i in ids:
            frame = np.empty(shape, np.uint8)
            self._games.render(int(i), frame)
            frames.append(frame)
        return frames

    def _restock(self, i: int) -> None:
        """Draw env ``i``'s next no-op counts from its generator, as ``AtariEnv.reset`` would
        draw them one reset after another."""
        if self._noops:
            rng, noop_max, draw = self._rngs[i], self.options.noop_max, self._draw
            self._stock[i] = [draw(rng, noop_max) for _ in range(STOCK)]
        self._stock_used[i] = 0

    def _reseed_env(self, i: int, seed: int) -> None:
        """``AtariEnv.reset(seed=)``: a new no-op generator and the ALE seed, from ``seed``."""
        np_seed, ale_seed = self._seed_words(seed)
        self._rngs[i] = self._noop_rng(np_seed)
        self._restock(i)
        self._reseed[i] = ale_seed
        self._has_reseed[i] = True

    def _refill_watch(self) -> tuple[np.ndarray, int] | None:
        """No-op counts run out when ``stock_used`` reaches ``STOCK``."""
        return (self._stock_used, STOCK) if self._noops else None

    def _refill(self, ids: np.ndarray) -> None:
        """Draw more no-op counts for the envs of ``ids`` that used theirs up."""
        if self._noops and int(self._stock_used.max()) >= STOCK:
            for i in ids[self._stock_used[ids] >= STOCK].tolist():
                self._restock(i)


def _props(options: AtariOptions, num_actions: int) -> EnvProps:
    """The games' spaces, as ``AtariEnv`` makes them."""
    import gymnasium as gym

    from envhive.envs.atari._env import AtariEnv

    return EnvProps(gym.spaces.Box(0, 255, options.obs_shape, np.uint8), gym.spaces.Discrete(num_actions),
                    dict(AtariEnv.metadata), options.render_mode, None)


if TYPE_CHECKING:

    def _implements_engine(engine: AtariThreadEngine) -> Engine:
        return engine  # mypy checks AtariThreadEngine against the Engine protocol here

    def _implements_async(engine: AtariThreadEngine) -> AsyncEngine:
        return engine  # ... and against AsyncEngine
