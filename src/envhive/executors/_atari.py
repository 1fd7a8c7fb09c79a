"""The ``"atari"`` engine kind: worker processes stepping ALE, every result in shared memory.

Registered in ``envhive.engines._registry`` (ids listed by ``envs.atari._options.atari_entries``,
factories built by :func:`atari_factory`, bench peers by :func:`bench_peers`). It lives with
the executors, not in ``envs/atari``, because it is process machinery: it reuses the process
executor's spawning (``main_hidden``, the start method) and its poll-then-block wait, and envs
never import executors.

ALE's ``act`` holds the GIL, so a batch of Atari games runs in worker processes. The general
process executor does that for any env, but it sends each worker's infos back through a pipe,
pickled, every step; for Atari that message costs about as much as the preprocessing (see
docs/executors.md). This engine knows the four Atari infos in advance (EnvPool's ``lives``,
``reward``, ``terminated``, ``elapsed_step``), so its workers write them, with the frames,
rewards and flags, as columns into one shared-memory block: a step is one semaphore post per
worker and one wait, and nothing is pickled.

Each worker owns every ``num_workers``-th env (env ``i`` is worker ``i % num_workers``'s, so an
async batch of consecutive ids keeps every worker busy). Its envs are
:class:`~envhive.envs.atari.AtariEnv`, the very class every other executor runs, so frames are
the same for a seed by construction, and it does two things to them: step (``advance``) and reset (seeded or not). Everything around the op
rule (which rows step, which reset after their step, where the terminal frame goes, which
infos are final infos) is the shared sequence of batched engines,
:class:`envhive.engines._batched.BatchedOps`, which this engine subclasses with those two
primitives.

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
from collections.abc import Callable, Sequence
from multiprocessing import shared_memory
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive._buffers import Buffers
from envhive._interrupts import deferred_interrupts
from envhive._ops import RESET, STEP
from envhive._report import Completion, EnvProps
from envhive.engines._batched import BatchedOps
from envhive.engines._registry import CompiledEnv
from envhive.envs.atari._options import AtariOptions, game_name, rom_of_game
from envhive.errors import ConfigError, EnvWorkerError, WorkerDiedError
from envhive.executors._process import default_start_method
from envhive.executors._spawn import main_hidden, usable_cpus
from envhive.executors._worker import SpinPolicy, wait_command

if TYPE_CHECKING:
    from envhive.engines import Engine, NativeFactory
    from envhive.envs.atari._env import AtariEnv

__all__ = ["AtariEngine", "AtariFactory", "atari_factory", "bench_peers", "INFO_KEYS"]

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
        "reward": (np.dtype(np.float64), (n,)),
        "terminated": (np.dtype(np.bool_), (n,)),
        "truncated": (np.dtype(np.bool_), (n,)),
        "failed": (np.dtype(np.bool_), (n,)),
    }
    for key, dtype in INFO_KEYS:
        fields[f"info_{key}"] = (np.dtype(dtype), (n,))  # the reset info of a RESET
        fields[f"step_{key}"] = (np.dtype(dtype), (n,))  # the step info of a STEP
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


def _serve(v: dict[str, np.ndarray], envs: list[Any], ids: list[int], report: Any) -> None:
    """Perform the ops of this worker's envs (STEP or RESET; the rest are ``_IDLE``). An env
    that raises is marked ``failed`` and ``report(i, err, traceback)`` says why."""
    ops, obs, acts = v["ops"], v["obs"], v["actions"]
    for i, env in zip(ids, envs):
        op = ops[i]
        if op == _IDLE:
            continue
        try:
            if op == RESET:
                seed = int(v["seeds"][i]) if v["has_seed"][i] else None
                obs[i], _ = env.reset(seed=seed)
                _write_info(v, "info_", i, env.info_values())
            else:
                reward, term, trunc = env.advance(int(acts[i]))
                v["reward"][i], v["terminated"][i], v["truncated"][i] = reward, term, trunc
                obs[i] = env.frames
                _write_info(v, "step_", i, env.info_values())
        except Exception as err:  # reported per env; the worker carries on
            v["failed"][i] = True
            report(i, err, traceback.format_exc())


def _worker(w: int, ids: list[int], shm_name: str, layout: Any, kwargs: dict[str, Any],
            cmd_sem: Any, done_sem: Any, conn: Any, spin: tuple[float, bool]) -> None:
    """Worker ``w``: build envs ``ids``, then serve commands until told to close."""
    from envhive.envs.atari._env import AtariEnv

    policy = SpinPolicy(*spin)
    parent = mp.parent_process()

    shm = shared_memory.SharedMemory(name=shm_name)
    try:
        v = _views(shm.buf, layout)
        try:
            envs = [AtariEnv(**kwargs) for _ in ids]
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
            _serve(v, envs, ids, lambda i, err, tb: conn.send((i, type(err).__name__, str(err), tb)))
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


class AtariEngine(BatchedOps):
    """A batch of Atari games on worker processes, for the native executor (see the module
    docstring). With one worker (one env, or one usable core) the games run in the caller,
    as on the serial executor: a round trip would only add latency.

    Args:
        num_envs: batch size.
        kwargs: ``AtariEnv`` keywords (``game`` and the options).
        num_workers: worker processes (``None``: one per usable core, at most ``num_envs``).
    """

    what = "the native Atari engine (use executor='process' for reset options)"
    device = None  # host arrays

    def __init__(self, num_envs: int, kwargs: dict[str, Any], num_workers: int | None = None) -> None:
        from envhive.envs.atari._env import AtariEnv

        probe = AtariEnv(**kwargs)  # spaces, and bad options fail here, in the caller
        self.props = EnvProps(probe.observation_space, probe.action_space, dict(probe.metadata),
                              probe.render_mode, None)
        self._num_actions = len(probe._actions)
        shape = tuple(probe.frames.shape)
        self.num_envs = n = int(num_envs)
        workers = max(1, min(num_workers or usable_cpus(), n))
        self.num_threads = workers  # the native executor's describe(): worker processes here
        layout = _layout(n, shape)
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._inline: list[Any] | None = None
        self._finalizer: Any = None
        # Env i belongs to worker i % workers (interleaved, not contiguous): a send of
        # consecutive ids (an async batch) then keeps every worker busy, not one.
        self._owned = [list(range(w, n, workers)) for w in range(workers)]
        if workers == 1:
            # Inline: the games in this process, the same code on plain arrays.
            self._inline = [probe] + [AtariEnv(**kwargs) for _ in range(n - 1)]
            self._raised: dict[int, EnvWorkerError] = {}
            self._v = _views(bytearray(_size(layout)), layout)
            self._v["ops"][:] = _IDLE
            self._finalizer = weakref.finalize(self, lambda: None)
            return
        probe.close()
        self._shm = shared_memory.SharedMemory(create=True, size=_size(layout))
        self._v = v = _views(self._shm.buf, layout)
        v["ops"][:] = _IDLE
        ctx: Any = mp.get_context(default_start_method())
        self._done = ctx.Semaphore(0)
        self._cmd = [ctx.Semaphore(0) for _ in range(workers)]
        # Waiters poll before they block, yielding the core unless each process has one.
        spin = (_SPIN_S, workers + 1 > usable_cpus())
        self._spin = SpinPolicy(*spin)
        for w in range(workers):
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, daemon=True, name=f"envhive-atari-{w}", args=(
                w, self._owned[w], self._shm.name, layout, dict(kwargs),
                self._cmd[w], self._done, child, spin))
            with main_hidden():  # workers need nothing from the user's script
                p.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(p)
        self._finalizer = weakref.finalize(self, _stop, self._procs, self._cmd, self._shm, self._v)
        self._wait_all()

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
                        env_ids=self._owned[w],
                        exitcode=code)
            self._spin.observe(time.perf_counter() - start)
        errors = self._errors()
        if -1 in errors:
            self.close()
            raise errors[-1]
        self._raised = errors

    def _errors(self) -> dict[int, EnvWorkerError]:
        out: dict[int, EnvWorkerError] = {}
        for conn in self._conns:
            while conn.poll():
                i, kind, text, tb = conn.recv()
                out[i] = EnvWorkerError(f"the env raised {kind}: {text}", env_id=i,
                                        worker_traceback=tb, cause_type=kind)
        return out

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

                _serve(v, self._inline, list(range(self.num_envs)), report)
                return raised
            # One round is one unit: Ctrl-C is held until every worker has posted its
            # completion, so no post of this round is left for the next one to mistake for
            # its own (an Atari step takes milliseconds; a dead worker still raises at once).
            with deferred_interrupts():
                for sem in self._cmd:
                    sem.release()
                self._wait_all()
            return self._raised
        finally:
            if v:  # empty once closed (a dead worker closes the engine before raising)
                v["ops"][rows] = _IDLE

    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (once)."""
        self._bind_ops(buffers)

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
        b.obs[rows] = v["obs"][rows]
        b.reward[rows] = v["reward"][rows]
        b.terminated[rows] = v["terminated"][rows]
        b.truncated[rows] = v["truncated"][rows]
        return int(np.count_nonzero(b.terminated[rows] | b.truncated[rows]))

    def _reset_rows(self, ids: np.ndarray, seeds: Sequence[int | None],
                    out: Completion | None) -> tuple[np.ndarray, dict[int, dict[str, Any]]]:
        b, v = self._ob, self._v
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
        b.obs[ids] = v["obs"][ids]
        return ids, {i: self._info("info_", i) for i in ids.tolist()}

    def _step_info_rows(self, ids: np.ndarray | None) -> dict[str, np.ndarray]:
        v = self._v
        return {key: (v["step_" + key].copy() if ids is None else v["step_" + key][ids])
                for key, _ in INFO_KEYS}

    def _info(self, prefix: str, i: int) -> dict[str, Any]:
        v = self._v
        return {key: v[prefix + key][i].copy() for key, _ in INFO_KEYS}

    # -- the rest of the Engine protocol --------------------------------------------------
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
        self._inline = None


class AtariFactory:
    """A picklable factory of one Atari game with its options: one :class:`AtariEnv` when
    called (serial, thread and process executors), the :class:`AtariEngine` of a whole batch
    for the native executor, which ``executor="auto"`` picks from two envs on (one game runs
    inline anyway; see ``AtariEngine``).

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
        """The native executor's engine: ``num_threads`` worker processes (``None``: one per
        core)."""
        return AtariEngine(num_envs, self.kwargs, num_threads)

    def key(self) -> tuple[Any, ...]:
        """What must be equal for two factories to share one engine."""
        return ("atari", sorted(self.kwargs.items()))

    def __repr__(self) -> str:
        return f"envhive/{game_name(self.kwargs.get('game', 'pong'))}-v5"


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
