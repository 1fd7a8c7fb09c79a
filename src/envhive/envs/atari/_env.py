"""One Atari game with EnvPool's preprocessing, as a ``gymnasium.Env`` (ALE + numpy + OpenCV).

This is the env every executor runs for ``envhive/<Game>-v5`` (the process executor by
default, since ALE's ``act`` holds the GIL): one class, so every executor gives the same frames
for a seed by construction. Step for step it follows EnvPool's ``atari_env.h``:

* **step**: the action is repeated ``frame_skip`` frames, stopping early at game over; the
  grayscale (or RGB) screens of the last two frames are max-pooled (only when the skip ran to
  its end, as EnvPool), resized with ``cv2.INTER_AREA`` and pushed onto the frame stack. The
  episode ends at game over, at ``max_episode_steps`` agent steps (``truncated``) and, with
  ``episodic_life``, on a life loss (``terminated``).
* **reset**: a new game (or, after a life loss with ``episodic_life``, the same game goes on),
  then ``1..noop_max`` no-op frames (one fewer with a fire reset), then FIRE in games that have
  it; the stack is filled with the first frame.
* **infos**: ``lives``, ``reward`` (unclipped), ``terminated`` (game over, as int32) and
  ``elapsed_step``, with EnvPool's dtypes; with ``ram_info``, ``ram`` (ALE's 128 bytes of the
  console's RAM, uint8), as EnvPool's Atari envs give it.

Seeds: ``reset(seed=s)`` reloads the ROM with an ALE seed drawn from ``s`` (sticky actions and
the game's own randomness) and restarts the no-op generator, so a seeded reset reproduces a
fresh env's episode. An unseeded reset continues both.

Examples:
    >>> env = AtariEnv("pong")
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, obs.dtype.name, sorted(info)
    ((4, 84, 84), 'uint8', ['elapsed_step', 'lives', 'reward', 'terminated'])
    >>> obs, reward, terminated, truncated, info = env.step(0)
    >>> int(info["elapsed_step"]), env.action_space
    (1, Discrete(6))
    >>> env.close()
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envhive._extras import require
from envhive.envs.atari._frames import area_plan
from envhive.envs.atari._options import AtariOptions, game_name, rom_of_game
from envhive.errors import ActionError, ConfigError, ResetNeededError

__all__ = ["AtariEnv", "EnvPoolNoops", "seed_words", "noop_rng", "draw_noops", "check_mode"]


def _int32(word: int) -> int:
    """``word``'s low 32 bits as a signed int (ALE's ``random_seed`` is an int)."""
    return int(np.int32(np.uint32(word & 0xFFFFFFFF).view(np.int32)))


def seed_words(seed: int | None, envpool: bool = False) -> tuple[int, int]:
    """``(no-op generator seed, ALE seed)`` for a reset with ``seed`` (``None``: OS entropy).

    By default both are drawn as gymnasium's ALE env draws them (``SeedSequence(seed)``: two
    words), so that a seed gives the no-op starts and sticky actions of
    ``gymnasium.make("ALE/...", frameskip=1)`` wrapped in ``AtariPreprocessing``. With
    ``envpool`` (the ``envpool_seeding`` option) a seed is both, as EnvPool uses an env's seed.

    Examples:
        >>> seed_words(0) == seed_words(0), seed_words(0) != seed_words(1)
        (True, True)
        >>> seed_words(7, envpool=True)
        (7, 7)
    """
    if envpool and seed is not None:
        return int(seed) & 0xFFFFFFFF, _int32(int(seed))
    np_seed, ale_seed = np.random.SeedSequence(seed).generate_state(n_words=2)
    return int(np_seed), _int32(int(ale_seed))


class EnvPoolNoops:
    """EnvPool's no-op draws: ``std::mt19937`` seeded with the env's seed, and
    ``std::uniform_int_distribution<int>(0, noop_max - 1)`` over it as libstdc++ computes it
    for a 32-bit generator (GCC 11 and later, which builds EnvPool's wheels: Lemire's
    multiply-and-shift, a draw again when the low word falls under the threshold).
    ``tests/atari/test_envpool_seeding.py`` holds it equal to the C++ library and EnvPool's
    episodes equal to envhive's.

    Examples:
        >>> g = EnvPoolNoops(0)
        >>> [g.below(30) for _ in range(5)]
        [16, 17, 21, 25, 18]
    """

    def __init__(self, seed: int) -> None:
        self._bits = np.random.MT19937(0)
        self._bits._legacy_seeding(int(seed) & 0xFFFFFFFF)  # std::mt19937(seed): init_genrand

    def below(self, n: int) -> int:
        """A draw in ``0..n-1`` (``1 <= n <= 2**32``)."""
        raw = self._bits.random_raw
        product = int(raw()) * n
        low = product & 0xFFFFFFFF
        if low < n:
            threshold = ((1 << 32) - n) % n
            while low < threshold:
                product = int(raw()) * n
                low = product & 0xFFFFFFFF
        return product >> 32


def noop_rng(np_seed: int, envpool: bool = False) -> np.random.Generator | EnvPoolNoops:
    """The no-op generator of an env seeded with ``np_seed`` (the first of :func:`seed_words`)."""
    return EnvPoolNoops(np_seed) if envpool else np.random.default_rng(np_seed)


def draw_noops(rng: np.random.Generator | EnvPoolNoops, noop_max: int) -> int:
    """A reset's no-op count before the fire reset's adjustment: EnvPool's ``1..noop_max``,
    drawn as gymnasium's ``AtariPreprocessing`` draws it (one scalar draw per reset), or from
    an :class:`EnvPoolNoops` as EnvPool draws it.

    Examples:
        >>> 1 <= draw_noops(np.random.default_rng(0), 30) <= 30
        True
        >>> draw_noops(EnvPoolNoops(0), 30)
        17
    """
    if isinstance(rng, EnvPoolNoops):
        return rng.below(noop_max) + 1
    return int(rng.integers(1, noop_max + 1))


def _load_ale(rom: str, options: AtariOptions, seed: int) -> Any:
    """A fresh ALE with ``rom`` loaded, seeded with ``seed`` (ALE reads its seed at load)."""
    ale_py = require("ale_py", "atari", "envhive's Atari envs")
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    ale = ale_py.ALEInterface()
    ale.setFloat("repeat_action_probability", float(options.repeat_action_probability))
    ale.setInt("random_seed", int(seed))
    ale.loadROM(str(ale_py.roms.get_rom_path(rom)))
    check_mode(options, ale.getAvailableModes(), ale.getAvailableDifficulties())
    _set_mode(ale, options)
    return ale


def _set_mode(ale: Any, options: AtariOptions) -> None:
    if options.mode >= 0:
        ale.setMode(options.mode)
    if options.difficulty >= 0:
        ale.setDifficulty(options.difficulty)


def check_mode(options: AtariOptions, modes: Any, difficulties: Any) -> None:
    """Raise :class:`ConfigError` when ``options`` ask for a mode or difficulty the ROM does
    not have (``modes``/``difficulties``: ALE's lists for it).

    Examples:
        >>> try:
        ...     check_mode(AtariOptions("pong", mode=99), [0, 1], [0, 1, 2, 3])
        ... except ConfigError as err:
        ...     print(err)
        envhive/Pong-v5: mode: expected one of the ROM's modes [0, 1] (or -1: its default), got 99
    """
    for name, value, valid in (("mode", options.mode, modes), ("difficulty", options.difficulty, difficulties)):
        valid = sorted(int(v) for v in valid)
        if value != -1 and value not in valid:
            noun = "difficulties" if name == "difficulty" else "modes"
            raise ConfigError(f"{options_id(options)}: {name}: expected one of the ROM's {noun} {valid} "
                              f"(or -1: its default), got {value}")


def options_id(options: AtariOptions) -> str:
    return f"envhive/{game_name(options.game)}-v5"


class AtariEnv(gym.Env):
    """One Atari game with EnvPool's preprocessing (see the module docstring).

    Args:
        game: a ROM id (``"pong"``) or game name (``"Pong"``) shipped with ale-py.
        **kwargs: EnvPool's Atari options (or ale-py's aliases); see
            :class:`envhive.envs.atari.AtariOptions`.

    Raises:
        ConfigError: an unknown game, keyword or value.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}

    def __init__(self, game: str = "pong", **kwargs: Any) -> None:
        rom = rom_of_game(game)
        self.options = o = AtariOptions.parse(rom, kwargs)
        self.id = f"envhive/{game_name(rom)}-v5"
        self.render_mode = o.render_mode
        self._rom = rom
        # Unseeded until a reset brings a seed: one draw of OS entropy for the generator of
        # no-ops, and the ALE seed from it (ALE reads its seed when the ROM loads).
        ale_seed = self._seed(None)
        self.ale = _load_ale(rom, o, ale_seed)
        actions = self.ale.getLegalActionSet() if o.full_action_space else self.ale.getMinimalActionSet()
        self._actions = list(actions)
        action = require("ale_py", "atari", "envhive's Atari envs").Action
        self._noop, self._fire_action = action.NOOP, action.FIRE
        self._fire = o.use_fire_reset and any(a == self._fire_action for a in self._actions)
        channels = 1 if o.gray_scale else 3
        self._channels = channels
        # The ROM's whole screen (210 lines, or up to 250); frames are made of all of it, or
        # of EnvPool's top 210 lines (``envpool_crop``).
        height, width = (int(d) for d in self.ale.getScreenDims())
        self._rows = min(height, 210) if o.envpool_crop else height
        raw = (height, width) if o.gray_scale else (height, width, 3)
        self._pool = [np.zeros(raw, np.uint8), np.zeros(raw, np.uint8)]
        self._frames = [p[:self._rows] for p in self._pool]  # the rows frames are made of
        self._stack = np.zeros(o.obs_shape, np.uint8)
        self._resized = np.zeros((o.img_height, o.img_width) + ((3,) if channels == 3 else ()), np.uint8)
        self._screen = self.ale.getScreenGrayscale if o.gray_scale else self.ale.getScreenRGB
        # Gray frames shrunk by OpenCV's generic area path are resized in C, bit-identical;
        # OpenCV is imported only for the others (it adds ~30 MB to each worker process).
        self._plan = (area_plan((self._rows, width), (o.img_height, o.img_width))
                      if o.gray_scale and o.use_inter_area_resize else None)
        self._cv2: Any = None
        if self._plan is None:
            self._cv2 = require("cv2", "atari", "envhive's Atari envs (frame resizing)")
            self._interp = self._cv2.INTER_AREA if o.use_inter_area_resize else self._cv2.INTER_LINEAR
        self._observation_space: gym.spaces.Box | None = None  # built when first asked for
        self.action_space = gym.spaces.Discrete(len(self._actions))
        self.max_episode_steps = o.max_episode_steps
        self._limit = o.max_episode_steps or 0
        self._elapsed = 0
        self._lives = 0
        self._done = True  # no episode yet: step() needs a reset first
        self._started = False
        self._life_lost = False
        #: The unclipped reward of the last step (0 after a reset).
        self.raw_reward = 0.0

    @property  # type: ignore[override]
    def observation_space(self) -> gym.spaces.Box:
        """``Box(0, 255, frames.shape, uint8)``, built on first use: its bound arrays cost
        ~110 KB per env, which the batched engine's workers never read."""
        if self._observation_space is None:
            self._observation_space = gym.spaces.Box(0, 255, self._stack.shape, np.uint8)
        return self._observation_space

    @observation_space.setter
    def observation_space(self, space: gym.spaces.Box) -> None:
        self._observation_space = space

    def _seed(self, seed: int | None) -> int:
        """Restart the no-op generator from ``seed`` and return the ALE seed, both drawn as
        gymnasium's ALE env draws them (``SeedSequence(seed)``: two words), so that a seed
        gives the no-op starts and sticky actions of ``gymnasium.make("ALE/...", frameskip=1)``
        wrapped in ``AtariPreprocessing``."""
        envpool = self.options.envpool_seeding
        np_seed, ale_seed = seed_words(seed, envpool)
        self._rng = noop_rng(np_seed, envpool)
        return ale_seed

    # -- reset ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode (see the module docstring).

        Args:
            seed: restart the env's randomness from this seed (ALE and the no-op draws).
            options: ``{"full_reset": True}`` starts a new game even after a life loss.
        """
        o, ale = self.options, self.ale
        full = not self._started or seed is not None or bool((options or {}).get("full_reset"))
        if seed is not None:
            ale.setInt("random_seed", self._seed(seed))
            ale.loadROM(str(require("ale_py", "atari", "Atari").roms.get_rom_path(self._rom)))
            _set_mode(ale, o)
        self._started = True
        # EnvPool's count (1..noop_max, one fewer with a fire reset), drawn as gymnasium's
        # AtariPreprocessing draws it.
        noops = draw_noops(self._rng, o.noop_max) - int(self._fire) if o.noop_max else 0
        new_game = (full or not o.episodic_life or ale.game_over() or not self._life_lost
                    or o.life_loss_reset == "full" or (self._limit and self._elapsed >= self._limit))
        if new_game:
            ale.reset_game()
            self._elapsed = 0
        if self._fire and o.reset_order == "fire_noop":
            ale.act(self._fire_action)
        for _ in range(max(noops, 0)):
            ale.act(self._noop)
            if ale.game_over():
                ale.reset_game()
                new_game = True
        if self._fire and o.reset_order == "noop_fire":
            ale.act(self._fire_action)
        self._screen(self._pool[0])
        self._push(bool(new_game), maxpool=False)
        self._done = False
        self._life_lost = False
        self._lives = ale.lives()
        self.raw_reward = 0.0
        return self._stack.copy(), self._info(0.0)

    def _info(self, reward: float) -> dict[str, Any]:
        info = {
            "lives": np.int32(self._lives),
            "reward": np.float32(reward),
            "terminated": np.int32(self.ale.game_over()),
        }
        if self.options.ram_info:  # EnvPool's order: ram before elapsed_step
            info["ram"] = self.ale.getRAM()
        info["elapsed_step"] = np.int32(self._elapsed)
        return info

    def _push(self, push_all: bool, maxpool: bool) -> None:
        """Max-pool the two captured screens (if asked), resize, push onto the stack; with
        ``push_all`` (a new game) pad the rest of the stack as ``stack_padding`` says."""
        o, stack, c, (frame, other) = self.options, self._stack, self._channels, self._frames
        if self._plan is not None:  # C, bit-identical to cv2 (envs/atari/_frames.py)
            self._plan.push(frame, other, maxpool, stack)
        else:
            if maxpool:
                np.maximum(frame, other, out=frame)
            if (o.img_height, o.img_width) == frame.shape[:2]:
                self._resized[...] = frame
            else:
                self._cv2.resize(frame, (o.img_width, o.img_height), dst=self._resized,
                                 interpolation=self._interp)
            stack[:-c] = stack[c:]
            stack[-c:] = self._resized if c == 1 else self._resized.transpose(2, 0, 1)
        if push_all and o.stack_padding == "zeros":
            stack[:-c] = 0
        elif push_all and o.stack_padding == "repeat":
            stack[:-c] = np.tile(stack[-c:], (o.stack_num - 1, 1, 1))

    # -- step ----------------------------------------------------------------------------
    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One agent step: ``frame_skip`` emulator frames of ``action`` (an index into the
        action set)."""
        if self._done:
            raise ResetNeededError(f"{self.id}: call reset() before step() (the episode ended)")
        try:
            a = int(action)
        except (TypeError, ValueError):
            raise ActionError(f"{self.id}: action {action!r} is not in {self.action_space}") from None
        if not 0 <= a < len(self._actions) or a != action:
            raise ActionError(f"{self.id}: action {action!r} is outside {self.action_space}")
        clipped, terminated, truncated = self.advance(a)
        return self._stack.copy(), clipped, terminated, truncated, self._info(self.raw_reward)

    def advance(self, a: int) -> tuple[float, bool, bool]:
        """The step itself, for a valid action index ``a``: returns ``(reward, terminated,
        truncated)``; the observation is :attr:`frames`, the unclipped reward
        :attr:`raw_reward` (what the batched engine's workers read, with no dict per step)."""
        o, ale, act = self.options, self.ale, self._actions[a]
        reward, over, pooled = 0, False, min(o.frame_skip, 2)
        skip = o.frame_skip
        while skip > 0 and not over:
            reward += ale.act(act)
            over = ale.game_over()
            if skip <= pooled:
                self._screen(self._pool[pooled - skip])
            skip -= 1
        self._push(False, maxpool=o.maxpool and o.frame_skip > 1 and skip == 0)
        self._elapsed += 1
        truncated = bool(self._limit) and self._elapsed >= self._limit
        lives = ale.lives()
        self._life_lost = 0 < lives < self._lives
        done = over or truncated or (o.episodic_life and self._life_lost)
        self._lives = lives
        self._done = done
        self.raw_reward = float(reward)
        clipped = float(np.sign(reward)) if o.reward_clip else float(reward)
        # EnvPool: truncated wins when the limit and the end coincide (terminated = done & ~trunc).
        return clipped, done and not truncated, truncated

    @property
    def frames(self) -> np.ndarray:
        """The current observation (the frame stack itself, not a copy)."""
        return self._stack

    def info_values(self) -> tuple[int, float, int, int]:
        """``(lives, reward, terminated, elapsed_step)`` of the last step or reset (the info's
        values, without the dict)."""
        return self._lives, self.raw_reward, int(self.ale.game_over()), self._elapsed

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        """The raw RGB screen (``render_mode="rgb_array"``), shape ``(height, 160, 3)``: the
        ROM's whole screen (210 lines for most ROMs), or with ``envpool_crop`` its top 210
        lines, as EnvPool renders."""
        if self.render_mode != "rgb_array":
            return None
        return np.asarray(self.ale.getScreenRGB())[:self._rows]

    def close(self) -> None:
        """Release the emulator."""
        self.ale = None
