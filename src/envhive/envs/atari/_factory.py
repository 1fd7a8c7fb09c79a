"""The ``"atari"`` engine kind's factory: one :class:`~envhive.envs.atari.AtariEnv` per env for
the general executors, the threaded engine of a whole batch for the native executor, and the
bench's peers.

Registered by ``_family.py`` (ids listed by ``_options.atari_entries``, factories built by
:func:`atari_factory`, bench peers by :func:`bench_peers`). There is one engine, the threaded
one (``_engine.py``); where it cannot run (:meth:`AtariFactory.native_problem`: an option it
lacks, no C++ extension, not Linux, an ale-py outside the checked versions or one that failed
the engine's self-check, ``_ale.py``), ``executor="auto"`` runs ``AtariEnv`` on the process
executor (ALE's ``act`` holds the GIL, so threads would not run games in parallel; the frames
are the same, as the cross-executor transcripts show) and says why, and ``executor="native"``
is a ``ConfigError`` with the reason.

Examples:
    >>> problem = AtariFactory({"game": "pong", "img_height": 105, "img_width": 80}).native_problem()
    >>> problem.executor, "105x80" in problem.reason
    ('process', True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive.engines._protocol import NativeProblem
from envhive.engines._registry import CompiledEnv
from envhive.envs.atari._options import AtariOptions, game_name, rom_of_game
from envhive.errors import ConfigError

if TYPE_CHECKING:
    from envhive.engines import Engine, NativeFactory
    from envhive.envs.atari._env import AtariEnv

__all__ = ["AtariFactory", "atari_factory", "bench_peers"]

#: What one ALE game takes in memory, its ROM loaded (measured: about 680 KB with ale-py 0.12).
_ALE_BYTES = 720_000
_TALLEST = 250  # the tallest screen of a ROM ale-py ships


class AtariFactory:
    """A picklable factory of one Atari game with its options: one :class:`AtariEnv` when
    called (serial, thread and process executors), the threaded engine of a whole batch for the
    native executor, which ``executor="auto"`` picks for any number of envs wherever it can
    run (else the process executor: :meth:`native_problem` says why).

    The options are checked here, at ``make()``: a bad one (a mode or difficulty the ROM does
    not have included) is a ``ConfigError`` in the caller, not in a worker.
    """

    preferred_executor = "native"
    preferred_min_envs = 1
    engine_device: Any = None  # host arrays only

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = dict(kwargs)
        rest = dict(kwargs)
        self.options = options = AtariOptions.parse(rom_of_game(rest.pop("game", "pong")), rest)
        if options.mode != -1 or options.difficulty != -1:
            from envhive.envs.atari._ale import rom_facts
            from envhive.envs.atari._env import check_mode

            facts = rom_facts(options.game)
            check_mode(options, facts.modes, facts.difficulties)
        self._problem: tuple[NativeProblem | None] | None = None  # found on first need

    def native_problem(self) -> NativeProblem | None:
        """Why the threaded engine cannot run these games here, and ``"process"`` (ALE's
        ``act`` holds the GIL: threads would not run games in parallel); ``None``: it can.
        Found once per factory (the ALE check once per machine, ``_ale.binding_problem``)."""
        if self._problem is None:
            from envhive.envs.atari._ale import binding_problem, rom_facts
            from envhive.envs.atari._engine import unsupported

            why = unsupported(self.options) or binding_problem()
            if why is None:
                why = unsupported(self.options, rom_facts(self.options.game).screen[0])
            self._problem = (None if why is None else NativeProblem(f"the threaded Atari engine cannot run it: {why}",
                                                                    "process"),)
        return self._problem[0]

    def __call__(self) -> AtariEnv:
        from envhive.envs.atari._env import AtariEnv

        return AtariEnv(**self.kwargs)

    def native_engine(self, num_envs: int, num_threads: int | None = None) -> Engine:
        """The threaded engine: ``num_threads`` runners in this process (the caller and C++
        threads; ``None``: one per core).

        Raises:
            ConfigError: it cannot run these games here (:meth:`native_problem`).
        """
        problem = self.native_problem()
        if problem is not None:
            raise ConfigError(f"executor='native': {self!r}: {problem.reason}. Use executor='process' "
                              "(what executor='auto' picks here)")
        from envhive.envs.atari._engine import AtariThreadEngine

        return AtariThreadEngine(num_envs, self.kwargs, num_threads)

    def bytes_per_env(self, num_envs: int) -> int:
        """Memory one env takes wherever it runs: its ALE game, two screens (the tallest), its
        frame stack, and its rows of the pool's observations and terminal observations."""
        o = self.options
        channels = 1 if o.gray_scale else 3
        frames = o.stack_num * channels * o.img_height * o.img_width
        screens = (2 * channels + (2 if channels == 3 else 0)) * _TALLEST * 160
        return _ALE_BYTES + screens + 3 * frames + 256

    def key(self) -> tuple[Any, ...]:
        """What must be equal for two factories to share one engine."""
        return ("atari", sorted(self.kwargs.items()))

    def __getstate__(self) -> dict[str, Any]:
        return {"kwargs": self.kwargs, "options": self.options, "_problem": None}

    def __repr__(self) -> str:
        return f"envhive/{game_name(self.options.game)}-v5"


def atari_factory(entry: CompiledEnv, kwargs: dict[str, Any], max_episode_steps: int | None) -> NativeFactory:
    """The ``"atari"`` kind's factory builder: the time limit is the env's own option."""
    if max_episode_steps is not None:
        kwargs = {**kwargs, "max_episode_steps": max_episode_steps}
    return AtariFactory(kwargs)


def bench_peers(entry: CompiledEnv, num_envs: int) -> list[tuple[str, str, Callable[[], Any]]]:
    """``envhive bench``'s peers for an Atari id: EnvPool's ``<Game>-v5`` (gymnasium API) and
    ale-py's ``AtariVectorEnv``, both with EnvPool's preprocessing and no reward clipping."""
    game = entry.id.removeprefix("envhive/").removesuffix("-v5")
    rom = dict(entry.kwargs)["game"]

    def envpool_env() -> Any:
        import envpool
        import gymnasium as gym

        from envhive.engines._peers import EnvPoolPeer

        env = envpool.make(f"{game}-v5", env_type="gymnasium", num_envs=num_envs, seed=0)
        return EnvPoolPeer(env, gym.spaces.MultiDiscrete([env.action_space.n] * num_envs, dtype=np.int32))

    def ale_vector_env() -> Any:
        from ale_py.vector_env import AtariVectorEnv

        return AtariVectorEnv(rom, num_envs=num_envs, reward_clipping=False,
                              max_num_frames_per_episode=108000)

    return [("EnvPool", f"{game}-v5", envpool_env), ("ale-py AtariVectorEnv", rom, ale_vector_env)]


if TYPE_CHECKING:

    def _implements_factory(factory: AtariFactory) -> NativeFactory:
        return factory  # mypy checks AtariFactory against the NativeFactory protocol here
