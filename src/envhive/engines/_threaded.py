"""The Python side of a C++ family on envhive's threaded batch core, written once.

A C++ family (``include/envhive/threaded_batch.h``: a game header, a module file of three lines)
builds into a module whose ``Batch`` holds the envs and runs each env's whole op (the op rule
of ``envhive._ops``) in C++ threads with the GIL released, writing into the pool's buffers.
:class:`ThreadedEngine` is everything Python does around it, for every such family: it
implements the :class:`~envhive.engines.Engine` and :class:`~envhive.engines.AsyncEngine`
protocols (sync ``step_all``/``run``, async ``start``/``collect``/``take_finished``/
``discard``), checks and binds the pool's buffers, keeps the info columns (an
:class:`~envhive._infos.InfoTable`: step infos, reset infos, and what each op reports), hands
a seeded reset's seed to the game, reports an env's failed op as its
:class:`~envhive.errors.EnvWorkerError` (``cause_type`` ``"ActionError"`` for an action the
game refused), waits out discarded ops before it rewrites anything (``_settle``), and answers
``call``/``set_attr`` for envs out of Python's reach.

A family's engine subclasses it and supplies what needs Python, through a few hooks:
``props`` (the spaces), ``_columns()`` (its own columns, e.g. Atari's no-op counts drawn
ahead), ``_shows_info(name)`` (an info field the options leave out, e.g. Atari's ``ram``
without ``ram_info``: bound, never reported), ``_reseed_env(i, seed)`` (how a reset's seed becomes the game's: by default the seed
itself modulo 2**64) and ``_refill(ids)`` (work before ops run, e.g. drawing more no-op
counts).

Examples:
    >>> import numpy as np, envhive
    >>> from envhive.testing.counter import CounterEngine
    >>> env = envhive.make("envhive/Counter-v0", num_envs=4, seed=0)
    >>> isinstance(env.pool.executor._engine, ThreadedEngine)
    True
    >>> obs, info = env.reset()
    >>> obs, reward, terminated, truncated, info = env.step(np.full(4, 2))
    >>> obs.shape, info["steps"].tolist()
    ((4, 4), [1, 1, 1, 1])
    >>> env.close()
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive._buffers import Buffers
from envhive._infos import InfoTable, row_of
from envhive._ops import RESET, RESET_REWARD, STEP, STEP_RESET
from envhive._report import Completion, EnvProps
from envhive.engines._batched import refuse_reset_options
from envhive.engines._protocol import CEntry, StepAllResult
from envhive.errors import ConfigError, EnvhiveError, EnvWorkerError

if TYPE_CHECKING:
    from envhive.engines import AsyncEngine, Engine, HasCEntry

__all__ = ["ThreadedEngine", "usable_cpus", "runners_for"]

_result = tuple.__new__  # StepAllResult(...) without the NamedTuple's Python frame
_SLOTS = ("step", "reset", "rep")  # the info columns' three sets (see the core's InfoSlot)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), at least 1.

    Examples:
        >>> 1 <= usable_cpus() <= (os.cpu_count() or 1)
        True
    """
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1  # pragma: no cover - not Linux


def runners_for(num_envs: int, num_threads: int | None) -> int:
    """How many runners step ``num_envs`` envs: ``num_threads`` (``None``: one per usable core),
    at most one per env; one env runs in the caller alone.

    Examples:
        >>> runners_for(1, 8), runners_for(4, 2), runners_for(2, 8)
        (1, 2, 2)
    """
    return 1 if num_envs == 1 else max(1, min(num_threads or usable_cpus(), num_envs))


class ThreadedEngine:
    """A batch of a C++ family's envs, stepped by C++ threads in this process (see the module
    docstring). Subclasses set :attr:`props` before :meth:`bind`.

    Args:
        module: the family's compiled module (its ``Batch`` type, ``info_fields()``).
        num_envs: batch size.
        num_threads: runners (``None``: one per usable core, at most ``num_envs``): the
            caller, which runs ops while it waits, and ``num_threads - 1`` C++ threads.
        config: the game's configuration (the op codes of ``envhive._ops`` are added here).
        seeds: one int64 per env: what the game builds each env from (e.g. the seed of an
            unseeded first reset).
        env_id: the id, for messages.
    """

    #: What refuses reset options, for the message.
    what = "a threaded engine"
    #: Where the envs live, for ``call``/``set_attr``'s refusal.
    games_live = "its C++ worker threads"
    device = None  # host arrays
    props: EnvProps

    def __init__(self, module: Any, num_envs: int, num_threads: int | None, config: dict[str, Any],
                 seeds: Sequence[int], env_id: str) -> None:
        self.num_envs = n = int(num_envs)
        self.num_threads = runners = runners_for(n, num_threads)
        self._id = env_id
        self._games: Any = None
        config = {"op_step": STEP, "op_reset": RESET, "op_step_reset": STEP_RESET,
                  "reset_reward": float(RESET_REWARD), **config}
        self._games = module.Batch(np.asarray(seeds, np.int64), config, runners - 1)
        # Every field's columns are bound (an array field: (n, items)); the shown ones reported.
        columns = {slot: {name: np.zeros((n,) if size == np.dtype(dtype).itemsize
                                         else (n, size // np.dtype(dtype).itemsize), dtype)
                          for name, dtype, size in module.info_fields()} for slot in _SLOTS}
        self._bound_infos = tuple(arr for slot in _SLOTS for arr in columns[slot].values())
        self._fields = [(name, arr.dtype) for name, arr in columns["rep"].items() if self._shows_info(name)]
        self._info = {slot: {name: columns[slot][name] for name, _ in self._fields} for slot in _SLOTS}
        self._reseed = np.zeros(n, np.int64)  # a seeded reset's seed, for the game
        self._has_reseed = np.zeros(n, np.bool_)
        self._reset_after = np.zeros(n, np.bool_)  # the op's step ended and the env was reset
        self._failed = np.zeros(n, np.bool_)
        self._table = InfoTable(self._info["rep"], self._info["step"], self._reset_after)
        self._out = np.zeros(n, np.int64)  # the ids collect() hands over
        self._every = np.arange(n, dtype=np.int64)
        self._pending = Completion()  # results and errors not collected yet
        self._discarded = False  # a discard since the last call (see _settle)
        self._num_actions = -1  # Discrete actions: their count (checked in step_all)

    # -- what a family supplies ------------------------------------------------------------
    def _columns(self) -> dict[str, np.ndarray]:
        """The family's own columns, by the names its game declares."""
        return {}

    def _shows_info(self, name: str) -> bool:
        """Whether the info field ``name`` is reported (every field by default)."""
        return True

    def _reseed_env(self, i: int, seed: int) -> None:
        """Env ``i``'s next RESET is seeded with ``seed``: by default the game gets the seed
        itself, modulo 2**64 (as an int64)."""
        self._reseed[i] = np.uint64(seed % 2**64).astype(np.int64)
        self._has_reseed[i] = True

    def _refill(self, ids: np.ndarray) -> None:
        """Work before the ops of ``ids`` run (nothing by default)."""

    def _refill_watch(self) -> tuple[np.ndarray, int] | None:
        """When ``_refill`` has work: ``(an int32 column, limit)``, due for the envs whose
        value reached the limit (``None``: never). Read by code that runs ops without Python
        (the C entry, :meth:`c_entry`)."""
        return None

    # -- setup ---------------------------------------------------------------------------
    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (once): the threads write their rows."""
        b = self._ob = buffers
        n, space = self.num_envs, self.props.observation_space
        shape = (n, *(space.shape or ()))
        space_n = getattr(self.props.action_space, "n", None)
        self._num_actions = int(space_n) if space_n is not None else -1
        for name, dtype, want in (("obs", space.dtype, shape), ("reward", np.float64, (n,)),
                                  ("terminated", np.bool_, (n,)), ("truncated", np.bool_, (n,)),
                                  ("ops", np.int8, (n,)), ("actions", np.int64, (n,))):
            arr = getattr(b, name)
            if type(arr) is not np.ndarray or arr.dtype != dtype or arr.shape != want or not arr.flags.c_contiguous:
                raise EnvhiveError(f"{self._id}: the pool's {name} buffer is not a contiguous "
                                   f"{np.dtype(dtype).name} array of shape {want}")
        final = b.final_obs
        if final is not None and (type(final) is not np.ndarray or final.shape != shape
                                  or final.dtype != space.dtype or not final.flags.c_contiguous):
            raise EnvhiveError(f"{self._id}: the pool's final_obs buffer is not a contiguous array of shape {shape}")
        infos = self._bound_infos
        self._games.bind({
            "obs": b.obs, "final_obs": final, "reward": b.reward, "terminated": b.terminated,
            "truncated": b.truncated, "ops": b.ops, "actions": b.actions, "reseed": self._reseed,
            "has_reseed": self._has_reseed, "reset_after": self._reset_after, "failed": self._failed,
            "infos": infos, **self._columns(),
        })

    def _prepare(self, ids: np.ndarray) -> None:
        """Before the general path's ops of ``ids``: hand the seeded RESETs' seeds to the game
        (``_reseed_env``), then the family's own work (``_refill``)."""
        b = self._ob
        resets = ids[b.ops[ids] == RESET]
        if resets.size and b.has_seed[resets].any():
            for i in resets[b.has_seed[resets]].tolist():
                seed = b.seed_of(i)
                if seed is not None:
                    self._reseed_env(i, seed)
        self._refill(ids)

    # -- sync ----------------------------------------------------------------------------
    def step_all(self, actions: np.ndarray) -> StepAllResult:
        """Every env's op (``buffers.ops``), actions from ``actions`` (checked first: with a bad
        one nothing runs), all finished on return. Every RESET here is an autoreset (unseeded)."""
        b = self._ob
        if self._num_actions >= 0:
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
        self._refill(every)
        # One C call; a Ctrl-C inside it raises once the caller sees it (within tens of
        # milliseconds), the ops in flight left for the pool's discard.
        self._games.run(every, self._out)
        if np.count_nonzero(self._failed):
            errors = Completion()
            self._report(every, errors)
            raise errors.errors[min(errors.errors)]
        done = int(np.count_nonzero(b.terminated | b.truncated))
        if not self._fields:
            return _result(StepAllResult, (-1, done, None, None))
        step = self._info["step"]
        step_infos = {k: step[k].copy() for k, _ in self._fields}
        again = b.ops == RESET
        again |= self._reset_after
        reset_infos = None
        if np.count_nonzero(again):
            reset = self._info["reset"]
            reset_infos = {i: {k: row_of(reset[k], i) for k, _ in self._fields} for i in np.flatnonzero(again).tolist()}
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
        self._prepare(ids)
        self._games.start(ids)

    def _settle(self) -> None:
        """After a discard: wait until no thread runs a discarded op (each stops at its next
        check), so that this side may rewrite any env's seeds and columns."""
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
        runs); the caller runs ops meanwhile."""
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
        """Forget every op started and not collected: queued ones never run, running ones stop
        at their next check and are dropped. Does not wait (the next call does, ``_settle``)."""
        self._pending = Completion()
        if self._games is not None:
            self._games.discard()
            self._discarded = True
            self._has_reseed[:] = False  # a seeded RESET that never ran must not seed a later one

    # -- the rest of the Engine protocol --------------------------------------------------
    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
             env_ids: Sequence[int] | None = None) -> list[Any]:
        """The spaces, metadata and render mode (the envs themselves are out of reach)."""
        ids = range(self.num_envs) if env_ids is None else list(env_ids)
        p = self.props
        known = {"observation_space": p.observation_space, "action_space": p.action_space,
                 "metadata": p.metadata, "render_mode": p.render_mode}
        if name not in known:
            raise ConfigError(f"call({name!r}): {self._id}'s envs on the native executor live in "
                              f"{self.games_live}; it exposes {sorted(known)}. Use executor='process' "
                              "to call other attributes")
        return [known[name]] * len(ids)

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """Refused: the envs are out of reach."""
        raise ConfigError(f"set_attr({name!r}): {self._id}'s envs on the native executor live in "
                          f"{self.games_live}; use executor='process' to set attributes")

    def c_api(self) -> Any:
        """The batch's C entry: a PyCapsule of an ``envhive_batch_api`` (``envhive/batch_api.h``)
        with which code holding no GIL runs ops on the bound buffers (bind first)."""
        return self._games.c_api()

    def c_entry(self) -> CEntry:
        """The C entry with what its caller needs of Python (``HasCEntry``): the family's
        ``_refill`` when its watched column says so, the failed column and messages, and a
        discard waited out before the entry is used."""
        watch = self._refill_watch()
        return CEntry(self.c_api(), self._refill, None if watch is None else watch[0],
                      0 if watch is None else watch[1], self._failed, self._error_text, self._settle_discard)

    def _error_text(self, i: int) -> str:
        kind, text = self._games.error(i)
        return f"the env raised {kind}: {self._id}: {text}"

    def _settle_discard(self) -> None:
        if self._discarded:
            self._settle()

    def close(self) -> None:
        """Stop the threads (an op in flight stops at its next check) and free the envs
        (idempotent)."""
        # One C call; a close cut short before it must still close: ``_games`` is forgotten
        # after (closing it twice is harmless).
        games = self._games
        if games is not None:
            games.close()
            self._games = None


if TYPE_CHECKING:

    def _implements_engine(engine: ThreadedEngine) -> Engine:
        return engine  # mypy checks ThreadedEngine against the Engine protocol here

    def _implements_async(engine: ThreadedEngine) -> AsyncEngine:
        return engine  # ... and against AsyncEngine

    def _implements_c_entry(engine: ThreadedEngine) -> HasCEntry:
        return engine  # ... and against HasCEntry
