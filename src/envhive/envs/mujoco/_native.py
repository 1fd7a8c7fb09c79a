"""The native engine for envhive's MuJoCo envs: a whole batch stepped by one compiled call.

``envhive.make("envhive/HalfCheetah-v5", 64)`` runs here by default. The engine owns one
envhive MuJoCo env object per slot (each with its own ``MjModel``/``MjData``, as on the other
executors) but steps them without their Python ``step``: one numba function, compiled once per
env family with ``parallel=True``, runs every env of the batch, spread over ``num_threads``
threads, with no GIL (families: HalfCheetah, Ant, Hopper, Walker2d, Swimmer, Reacher,
InvertedPendulum, InvertedDoublePendulum; Humanoid runs on threads):

1. write the action into ``data.ctrl``;
2. ``mj_step`` ``frame_skip`` times and ``mj_rnePostConstraint`` where the env calls it
   (``libmujoco`` called through ctypes, on the env's own ``MjModel``/``MjData``);
3. write the observation into the pool's buffer, and the reward, flags and step infos into
   arrays (the family's compiled step, ``envhive.envs.mujoco._families``).

Resets are split: Python draws each env's start state with the env's own generator calls
(``env._reset_state()``: gymnasium's noise, exactly), then one compiled parallel call runs
``mj_resetData``, sets ``qpos``/``qvel``, ``mj_forward`` and writes the observations of every
env reset in that step; the reset infos come from the env objects (``env._reset_info()``). ``call`` and
``set_attr`` reach the env objects, as on the serial executor; parameters read by the
compiled step (reward weights ...) are read again after ``set_attr``.

Threads: numba's threading layer (OpenMP where available). Its threads outlive the call;
like any OpenMP program, do not ``fork`` a process that already ran a native MuJoCo pool and
use one in the child (envhive's process executor starts workers with forkserver: safe).

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envhive/HalfCheetah-v5", num_envs=4, seed=0)
    >>> obs, info = env.reset()
    >>> obs, reward, terminated, truncated, info = env.step(np.zeros((4, 6), np.float32))
    >>> obs.shape, sorted(info)[:2]
    ((4, 17), ['_reward_ctrl', '_reward_forward'])
    >>> engine = env._pool.executor._engine
    >>> sorted(engine.step_all(np.zeros((4, 6), np.float32)).step_infos)[:2]  # neutral columns
    ['reward_ctrl', 'reward_forward']
    >>> env.close()
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numba
import numpy as np

from envhive._buffers import Buffers
from envhive._ops import RESET
from envhive._report import Completion, env_error, env_props
from envhive._runner import EnvRunner
from envhive.engines import Engine, family_of
from envhive.engines._batched import BatchedOps
from envhive.engines._compiled import address_to_voidptr as _ptr
from envhive.engines._compiled import first_bad_action
from envhive.engines._jit import jit
from envhive.envs.mujoco._base import MujocoEnv
from envhive.envs.mujoco._families import _D, _M, _QPOS, _QVEL, Family
from envhive.envs.mujoco._libmujoco import libmujoco_fns
from envhive.errors import ConfigError

__all__ = ["MujocoEngine", "build_driver"]

_LOCK = threading.Lock()  # numba's workqueue layer must not run two parallel calls at once


def build_driver(step_one: Any) -> Any:
    """Compile the parallel loop over env ids for one family's ``step_one``.

    ``drive(ids, ops, table, params, actions, obs, reward, terminated, truncated, elapsed,
    max_steps, vals) -> done`` steps every env in ``ids`` whose op is not RESET, keeps the
    time limit and returns how many episodes ended.
    """

    @jit(nogil=True, parallel=True)
    def drive(ids, ops, table, params, actions, obs, reward, terminated, truncated, elapsed, max_steps, vals):  # type: ignore[no-untyped-def]  # pragma: no cover
        done = 0
        for k in numba.prange(ids.size):
            i = ids[k]
            if ops[i] == RESET:
                continue
            r, term = step_one(table[i], params[i], actions[i], obs[i], vals, i)
            steps = elapsed[i] + 1
            elapsed[i] = steps
            trunc = steps >= max_steps
            reward[i] = r
            terminated[i] = term
            truncated[i] = trunc
            done += term or trunc
        return done

    return drive


def build_reset_driver(obs_one: Any) -> Any:
    """Compile the parallel reset over env ids for one family's ``obs_one``.

    ``reset(ids, table, params, qpos, qvel, obs)``: for env ``ids[k]``, ``mj_resetData``,
    ``qpos[k]``/``qvel[k]`` as its state, ``mj_forward`` (gymnasium's ``reset`` and
    ``set_state``), then its observation into ``obs``.
    """
    fns = libmujoco_fns()
    c_reset, c_forward = fns["mj_resetData"], fns["mj_forward"]

    @jit(nogil=True, parallel=True)
    def reset(ids, table, params, qpos_new, qvel_new, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
        nq, nv = qpos_new.shape[1], qvel_new.shape[1]
        for k in numba.prange(ids.size):
            i = ids[k]
            row = table[i]
            c_reset(row[_M], row[_D])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            for j in range(nq):
                qpos[j] = qpos_new[k, j]
            for j in range(nv):
                qvel[j] = qvel_new[k, j]
            c_forward(row[_M], row[_D])
            obs_one(row, params[i], obs[i])

    return reset


_DRIVERS: dict[Any, Any] = {}


def _driver(family: type[Family]) -> tuple[Any, Any]:
    """``(step driver, reset driver)`` of a family (compiled once per process)."""
    key = (family.step_one(), family.obs_one())
    drivers = _DRIVERS.get(key)
    if drivers is None:
        drivers = _DRIVERS[key] = (build_driver(key[0]), build_reset_driver(key[1]))
    return drivers


class MujocoEngine(BatchedOps):
    """Steps ``num_envs`` envhive MuJoCo envs of one compiled family, in parallel threads.

    Args:
        env_cls: the env class (one with a compiled family, e.g. ``HalfCheetahEnv``).
        num_envs: batch size.
        kwargs: the env's keywords (as ``env_cls(**kwargs)``).
        num_threads: threads per step (``None``: numba's default, one per core).

    Raises:
        ConfigError: ``env_cls`` has no compiled family, or a keyword the compiled step cannot
            honour (a reward weight that is not a real number).
    """

    def __init__(
        self, env_cls: type[MujocoEnv], num_envs: int, kwargs: dict[str, Any], num_threads: int | None = None
    ) -> None:
        family: type[Family] | None = family_of(env_cls)
        if family is None:
            raise ConfigError(
                f"{env_cls.__name__} has no compiled step for the native executor; use "
                "executor='thread' (or 'serial')"
            )
        self.family = family
        self.envs: list[MujocoEnv] = []
        try:
            for _ in range(num_envs):
                self.envs.append(env_cls(**kwargs))
        except BaseException:
            self.close()
            raise
        env0 = self.envs[0]
        self._runner = EnvRunner(self.envs, first_id=0)  # call, set_attr and close, as elsewhere
        self.props = env_props(env0)
        self.num_envs = n = num_envs
        self.device = None  # host arrays
        limit = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
        self.num_threads = max(1, min(num_threads or limit, limit, n))
        self._max_steps = np.int64(env0._max_steps)
        self._elapsed = np.zeros(n, np.int64)
        self._f64 = np.dtype(np.float64)
        self._vals = np.zeros((len(family.info) + family.scratch_rows, n), np.float64)
        space = self.props.action_space
        self._acts = np.zeros((n, *space.shape), np.float32)  # type: ignore[misc]
        self._low = np.asarray(space.low, np.float64).reshape(-1)  # type: ignore[attr-defined]
        self._high = np.asarray(space.high, np.float64).reshape(-1)  # type: ignore[attr-defined]
        self._table = np.array([family.row(e) for e in self.envs], np.int64)
        self._pack_params()
        self._drive, self._reset_drive = _driver(family)
        self._nq, self._nv = env0.model.nq, env0.model.nv
        self._first = True

    def _pack_params(self) -> None:
        """Read every env's parameters (at start, and after ``set_attr``)."""
        family, rows = self.family, []
        dtypes = family.info_dtypes(self.envs[0])
        for i, e in enumerate(self.envs):
            rows.append(family.par(e))
            if family.info_dtypes(e) != dtypes:
                raise ConfigError(
                    f"env {i}: the native MuJoCo engine needs reward weights of the same types "
                    f"in every env (info dtypes {family.info_dtypes(e)}, env 0 has {dtypes}); "
                    "the compiled step keeps the previous parameters"
                )
        self._params = np.array(rows, np.float64)
        self._dtypes = dtypes
        self._max_steps = np.int64(self.envs[0]._max_steps)

    # ------------------------------------------------------------------ protocol
    reset_options = True  # accepted and ignored, as by gymnasium's MuJoCo envs

    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (obs must be a float64 array: the envs' Box)."""
        self._buffers = buffers
        self._bind_ops(buffers)

    def _parallel(self, fn: Any, *args: Any) -> Any:
        """Call a compiled parallel function on this engine's threads."""
        numba.set_num_threads(self.num_threads)
        if self._first or _LOCK_ALWAYS:
            with _LOCK:
                out = fn(*args)
            self._first = False
            _check_layer()
            return out
        return fn(*args)

    def _run_compiled(self, ids: np.ndarray, ops: np.ndarray, actions: np.ndarray) -> int:
        b = self._buffers
        done = int(self._parallel(
            self._drive, ids, ops, self._table, self._params, actions, b.obs, b.reward,
            b.terminated, b.truncated, self._elapsed, self._max_steps, self._vals,
        ))
        if self.family.finishes_step:  # ids holds no RESET (BatchedOps steps step ids only)
            self.family.finish_step(self._vals, self._params, b.reward, ids)
        return done

    def _step_infos(self, rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The step infos as neutral columns (one value per env, gymnasium's dtypes), every
        env (or ``rows`` only).

        Fresh arrays every call (views into one new block: one allocation, not one per key).
        """
        keys = len(self.family.info)
        vals = self._vals[:keys].copy() if rows is None else self._vals[:keys, rows]
        infos: dict[str, np.ndarray] = {}
        f64 = self._f64
        for j, (key, dtype) in enumerate(zip(self.family.info, self._dtypes)):
            infos[key] = vals[j] if dtype == f64 else vals[j].astype(dtype)
        self.family.finish_infos(infos)
        return infos

    # -- the op sequence's primitives (engines._batched.BatchedOps) ---------------------
    def _first_bad(self, actions: np.ndarray, ids: np.ndarray) -> int:
        """Bounds and NaN, checked for every row of the batch (one compiled pass)."""
        acts = actions if actions.ndim == 2 else actions.reshape(self.num_envs, -1)
        return int(first_bad_action(acts, self._low, self._high))

    def _step_rows(self, ids: np.ndarray, actions: np.ndarray) -> int:
        """Step envs ``ids`` in one parallel call (float32 actions, as the envs' ``ctrl``)."""
        if actions is not self._buffers.actions:  # the caller's batch: as the compiled step takes it
            self._acts[...] = actions
            actions = self._acts
        return self._run_compiled(ids, self._buffers.ops, actions)

    def _step_info_rows(self, ids: np.ndarray | None) -> dict[str, np.ndarray]:
        return self._step_infos(ids)

    def _reset_rows(
        self, ids: np.ndarray, seeds: Sequence[int | None], out: Completion | None
    ) -> tuple[np.ndarray, dict[int, dict[str, Any]]]:
        """Reset envs ``ids`` as their ``reset`` would (``MujocoEnv.reset``: seed, then
        ``mj_resetData``, the noisy start state, ``mj_forward``), their observations written
        by one compiled call. An env whose start state raises is reported in ``out`` (without
        ``out``, the exception propagates)."""
        b, envs = self._buffers, self.envs
        qpos = np.empty((ids.size, self._nq))
        qvel = np.empty((ids.size, self._nv))
        done: list[int] = []
        for i, seed in zip(ids.tolist(), seeds):
            env = envs[i]
            try:
                if seed is not None:
                    gym.Env.reset(env, seed=seed)  # MujocoEnv.reset's super().reset
                qpos[len(done)], qvel[len(done)] = env._reset_state()
            except Exception as err:
                if out is None:
                    raise
                out.errors[i] = env_error("reset", err, i)
                continue
            done.append(i)
        arr = np.array(done, dtype=np.int64)
        infos: dict[int, dict[str, Any]] = {}
        if not done:
            return arr, infos
        k = arr.size
        self._parallel(self._reset_drive, arr, self._table, self._params, qpos[:k], qvel[:k], b.obs)
        self._elapsed[arr] = 0
        for i in done:
            env = envs[i]
            env._elapsed_steps = 0
            info = env._reset_info()
            if info:
                infos[i] = info
        return arr, infos

    def _runner_for(self, env_ids: Sequence[int] | None) -> EnvRunner:
        """The runner of every env (``None``), or of the envs ``env_ids`` in that order."""
        if env_ids is None:
            return self._runner
        return EnvRunner([self.envs[int(i)] for i in env_ids], first_id=0)

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        """``env.get_wrapper_attr(name)`` on the env objects ``env_ids`` (``None``: all), in
        that order, called if callable."""
        for env, steps in zip(self.envs, self._elapsed.tolist()):
            env._elapsed_steps = steps
        results = self._runner_for(env_ids).call(name, args, kwargs)
        # A call may have stepped or reset an env in Python.
        self._elapsed[:] = [env._elapsed_steps for env in self.envs]
        return results

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """Set ``name`` on the env objects ``env_ids`` (``None``: all; ``values[k]`` to
        ``env_ids[k]``), then read the compiled step's parameters again."""
        self._runner_for(env_ids).set_attr(name, values)
        self._pack_params()

    def close(self) -> None:
        """Close every env."""
        EnvRunner(self.envs, first_id=0).close()  # also when __init__ failed halfway
        self.envs = []


if TYPE_CHECKING:

    def _implements_engine(engine: MujocoEngine) -> Engine:
        return engine  # mypy checks MujocoEngine against the Engine protocol here


_LOCK_ALWAYS = False


def _check_layer() -> None:
    """After the first parallel call: serialize calls if numba runs the workqueue layer."""
    global _LOCK_ALWAYS
    try:
        _LOCK_ALWAYS = numba.threading_layer() == "workqueue"
    except ValueError:  # pragma: no cover - no parallel call ran yet
        _LOCK_ALWAYS = True

