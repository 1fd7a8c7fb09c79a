"""The native executor's worker-process Atari engine: processes stepping ALE, every result in
shared memory (the fallback of the threaded engine; ``ENVHIVE_ATARI_ENGINE=processes`` forces it).

The native executor's Atari engine where the threaded one (``executors/_atari_threads.py``)
cannot run (``executors/_atari_factory.py``: ``engine_kind`` chooses). It lives with the
executors, not in ``envs/atari``, because it is process machinery: it reuses the process
executor's spawning (``main_hidden``, the start method) and its poll-then-block wait, and envs
never import executors.

ALE's ``act`` holds the GIL, so a batch of Atari games runs in worker processes. The general
process executor does that for any env, but it sends each worker's infos back through a pipe,
pickled, every step; for Atari that message costs about as much as the preprocessing (see
docs/executors.md). This engine knows the four Atari infos in advance (EnvPool's ``lives``,
``reward``, ``terminated``, ``elapsed_step``), so its workers write them, with the frames,
rewards and flags, as columns into one shared-memory block: a sync step is one semaphore post
per worker and one wait, and nothing is pickled.

Each worker owns every ``num_workers``-th env (env ``i`` is worker ``i % num_workers``'s, so an
async batch of consecutive ids keeps every worker busy). Its envs are
:class:`~envhive.envs.atari.AtariEnv`, the very class every other executor runs, so frames are
the same for a seed by construction. Two paths drive them (the worker's side is
``executors/_atari_worker.py``):

* **sync** (``step_all``, ``run``): a *round*, in which each worker steps or resets its envs of
  the call; everything around the op rule (which rows step, which reset after their step,
  where the terminal frame goes, which infos are final infos) is the shared sequence of
  batched engines, :class:`envhive.engines._batched.BatchedOps`, which this engine subclasses
  with those two primitives;
* **async** (``send``/``recv`` through the native executor: the
  :class:`~envhive.engines.AsyncEngine` methods ``start``/``collect``/``discard``): a *queued
  command* per worker, in which the worker performs each env's whole op (the op rule of
  ``envhive._ops``, as ``EnvRunner`` does for a Python env) while the caller goes on; the
  envs finished first are collected first.

Examples:
    >>> import os, envhive, numpy as np
    >>> os.environ["ENVHIVE_ATARI_ENGINE"] = "processes"  # this engine, not the threaded one
    >>> env = envhive.make("envhive/Pong-v5", num_envs=2, seed=0, executor="native")
    >>> type(env.pool.executor._engine).__name__
    'AtariEngine'
    >>> obs, info = env.reset()
    >>> obs, rew, term, trunc, info = env.step(np.zeros(2, np.int64))
    >>> obs.shape, info["elapsed_step"].tolist()
    ((2, 4, 84, 84), [1, 1])
    >>> env.close()

    Async, EnvPool's ``send``/``recv``:

    >>> env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor="native", batch_size=2)
    >>> env.async_reset()
    >>> obs, rew, term, trunc, info = env.recv()
    >>> env.send(np.zeros(2, np.int64), info["env_id"])
    >>> sorted(info["env_id"].tolist() + env.recv()[4]["env_id"].tolist()) != []
    True
    >>> env.close()
    >>> del os.environ["ENVHIVE_ATARI_ENGINE"]
"""

from __future__ import annotations

import multiprocessing as mp
import select
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from multiprocessing import shared_memory
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive._buffers import Buffers
from envhive._infos import InfoTable
from envhive._interrupts import deferred_interrupts
from envhive._ops import RESET, STEP
from envhive._report import Completion, EnvProps
from envhive.engines._batched import BatchedOps, refuse_reset_options
from envhive.envs.atari._options import AtariOptions, rom_of_game
from envhive.errors import EnvhiveError, EnvWorkerError, WorkerDiedError
from envhive.executors._atari_factory import OutOfReach
from envhive.executors._atari_worker import (
    BUILD,
    CLOSE,
    IDLE,
    INFO_KEYS,
    NO_WANT,
    ROUND,
    serve_round,
    size,
    views,
    worker_main,
)
from envhive.executors._atari_worker import layout as worker_layout
from envhive.executors._fdsync import EventSemaphore, SharedBlock, fd_sharing, untracked_process
from envhive.executors._process import default_start_method
from envhive.executors._shm import map_segment
from envhive.executors._spawn import main_hidden, usable_cpus
from envhive.executors._worker import SpinPolicy

if TYPE_CHECKING:
    from envhive.engines import AsyncEngine, Engine

__all__ = ["AtariEngine", "INFO_KEYS"]

_WAIT_S = 0.5  # how often a waiting parent checks that its workers are alive
_SPIN_S = 2e-3  # the longest a waiter polls before blocking (as the process executor)


#: The shared block's arrays the pool's buffers may be (``AtariEngine.allocate``), in the
#: order ``Buffers.allocate`` asks for them: ``(block field, buffer)``. The results, which the
#: workers write into the pool's rows, and an async command's actions and ops, which the pool
#: writes into the workers' (no copy either way).
_SHARED = (("obs", "obs"), ("final_obs", "final_obs"), ("actions", "actions"), ("reward", "reward"),
           ("terminated", "terminated"), ("truncated", "truncated"), ("a_ops", "ops"))
_RESULTS = ("obs", "final_obs", "reward", "terminated", "truncated")


def _stop(procs: list[Any], cmd_sems: list[Any], done_sems: list[Any], free_block: Callable[[], None],
          arrays: dict[str, np.ndarray]) -> None:
    """Close the workers (close command, then terminate), free the shared block and close
    the semaphores."""
    try:
        arrays["cmd"][0] = CLOSE
    except (TypeError, ValueError, KeyError):  # pragma: no cover - the block is already gone
        pass
    for p, sem in zip(procs, cmd_sems):
        if p.is_alive():
            sem.release()
    for p in procs:
        p.join(2.0)
        if p.is_alive():  # pragma: no cover - a stuck worker
            p.terminate()
            p.join(1.0)
    arrays.clear()
    free_block()
    for sem in (*cmd_sems, *done_sems):
        getattr(sem, "close", lambda: None)()  # an EventSemaphore's descriptor


def _unlink(shm: shared_memory.SharedMemory) -> None:
    """Free the fallback's named block (no memfd on this platform)."""
    try:
        shm.unlink()  # first: the pool's buffers (views of the block) may outlive the engine
    except FileNotFoundError:  # pragma: no cover
        pass
    try:
        shm.close()
    except BufferError:  # views still held (the pool's buffers): unmapped once they are freed
        pass


class _Columns:
    """The block's columns the async path uses, as attributes (no dict lookup per use)."""

    def __init__(self, v: dict[str, np.ndarray]) -> None:
        self.ops, self.actions, self.seeds, self.has_seed = v["a_ops"], v["actions"], v["seeds"], v["has_seed"]
        self.epoch, self.want, self.failed = v["epoch"], v["want"], v["failed"]
        self.q_env, self.q_tag, self.q_tail, self.q_head = v["q_env"], v["q_tag"], v["q_tail"], v["q_head"]
        self.ring = int(self.q_env.shape[1])


class AtariEngine(OutOfReach, BatchedOps):
    """A batch of Atari games on worker processes, for the native executor (see the module
    docstring). With one worker (one env, or one usable core) the games run in the caller,
    as on the serial executor: a round trip would only add latency.

    Sync steps are *rounds* (every worker steps its envs of the call; the parent runs the
    :class:`BatchedOps` sequence around them). Async ``send``/``recv`` are *queued commands*
    (:class:`~envhive.engines.AsyncEngine`): ``start`` appends one command per worker and
    returns, the workers perform each env's whole op, and ``collect`` hands over the envs
    finished so far, first finished first, while the others run on.

    Args:
        num_envs: batch size.
        kwargs: ``AtariEnv`` keywords (``game`` and the options).
        num_workers: worker processes (``None``: one per usable core, at most ``num_envs``).
    """

    what = "the native Atari engine (use executor='process' for reset options)"
    games_live = "its worker processes"
    device = None  # host arrays

    def __init__(self, num_envs: int, kwargs: dict[str, Any], num_workers: int | None = None) -> None:
        from envhive.envs.atari._env import AtariEnv

        # The frames' shape follows from the options; the action count is the game's, from
        # ALE: the workers write it into the block (ale-py is not even imported here, ~8 MB).
        rest = dict(kwargs)
        options = AtariOptions.parse(rom_of_game(rest.pop("game", "pong")), rest)
        shape = options.obs_shape
        self.num_envs = n = int(num_envs)
        workers = max(1, min(num_workers or usable_cpus(), n))
        self.num_threads = workers  # the native executor's describe(): worker processes here
        # Env i belongs to worker i % workers (interleaved, not contiguous): a send of
        # consecutive ids (an async batch) then keeps every worker busy, not one.
        self._owned = [list(range(w, n, workers)) for w in range(workers)]
        self._owner_of = [i % workers for i in range(n)]
        # A ring holds the commands in flight and, after a discard, skipped ones: each env is
        # in at most one live command, so 4 slots per owned env leave room for 3 discards.
        ring = 4 * len(self._owned[0]) + 8
        fields = worker_layout(n, workers, ring, shape)
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._errors_ready: Any = None  # a select.poll over the error pipes (see below)
        self._inline: list[Any] | None = None
        self._finalizer: Any = None
        self._pending = Completion()  # async results not collected yet
        self._inflight: list[deque[tuple[int, int, int, list[int]]]] = [deque() for _ in range(workers)]
        self._ring_consumed = [0] * workers  # ring slots of collected (or dropped) commands
        # Mirrors of the block's epoch and q_tail, which only this process writes.
        self._epoch = 0
        self._tails = [0] * workers
        self._cmd_shared = False  # the pool's actions and ops are the block's (see bind)
        self._async_errors: dict[int, EnvWorkerError] = {}
        self._round_errors: dict[int, EnvWorkerError] = {}
        self._shared: dict[str, np.ndarray] = {}  # the pool's buffers that are ours (allocate)
        self._copied = True  # some result is copied into the pool's buffers (see bind)
        self._next_shared = 0
        if workers == 1:
            # Inline: the games in this process, the same code on plain arrays.
            self._inline = [AtariEnv(**kwargs) for _ in range(n)]
            self._v = views(bytearray(size(fields)), fields)
            self._v["ops"][:] = IDLE
            self._finalizer = weakref.finalize(self, lambda: None)
            self._set_props(options, len(self._inline[0]._actions))
            return
        # Linux: an anonymous block and eventfd semaphores, handed to spawned workers by
        # descriptor; nothing has a name, so no resource tracker (nor forkserver) process is
        # needed. Elsewhere: a named block, multiprocessing's semaphores and start method.
        fds = fd_sharing()
        ctx: Any = mp.get_context("spawn" if fds else default_start_method())
        self._shm: shared_memory.SharedMemory | None = None
        self._block: SharedBlock | None = None
        if fds:
            self._block = block = SharedBlock(size(fields))
            where: Any = block
            buf: Any = block.map()
            free: Callable[[], None] = block.close
        else:
            self._shm = shm = shared_memory.SharedMemory(create=True, size=size(fields))
            where, buf, free = shm.name, map_segment(shm.name), partial(_unlink, shm)
        # The arrays map the block themselves (a mapping only they hold): the pool's buffers
        # are some of them (allocate) and may outlive the engine, whose close frees the block;
        # the mapping goes when the last array does.
        self._v = v = views(buf, fields)
        v["ops"][:] = IDLE
        v["want"][0] = NO_WANT
        self._a = _Columns(v)
        keys = [k for k, _ in INFO_KEYS]
        self._table = InfoTable({k: v["rep_" + k] for k in keys}, {k: v["step_" + k] for k in keys},
                                v["reset_after"])
        semaphore: Callable[[], Any] = EventSemaphore if fds else partial(ctx.Semaphore, 0)
        self._round_done = semaphore()
        self._async_done = semaphore()
        self._cmd = [semaphore() for _ in range(workers)]
        # Waiters poll before they block, yielding the core unless each process has one.
        spin = (_SPIN_S, workers + 1 > usable_cpus())
        # The parent polls only with a core to spare: otherwise its polls take the time of
        # the workers it waits for (they always have envs queued in async use).
        self._spin = SpinPolicy(*spin) if workers < usable_cpus() else SpinPolicy(0.0, True)
        # Registered first: a start that fails half way still stops the workers it started.
        self._finalizer = weakref.finalize(self, _stop, self._procs, self._cmd,
                                           [self._round_done, self._async_done], free, self._v)
        new_process = untracked_process if fds else ctx.Process
        for w in range(workers):
            parent, child = ctx.Pipe(duplex=False)
            p = new_process(target=worker_main, daemon=True, name=f"envhive-atari-{w}", args=(
                w, self._owned[w], where, fields, dict(kwargs), self._cmd[w],
                self._round_done, self._async_done, child, spin))
            with main_hidden():  # workers need nothing from the user's script
                p.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(p)
        if self._block is not None:
            self._block.close()  # the workers have their own descriptors; the mapping stays
        # One poll over every worker's error pipe: most rounds have nothing to read, and this
        # says so in one system call (Connection.poll builds a selector per call).
        if hasattr(select, "poll"):
            self._errors_ready = select.poll()
            for conn in self._conns:
                self._errors_ready.register(conn.fileno(), select.POLLIN)
        self._wait_round()
        self._set_props(options, int(v["num_actions"][0]))

    def _set_props(self, options: AtariOptions, num_actions: int) -> None:
        """The games' spaces, as ``AtariEnv`` makes them (tests compare the two)."""
        import gymnasium as gym

        from envhive.envs.atari._env import AtariEnv

        self._num_actions = num_actions
        self.props = EnvProps(gym.spaces.Box(0, 255, options.obs_shape, np.uint8),
                              gym.spaces.Discrete(num_actions), dict(AtariEnv.metadata),
                              options.render_mode, None)

    # -- worker round trip --------------------------------------------------------------
    def _take(self, sem: Any, once: bool = False) -> None:
        """Take one post of ``sem``: poll, then block; a dead worker raises instead of hanging.
        ``once``: give up after one block of ``_WAIT_S`` (the caller looks again itself)."""
        start = time.perf_counter()
        if not self._spin.poll(sem):
            while not sem.acquire(True, _WAIT_S):
                self._check_alive()
                if once:
                    break
        self._spin.observe(time.perf_counter() - start)

    def _check_alive(self) -> None:
        dead = [w for w, p in enumerate(self._procs) if not p.is_alive()]
        if dead:
            w = dead[0]
            code = self._procs[w].exitcode
            self.close()
            raise WorkerDiedError(f"Atari worker {w} died (exit code {code})",
                                  env_ids=self._owned[w], exitcode=code)

    def _wait_round(self) -> None:
        """Wait for one round completion per worker; their env errors in ``_round_errors``."""
        for _ in self._procs:
            self._take(self._round_done)
        self._read_errors()
        errors, self._round_errors = self._round_errors, {}
        if -1 in errors:
            self.close()
            raise errors[-1]
        self._raised = errors

    def _read_errors(self) -> None:
        """Sort the workers' error messages: a round's, or a queued command's (kept only if
        its command was not discarded: the parent still expects the env)."""
        if self._errors_ready is not None and not self._errors_ready.poll(0):
            return  # no message in any pipe
        current = self._epoch
        for conn in self._conns:
            while conn.poll():
                try:
                    kind, epoch, i, name, text, tb = conn.recv()
                except EOFError:  # the worker ended (its build failed): nothing more to read
                    break
                err = EnvWorkerError(f"the env {'factory ' if kind == BUILD else ''}raised {name}: {text}",
                                     env_id=i, worker_traceback=tb, cause_type=name)
                if kind == BUILD:  # _wait_round fails the pool (naming the first env that failed)
                    if -1 not in self._round_errors or i < self._round_errors[-1].env_id:
                        self._round_errors[-1] = err
                elif kind == ROUND:
                    self._round_errors[i] = err
                elif epoch == current:
                    self._async_errors[i] = err

    def _round(self, ids: np.ndarray, op: int) -> dict[int, EnvWorkerError]:
        """Run ``op`` (STEP or RESET) on envs ``ids`` in the workers; their errors by env."""
        v = self._v
        every = ids.size == self.num_envs
        rows = slice(None) if every else ids
        v["ops"][rows] = op
        v["failed"][rows] = False
        try:
            if self._inline is not None:
                raised: dict[int, EnvWorkerError] = {}

                def report(i: int, err: Exception, tb: str) -> None:
                    raised[i] = EnvWorkerError(f"the env raised {type(err).__name__}: {err}",
                                               env_id=i, worker_traceback=tb,
                                               cause_type=type(err).__name__)

                serve_round(v, self._inline, list(range(self.num_envs)), report)
                return raised
            # One round is one unit: Ctrl-C is held until every worker has posted its
            # completion, so no post of this round is left for the next one to mistake for
            # its own (an Atari step takes milliseconds; a dead worker still raises at once).
            with deferred_interrupts():
                v["round"][:] = 1
                for sem in self._cmd:
                    sem.release()
                self._wait_round()
            return self._raised
        finally:
            if v:  # empty once closed (a dead worker closes the engine before raising)
                v["ops"][rows] = IDLE

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A buffer of the pool (``Executor.allocate``): the results the workers write
        (observations, final observations, rewards, flags) are handed out as the arrays of the
        shared block itself, so the workers write the pool's rows directly (no copy per step,
        no second copy of every frame). ``Buffers.allocate`` asks in a fixed order (obs,
        final_obs, actions, reward, terminated, truncated, ...): each request takes the next
        of these fields it matches exactly, anything else a plain array. ``bind`` checks
        that each one landed where it was meant to."""
        want = (tuple(shape), np.dtype(dtype))
        v = self._v
        for k in range(self._next_shared, len(_SHARED)):
            field, name = _SHARED[k]
            if (v[field].shape, v[field].dtype) == want:
                self._next_shared = k + 1
                self._shared[name] = v[field]
                return v[field]
        return np.zeros(shape, dtype=dtype)

    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (once)."""
        for name, arr in self._shared.items():
            if getattr(buffers, name) is not arr:  # Buffers.allocate's order changed
                raise EnvhiveError(f"Atari engine: the shared {name!r} array is not the pool's {name}")
        # Some result is copied from the block: a buffer of the pool that is not the block's
        # (a final_obs is there only when the pool may plan STEP_RESET).
        self._copied = any(getattr(buffers, name) is not None and name not in self._shared
                           for name in _RESULTS)
        # The pool writes an async command's actions and ops into the block itself.
        self._cmd_shared = "actions" in self._shared and "ops" in self._shared
        self._bind_ops(buffers)

    def _out(self, name: str, rows: Any, src_rows: Any = None) -> None:
        """Copy result field ``name`` of ``rows`` from the shared block into the pool's
        buffer, unless the pool's buffer is the shared block's array."""
        if name not in self._shared:
            getattr(self._ob, name)[rows] = self._v[name][rows if src_rows is None else src_rows]

    # -- async: queued commands ---------------------------------------------------------
    def start(self, ids: np.ndarray, options: dict[str, Any] | None) -> None:
        """Start the ops of envs ``ids``: one command per worker owning some of them.

        No step here needs Ctrl-C held: a command is written to ring slots the worker does
        not read yet, booked, then published (``q_tail``) and posted. Cut short anywhere, the
        pool calls :meth:`discard`, which drops a booked command that was never published."""
        b = self._ob
        if options:
            ids = refuse_reset_options(ids, b.ops, options, self._pending, self.what)
            if not ids.size:
                return
        if self._inline is not None:  # no workers: the ops run now
            self.run(ids, None, self._pending)
            return
        a = self._a  # the block's columns (see __init__)
        ops = b.ops[ids]
        if not self._cmd_shared:  # else the pool wrote them into the block (allocate)
            a.ops[ids] = ops
            a.actions[ids] = b.actions[ids]
        resets = ops == RESET
        if np.count_nonzero(resets):  # only a RESET op reads its seed
            seeded = b.has_seed[ids] & resets
            a.has_seed[ids] = seeded
            for i in ids[seeded].tolist():
                a.seeds[i] = b.seed_of(i)
        epoch = self._epoch
        groups: dict[int, list[int]] = {}
        owner = self._owner_of
        for i in ids.tolist():
            w = owner[i]
            group = groups.get(w)
            if group is None:
                groups[w] = [i]
            else:
                group.append(i)
        ring, tails = a.ring, self._tails
        for w, mine in groups.items():
            tail = tails[w]
            end = tail + len(mine)
            if end - self._ring_consumed[w] > ring:
                raise EnvhiveError(f"Atari worker {w}: its command ring is full (a worker "
                                   "stuck after repeated interrupts?); close the pool")
            q_env, q_tag, tag = a.q_env[w], a.q_tag[w], epoch * 2
            for slot, i in enumerate(mine, tail):
                q_env[slot % ring] = i
                q_tag[slot % ring] = tag
            q_tag[(end - 1) % ring] = tag + 1  # the command's last env
            self._inflight[w].append((tail, end, epoch, mine))
            a.q_tail[w] = end  # published: the block's tail is the truth (see discard)
            tails[w] = end
            self._cmd[w].release()  # a post is a memory barrier: the ring is visible

    def collect(self, min_count: int) -> Completion:
        """Hand over every finished env, waiting until ``min_count`` envs finished (or
        nothing else runs)."""
        out, self._pending = self._pending, Completion()
        if self._inline is not None:
            return out
        taken = self._finished(min_count - len(out.env_ids) - len(out.errors))
        if taken:  # applied once, at the end: one set of copies per call
            self._apply(np.array(taken, np.int64), out)
        return out

    def take_finished(self, min_count: int) -> tuple[np.ndarray, int, InfoTable] | None:
        """:meth:`collect` for the pool's lean ``recv`` (``Executor.take_finished``): every
        finished env, waiting until ``min_count`` finished, as ``(env ids, how many of them
        ended, the table of their infos)``, their results in the pool's buffers already.

        ``None`` (nothing handed over): the general :meth:`collect` must run, because results
        are pending from before, or the pool's buffers are copies of the block's arrays, or
        the games run inline, or an env taken now raised or fewer than ``min_count`` came
        back (those envs then wait in the pending completion that ``collect`` hands over
        first)."""
        if self._inline is not None or self._copied or self._pending.env_ids or self._pending.errors:
            return None
        ids = np.array(self._finished(min_count), np.int64)
        v = self._v
        if ids.size < min_count or np.count_nonzero(v["failed"][ids]):
            if ids.size:
                self._apply(ids, self._pending)
            return None
        return ids, int(np.count_nonzero(v["terminated"][ids] | v["truncated"][ids])), self._table

    def _finished(self, min_count: int) -> list[int]:
        """The ids of every finished env (taken off the rings), waiting until ``min_count``
        finished (or nothing else runs)."""
        a = self._a
        taken: list[int] = []
        count = 0
        try:
            while True:
                count += self._harvest(taken)
                if count >= min_count or not any(self._inflight):
                    break
                # Ask for one post when enough envs are done (not one per env), then look
                # again: an env may have finished before the workers could read the request.
                a.want[0] = sum(a.q_head.tolist()) + min_count - count
                count += self._harvest(taken)
                if count >= min_count or not any(self._inflight):
                    break
                self._take(self._async_done, once=True)
        finally:
            if self._v:  # nobody waits now: no posts until the next request (or a worker idles)
                a.want[0] = NO_WANT
        return taken

    def _harvest(self, taken: list[int]) -> int:
        """Take every finished env (their ids appended to ``taken``, for :meth:`_apply`);
        how many it took.

        A worker publishes how far it got in its ring (``q_head``) after each env, so the
        finished part of a command is taken and the rest stays booked (``_inflight``: per
        worker, its commands as ``(first slot not taken, end slot, epoch, env ids not
        taken)``). Cut short between taking envs and applying them, their results are lost,
        and the pool's :meth:`discard` gives up on them."""
        a, got = self._a, 0
        heads = a.q_head.tolist()  # before the failed flags: an env's error precedes its publish
        current = -1
        for w, flight in enumerate(self._inflight):
            head = heads[w]
            if not flight or flight[0][0] >= head:
                continue
            if current < 0:  # the first worker with news
                current = self._epoch
                if np.count_nonzero(a.failed):
                    self._read_errors()
            while flight and flight[0][0] < head:
                first, end, epoch, ids = flight[0]
                if end <= head:
                    flight.popleft()
                    part = ids
                else:  # partly done: keep the rest booked
                    part = ids[: head - first]
                    flight[0] = (head, end, epoch, ids[head - first:])
                self._ring_consumed[w] = min(end, head)
                if epoch == current:
                    taken.extend(part)
                    got += len(part)
        return got

    def _apply(self, ids: np.ndarray, out: Completion) -> None:
        """Finished envs' results into the pool's buffers and ``out``; their infos stay in
        the block, read through ``out.info_table`` when their rows are handed out."""
        v = self._v
        failed = v["failed"][ids]
        if np.count_nonzero(failed):
            for i in ids[failed].tolist():
                lost = EnvWorkerError("the env raised (its error message was lost)", env_id=i)
                out.errors[i] = self._async_errors.pop(i, lost)
            ids = ids[~failed]
        if self._copied:
            for name in ("obs", "reward", "terminated", "truncated"):
                self._out(name, ids)
            again = v["reset_after"][ids]
            if np.count_nonzero(again):
                self._out("final_obs", ids[again])
        # How many ended (a RESET op's flags are False), so the pool's books need not look.
        out.add_tabled(ids.tolist(), int(np.count_nonzero(v["terminated"][ids] | v["truncated"][ids])), self._table)

    def discard(self) -> None:
        """Forget every started op not collected: queued ones are skipped by the workers,
        running ones finish and their results are dropped. Does not wait."""
        self._pending = Completion()
        if self._inline is not None or not self._v:
            return
        v = self._v
        self._epoch += 1
        v["epoch"][0] = self._epoch
        # The tails as published (a start cut short may have published without its mirror).
        self._tails = v["q_tail"].tolist()
        for w, flight in enumerate(self._inflight):
            while flight and flight[-1][1] > self._tails[w]:
                flight.pop()  # booked by a start cut short, never published
        self._async_errors.clear()

    # -- the primitives of BatchedOps -----------------------------------------------------
    def _first_bad(self, actions: Any, ids: np.ndarray) -> int:
        acts = actions[ids]
        bad = np.flatnonzero((acts < 0) | (acts >= self._num_actions))
        return int(ids[bad[0]]) if bad.size else -1

    def _step_rows(self, ids: np.ndarray, actions: Any) -> int:
        b, v = self._ob, self._v
        every = ids.size == self.num_envs
        rows = slice(None) if every else ids
        v["actions"][rows] = actions[rows]
        raised = self._round(ids, STEP)
        if raised:  # a step that raises leaves its env unusable: the call fails, as EnvRunner's
            raise next(iter(raised.values()))
        for name in ("obs", "reward", "terminated", "truncated"):
            self._out(name, rows)
        return int(np.count_nonzero(b.terminated[rows] | b.truncated[rows]))

    def _reset_rows(self, ids: np.ndarray, seeds: Sequence[int | None],
                    out: Completion | None) -> tuple[np.ndarray, dict[int, dict[str, Any]]]:
        v = self._v
        has = np.array([s is not None for s in seeds], np.bool_)
        v["has_seed"][ids] = has
        if has.any():
            v["seeds"][ids[has]] = [s for s in seeds if s is not None]
        raised = self._round(ids, RESET)
        if raised:
            if out is None:
                raise next(iter(raised.values()))
            out.errors.update(raised)
            ids = ids[~v["failed"][ids]]
        self._out("obs", ids)
        return ids, {i: self._info("info_", i) for i in ids.tolist()}

    def _step_info_rows(self, ids: np.ndarray | None) -> dict[str, np.ndarray]:
        v = self._v
        return {key: (v["step_" + key].copy() if ids is None else v["step_" + key][ids])
                for key, _ in INFO_KEYS}

    def _info(self, prefix: str, i: int) -> dict[str, Any]:
        v = self._v
        return {key: v[prefix + key][i].copy() for key, _ in INFO_KEYS}

    # -- the rest of the Engine protocol --------------------------------------------------
    def close(self) -> None:
        """Stop the workers and free the shared block (idempotent). Ctrl-C is held until it
        is done (at most ~3 s a stuck worker): the finalizer runs once, so a close cut short
        would leave the workers and the block behind for good."""
        with deferred_interrupts():
            self._finalizer()
        self._inline = None


if TYPE_CHECKING:

    def _implements_engine(engine: AtariEngine) -> Engine:
        return engine  # mypy checks AtariEngine against the Engine and AsyncEngine protocols here

    def _implements_async(engine: AtariEngine) -> AsyncEngine:
        return engine
