"""EnvPool's own pool as an envhive engine: the pool's ops (STEP, RESET, STEP_RESET) on
EnvPool's envs, results written into the pool's buffers.

**The mapping.** One EnvPool pool holds the batch, built in *sync* mode (``batch_size =
num_envs``): there ``_recv()`` returns exactly the envs of the last call, in the call's order,
whatever their number, so any subset of envs can be run (EnvPool's own ``step(action,
env_id)``). Only one EnvPool call may be in flight at a time in that mode (two calls would share
result slots), so the engine keeps one call in flight and collects it before it issues the
next. Per op:

* STEP: ``_send`` of the env's action.
* RESET: EnvPool resets an env on ``_send`` when its last transition ended it (and every env
  before its first reset), ignoring the action: an autoreset rides in the same ``_send`` as the
  steps. A RESET of an env that has not ended is ``_reset(env_id)``, a call of its own.
* STEP_RESET: the step's ``_send``; the envs it ended keep their terminal observation (in
  ``final_obs``) and step info (their final info) and are reset by ``_reset`` before they are
  reported (reward and flags stay the step's).

**Seeds.** EnvPool seeds each env once, when its pool is built (env ``i`` gets ``seed + i`` or
``env_seed[i]``), and ``reset`` takes no seed. The engine therefore builds EnvPool's pool at
the first op, with the seeds of that op's seeded resets (as ``envpool.make(seed=s)`` does for
``make(seed=s)``: ``s + i``), and builds it again for a seeded reset as long as no other env has
run since the last build (a seeded reset of every env, or the first resets of untouched envs).
A seeded reset of some envs while others are running cannot be honoured (EnvPool has no way to
reseed one env): it fails as that env's error, saying so. Seeds must fit an int32, as in
EnvPool. An env without a seed at a build gets a fresh random one.

**Sync steps.** A ``step`` of every env with no RESET among the ops is one ``_send`` and one
``_recv``; its step infos are EnvPool's own result arrays (each ``_recv`` returns fresh ones),
handed to the pool without a copy.

**Async.** ``start`` issues the call (after collecting the one in flight, if any, into a stash)
and returns while EnvPool's threads run it; ``collect`` hands over the stash, collecting the
call in flight when that is not enough. Infos are kept in columns read through an
:class:`~envhive._infos.InfoTable`. This engine serves pools whose ``recv`` returns every env
(``batch_size = num_envs``) and multi-player ids; a single-player pool with a smaller
``batch_size`` gets :class:`~envhive.envs.envpool._stream.StreamEngine`, which runs EnvPool's
pool in EnvPool's async mode (many envs queued at once, no call boundaries).

Multi-player ids (``max_num_players > 1``, pgx's board games, highway's multi-agent) run on the
agent axis; EnvPool pools of several players are never in sync mode, so theirs is built with
``batch_size = 1`` and a call of ``k`` envs is ``k`` receives.

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envpool/CartPole-v1", num_envs=3, seed=0)  # doctest: +SKIP
    >>> obs, info = env.reset()  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive._buffers import Buffers
from envhive._infos import InfoTable
from envhive._ops import RESET, STEP_RESET
from envhive._report import Completion, EnvProps
from envhive._spaces import codec_for
from envhive.engines._batched import refuse_reset_options
from envhive.engines._protocol import StepAllResult
from envhive.envs.envpool._layout import Layout
from envhive.envs.envpool._real import envpool_module, real_envpool
from envhive.errors import ConfigError, EnvWorkerError

if TYPE_CHECKING:
    from envhive.engines import AsyncEngine, Engine

__all__ = ["EnvPoolEngine", "INT32_SEEDS", "WRAPPER_KEYS", "envpool_module", "spec_config"]

#: Seeds EnvPool takes: ``-2**31 <= seed < 2**31`` (its ``make`` asserts it).
INT32_SEEDS = 2**31
#: ``make`` keywords EnvPool's Python wrapper keeps for itself (rendering).
WRAPPER_KEYS = ("render_mode", "render_env_id", "render_width", "render_height", "render_camera_id")


def spec_config(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords of ``envpool.make_spec`` among an id's ``make`` keywords: the wrapper's
    rendering keys go, except the frame size and camera of ``from_pixels`` observations
    (there they are config values)."""
    keep = ("render_width", "render_height", "render_camera_id") if kwargs.get("from_pixels") else ()
    return {k: v for k, v in kwargs.items() if k not in WRAPPER_KEYS or k in keep}
_result = tuple.__new__  # StepAllResult(...) without the NamedTuple's Python frame


def random_seeds(count: int) -> list[int]:
    """Fresh int32 seeds from the OS's entropy (an unseeded env at a build)."""
    return np.random.default_rng().integers(0, INT32_SEEDS, count).tolist()


class _Call:
    """The EnvPool call in flight: ``kind`` (``"send"``; ``"reset"``: RESET ops; ``"again"``:
    the resets after STEP_RESET steps that ended), its env ids, how many stepped envs ended,
    and ``drop`` (discarded: collected, never reported)."""

    __slots__ = ("drop", "ended", "ids", "kind")

    def __init__(self, kind: str, ids: np.ndarray) -> None:
        self.kind, self.ids, self.ended, self.drop = kind, ids, 0, False


class EnvPoolEngine:
    """A batch of one EnvPool id's envs in one EnvPool pool (see the module docstring).

    Args:
        task_id: EnvPool's id (``"CheetahRun-v1"``).
        kwargs: EnvPool ``make`` keywords (config values and its render keywords), without
            ``num_envs``/``batch_size``/``num_threads``; ``seed``/``env_seed`` seed the first
            build.
        num_envs: batch size.
        num_threads: EnvPool's worker threads (``None``: one per usable core, at most
            ``num_envs``).
    """

    what = "EnvPool's engine (its envs take no reset options)"
    device = None  # host arrays

    def __init__(self, task_id: str, kwargs: dict[str, Any], num_envs: int, num_threads: int | None = None) -> None:
        self.task_id = task_id
        self.num_envs = n = int(num_envs)
        kwargs = dict(kwargs)
        seed, env_seed = kwargs.pop("seed", None), kwargs.pop("env_seed", None)
        self._first_seeds: list[int] | None = None
        if env_seed is not None:
            self._first_seeds = [int(s) for s in env_seed]
        elif seed is not None:
            self._first_seeds = [int(seed) + i for i in range(n)]
        self._kwargs = kwargs
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.num_threads = max(1, min(num_threads or cores, n))
        ep = envpool_module()
        spec_kwargs = spec_config(kwargs)
        with real_envpool():
            self.layout = layout = Layout(ep.make_spec(task_id, num_envs=n, **spec_kwargs))
        self._multi = layout.players > 1
        #: step_all may take ``_step_plain`` (EnvPool's pool in sync mode, one player).
        self._lean_sync = not self._multi
        self.props = EnvProps(layout.observation_space, layout.action_space,
                              {"render_modes": ["rgb_array"]}, kwargs.get("render_mode"), None, layout.agents)
        self._pool: Any = None
        self._done = np.ones(n, np.bool_)  # EnvPool's view: the last transition ended the env
        self._touched = np.zeros(n, np.bool_)  # reset or stepped since the pool was built
        self._info = {part: layout.info_arrays(n) for part in ("step", "reset", "rep")}
        self._reset_after = np.zeros(n, np.bool_)
        self._table = InfoTable(self._info["rep"], self._info["step"], self._reset_after)
        self._every = np.arange(n, dtype=np.int64)
        self._every.flags.writeable = False
        self._every32 = self._every.astype(np.int32)
        self._flight: _Call | None = None
        self._stash = Completion()
        self._codec = codec_for(layout.action_space)

    # -- setup ---------------------------------------------------------------------------
    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (once)."""
        self._ob = buffers
        self._obs_leaves = self.layout.obs_leaves(buffers.obs)
        final = buffers.final_obs
        self._final_leaves = self.layout.obs_leaves(final) if final is not None else None

    def _build(self, seeds: list[int]) -> None:
        """(Re)build EnvPool's pool, env ``i`` seeded with ``seeds[i]``."""
        self._close_pool()
        ep = envpool_module()
        batch = 1 if self._multi else self.num_envs
        with real_envpool():
            self._pool = ep.make_gymnasium(self.task_id, num_envs=self.num_envs, batch_size=batch,
                                           num_threads=self.num_threads, env_seed=seeds, **self._kwargs)
        self._done[:] = True
        self._touched[:] = False

    def _ensure_pool(self) -> None:
        if self._pool is None:
            seeds = self._first_seeds if self._first_seeds is not None else random_seeds(self.num_envs)
            self._build(seeds)

    # -- seeds ---------------------------------------------------------------------------
    def _seed(self, ids: np.ndarray, out: Completion) -> np.ndarray:
        """Honour the seeded RESETs among ``ids`` (a rebuild, see the module docstring) or
        fail them as their envs' errors in ``out``; returns the ids left to run."""
        b = self._ob
        resets = ids[b.ops[ids] == RESET]
        seeded = resets[b.has_seed[resets]] if resets.size else resets
        if not seeded.size:
            return ids
        seeds = [b.seed_of(i) for i in seeded.tolist()]
        wrong = [i for i, s in zip(seeded.tolist(), seeds) if s is None or not 0 <= s < INT32_SEEDS]
        running = self._touched.copy()
        running[resets] = False
        if wrong or (self._pool is not None and np.count_nonzero(running)):
            if wrong:
                why = f"EnvPool takes int32 seeds (0 <= seed < 2**31), got {dict(zip(seeded.tolist(), seeds))}"
            else:
                why = ("EnvPool seeds each env once, when its pool is built; envhive builds it again for "
                       "a seeded reset only while no other env runs (reset every env with a seed, or "
                       f"reset these without one); envs {np.flatnonzero(running).tolist()} are running")
            failed = wrong or seeded.tolist()
            for i in failed:
                out.errors[i] = EnvWorkerError(f"seeded reset: {why}", env_id=i, cause_type="ConfigError")
            return ids[~np.isin(ids, np.array(failed, np.int64))]
        fresh = random_seeds(self.num_envs)
        for i, s in zip(seeded.tolist(), seeds):
            fresh[i] = int(s)  # type: ignore[arg-type]
        self._build(fresh)
        return ids

    # -- EnvPool calls -------------------------------------------------------------------
    def _issue(self, kind: str, ids: np.ndarray) -> None:
        """Start one EnvPool call (nothing may be in flight)."""
        every = ids is self._every
        pool, ids32 = self._pool, self._every32 if every else ids.astype(np.int32)
        if kind == "send":
            acts = self._ob.actions if every else self._ob.actions[ids]
            dtype = self.layout.action_dtype
            if self._multi and self.layout.turn_based:  # the current player's action only
                current = self._info["rep"]["current_player"][ids]
                rows = acts[np.arange(ids.size), np.clip(current, 0, self.layout.players - 1)]
                pool._send([ids32, ids32, np.ascontiguousarray(rows, dtype)])
            elif self._multi:
                players = np.repeat(ids32, self.layout.players)
                rows = acts.reshape(ids.size * self.layout.players, *acts.shape[2:])
                pool._send([ids32, players, np.ascontiguousarray(rows, dtype)])
            else:
                pool._send([ids32, ids32, np.ascontiguousarray(acts, dtype)])
        else:
            pool._reset(ids32)
        self._touched[slice(None) if every else ids] = True
        self._flight = _Call(kind, ids)

    def _complete(self, out: Completion) -> None:
        """Collect the call in flight (and the resets after its STEP_RESET steps that ended),
        reporting its envs in ``out`` (or, discarded, nobody)."""
        call = self._flight
        assert call is not None
        try:
            ended = self._finish(call)
            if ended.size:
                self._issue("again", ended)
                self._finish(self._flight)  # type: ignore[arg-type]
        except Exception as err:  # EnvPool raised: every env of the call failed
            self._flight = None
            if not call.drop:
                for i in call.ids.tolist():
                    out.errors[i] = EnvWorkerError(f"EnvPool {self.task_id}: {type(err).__name__}: {err}",
                                                   env_id=i, cause_type=type(err).__name__)
            return
        if not call.drop:
            out.add_tabled(call.ids.tolist(), call.ended, self._table)

    def _finish(self, call: _Call) -> np.ndarray:
        """Receive ``call``'s results into the buffers; the STEP_RESET envs it ended."""
        self._flight = None
        if self._multi:
            for _ in range(call.ids.size):
                self._write_player_rows(call, self._pool._recv())
            return self._again(call)
        self._write(call, self._pool._recv())
        return self._again(call)

    def _again(self, call: _Call) -> np.ndarray:
        """After a send: the STEP_RESET envs that ended (final obs kept, reset next)."""
        if call.kind != "send":
            return _NONE
        b, ids = self._ob, call.ids
        ended_mask = b.terminated[ids] | b.truncated[ids]
        ops = b.ops[ids]
        stepped = ops != RESET
        call.ended = int(np.count_nonzero(ended_mask & stepped))
        again = (ops == STEP_RESET) & ended_mask
        if not np.count_nonzero(again):
            return _NONE
        ended = ids[again]
        if self._final_leaves is not None:
            for (_, leaf, _), (_, final, _) in zip(self._obs_leaves, self._final_leaves):
                final[ended] = leaf[ended]
        self._reset_after[ended] = True
        return ended

    def _write(self, call: _Call, state: list[np.ndarray]) -> None:
        """One call's results (one row per env, in call order) into the buffers and infos."""
        b, layout, ids = self._ob, self.layout, call.ids
        rows: Any = slice(None) if ids is self._every else ids
        for j, leaf, _ in self._obs_leaves:
            leaf[rows] = state[j]
        if call.kind == "again":  # after a STEP_RESET's step: reward and flags stay the step's
            self._done[ids] = False
        else:
            done, trunc = state[layout.done], state[layout.trunc]
            b.reward[rows] = state[layout.reward]
            b.terminated[rows] = done & ~trunc
            b.truncated[rows] = trunc
            self._done[rows] = done
        self._put_infos(call, ids, rows, {name: state[j] for j, name, _ in layout.info_keys})

    def _put_infos(self, call: _Call, ids: np.ndarray, rows: Any, values: dict[str, np.ndarray]) -> None:
        """Info values of envs ``ids`` (at ``rows``) into the columns: the row's info into
        ``rep``; a reset's also into ``reset``, a step's into ``step`` (a STEP_RESET's step
        info, its final info, stays there when the env is reset after it)."""
        info = self._info
        if call.kind != "again":
            self._reset_after[ids] = False
        resets = (self._ob.ops[ids] == RESET) if call.kind == "send" else None
        mixed = resets is not None and bool(np.count_nonzero(resets))
        for name, value in values.items():
            info["rep"][name][rows] = value
            if resets is None:
                info["reset"][name][rows] = value
            elif mixed:
                info["reset"][name][ids[resets]] = value[resets]
                info["step"][name][ids[~resets]] = value[~resets]
            else:
                info["step"][name][rows] = value

    def _write_player_rows(self, call: _Call, state: list[np.ndarray]) -> None:
        """One env's results of a multi-player call: its player rows onto the agent axis
        (``players.id``, else their order), absent players inactive with zeros."""
        b, layout = self._ob, self.layout
        e = int(state[layout.env_id][0])
        rows = len(state[layout.player_env]) if layout.player_env is not None else layout.players
        pid = state[layout.player_id] if layout.player_id is not None else np.arange(rows)
        active = np.zeros(layout.players, np.bool_)
        active[pid] = True
        for j, leaf, player in self._obs_leaves:
            leaf[e] = 0
            if player:
                leaf[e, pid] = state[j]
            else:
                leaf[e, :] = state[j][0]
        assert b.active is not None and b.agent_terminated is not None and b.agent_truncated is not None
        b.active[e] = active
        if call.kind != "again":
            done, trunc = bool(state[layout.done][0]), bool(state[layout.trunc][0])
            reward = state[layout.reward]
            b.reward[e] = 0.0
            if "reward" in layout.per_player:
                b.reward[e, pid] = reward
            else:
                b.reward[e, active] = reward[0]
            b.terminated[e], b.truncated[e] = done and not trunc, trunc
            b.agent_terminated[e] = active & (done and not trunc)
            b.agent_truncated[e] = active & trunc
            self._done[e] = done
        else:
            self._done[e] = False
        values: dict[str, np.ndarray] = {}
        for j, name, player in layout.info_keys:
            if player:
                column = np.zeros(self._info["rep"][name].shape[1:], self._info["rep"][name].dtype)
                column[pid] = state[j]
                values[name] = column[None]
            else:
                values[name] = state[j][:1]
        one = np.array([e], np.int64)
        self._put_infos(call, one, one, values)

    # -- the ops ---------------------------------------------------------------------------
    def _run(self, ids: np.ndarray, seeded: bool, out: Completion, leave: bool) -> None:
        """The ops of ``ids``: the RESETs of envs that have not ended by ``_reset`` (a call of
        their own), the rest (steps, autoresets) by one ``_send``; with ``leave``, the last
        call is left in flight."""
        self._ensure_pool()
        if seeded:
            ids = self._seed(ids, out)
            if not ids.size:
                return
        ops = self._ob.ops[ids]
        forced = (ops == RESET) & ~self._done[ids]
        if np.count_nonzero(forced):
            self._issue("reset", ids[forced])
            self._complete(out)
            ids = ids[~forced]
            if not ids.size:
                return
        self._issue("send", ids)
        if not leave:
            self._complete(out)

    def _settle(self) -> None:
        """Collect the call in flight into the stash (a sync call, or a new call, needs the
        pool to itself)."""
        if self._flight is not None:
            self._complete(self._stash)

    # -- sync ------------------------------------------------------------------------------
    def step_all(self, actions: Any) -> StepAllResult:
        """Every env's op (``buffers.ops``), actions from ``actions`` (checked first: with a
        bad one nothing runs), all finished on return. Every RESET is an autoreset here."""
        b = self._ob
        ops = b.ops
        plain = not np.count_nonzero(ops == RESET)
        stepped = actions if plain else actions[ops != RESET]
        if stepped.size and not self._codec.in_bounds(stepped):  # type: ignore[attr-defined]
            return _result(StepAllResult, (self._first_bad(actions, ops), 0, None, None))
        if plain and self._lean_sync and self._flight is None and self._pool is not None:
            return self._step_plain(actions, ops)
        if actions is not b.actions:
            b.actions[...] = actions
        self._settle()
        out = Completion()
        self._run(self._every, False, out, False)
        if out.errors:
            raise out.errors[min(out.errors)]
        term, trunc = b.terminated, b.truncated
        ended = term | trunc if plain else (term | trunc) & (ops != RESET)
        done = int(np.count_nonzero(ended))
        step = self._info["step"]
        step_infos = {k: v.copy() for k, v in step.items()}
        again = self._reset_after if plain else self._reset_after | (ops == RESET)
        reset_infos = None
        if np.count_nonzero(again):
            reset = self._info["reset"]
            reset_infos = {i: {k: v[i] for k, v in reset.items()} for i in np.flatnonzero(again).tolist()}
        return _result(StepAllResult, (-1, done, step_infos, reset_infos))

    def _step_plain(self, actions: np.ndarray, ops: np.ndarray) -> StepAllResult:
        """``step_all``'s common case: every env steps (no RESET op) in one ``_send``/``_recv``
        and nothing else runs. The step infos are EnvPool's own result arrays (each ``_recv``
        hands out fresh ones), so they are neither copied nor written into the info columns:
        the columns are only read for envs reported through the table, whose rows are written
        by the op that reports them. The envs a STEP_RESET ended are reset as on the general
        path (``"again"``). The actions go to EnvPool only (the general path reads them from
        the pool's buffers)."""
        b, layout, pool, every = self._ob, self.layout, self._pool, self._every32
        # In flight while EnvPool runs it: a Ctrl-C as _send or _recv returns leaves it to the
        # next call's _settle (a _recv in sync mode with nothing in flight returns no rows).
        self._flight = _Call("send", self._every)
        try:
            pool._send([every, every, np.asarray(actions).astype(layout.action_dtype)])
            state = pool._recv()
        except Exception as err:  # EnvPool raised: as on the general path, env 0's error first
            self._flight = None
            raise EnvWorkerError(f"EnvPool {self.task_id}: {type(err).__name__}: {err}", env_id=0,
                                 cause_type=type(err).__name__) from err
        self._flight = None
        for j, leaf, _ in self._obs_leaves:
            leaf[...] = state[j]
        done, trunc = state[layout.done], state[layout.trunc]
        b.reward[...] = state[layout.reward]
        np.greater(done, trunc, out=b.terminated)  # done & ~trunc
        b.truncated[...] = trunc
        self._done[...] = done
        self._touched.fill(True)
        self._reset_after.fill(False)
        step_infos = {name: state[j] for j, name, _ in layout.info_keys}
        count = int(np.count_nonzero(done))
        ended = np.flatnonzero(done & (ops == STEP_RESET)) if count else _NONE
        if not ended.size:
            return _result(StepAllResult, (-1, count, step_infos, None))
        if self._final_leaves is not None:
            for (_, leaf, _), (_, final, _) in zip(self._obs_leaves, self._final_leaves):
                final[ended] = leaf[ended]
        self._reset_after[ended] = True
        out = Completion()
        self._issue("again", ended)
        self._complete(out)
        if out.errors:
            raise out.errors[min(out.errors)]
        reset = self._info["reset"]
        reset_infos = {i: {k: v[i] for k, v in reset.items()} for i in ended.tolist()}
        return _result(StepAllResult, (-1, count, step_infos, reset_infos))

    def _first_bad(self, actions: Any, ops: np.ndarray) -> int:
        """The first env whose action is outside the action space (RESET rows excepted)."""
        for i in np.flatnonzero(ops != RESET).tolist():
            if not self._codec.in_bounds(actions[i:i + 1]):  # type: ignore[attr-defined]
                return int(i)
        return -1

    def run(self, ids: np.ndarray, options: dict[str, Any] | None, out: Completion) -> None:
        """The general path: the ops of ``ids``, to the end."""
        self.start(ids, options)
        out.extend(self.collect(ids.size))

    # -- async -----------------------------------------------------------------------------
    def start(self, ids: np.ndarray, options: dict[str, Any] | None) -> None:
        """Start the ops of ``ids`` (after collecting the call in flight into the stash);
        returns while EnvPool's threads run them."""
        if options:
            ids = refuse_reset_options(ids, self._ob.ops, options, self._stash, self.what)
            if not ids.size:
                return
        self._settle()
        self._run(ids, True, self._stash, True)

    def take_finished(self, min_count: int) -> tuple[np.ndarray, int, InfoTable] | None:
        """No lean receive: EnvPool's finished envs come through :meth:`collect` (the pool's
        general ``recv`` path)."""
        return None

    def collect(self, min_count: int) -> Completion:
        """Every finished env: the stash, and the call in flight when the stash has fewer
        than ``min_count``."""
        out, self._stash = self._stash, Completion()
        if self._flight is not None and len(out.env_ids) + len(out.errors) < min_count:
            self._complete(out)
        return out

    def discard(self) -> None:
        """Forget every op started and not collected (the call in flight is collected by the
        next call and dropped: EnvPool cannot cancel it)."""
        self._stash = Completion()
        if self._flight is not None:
            self._flight.drop = True

    def info_rows(self, ids: Sequence[int]) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
        """The last infos of envs ``ids`` as per-env dicts ``(infos, final_infos)``."""
        return self._table.as_dicts(ids)

    # -- the rest of the Engine protocol -----------------------------------------------------
    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
             env_ids: Sequence[int] | None = None) -> list[Any]:
        """``render`` (EnvPool's batched render: one ``(H, W, 3)`` frame per env), or the
        spaces, metadata and render mode; EnvPool's envs expose nothing else."""
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in env_ids]
        if name == "render":
            self._settle()
            self._ensure_pool()
            with real_envpool():
                frames = self._pool.render(np.array(ids, np.int32))
            return [None] * len(ids) if frames is None else list(frames)
        p = self.props
        known = {"observation_space": p.observation_space, "action_space": p.action_space,
                 "metadata": p.metadata, "render_mode": p.render_mode, "spec": None}
        if name not in known:
            raise ConfigError(f"call({name!r}): EnvPool's envs live in its C++ pool; envhive exposes "
                              f"render and {sorted(known)}")
        return [known[name]] * len(ids)

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """Refused: EnvPool's envs live in its C++ pool."""
        raise ConfigError(f"set_attr({name!r}): EnvPool's envs live in its C++ pool and take no attributes")

    def _close_pool(self) -> None:
        # EnvPool's destructor stops its threads (each finishes its op) and frees the results
        # of a call still in flight.
        pool, self._pool, self._flight = self._pool, None, None
        if pool is not None:
            with real_envpool():
                pool.close()
                del pool

    def close(self) -> None:
        """Release EnvPool's pool (its threads finish their op and are joined). Idempotent."""
        self._close_pool()


_NONE = np.empty(0, np.int64)
_NONE.flags.writeable = False


if TYPE_CHECKING:

    def _implements_engine(engine: EnvPoolEngine) -> Engine:
        return engine  # mypy checks EnvPoolEngine against the Engine protocol here

    def _implements_async(engine: EnvPoolEngine) -> AsyncEngine:
        return engine  # ... and against AsyncEngine
