"""The native executor's Atari engine: worker processes stepping ALE, every result in shared memory.

ALE's ``act`` holds the GIL, so a batch of Atari games runs in worker processes. The general
process executor does that for any env, but it sends each worker's infos back through a pipe,
pickled, every step; for Atari that message costs about as much as the preprocessing (see
docs/executors.md). This engine knows the four Atari infos in advance (EnvPool's ``lives``,
``reward``, ``terminated``, ``elapsed_step``), so its workers write them, with the frames,
rewards and flags, as columns into one shared-memory block: a step is one semaphore post per
worker and one wait, and nothing is pickled.

Each worker owns a contiguous slice of envs (:class:`~envhive.envs.atari.AtariEnv`, the very
class every other executor runs, so frames are the same for a seed by construction) and
performs the pool's ops on them (``envhive._ops``): STEP, RESET (seeded from the command
block) and STEP_RESET (the terminal frame to ``final_obs``, then a reset). The op handling is
:meth:`AtariEngine._perform`, one method, the piece a shared op-rule helper replaces.

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envhive/Pong-v5", num_envs=2, seed=0, executor="native")
    >>> obs, info = env.reset()
    >>> obs, rew, term, trunc, info = env.step(np.zeros(2, np.int64))
    >>> obs.shape, info["elapsed_step"].tolist()
    ((2, 4, 84, 84), [1, 1])
    >>> env.close()
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
import weakref
from collections.abc import Sequence
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from envhive._buffers import Buffers
from envhive._ops import RESET, STEP_RESET
from envhive._report import Completion, EnvProps
from envhive.engines._protocol import StepAllResult
from envhive.errors import ConfigError, EnvWorkerError, WorkerDiedError

__all__ = ["AtariEngine", "INFO_KEYS"]

#: EnvPool's Atari infos and their dtypes, in the order of ``AtariEnv.info_values``.
INFO_KEYS: tuple[tuple[str, type], ...] = (
    ("lives", np.int32), ("reward", np.float32), ("terminated", np.int32), ("elapsed_step", np.int32),
)
#: An op code for "not in this call" (``run`` of some envs only).
_IDLE = 255
_CLOSE = 1
_WAIT_S = 0.5  # how often a waiting parent checks that its workers are alive
_SPIN_S = 2e-3  # the longest a waiter polls before blocking (as the process executor)


def _layout(n: int, obs_shape: tuple[int, ...]) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """The shared block's arrays: name -> (dtype, shape)."""
    fields: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
        "cmd": (np.dtype(np.int64), (1,)),
        "ops": (np.dtype(np.uint8), (n,)),
        "actions": (np.dtype(np.int64), (n,)),
        "seeds": (np.dtype(np.uint64), (n,)),
        "has_seed": (np.dtype(np.bool_), (n,)),
        "obs": (np.dtype(np.uint8), (n, *obs_shape)),
        "final_obs": (np.dtype(np.uint8), (n, *obs_shape)),
        "reward": (np.dtype(np.float64), (n,)),
        "terminated": (np.dtype(np.bool_), (n,)),
        "truncated": (np.dtype(np.bool_), (n,)),
        "was_reset": (np.dtype(np.bool_), (n,)),  # a STEP_RESET that ended and reset
        "failed": (np.dtype(np.bool_), (n,)),
    }
    for key, dtype in INFO_KEYS:
        fields[f"info_{key}"] = (np.dtype(dtype), (n,))  # the row's info (reset info if reset)
        fields[f"step_{key}"] = (np.dtype(dtype), (n,))  # the step's info (final info if reset)
    return fields


def _views(buf: Any, layout: dict[str, tuple[np.dtype, tuple[int, ...]]]) -> dict[str, np.ndarray]:
    views, offset = {}, 0
    for name, (dtype, shape) in layout.items():
        offset = -(-offset // 64) * 64  # cache-line aligned
        count = int(np.prod(shape))
        views[name] = np.ndarray(shape, dtype, buf, offset)
        offset += count * dtype.itemsize
    return views


def _size(layout: dict[str, tuple[np.dtype, tuple[int, ...]]]) -> int:
    offset = 0
    for dtype, shape in layout.values():
        offset = -(-offset // 64) * 64 + int(np.prod(shape)) * dtype.itemsize
    return max(offset, 1)


def _write_info(v: dict[str, np.ndarray], prefix: str, i: int, values: tuple[Any, ...]) -> None:
    for (key, _), value in zip(INFO_KEYS, values):
        v[prefix + key][i] = value


def _serve(v: dict[str, np.ndarray], envs: list[Any], lo: int, conn: Any) -> None:
    """Perform the ops of this worker's envs (the ones not ``_IDLE``)."""
    ops, obs, acts = v["ops"], v["obs"], v["actions"]
    for k, env in enumerate(envs):
        i = lo + k
        op = ops[i]
        if op == _IDLE:
            continue
        try:
            if op == RESET:
                seed = int(v["seeds"][i]) if v["has_seed"][i] else None
                obs[i], _ = env.reset(seed=seed)
                v["reward"][i] = 0.0
                v["terminated"][i] = v["truncated"][i] = False
                _write_info(v, "info_", i, env.info_values())
                continue
            reward, term, trunc = env.advance(int(acts[i]))
            v["reward"][i], v["terminated"][i], v["truncated"][i] = reward, term, trunc
            values = env.info_values()
            _write_info(v, "step_", i, values)
            if op == STEP_RESET and (term or trunc):
                v["final_obs"][i] = env.frames
                obs[i], _ = env.reset()
                v["was_reset"][i] = True
                _write_info(v, "info_", i, env.info_values())
            else:
                obs[i] = env.frames
                v["was_reset"][i] = False
                _write_info(v, "info_", i, values)
        except Exception as err:  # reported per env; the worker carries on
            v["failed"][i] = True
            conn.send((i, type(err).__name__, str(err), traceback.format_exc()))


def _worker(w: int, lo: int, hi: int, shm_name: str, layout: Any, kwargs: dict[str, Any],
            cmd_sem: Any, done_sem: Any, conn: Any, spin: tuple[float, bool]) -> None:
    """Worker ``w``: build envs ``[lo, hi)``, then serve commands until told to close."""
    from envhive.envs.atari._env import AtariEnv
    from envhive.executors._worker import SpinPolicy, wait_command

    policy = SpinPolicy(*spin)
    parent = mp.parent_process()

    shm = shared_memory.SharedMemory(name=shm_name)
    try:
        v = _views(shm.buf, layout)
        try:
            envs = [AtariEnv(**kwargs) for _ in range(lo, hi)]
        except Exception as err:
            conn.send((-1, type(err).__name__, str(err), traceback.format_exc()))
            done_sem.release()
            return
        done_sem.release()  # built
        while True:
            # Poll briefly, then block (the process executor's policy: a blocked process's
            # wake-up is slow on virtual machines, and the parent's next command comes soon).
            wait_command(cmd_sem, policy, parent)
            if v["cmd"][0] == _CLOSE:
                break
            _serve(v, envs, lo, conn)
            done_sem.release()
        del v
    finally:
        shm.close()


def _stop(procs: list[Any], cmd_sems: list[Any], shm: Any, views: dict[str, np.ndarray]) -> None:
    """Close the workers (close command, then terminate) and free the shared block."""
    try:
        views["cmd"][0] = _CLOSE
    except (TypeError, ValueError):  # pragma: no cover - the block is already gone
        pass
    for p, sem in zip(procs, cmd_sems):
        if p.is_alive():
            sem.release()
    for p in procs:
        p.join(2.0)
        if p.is_alive():  # pragma: no cover - a stuck worker
            p.terminate()
            p.join(1.0)
    views.clear()
    try:
        shm.close()
        shm.unlink()
    except (FileNotFoundError, BufferError):  # pragma: no cover
        pass


class AtariEngine:
    """A batch of Atari games on worker processes, for the native executor (see the module
    docstring).

    Args:
        num_envs: batch size.
        kwargs: ``AtariEnv`` keywords (``game`` and the options).
        num_workers: worker processes (``None``: one per usable core, at most ``num_envs``).
    """

    def __init__(self, num_envs: int, kwargs: dict[str, Any], num_workers: int | None = None) -> None:
        from envhive.envs.atari._env import AtariEnv
        from envhive.executors._process import default_start_method
        from envhive.executors._spawn import main_hidden, usable_cpus

        probe = AtariEnv(**kwargs)  # spaces, and bad options fail here, in the caller
        self.props = EnvProps(probe.observation_space, probe.action_space, dict(probe.metadata),
                              probe.render_mode, None)
        self._num_actions = len(probe._actions)
        shape = tuple(probe.frames.shape)
        probe.close()
        self.num_envs = n = int(num_envs)
        workers = max(1, min(num_workers or usable_cpus(), n))
        self.num_threads = workers  # what the native executor's describe() shows
        layout = _layout(n, shape)
        self._shm = shared_memory.SharedMemory(create=True, size=_size(layout))
        self._v = v = _views(self._shm.buf, layout)
        v["ops"][:] = _IDLE
        ctx: Any = mp.get_context(default_start_method())
        self._done = ctx.Semaphore(0)
        self._cmd = [ctx.Semaphore(0) for _ in range(workers)]
        self._conns, self._procs = [], []
        self._bounds = bounds = np.linspace(0, n, workers + 1).astype(int)
        # Waiters poll before they block, yielding the core unless each process has one.
        from envhive.executors._worker import SpinPolicy

        spin = (_SPIN_S, workers + 1 > usable_cpus())
        self._spin = SpinPolicy(*spin)
        for w in range(workers):
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, daemon=True, name=f"envhive-atari-{w}", args=(
                w, int(bounds[w]), int(bounds[w + 1]), self._shm.name, layout, dict(kwargs),
                self._cmd[w], self._done, child, spin))
            with main_hidden():  # workers need nothing from the user's script
                p.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(p)
        self._finalizer = weakref.finalize(self, _stop, self._procs, self._cmd, self._shm, self._v)
        self._wait_all()
        self._all = np.arange(n, dtype=np.int64)

    # -- worker round trip --------------------------------------------------------------
    def _wait_all(self) -> None:
        """Wait for one completion per worker; a dead worker raises instead of hanging."""
        for _ in self._procs:
            start = time.perf_counter()
            if self._spin.poll(self._done):
                self._spin.observe(time.perf_counter() - start)
                continue
            while not self._done.acquire(True, _WAIT_S):
                dead = [w for w, p in enumerate(self._procs) if not p.is_alive()]
                if dead:
                    w = dead[0]
                    code = self._procs[w].exitcode
                    self.close()
                    raise WorkerDiedError(
                        f"Atari worker {w} died (exit code {code})",
                        env_ids=list(range(int(self._bounds[w]), int(self._bounds[w + 1]))),
                        exitcode=code)
            self._spin.observe(time.perf_counter() - start)
        errors = self._errors()
        if -1 in errors:
            self.close()
            raise errors[-1]

    def _errors(self) -> dict[int, EnvWorkerError]:
        out: dict[int, EnvWorkerError] = {}
        for conn in self._conns:
            while conn.poll():
                i, kind, text, tb = conn.recv()
                out[i] = EnvWorkerError(f"the env raised {kind}: {text}", env_id=i,
                                        worker_traceback=tb, cause_type=kind)
        return out

    def _round(self) -> None:
        for sem in self._cmd:
            sem.release()
        self._wait_all()

    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (once)."""
        self._b = buffers

    # -- ops ----------------------------------------------------------------------------
    def _perform(self, ids: np.ndarray, actions: np.ndarray, seeded: bool) -> tuple[np.ndarray, dict[int, dict[str, Any]]]:
        """Run the planned op of every env in ``ids`` in the workers and copy the results into
        the pool's buffers; returns ``(rows that reset, their reset infos)``. RESET ops take
        the seeds of the command block when ``seeded`` (``run``: resets the pool sent; in
        ``step_all`` every RESET is an autoreset, whose seeds belong to earlier calls)."""
        b, v = self._b, self._v
        every = ids.size == self.num_envs
        ops = b.ops if every else b.ops[ids]
        v["ops"][ids] = ops
        v["actions"][ids] = actions if every else actions[ids]
        v["failed"][ids] = False
        resets = ids[ops == RESET]
        v["has_seed"][resets] = False
        if seeded:
            for i in resets.tolist():
                seed = b.seed_of(i)
                if seed is not None:
                    v["seeds"][i], v["has_seed"][i] = seed, True
        try:
            self._round()
        finally:
            if not every:
                v["ops"][ids] = _IDLE
        rows = slice(None) if every else ids
        b.obs[rows] = v["obs"][rows]
        b.reward[rows] = v["reward"][rows]
        b.terminated[rows] = v["terminated"][rows]
        b.truncated[rows] = v["truncated"][rows]
        again = ids[v["was_reset"][ids] & (ops == STEP_RESET)]
        if again.size and b.final_obs is not None:
            b.final_obs[again] = v["final_obs"][again]
        reset_rows = np.concatenate([resets, again]) if again.size else resets
        reset_infos = {i: self._info("info_", i) for i in reset_rows.tolist()}
        return again, reset_infos

    def _info(self, prefix: str, i: int) -> dict[str, Any]:
        v = self._v
        return {key: v[prefix + key][i].copy() for key, _ in INFO_KEYS}

    def _first_bad(self, actions: np.ndarray, ids: np.ndarray) -> int:
        acts = actions[ids]
        bad = np.flatnonzero((acts < 0) | (acts >= self._num_actions))
        return int(ids[bad[0]]) if bad.size else -1

    def step_all(self, actions: np.ndarray) -> StepAllResult:
        """Run every env's op with ``actions`` (checked first: nothing runs if one is bad)."""
        b = self._b
        bad = self._first_bad(actions, self._all[b.ops != RESET])
        if bad >= 0:
            return StepAllResult(bad, 0, None, None)
        _, reset_infos = self._perform(self._all, actions, seeded=False)
        failed = self._errors()
        if failed:
            raise next(iter(failed.values()))
        v = self._v
        stepped = b.ops != RESET
        done = int(np.count_nonzero((b.terminated | b.truncated) & stepped))
        step_infos = {key: v["step_" + key].copy() for key, _ in INFO_KEYS}
        return StepAllResult(-1, done, step_infos, reset_infos or None)

    def run(self, ids: np.ndarray, options: dict[str, Any] | None, out: Completion) -> None:
        """The ops of ``ids`` (actions from the bound buffers); every env reported in ``out``."""
        b = self._b
        if options and np.any(b.ops[ids] == RESET):
            for i in ids[b.ops[ids] == RESET].tolist():
                out.errors[i] = EnvWorkerError(
                    f"reset options are not supported by the native Atari engine, got {sorted(options)}; "
                    "use executor='process' for them", env_id=i, cause_type="ConfigError")
            ids = ids[b.ops[ids] != RESET]
        if not ids.size:
            return
        bad = self._first_bad(b.actions, ids[b.ops[ids] != RESET])
        if bad >= 0:
            out.errors[bad] = EnvWorkerError(f"action {b.actions[bad]!r} is outside {self.props.action_space}",
                                             env_id=bad, cause_type="ActionError")
            ids = ids[ids != bad]
        again, reset_infos = self._perform(ids, b.actions, seeded=True)
        failed = self._errors()
        out.errors.update(failed)
        resets = set(reset_infos)
        for i in ids.tolist():
            if i in failed:
                continue
            out.env_ids.append(i)
            out.infos[i] = reset_infos[i] if i in resets else self._info("step_", i)
        for i in again.tolist():
            out.final_infos[i] = self._info("step_", i)

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
             env_ids: Sequence[int] | None = None) -> list[Any]:
        """The spaces, metadata and render mode (the games live in other processes)."""
        ids = range(self.num_envs) if env_ids is None else list(env_ids)
        known = {"observation_space": self.props.observation_space, "action_space": self.props.action_space,
                 "metadata": self.props.metadata, "render_mode": self.props.render_mode}
        if name not in known:
            raise ConfigError(f"call({name!r}): the native Atari engine's games live in its worker "
                              f"processes; it exposes {sorted(known)}. Use executor='process' to call "
                              "other attributes")
        return [known[name]] * len(ids)

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """Refused: the games live in the worker processes."""
        raise ConfigError(f"set_attr({name!r}): the native Atari engine's games live in its worker "
                          "processes; use executor='process' to set attributes")

    def close(self) -> None:
        """Stop the workers and free the shared block (idempotent)."""
        self._finalizer()
