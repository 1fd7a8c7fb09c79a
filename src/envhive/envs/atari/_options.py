"""Atari options: EnvPool's names, meanings and defaults, with ale-py's spellings as aliases.

A user coming from ``envpool.make("Pong-v5", ...)`` keeps every keyword; one coming from
``ale_py.vector_env.AtariVectorEnv`` may use its spellings (``grayscale``, ``frameskip``,
``reward_clipping``, ``max_num_frames_per_episode``). Where the two libraries behave
differently, EnvPool's behaviour is the default and ale-py's is an option:

==========================  ======================  ========================
option                      EnvPool (default)       ale-py
==========================  ======================  ========================
``reward_clip``             ``False``               ``True``
``reset_order``             ``"noop_fire"``         ``"fire_noop"``
``stack_padding``           ``"repeat"``            ``"zeros"``
``life_loss_reset``         ``"continue"``          ``"full"``
==========================  ======================  ========================

Examples:
    >>> o = AtariOptions.parse("pong", {"frameskip": 2, "reward_clipping": True})
    >>> o.frame_skip, o.reward_clip, o.max_episode_steps
    (2, True, 27000)
    >>> AtariOptions.parse("pong", {"max_num_frames_per_episode": 400}).max_episode_steps
    100
    >>> try:
    ...     AtariOptions.parse("pong", {"gray": True})
    ... except Exception as err:
    ...     print(type(err).__name__)
    UnexpectedKeywordError
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import os
from dataclasses import dataclass
from typing import Any

from envhive.engines._registry import CompiledEnv
from envhive.errors import ConfigError, ConfigTypeError, UnexpectedKeywordError

__all__ = ["AtariOptions", "ALIASES", "rom_ids", "game_name", "rom_of_game", "atari_entries", "NO_SINGLE_PLAYER",
           "NOOP_MAX_LIMIT"]

#: ale-py's spelling -> EnvPool's (``max_num_frames_per_episode`` is converted: frames to
#: agent steps).
ALIASES = {
    "grayscale": "gray_scale",
    "frameskip": "frame_skip",
    "reward_clipping": "reward_clip",
}

#: ROMs ale-py ships that ALE cannot run as a single-player game: they have no single-player
#: settings, and ALE's ``loadROM`` ends the process (``exit(1)``) on them. ale-py's own
#: gymnasium registration skips them too; envhive has no id for them.
NO_SINGLE_PLAYER = ("combat", "joust", "maze_craze", "warlords")

#: The largest ``noop_max``: no-op counts are drawn ahead into int32 columns.
NOOP_MAX_LIMIT = 2**31 - 1

_CHOICES = {
    "reset_order": ("noop_fire", "fire_noop"),
    "stack_padding": ("repeat", "zeros"),
    "life_loss_reset": ("continue", "full"),
    "render_mode": (None, "rgb_array"),
}


@dataclass(frozen=True)
class AtariOptions:
    """The options of one Atari env (EnvPool's names and v5 defaults).

    Attributes:
        game: the ROM id (``"pong"``, ``"ms_pacman"``).
        img_height: observation height after resizing.
        img_width: observation width after resizing.
        gray_scale: grayscale frames (else RGB, channels first as EnvPool: ``(stack*3, h, w)``).
        stack_num: frames stacked in one observation.
        frame_skip: emulator frames per agent step (the action is repeated).
        noop_max: a reset takes ``1..noop_max`` no-op frames (one fewer with a fire reset).
        episodic_life: a life loss ends the episode (``terminated``).
        zero_discount_on_life_loss: dm_env's discount is 0 on a life loss.
        reward_clip: rewards are clipped to their sign (``info["reward"]`` stays unclipped).
        repeat_action_probability: sticky actions (ALE's own).
        use_fire_reset: press FIRE at reset in games that have it.
        full_action_space: all 18 actions (else the game's minimal set).
        max_episode_steps: truncation after this many agent steps (``None``: none).
        use_inter_area_resize: ``cv2.INTER_AREA`` (else ``INTER_LINEAR``).
        mode: the game mode (``-1``: default).
        difficulty: the game difficulty (``-1``: default).
        maxpool: max over the last two frames of a skip.
        reset_order: ``"noop_fire"`` (EnvPool: no-ops, then FIRE) or ``"fire_noop"`` (ale-py).
        stack_padding: a new game fills the stack with its first frame (``"repeat"``,
            EnvPool) or with zeros before it (``"zeros"``, ale-py).
        life_loss_reset: with ``episodic_life``, the reset after a life loss continues the
            game (``"continue"``, EnvPool) or restarts it (``"full"``, ale-py).
        render_mode: ``None`` or ``"rgb_array"`` (the raw screen).
        ram_info: add ``info["ram"]``, the console's 128 bytes of RAM after the step or reset
            (``uint8[128]``, as EnvPool's Atari envs give it; off by default: it costs a copy
            of 128 bytes per env and step).
        envpool_crop: EnvPool's frames: resize (and render) only the top 210 lines of the
            screen, as EnvPool does (envhive uses the whole screen; they differ only for the 13
            ROMs whose screen is taller, e.g. AirRaid, Carnival, Pooyan). For EnvPool
            compatibility.
        envpool_seeding: EnvPool's episodes for a seed: an env's seed is ALE's seed and seeds
            the ``std::mt19937`` its no-op counts are drawn from, as EnvPool draws them
            (envhive draws both from the seed as gymnasium's ALE env and
            ``AtariPreprocessing`` do). For EnvPool compatibility.
    """

    game: str
    img_height: int = 84
    img_width: int = 84
    gray_scale: bool = True
    stack_num: int = 4
    frame_skip: int = 4
    noop_max: int = 30
    episodic_life: bool = False
    zero_discount_on_life_loss: bool = False
    reward_clip: bool = False
    repeat_action_probability: float = 0.0
    use_fire_reset: bool = True
    full_action_space: bool = False
    max_episode_steps: int | None = 27000
    use_inter_area_resize: bool = True
    mode: int = -1
    difficulty: int = -1
    maxpool: bool = True
    reset_order: str = "noop_fire"
    stack_padding: str = "repeat"
    life_loss_reset: str = "continue"
    render_mode: str | None = None
    ram_info: bool = False
    envpool_crop: bool = False
    envpool_seeding: bool = False

    @property
    def obs_shape(self) -> tuple[int, int, int]:
        """An observation's shape: the stack of frames, channels first.

        Examples:
            >>> AtariOptions("pong", gray_scale=False, stack_num=2).obs_shape
            (6, 84, 84)
        """
        return (self.stack_num * (1 if self.gray_scale else 3), self.img_height, self.img_width)

    @classmethod
    def parse(cls, game: str, kwargs: dict[str, Any]) -> AtariOptions:
        """Options from keyword arguments (EnvPool's names or ale-py's aliases), checked.

        Raises:
            UnexpectedKeywordError: an unknown keyword (with close matches).
            ConfigError: a value of the wrong type or out of range, or an option given twice.
        """
        fields = {f.name for f in dataclasses.fields(cls)} - {"game"}
        values: dict[str, Any] = {}
        for key, value in kwargs.items():
            name = ALIASES.get(key, key)
            if key == "max_num_frames_per_episode":
                name = "max_episode_steps"
            if name not in fields:
                near = difflib.get_close_matches(key, [*fields, *ALIASES], n=3)
                hint = f"; did you mean {', '.join(near)}?" if near else ""
                raise UnexpectedKeywordError(
                    f"envhive/{game_name(game)}-v5: __init__() got an unexpected keyword argument "
                    f"{key!r}{hint}"
                )
            if name in values:
                raise ConfigError(f"envhive/{game_name(game)}-v5: option {name!r} given twice (as {key!r})")
            values[name] = value
        frames = kwargs.get("max_num_frames_per_episode")
        if frames is not None:
            skip = values.get("frame_skip", cls.frame_skip)
            values["max_episode_steps"] = _int(game, "max_num_frames_per_episode", frames, 1) // max(int(skip), 1)
        options = cls(game, **values)
        options.check()
        return options

    def check(self) -> None:
        """Raise :class:`ConfigError` naming the first option whose value is invalid."""
        g = self.game
        for name in ("img_height", "img_width", "stack_num", "frame_skip"):
            _int(g, name, getattr(self, name), 1)
        _int(g, "noop_max", self.noop_max, 0, NOOP_MAX_LIMIT)
        _int(g, "mode", self.mode, -1)
        _int(g, "difficulty", self.difficulty, -1)
        if self.max_episode_steps is not None:
            _int(g, "max_episode_steps", self.max_episode_steps, 1)
        for name in ("gray_scale", "episodic_life", "zero_discount_on_life_loss", "reward_clip",
                     "use_fire_reset", "full_action_space", "use_inter_area_resize", "maxpool",
                     "ram_info", "envpool_crop", "envpool_seeding"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigTypeError(f"envhive/{game_name(g)}-v5: {name}: expected a bool, got {getattr(self, name)!r}")
        p = self.repeat_action_probability
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ConfigError(f"envhive/{game_name(g)}-v5: repeat_action_probability: expected a float in [0, 1], got {p!r}")
        for name, choices in _CHOICES.items():
            if getattr(self, name) not in choices:
                raise ConfigError(
                    f"envhive/{game_name(g)}-v5: {name}: expected one of {choices}, got {getattr(self, name)!r}"
                )


def _int(game: str, name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        valid = f"in {low}..{high}" if high is not None else f">= {low}"
        raise ConfigError(f"envhive/{game_name(game)}-v5: {name}: expected an int {valid}, got {value!r}")
    return value


def game_name(rom: str) -> str:
    """The id's game name for a ROM id, as EnvPool and gymnasium spell it.

    Examples:
        >>> game_name("ms_pacman"), game_name("pong")
        ('MsPacman', 'Pong')
    """
    return "".join(part.capitalize() for part in rom.split("_"))


def _rom_dir() -> str | None:
    """ale-py's ROM directory, found without importing ale_py (envhive's import stays light)."""
    spec = importlib.util.find_spec("ale_py")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "roms")


_ROMS: list[str] | None = None


def rom_ids() -> list[str]:
    """The ROM ids ale-py ships that ALE runs as single-player games (``[]`` when ale-py is
    not installed), sorted: every ROM but :data:`NO_SINGLE_PLAYER`.

    Examples:
        >>> "pong" in rom_ids() or rom_ids() == []
        True
    """
    global _ROMS
    if _ROMS is None:
        path = _rom_dir()
        names = os.listdir(path) if path and os.path.isdir(path) else []
        _ROMS = sorted(n[:-4] for n in names if n.endswith(".bin") and n[:-4] not in NO_SINGLE_PLAYER)
    return _ROMS


def rom_of_game(game: str) -> str:
    """The ROM id of a game name (``"MsPacman"`` or ``"ms_pacman"``).

    Examples:
        >>> rom_of_game("MsPacman") if rom_ids() else "ms_pacman"
        'ms_pacman'
    """
    roms = {game_name(r): r for r in rom_ids()}
    if game in roms.values():
        return game
    if game in roms:
        return roms[game]
    for rom in NO_SINGLE_PLAYER:
        if game in (rom, game_name(rom)):
            raise ConfigError(f"Atari game {game!r}: ALE has no single-player version of this ROM "
                              "(its loadROM would end the process); ale-py registers no env for it either")
    near = difflib.get_close_matches(game, list(roms), n=3)
    raise ConfigError(
        f"Atari game {game!r}: expected a ROM shipped with ale-py (pip install 'envhive[atari]')"
        + (f"; did you mean {', '.join(near)}?" if near else "")
    )


def atari_entries() -> list[CompiledEnv]:
    """The ``"atari"`` engine kind's ids: ``envhive/<Game>-v5`` per ROM ale-py ships (none
    without ale-py), listed the first time ids are listed.

    Examples:
        >>> all(e.engine == "atari" for e in atari_entries())
        True
    """
    return [CompiledEnv(f"envhive/{game_name(rom)}-v5", "atari", "envhive.envs.atari:AtariEnv",
                        kwargs=(("game", rom),)) for rom in rom_ids()]
