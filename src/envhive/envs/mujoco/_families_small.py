"""Compiled families of the small MuJoCo envs: InvertedPendulum, InvertedDoublePendulum, Reacher.

The same scheme as ``_families`` (see there), for envs with trigonometric observations, a
C-library ``pow`` (numpy's scalar ``x**2``) or a BLAS ``ddot`` in the reward.

Examples:
    >>> [f.env_cls.__name__ for f in FAMILIES]
    ['InvertedPendulumEnv', 'InvertedDoublePendulumEnv', 'ReacherEnv']
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from envhive.envs.mujoco._families import (
    _FIRST_EXTRA,
    _FIRST_PARAM,
    _NQ,
    _NV,
    _QPOS,
    _QVEL,
    Family,
    _clip,
    _ctrl_cost,
    _ctrl_dtype,
    _ctrl_params,
    _physics_fn,
    _ptr,
    _state_obs,
    _weight,
)
from envhive.envs.mujoco._pendulum import InvertedDoublePendulumEnv, InvertedPendulumEnv
from envhive.envs.mujoco._reacher import ReacherEnv

__all__ = ["FAMILIES", "InvertedPendulumFamily", "InvertedDoublePendulumFamily", "ReacherFamily"]


class InvertedPendulumFamily(Family):
    """``InvertedPendulumEnv``: obs ``[qpos, qvel]``; reward 1 (an int) until the pole leaves
    ``|angle| <= 0.2`` or the observation stops being finite."""

    env_cls = InvertedPendulumEnv
    info = ("reward_survive",)

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        return [np.dtype(int)]  # gymnasium's int(not terminated): an int slot (int64)

    @classmethod
    def compiled_obs(cls) -> Any:
        @numba.njit(nogil=True)
        def obs_one(row, par, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
            _state_obs(row, par, obs, 0, False)

        return obs_one

    @classmethod
    def compiled(cls) -> Any:
        physics = _physics_fn()
        obs_one = cls.obs_one()

        @numba.njit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq, nv = int(par[_NQ]), int(par[_NV])
            physics(row, par, act)
            obs_one(row, par, obs)
            finite = True
            for j in range(nq + nv):
                finite = finite and np.isfinite(obs[j])
            terminated = not finite or abs(obs[1]) > 0.2
            reward = 0.0 if terminated else 1.0
            vals[0, i] = reward
            return reward, terminated

        return step_one


class InvertedDoublePendulumFamily(Family):
    """``InvertedDoublePendulumEnv``: obs ``[x, sin(angles), cos(angles), clip(qvel),
    clip(qfrc_constraint[0])]``; alive bonus minus tip distance and velocity penalties; ends
    when the tip is at or below height 1.

    ``x**2`` is numpy's scalar power, i.e. the C library's ``pow``, called here too (as the
    Pendulum kernel does). ``sin``/``cos`` are the C library's (numba's), which equal numpy's
    float64 ``sin``/``cos`` bit for bit on the machines this was tested on; the gymnasium
    differential test would show a machine where they do not.
    """

    env_cls = InvertedDoublePendulumEnv
    info = ("reward_survive", "distance_penalty", "velocity_penalty")

    @classmethod
    def extra_addresses(cls, env: Any) -> list[int]:
        return [env._tip_xpos.ctypes.data, env.data.qfrc_constraint.ctypes.data]

    @classmethod
    def params(cls, env: Any) -> list[float]:
        return [_weight(env._healthy_reward, "healthy_reward")]

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        f64 = np.dtype(np.float64)
        return [np.asarray(env._healthy_reward * int(True)).dtype, f64, f64]

    @classmethod
    def compiled_obs(cls) -> Any:
        @numba.njit(nogil=True)
        def obs_one(row, par, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq, nv = int(par[_NQ]), int(par[_NV])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            qfrc = numba.carray(_ptr(row[_FIRST_EXTRA + 1]), nv, np.float64)
            obs[0] = qpos[0]
            angles = nq - 1
            for j in range(angles):
                obs[1 + j] = math.sin(qpos[1 + j])
                obs[1 + angles + j] = math.cos(qpos[1 + j])
            k = 1 + 2 * angles
            for j in range(nv):
                obs[k + j] = _clip(qvel[j], -10.0, 10.0)
            obs[k + nv] = _clip(qfrc[0], -10.0, 10.0)

        return obs_one

    @classmethod
    def compiled(cls) -> Any:
        from envhive.kernels.classic._pendulum import _square

        physics = _physics_fn()
        obs_one = cls.obs_one()
        p = _FIRST_PARAM

        @numba.njit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nv = int(par[_NV])
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            tip = numba.carray(_ptr(row[_FIRST_EXTRA]), 3, np.float64)
            physics(row, par, act)
            x, y = tip[0], tip[2]
            obs_one(row, par, obs)
            terminated = y <= 1
            dist_penalty = 0.01 * _square(x) + _square(y - 2.0)
            vel_penalty = 1e-3 * _square(qvel[1]) + 5e-3 * _square(qvel[2])
            alive_bonus = par[p] * (0.0 if terminated else 1.0)  # healthy_reward * int(not terminated)
            vals[0, i] = alive_bonus
            vals[1, i] = -dist_penalty
            vals[2, i] = -vel_penalty
            return alive_bonus - dist_penalty - vel_penalty, terminated

        return step_one


class ReacherFamily(Family):
    """``ReacherEnv``: obs ``[cos(qpos[:2]), sin(qpos[:2]), qpos[2:], qvel[:2], (fingertip -
    target)[:2]]``; reward ``-|fingertip - target| * w_dist - sum(action**2) * w_ctrl``.

    The distance is numpy's ``np.linalg.norm``, a BLAS ``ddot``: the compiled step leaves the
    difference vector in scratch rows and :meth:`finish_step` computes the distance and the
    reward with numpy's ``ddot`` (``matmul`` of 1x3 by 3x1 rows) after the call.
    """

    env_cls = ReacherEnv
    info = ("reward_dist", "reward_ctrl")
    scratch_rows = 3
    finishes_step = True

    @classmethod
    def extra_addresses(cls, env: Any) -> list[int]:
        return [env._fingertip.ctypes.data, env._target.ctypes.data]

    @classmethod
    def params(cls, env: Any) -> list[float]:
        return [
            _weight(env._reward_dist_weight, "reward_dist_weight"),
            *_ctrl_params(env._reward_control_weight, "reward_control_weight"),
        ]

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        f64 = np.dtype(np.float64)
        return [f64, _ctrl_dtype(env._reward_control_weight)]

    @classmethod
    def finish_step(cls, vals: np.ndarray, params: np.ndarray, reward: np.ndarray, ids: np.ndarray) -> None:
        vec = np.ascontiguousarray(vals[2:5, ids].T)
        dist = np.sqrt(np.matmul(vec[:, None, :], vec[:, :, None])[:, 0, 0])
        reward_dist = -dist * params[ids, _FIRST_PARAM]
        vals[0, ids] = reward_dist
        reward[ids] = reward_dist + vals[1, ids]

    @classmethod
    def compiled_obs(cls) -> Any:
        @numba.njit(nogil=True)
        def obs_one(row, par, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq, nv = int(par[_NQ]), int(par[_NV])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            tip = numba.carray(_ptr(row[_FIRST_EXTRA]), 3, np.float64)
            target = numba.carray(_ptr(row[_FIRST_EXTRA + 1]), 3, np.float64)
            obs[0], obs[1] = math.cos(qpos[0]), math.cos(qpos[1])
            obs[2], obs[3] = math.sin(qpos[0]), math.sin(qpos[1])
            k = 4
            for j in range(2, nq):
                obs[k] = qpos[j]
                k += 1
            obs[k], obs[k + 1] = qvel[0], qvel[1]
            obs[k + 2], obs[k + 3] = tip[0] - target[0], tip[1] - target[1]

        return obs_one

    @classmethod
    def compiled(cls) -> Any:
        physics = _physics_fn()
        obs_one = cls.obs_one()
        p = _FIRST_PARAM

        @numba.njit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            tip = numba.carray(_ptr(row[_FIRST_EXTRA]), 3, np.float64)
            target = numba.carray(_ptr(row[_FIRST_EXTRA + 1]), 3, np.float64)
            physics(row, par, act)
            obs_one(row, par, obs)
            for j in range(3):
                vals[2 + j, i] = tip[j] - target[j]
            # gymnasium: -sum(action**2) * weight, the same value as -(weight * sum(...))
            reward_ctrl = -_ctrl_cost(act, par[p + 1], par[p + 2])
            vals[1, i] = reward_ctrl
            return 0.0, False  # the reward is finished with numpy (finish_step)

        return step_one


FAMILIES: tuple[type[Family], ...] = (InvertedPendulumFamily, InvertedDoublePendulumFamily, ReacherFamily)
