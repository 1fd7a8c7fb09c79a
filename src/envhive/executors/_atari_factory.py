"""The ``"atari"`` engine kind's factory: one :class:`~envhive.envs.atari.AtariEnv` per env for the
general executors, or a whole batch's engine for the native executor, and the bench's peers.

Registered in ``envhive.engines._registry`` (ids listed by ``envs.atari._options.atari_entries``,
factories built by :func:`atari_factory`, bench peers by :func:`bench_peers`). The native
executor's engine is the threaded one (``executors/_atari_threads.py``: C++ threads in this
process) wherever it can run the options, else worker processes (``executors/_atari.py``);
:func:`engine_kind` decides and says why, and ``ENVHIVE_ATARI_ENGINE`` forces one.

Examples:
    >>> engine_kind({"game": "pong", "use_inter_area_resize": False})[0]
    'processes'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive._report import EnvProps
from envhive.engines._registry import CompiledEnv
from envhive.envs.atari._options import AtariOptions, game_name, rom_of_game
from envhive.errors import ConfigError

if TYPE_CHECKING:
    from envhive.engines import Engine, NativeFactory
    from envhive.envs.atari._env import AtariEnv

__all__ = ["AtariFactory", "atari_factory", "bench_peers", "engine_kind", "ENGINE_VARIABLE", "OutOfReach"]


class AtariFactory:
    """A picklable factory of one Atari game with its options: one :class:`AtariEnv` when
    called (serial, thread and process executors), the native engine of a whole batch for the
    native executor (threaded or worker processes, :func:`engine_kind`), which
    ``executor="auto"`` picks for any number of envs.

    The options are checked here, at ``make()``: a bad one is a ``ConfigError`` in the
    caller, not in a worker.
    """

    preferred_executor = "native"
    preferred_min_envs = 1
    engine_device: Any = None  # host arrays only

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = dict(kwargs)
        rest = dict(kwargs)
        AtariOptions.parse(rom_of_game(rest.pop("game", "pong")), rest)

    def __call__(self) -> AtariEnv:
        from envhive.envs.atari._env import AtariEnv

        return AtariEnv(**self.kwargs)

    def native_engine(self, num_envs: int, num_threads: int | None = None) -> Engine:
        """The native executor's engine (:func:`engine_kind` says which): ``num_threads``
        runners in this process (the caller and C++ threads), or as many worker processes
        (``None``: one per core)."""
        if engine_kind(self.kwargs)[0] == "threads":
            from envhive.executors._atari_threads import AtariThreadEngine

            return AtariThreadEngine(num_envs, self.kwargs, num_threads)
        from envhive.executors._atari import AtariEngine

        return AtariEngine(num_envs, self.kwargs, num_threads)

    def key(self) -> tuple[Any, ...]:
        """What must be equal for two factories to share one engine."""
        return ("atari", sorted(self.kwargs.items()))

    def __repr__(self) -> str:
        return f"envhive/{game_name(self.kwargs.get('game', 'pong'))}-v5"


class OutOfReach:
    """``call`` and ``set_attr`` of a native Atari engine, whose games live out of Python's
    reach (in ``games_live``: C++ threads, worker processes): ``call`` reads the spaces,
    metadata and render mode; anything else, and ``set_attr``, is a ``ConfigError`` naming the
    executor that can."""

    games_live: str
    props: EnvProps
    num_envs: int

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
             env_ids: Sequence[int] | None = None) -> list[Any]:
        """The spaces, metadata and render mode."""
        ids = range(self.num_envs) if env_ids is None else list(env_ids)
        p = self.props
        known = {"observation_space": p.observation_space, "action_space": p.action_space,
                 "metadata": p.metadata, "render_mode": p.render_mode}
        if name not in known:
            raise ConfigError(f"call({name!r}): the native Atari engine's games live in {self.games_live}; "
                              f"it exposes {sorted(known)}. Use executor='process' to call other attributes")
        return [known[name]] * len(ids)

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """Refused: the games are out of reach."""
        raise ConfigError(f"set_attr({name!r}): the native Atari engine's games live in {self.games_live}; "
                          "use executor='process' to set attributes")


#: Forces the native Atari engine: ``"threads"`` or ``"processes"`` (unset: the threads
#: wherever they can run these options, see :func:`engine_kind`).
ENGINE_VARIABLE = "ENVHIVE_ATARI_ENGINE"


def engine_kind(kwargs: dict[str, Any]) -> tuple[str, str]:
    """Which native Atari engine runs games with ``kwargs``, and why: ``("threads", ...)``
    (``executors/_atari_threads.py``, the default) or ``("processes", reason)`` (this module's
    engine) where the C++ threads cannot run the options (``envs/atari/_threads.py``:
    ``unsupported``), were not built, or failed their check against ``AtariEnv`` in this
    process. ``ENVHIVE_ATARI_ENGINE=threads|processes`` forces one.

    Raises:
        ConfigError: ``ENVHIVE_ATARI_ENGINE`` names no engine, or forces the threads where they
            cannot run.
    """
    from envhive.envs.atari._threads import self_check, unsupported

    rest = dict(kwargs)
    options = AtariOptions.parse(rom_of_game(rest.pop("game", "pong")), rest)
    forced = os.environ.get(ENGINE_VARIABLE, "")
    if forced not in ("", "threads", "processes"):
        raise ConfigError(f"{ENGINE_VARIABLE}: expected 'threads' or 'processes', got {forced!r}")
    if forced == "processes":
        return "processes", f"{ENGINE_VARIABLE}=processes"
    why = unsupported(options) or self_check()
    if why is None:
        return "threads", "C++ threads"
    if forced == "threads":
        raise ConfigError(f"{ENGINE_VARIABLE}=threads: the threaded Atari engine cannot run here: {why}")
    return "processes", why


def atari_factory(entry: CompiledEnv, kwargs: dict[str, Any], max_episode_steps: int | None) -> NativeFactory:
    """The ``"atari"`` kind's factory builder: the time limit is the env's own option."""
    if max_episode_steps is not None:
        kwargs = {**kwargs, "max_episode_steps": max_episode_steps}
    return AtariFactory(kwargs)


class _EnvPoolPeer:
    """EnvPool's gymnasium env as the bench measures vector envs: a batched action space of
    int32 actions (what EnvPool checks), ``reset(seed=)`` (EnvPool seeds at ``make``)."""

    def __init__(self, env: Any) -> None:
        import gymnasium as gym

        self.env = env
        self.action_space = gym.spaces.MultiDiscrete([env.action_space.n] * env.config["num_envs"],
                                                     dtype=np.int32)

    def reset(self, seed: int | None = None) -> Any:
        return self.env.reset()

    def step(self, actions: Any) -> Any:
        return self.env.step(actions)

    def close(self) -> None:
        self.env.close()


def bench_peers(entry: CompiledEnv, num_envs: int) -> list[tuple[str, str, Callable[[], Any]]]:
    """``envhive bench``'s peers for an Atari id: EnvPool's ``<Game>-v5`` (gymnasium API) and
    ale-py's ``AtariVectorEnv``, both with EnvPool's preprocessing and no reward clipping."""
    game = entry.id.removeprefix("envhive/").removesuffix("-v5")
    rom = dict(entry.kwargs)["game"]

    def envpool_env() -> Any:
        import envpool

        return _EnvPoolPeer(envpool.make(f"{game}-v5", env_type="gymnasium", num_envs=num_envs, seed=0))

    def ale_vector_env() -> Any:
        from ale_py.vector_env import AtariVectorEnv

        return AtariVectorEnv(rom, num_envs=num_envs, reward_clipping=False,
                              max_num_frames_per_episode=108000)

    return [("EnvPool", f"{game}-v5", envpool_env), ("ale-py AtariVectorEnv", rom, ale_vector_env)]


if TYPE_CHECKING:

    def _implements_factory(factory: AtariFactory) -> NativeFactory:
        return factory  # mypy checks AtariFactory against the NativeFactory protocol here
