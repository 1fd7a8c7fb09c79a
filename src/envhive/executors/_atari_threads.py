"""The threaded Atari engine: every game of the batch in this process, stepped by C++ threads.

This is what the native executor runs for ``envhive/<Game>-v5`` wherever it can (see
``AtariFactory.native_engine``): the games live in one process and are stepped by
``num_threads`` C++ threads with the GIL released (``envs/atari/_threads.cpp``: ALE through
ale-py's exported C++ API, EnvPool's preprocessing in C), as EnvPool and ale-py's
``AtariVectorEnv`` do. Next to the worker-process engine (``executors/_atari.py``, the
fallback) it has no round trip to another process, no copy of the frames, and no static
ownership: any thread takes the next env's op, so a batch whose games reset (a reset costs
many steps) stays balanced, and a sync step runs RESET ops first. While the caller waits
(a sync step, ``recv``) it steps games too.

The C++ threads perform each env's whole op (``envhive._ops``: STEP, RESET, STEP_RESET with
its terminal frame kept) as :class:`~envhive.envs.atari.AtariEnv` does through ``EnvRunner``;
this side does what needs Python: the seeds (a seeded reset's ALE seed and no-op generator,
drawn as ``AtariEnv.reset(seed=)`` draws them), the no-op counts (drawn ahead from each env's
own generator, in the order ``AtariEnv`` would draw them, so a seed gives the same episode
on every executor), and the pool's protocols (``Engine``, ``AsyncEngine``). Results are
written straight into the pool's buffers; the four EnvPool infos into columns read through an
:class:`~envhive._infos.InfoTable`.

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

from typing import TYPE_CHECKING, Any

import numpy as np

from envhive._buffers import Buffers
from envhive._infos import InfoTable
from envhive._ops import RESET
from envhive._report import Completion, EnvProps
from envhive.engines import StepAllResult
from envhive.engines._batched import refuse_reset_options
from envhive.envs.atari._env import AtariEnv, draw_noops, seed_words
from envhive.envs.atari._options import AtariOptions, game_name, rom_of_game
from envhive.envs.atari._threads import new_games
from envhive.errors import EnvhiveError, EnvWorkerError
from envhive.executors._atari_factory import OutOfReach

if TYPE_CHECKING:
    from envhive.engines import AsyncEngine, Engine

__all__ = ["AtariThreadEngine", "STOCK"]

#: No-op counts drawn ahead per env (one per reset); refilled when used up.
STOCK = 32
_INFO_KEYS = ("lives", "reward", "terminated", "elapsed_step")
_INFO_TYPES = (np.int32, np.float32, np.int32, np.int32)
_result = tuple.__new__  # StepAllResult(...) without the NamedTuple's Python frame


class AtariThreadEngine(OutOfReach):
    """A batch of Atari games stepped by C++ threads in this process (see the module docstring).

    Args:
        num_envs: batch size.
        kwargs: ``AtariEnv`` keywords (``game`` and the options).
        num_threads: runners (``None``: one per usable core, at most ``num_envs``): the
            caller, which steps games while it waits, and ``num_threads - 1`` C++ threads; one
            env runs in the caller alone.
    """

    what = "the native Atari engine (use executor='process' for reset options)"
    games_live = "its C++ worker threads"
    device = None  # host arrays

    def __init__(self, num_envs: int, kwargs: dict[str, Any], num_threads: int | None = None) -> None:
        from envhive.executors._spawn import usable_cpus

        rest = dict(kwargs)
        self.options = options = AtariOptions.parse(rom_of_game(rest.pop("game", "pong")), rest)
        self._id = f"envhive/{game_name(options.game)}-v5"
        self.num_envs = n = int(num_envs)
        # ``num_threads`` runners: the caller (it steps games while it waits) and C++ threads.
        self.num_threads = runners = 1 if n == 1 else max(1, min(num_threads or usable_cpus(), n))
        threads = runners - 1
        # Each env's no-op generator and ALE seed, unseeded until a reset brings a seed (as
        # AtariEnv.__init__ draws them).
        words = [seed_words(None) for _ in range(n)]
        self._rngs = [np.random.default_rng(np_seed) for np_seed, _ in words]
        self._games: Any = new_games(options, [ale for _, ale in words], threads)
        self._num_actions = len(self._games.actions())
        self.props = _props(options, self._num_actions)
        # Python's side of the ops: seeded resets, no-op counts drawn ahead, infos, errors.
        self._reseed = np.zeros(n, np.int64)
        self._has_reseed = np.zeros(n, np.bool_)
        self._stock = np.zeros((n, STOCK), np.int32)
        self._stock_used = np.zeros(n, np.int32)
        self._noops = options.noop_max > 0
        for i in range(n):
            self._restock(i)
        self._info = {p: {k: np.zeros(n, t) for k, t in zip(_INFO_KEYS, _INFO_TYPES)}
                      for p in ("step", "reset", "rep")}
        self._reset_after = np.zeros(n, np.bool_)
        self._failed = np.zeros(n, np.bool_)
        self._table = InfoTable(self._info["rep"], self._info["step"], self._reset_after)
        self._out = np.zeros(n, np.int64)  # the ids collect() hands over
        self._every = np.arange(n, dtype=np.int64)
        self._pending = Completion()  # results and errors not collected yet
        self._discarded = False  # a discard since the last call (see _settle)

    # -- setup ---------------------------------------------------------------------------
    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (once): the threads write their rows."""
        b = self._ob = buffers
        n, shape = self.num_envs, (self.num_envs, *self.options.obs_shape)
        for name, dtype, want in (("obs", np.uint8, shape), ("reward", np.float64, (n,)),
                                  ("terminated", np.bool_, (n,)), ("truncated", np.bool_, (n,)),
                                  ("ops", np.int8, (n,)), ("actions", np.int64, (n,))):
            arr = getattr(b, name)
            if type(arr) is not np.ndarray or arr.dtype != dtype or arr.shape != want or not arr.flags.c_contiguous:
                raise EnvhiveError(f"Atari engine: the pool's {name} buffer is not a contiguous "
                                   f"{np.dtype(dtype).name} array of shape {want}")
        final = b.final_obs
        if final is not None and (type(final) is not np.ndarray or final.shape != shape or final.dtype != np.uint8):
            raise EnvhiveError(f"Atari engine: the pool's final_obs buffer is not a uint8 array of shape {shape}")
        infos = tuple(self._info[p][k] for p in ("step", "reset", "rep") for k in _INFO_KEYS)
        self._games.bind(b.obs, final, b.reward, b.terminated, b.truncated, b.ops, b.actions,
                         self._reseed, self._has_reseed, self._stock, self._stock_used, infos,
                         self._reset_after, self._failed)

    def _restock(self, i: int) -> None:
        """Draw env ``i``'s next no-op counts from its generator, as ``AtariEnv.reset`` would
        draw them one reset after another."""
        if self._noops:
            rng, noop_max = self._rngs[i], self.options.noop_max
            self._stock[i] = [draw_noops(rng, noop_max) for _ in range(STOCK)]
        self._stock_used[i] = 0

    def _prepare(self, ids: np.ndarray, seeded: bool) -> None:
        """Before the ops of ``ids`` start: the seeded RESETs' seeds (``seeded``: the command
        block's seeds are this call's), and fresh no-op counts for envs that used theirs up."""
        b = self._ob
        seeds = b.has_seed[ids] if seeded else None
        if seeds is not None and np.count_nonzero(seeds):
            resets = ids[(b.ops[ids] == RESET) & seeds]
            for i in resets.tolist():
                np_seed, ale_seed = seed_words(b.seed_of(i))
                self._rngs[i] = np.random.default_rng(np_seed)
                self._restock(i)
                self._reseed[i] = ale_seed
                self._has_reseed[i] = True
        if self._noops:
            low = ids[self._stock_used[ids] >= STOCK]
            for i in low.tolist():
                self._restock(i)

    # -- sync ----------------------------------------------------------------------------
    def step_all(self, actions: np.ndarray) -> StepAllResult:
        """Every env's op (``buffers.ops``), actions from ``actions`` (checked first: with a bad
        one nothing runs), all finished on return."""
        b = self._ob
        bad = (actions < 0) | (actions >= self._num_actions)
        if np.count_nonzero(bad):
            bad &= b.ops != RESET
            if np.count_nonzero(bad):
                return _result(StepAllResult, (int(np.flatnonzero(bad)[0]), 0, None, None))
        if actions is not b.actions:
            b.actions[...] = actions
        every = self._every
        if self._discarded:
            self._settle()
        if self._noops and int(self._stock_used.max()) >= STOCK:
            self._prepare(every, False)
        # One C call: a Ctrl-C is delivered after it, with every op finished.
        self._games.run(every, self._out)
        if np.count_nonzero(self._failed):
            errors = Completion()
            self._report(every, errors)
            raise errors.errors[min(errors.errors)]
        done = int(np.count_nonzero(b.terminated | b.truncated))
        step = self._info["step"]
        step_infos = {k: step[k].copy() for k in _INFO_KEYS}
        again = b.ops == RESET
        again |= self._reset_after
        reset_infos = None
        if np.count_nonzero(again):
            reset = self._info["reset"]
            reset_infos = {i: {k: reset[k][i] for k in _INFO_KEYS} for i in np.flatnonzero(again).tolist()}
        return _result(StepAllResult, (-1, done, step_infos, reset_infos))

    def run(self, ids: np.ndarray, options: dict[str, Any] | None, out: Completion) -> None:
        """The general path: the ops of ``ids``, to the end."""
        self.start(ids, options)
        out.extend(self.collect(ids.size))

    # -- async ---------------------------------------------------------------------------
    def start(self, ids: np.ndarray, options: dict[str, Any] | None) -> None:
        """Queue the ops of ``ids``; the threads take them at once."""
        b = self._ob
        if options:
            ids = refuse_reset_options(ids, b.ops, options, self._pending, self.what)
            if not ids.size:
                return
        if self._discarded:
            self._settle()
        self._prepare(ids, True)
        self._games.start(ids)

    def _settle(self) -> None:
        """After a discard: wait until no thread runs a discarded op (each finishes within
        one op), so that this side may rewrite any env's seeds and no-op counts."""
        self._games.wait_idle()
        self._discarded = False

    def _report(self, ids: np.ndarray, out: Completion) -> None:
        """Finished envs ``ids`` into ``out``: their errors, or their ids with the info table."""
        failed = self._failed[ids]
        if np.count_nonzero(failed):
            for i in ids[failed].tolist():
                kind, text = self._games.error(i)
                out.errors[i] = EnvWorkerError(f"the env raised {kind}: {self._id}: {text}", env_id=i,
                                               cause_type=kind)
            ids = ids[~failed]
        b = self._ob
        out.add_tabled(ids.tolist(), int(np.count_nonzero(b.terminated[ids] | b.truncated[ids])), self._table)

    def collect(self, min_count: int) -> Completion:
        """Hand over every finished env, waiting until ``min_count`` finished (or nothing else
        runs); the caller steps games meanwhile."""
        out, self._pending = self._pending, Completion()
        need = min_count - len(out.env_ids) - len(out.errors)
        k = self._games.collect(max(need, 0), self._out)
        if k:
            self._report(self._out[:k].copy(), out)
        return out

    def take_finished(self, min_count: int) -> tuple[np.ndarray, int, InfoTable] | None:
        """:meth:`collect` for the pool's lean ``recv`` (``Executor.take_finished``): ``(env
        ids, how many ended, their infos' table)``. ``None``: :meth:`collect` must run (results
        or errors pending, an env raised, or fewer than ``min_count`` came back; those wait in
        the pending completion that ``collect`` hands over first)."""
        if self._pending.env_ids or self._pending.errors:
            return None
        k = self._games.collect(min_count, self._out)
        ids = self._out[:k].copy()
        if k < min_count or np.count_nonzero(self._failed[ids]):
            if k:
                self._report(ids, self._pending)
            return None
        b = self._ob
        return ids, int(np.count_nonzero(b.terminated[ids] | b.truncated[ids])), self._table

    def discard(self) -> None:
        """Forget every op started and not collected: queued ones never run, running ones
        finish and are dropped. Does not wait (the next call does, see ``_settle``)."""
        self._pending = Completion()
        if self._games is not None:
            self._games.discard()
            self._discarded = True
            self._has_reseed[:] = False  # a seeded RESET that never ran must not seed a later one

    # -- the rest of the Engine protocol --------------------------------------------------
    def close(self) -> None:
        """Stop the threads and free the games (idempotent)."""
        # One C call joins the threads (each finishes its op) and frees the games; Ctrl-C can
        # only land before or after it, and a close cut short before it must still close:
        # ``_games`` is forgotten after (closing it twice is harmless).
        games = self._games
        if games is not None:
            games.close()
            self._games = None


def _props(options: AtariOptions, num_actions: int) -> EnvProps:
    """The games' spaces, as ``AtariEnv`` makes them."""
    import gymnasium as gym

    return EnvProps(gym.spaces.Box(0, 255, options.obs_shape, np.uint8), gym.spaces.Discrete(num_actions),
                    dict(AtariEnv.metadata), options.render_mode, None)


if TYPE_CHECKING:

    def _implements_engine(engine: AtariThreadEngine) -> Engine:
        return engine  # mypy checks AtariThreadEngine against the Engine protocol here

    def _implements_async(engine: AtariThreadEngine) -> AsyncEngine:
        return engine  # ... and against AsyncEngine
