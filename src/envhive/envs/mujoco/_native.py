"""The native engine for envhive's MuJoCo envs: a whole batch stepped by one compiled call.

``envhive.make("envhive/HalfCheetah-v5", 64)`` runs here by default. The engine owns one
envhive MuJoCo env object per slot (each with its own ``MjModel``/``MjData``, as on the other
executors) but steps them without their Python ``step``: one numba function, compiled once per
env family with ``parallel=True``, runs every env of the batch, spread over ``num_threads``
threads, with no GIL (families: HalfCheetah, Ant, Hopper, Walker2d, Swimmer):

1. write the action into ``data.ctrl``;
2. ``mj_step`` ``frame_skip`` times and ``mj_rnePostConstraint`` where the env calls it
   (``libmujoco`` called through ctypes, on the env's own ``MjModel``/``MjData``);
3. write the observation into the pool's buffer, and the reward, flags and step infos into
   arrays (the family's compiled step, ``envhive.envs.mujoco._families``).

Resets run in Python with the env's own ``reset`` (same generator, same noise): they come
once per episode, and keeping them there keeps seeding exactly gymnasium's. ``call`` and
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
    >>> env.close()
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from envhive.envs.mujoco._base import MujocoEnv
from envhive.envs.mujoco._families import Family, first_bad_action, native_family
from envhive.errors import ConfigError, EnvWorkerError
from envhive.executors._base import Buffers, Completion, Op, env_props

__all__ = ["MujocoEngine", "build_driver"]

_RESET, _STEP_RESET = int(Op.RESET), int(Op.STEP_RESET)

_LOCK = threading.Lock()  # numba's workqueue layer must not run two parallel calls at once


def build_driver(step_one: Any) -> Any:
    """Compile the parallel loop over env ids for one family's ``step_one``.

    ``drive(ids, ops, table, params, actions, obs, reward, terminated, truncated, elapsed,
    max_steps, vals) -> done`` steps every env in ``ids`` whose op is not RESET, keeps the
    time limit and returns how many episodes ended.
    """

    @numba.njit(nogil=True, parallel=True)
    def drive(ids, ops, table, params, actions, obs, reward, terminated, truncated, elapsed, max_steps, vals):  # type: ignore[no-untyped-def]  # pragma: no cover
        done = 0
        for k in numba.prange(ids.size):
            i = ids[k]
            if ops[i] == _RESET:
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


_DRIVERS: dict[Any, Any] = {}


def _driver(family: type[Family]) -> Any:
    step_one = family.step_one()
    drive = _DRIVERS.get(step_one)
    if drive is None:
        drive = _DRIVERS[step_one] = build_driver(step_one)
    return drive


class MujocoEngine:
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
        family = native_family(env_cls)
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
        self.props = env_props(env0)
        self.num_envs = n = num_envs
        limit = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
        self.num_threads = max(1, min(num_threads or limit, limit, n))
        self._max_steps = np.int64(env0._max_steps)
        self._elapsed = np.zeros(n, np.int64)
        self._f64 = np.dtype(np.float64)
        self._vals = np.zeros((len(family.info), n), np.float64)
        self._ids = np.arange(n, dtype=np.int64)
        space = self.props.action_space
        self._acts = np.zeros((n, *space.shape), np.float32)  # type: ignore[misc]
        self._low = np.asarray(space.low, np.float64).reshape(-1)  # type: ignore[attr-defined]
        self._high = np.asarray(space.high, np.float64).reshape(-1)  # type: ignore[attr-defined]
        self._table = np.array(
            [
                [e.model._address, e.data._address, e._qpos.ctypes.data, e._qvel.ctypes.data,
                 e._ctrl.ctypes.data, *family.extra_addresses(e)]
                for e in self.envs
            ],
            np.int64,
        )
        self._pack_params()
        self._drive = _driver(family)
        self._first = True

    def _pack_params(self) -> None:
        """Read every env's parameters (at start, and after ``set_attr``)."""
        family, rows = self.family, []
        dtypes = family.info_dtypes(self.envs[0])
        for i, e in enumerate(self.envs):
            rows.append([
                float(e._frame_skip), float(bool(e.rne_post_constraint)), e._dt,
                float(e.model.nq), float(e.model.nv), *family.params(e),
            ])
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
    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (obs must be a float64 array: the envs' Box)."""
        self._buffers = buffers

    def _run_compiled(self, ids: np.ndarray, ops: np.ndarray, actions: np.ndarray) -> int:
        b = self._buffers
        args = (ids, ops, self._table, self._params, actions, b.obs, b.reward, b.terminated,
                b.truncated, self._elapsed, self._max_steps, self._vals)
        numba.set_num_threads(self.num_threads)
        if self._first or _LOCK_ALWAYS:
            with _LOCK:
                done = self._drive(*args)
            self._first = False
            _check_layer()
            return int(done)
        return int(self._drive(*args))

    def _step_infos(self, count: int, rows: np.ndarray | None = None) -> dict[str, Any]:
        """The step infos batched as gymnasium does, every env present (or ``rows`` only).

        Fresh arrays every call (views into one new block per dtype: two allocations, not
        two per key).
        """
        vals = self._vals.copy() if rows is None else self._vals[:, rows]
        masks = np.ones((len(self.family.info), count), np.bool_)
        infos: dict[str, Any] = {}
        f64 = self._f64
        for j, (key, dtype) in enumerate(zip(self.family.info, self._dtypes)):
            infos[key] = vals[j] if dtype == f64 else vals[j].astype(dtype)
            infos[f"_{key}"] = masks[j]
        self.family.finish_infos(infos)
        return infos

    def step_all(self, actions: np.ndarray) -> tuple[int, int, Any, Any]:
        """Validate ``actions`` (bounds, NaN), then run every env's op in one parallel call."""
        acts = actions if actions.ndim == 2 else actions.reshape(self.num_envs, -1)
        bad = first_bad_action(acts, self._low, self._high)
        if bad >= 0:
            return bad, 0, None, None
        self._acts[...] = actions
        b = self._buffers
        done = self._run_compiled(self._ids, b.ops, self._acts)
        infos = self._step_infos(self.num_envs)
        reset_infos: dict[int, dict[str, Any]] = {}
        resets = np.flatnonzero(b.ops == _RESET)
        if done and b.final_obs is not None:
            ended = np.flatnonzero((b.ops == _STEP_RESET) & (b.terminated | b.truncated))
            if ended.size:
                b.final_obs[ended] = b.obs[ended]
                resets = np.union1d(resets, ended)
        for i in resets.tolist():
            # Autoresets: no seed (the command block's seeds belong to earlier reset calls).
            reset_infos[i] = self._reset(i, None, seeded=False)
        return -1, done, infos, reset_infos

    def _reset(self, i: int, options: dict[str, Any] | None, seeded: bool = True) -> dict[str, Any]:
        """Reset env ``i`` with its own ``reset`` (with the command block's seed if ``seeded``
        and it has one)."""
        b = self._buffers
        seed = int(b.seeds[i]) if seeded and b.ops[i] == _RESET and b.has_seed[i] else None
        obs, info = self.envs[i].reset(seed=seed, options=options)
        b.obs[i] = obs
        self._elapsed[i] = 0
        if b.ops[i] == _RESET:
            b.reward[i] = 0.0
            b.terminated[i] = False
            b.truncated[i] = False
        return info

    def run(self, ids: np.ndarray, options: dict[str, Any] | None, out: Completion) -> None:
        """The general path: the ops of ``ids``, actions from the pool's buffers."""
        b = self._buffers
        ops = b.ops[ids]
        stepped = ids[ops != _RESET]
        if stepped.size:
            self._run_compiled(stepped, b.ops, b.actions)
            infos = self._step_infos(stepped.size, stepped)
            keys = [(k, infos[k]) for k in self.family.info]
            ended = (b.ops[stepped] == _STEP_RESET) & (b.terminated[stepped] | b.truncated[stepped])
            for pos, (i, end) in enumerate(zip(stepped.tolist(), ended.tolist())):
                info: dict[str, Any] | None = {k: v[pos] for k, v in keys}
                if end:
                    b.final_obs[i] = b.obs[i]  # type: ignore[index]
                    out.final_infos[i] = info  # type: ignore[assignment]
                    info = self._guarded(i, None, out)
                    if info is None:
                        continue
                if info:
                    out.infos[i] = info
                out.env_ids.append(i)
        for i in ids[ops == _RESET].tolist():
            reset_info = self._guarded(i, options, out)
            if reset_info is None:
                continue
            if reset_info:
                out.infos[i] = reset_info
            out.env_ids.append(i)

    def _guarded(self, i: int, options: dict[str, Any] | None, out: Completion) -> dict[str, Any] | None:
        try:
            return self._reset(i, options)
        except Exception as err:
            out.errors[i] = EnvWorkerError(
                f"reset() raised {type(err).__name__}: {err}",
                env_id=i,
                worker_traceback=traceback.format_exc(),
                cause_type=type(err).__name__,
            )
            return None

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """``env.get_wrapper_attr(name)`` on each env object, called if callable."""
        for env, steps in zip(self.envs, self._elapsed.tolist()):
            env._elapsed_steps = steps
        results = []
        for env in self.envs:
            attr = env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        # A call may have stepped or reset an env in Python.
        self._elapsed[:] = [env._elapsed_steps for env in self.envs]
        return results

    def set_attr(self, name: str, values: Sequence[Any]) -> None:
        """Set ``name`` on each env object, then read the compiled step's parameters again."""
        for env, value in zip(self.envs, values):
            env.set_wrapper_attr(name, value)
        self._pack_params()

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass
        self.envs = []


_LOCK_ALWAYS = False


def _check_layer() -> None:
    """After the first parallel call: serialize calls if numba runs the workqueue layer."""
    global _LOCK_ALWAYS
    try:
        _LOCK_ALWAYS = numba.threading_layer() == "workqueue"
    except ValueError:  # pragma: no cover - no parallel call ran yet
        _LOCK_ALWAYS = True

