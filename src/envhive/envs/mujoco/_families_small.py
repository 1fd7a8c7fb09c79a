"""Compiled families of the small MuJoCo envs: InvertedPendulum, InvertedDoublePendulum, Reacher.

The same scheme as ``_families`` (see there), for envs with trigonometric observations, a
C-library ``pow`` (numpy's scalar ``x**2``) or a BLAS ``ddot`` in the reward.

Examples:
    >>> ReacherFamily.param_names
    ('reward_dist_weight', 'ctrl_cost_weight', 'ctrl_cost_f32')
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from envhive.engines._compiled import address_to_voidptr as _ptr
from envhive.engines._compiled import clip as _clip
from envhive.engines._compiled import square as _square
from envhive.engines._jit import jit
from envhive.envs.mujoco._families import (
    _NQ,
    _NV,
    _QPOS,
    _QVEL,
    ADDRESS_COLUMNS,
    COMMON_PARAMS,
    Family,
    _ctrl_cost,
    _ctrl_dtype,
    _ctrl_params,
    _physics_fn,
    _state_obs,
    _weight,
    column_index,
)

__all__ = ["InvertedPendulumFamily", "InvertedDoublePendulumFamily", "ReacherFamily"]

_IP_INFO = ("reward_survive",)
_IP_SURVIVE = column_index(_IP_INFO)["reward_survive"]


class InvertedPendulumFamily(Family):
    """``InvertedPendulumEnv``: obs ``[qpos, qvel]``; reward 1 (an int) until the pole leaves
    ``|angle| <= 0.2`` or the observation stops being finite."""

    info = _IP_INFO

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        return [np.dtype(int)]  # gymnasium's int(not terminated): an int slot (int64)

    @classmethod
    def compiled_obs(cls) -> Any:
        @jit(nogil=True)
        def obs_one(row, par, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
            _state_obs(row, par, obs, 0, False)

        return obs_one

    @classmethod
    def compiled(cls) -> Any:
        physics = _physics_fn()
        obs_one = cls.obs_one()

        @jit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq, nv = int(par[_NQ]), int(par[_NV])
            physics(row, par, act)
            obs_one(row, par, obs)
            finite = True
            for j in range(nq + nv):
                finite = finite and np.isfinite(obs[j])
            terminated = not finite or abs(obs[1]) > 0.2
            reward = 0.0 if terminated else 1.0
            vals[_IP_SURVIVE, i] = reward
            return reward, terminated

        return step_one


_IDP_INFO = ("reward_survive", "distance_penalty", "velocity_penalty")
_IDP_PARAMS = ("healthy_reward",)
_IDP_ADDRESSES = ("tip_xpos", "qfrc_constraint")
_IDP_V = column_index(_IDP_INFO)
_IDP_HEALTHY_R = column_index(COMMON_PARAMS, _IDP_PARAMS)["healthy_reward"]
_IDP_ROW = column_index(ADDRESS_COLUMNS, _IDP_ADDRESSES)
_IDP_TIP = _IDP_ROW["tip_xpos"]
_IDP_QFRC = _IDP_ROW["qfrc_constraint"]


class InvertedDoublePendulumFamily(Family):
    """``InvertedDoublePendulumEnv``: obs ``[x, sin(angles), cos(angles), clip(qvel),
    clip(qfrc_constraint[0])]``; alive bonus minus tip distance and velocity penalties; ends
    when the tip is at or below height 1.

    ``x**2`` is numpy's scalar power, i.e. the C library's ``pow``, called here too (as the
    Pendulum kernel does, ``envhive.engines._compiled.square``). ``sin``/``cos`` are the C library's (numba's), which equal numpy's
    float64 ``sin``/``cos`` bit for bit on the machines this was tested on; the gymnasium
    differential test would show a machine where they do not.
    """

    info = _IDP_INFO
    param_names = _IDP_PARAMS
    addresses = _IDP_ADDRESSES

    @classmethod
    def extra_addresses(cls, env: Any) -> dict[str, int]:
        return {"tip_xpos": env._tip_xpos.ctypes.data, "qfrc_constraint": env.data.qfrc_constraint.ctypes.data}

    @classmethod
    def params(cls, env: Any) -> dict[str, float]:
        return {"healthy_reward": _weight(env._healthy_reward, "healthy_reward")}

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        f64 = np.dtype(np.float64)
        return [np.asarray(env._healthy_reward * int(True)).dtype, f64, f64]

    @classmethod
    def compiled_obs(cls) -> Any:
        @jit(nogil=True)
        def obs_one(row, par, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq, nv = int(par[_NQ]), int(par[_NV])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            qfrc = numba.carray(_ptr(row[_IDP_QFRC]), nv, np.float64)
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
        physics = _physics_fn()
        obs_one = cls.obs_one()
        v_survive, v_dist, v_vel = (_IDP_V[k] for k in _IDP_INFO)

        @jit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nv = int(par[_NV])
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            tip = numba.carray(_ptr(row[_IDP_TIP]), 3, np.float64)
            physics(row, par, act)
            x, y = tip[0], tip[2]
            obs_one(row, par, obs)
            terminated = y <= 1
            dist_penalty = 0.01 * _square(x) + _square(y - 2.0)
            vel_penalty = 1e-3 * _square(qvel[1]) + 5e-3 * _square(qvel[2])
            alive_bonus = par[_IDP_HEALTHY_R] * (0.0 if terminated else 1.0)  # healthy_reward * int(not terminated)
            vals[v_survive, i] = alive_bonus
            vals[v_dist, i] = -dist_penalty
            vals[v_vel, i] = -vel_penalty
            return alive_bonus - dist_penalty - vel_penalty, terminated

        return step_one


_REACHER_INFO = ("reward_dist", "reward_ctrl")
_REACHER_PARAMS = ("reward_dist_weight", "ctrl_cost_weight", "ctrl_cost_f32")
_REACHER_ADDRESSES = ("fingertip", "target")
_REACHER_V = column_index(_REACHER_INFO)
#: Scratch rows of ``vals`` (after the info rows): fingertip - target, 3 values.
_REACHER_DIFF = len(_REACHER_INFO)
_REACHER_P = column_index(COMMON_PARAMS, _REACHER_PARAMS)
_REACHER_ROW = column_index(ADDRESS_COLUMNS, _REACHER_ADDRESSES)
_REACHER_TIP = _REACHER_ROW["fingertip"]
_REACHER_TARGET = _REACHER_ROW["target"]


class ReacherFamily(Family):
    """``ReacherEnv``: obs ``[cos(qpos[:2]), sin(qpos[:2]), qpos[2:], qvel[:2], (fingertip -
    target)[:2]]``; reward ``-|fingertip - target| * w_dist - sum(action**2) * w_ctrl``.

    The distance is numpy's ``np.linalg.norm``, a BLAS ``ddot``: the compiled step leaves the
    difference vector in scratch rows and :meth:`finish_step` computes the distance and the
    reward with numpy's ``ddot`` (``matmul`` of 1x3 by 3x1 rows) after the call.
    """

    info = _REACHER_INFO
    param_names = _REACHER_PARAMS
    addresses = _REACHER_ADDRESSES
    scratch_rows = 3
    finishes_step = True

    @classmethod
    def extra_addresses(cls, env: Any) -> dict[str, int]:
        return {"fingertip": env._fingertip.ctypes.data, "target": env._target.ctypes.data}

    @classmethod
    def params(cls, env: Any) -> dict[str, float]:
        return {
            "reward_dist_weight": _weight(env._reward_dist_weight, "reward_dist_weight"),
            **_ctrl_params(env._reward_control_weight, "reward_control_weight"),
        }

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        f64 = np.dtype(np.float64)
        return [f64, _ctrl_dtype(env._reward_control_weight)]

    @classmethod
    def finish_step(cls, vals: np.ndarray, params: np.ndarray, reward: np.ndarray, ids: np.ndarray) -> None:
        vec = np.ascontiguousarray(vals[_REACHER_DIFF:_REACHER_DIFF + 3, ids].T)
        dist = np.sqrt(np.matmul(vec[:, None, :], vec[:, :, None])[:, 0, 0])
        reward_dist = -dist * params[ids, _REACHER_P["reward_dist_weight"]]
        vals[_REACHER_V["reward_dist"], ids] = reward_dist
        reward[ids] = reward_dist + vals[_REACHER_V["reward_ctrl"], ids]

    @classmethod
    def compiled_obs(cls) -> Any:
        @jit(nogil=True)
        def obs_one(row, par, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq, nv = int(par[_NQ]), int(par[_NV])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            tip = numba.carray(_ptr(row[_REACHER_TIP]), 3, np.float64)
            target = numba.carray(_ptr(row[_REACHER_TARGET]), 3, np.float64)
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
        v_ctrl = _REACHER_V["reward_ctrl"]
        ctrl_w, ctrl_f32 = _REACHER_P["ctrl_cost_weight"], _REACHER_P["ctrl_cost_f32"]

        @jit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            tip = numba.carray(_ptr(row[_REACHER_TIP]), 3, np.float64)
            target = numba.carray(_ptr(row[_REACHER_TARGET]), 3, np.float64)
            physics(row, par, act)
            obs_one(row, par, obs)
            for j in range(3):
                vals[_REACHER_DIFF + j, i] = tip[j] - target[j]
            # gymnasium: -sum(action**2) * weight, the same value as -(weight * sum(...))
            reward_ctrl = -_ctrl_cost(act, par[ctrl_w], par[ctrl_f32])
            vals[v_ctrl, i] = reward_ctrl
            return 0.0, False  # the reward is finished with numpy (finish_step)

        return step_one
