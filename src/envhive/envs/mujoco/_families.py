"""Compiled steps of envhive's MuJoCo envs, one *family* per env class (see ``_native``).

A family's compiled ``step_one`` is the env's ``_step_post`` written again in numba with the
same operations in the same order and dtypes: numpy's pairwise summation
(``envhive.engines._compiled.pairwise_sum``), ``float32`` control costs where numpy computes
them in ``float32``, NaN-propagating clips. The one quantity numpy computes with BLAS (Ant's
``distance_from_origin``, a ``ddot`` that may fuse multiply-adds) is computed by numpy after
the call (:meth:`Family.finish_infos`), with the same ``ddot``. The tests check every output
bit for bit against the env's own ``step`` and against gymnasium's envs.

Which env class a family steps is registered in ``envhive.engines._registry`` (the one
registry of compiled ids), not here.

**Named columns.** Compiled code reads three per-env tables by column: ``row`` (addresses),
``par`` (parameters) and ``vals`` (step infos). Each column has a name: the common ones here
(:data:`ADDRESS_COLUMNS`, :data:`COMMON_PARAMS`), then each family's (``addresses``,
``param_names``, ``info``). :func:`column_index` turns the ordered names into positions, and
the module-level constants below are read from it by name, so numba still sees plain int
constants.

Examples:
    >>> HalfCheetahFamily.info
    ('x_position', 'x_velocity', 'reward_forward', 'reward_ctrl')
    >>> column_index(COMMON_PARAMS, LOCOMOTION_PARAMS)["forward_reward_weight"]
    5
"""

from __future__ import annotations

from typing import Any, ClassVar

import numba
import numpy as np

from envhive.engines._columns import column_index
from envhive.engines._compiled import address_to_voidptr as _ptr
from envhive.engines._compiled import clip as _clip
from envhive.engines._compiled import pairwise_sum
from envhive.engines._jit import jit
from envhive.envs.mujoco._libmujoco import libmujoco_fns
from envhive.errors import ConfigError

__all__ = [
    "Family",
    "column_index",
    "ADDRESS_COLUMNS",
    "COMMON_PARAMS",
    "LOCOMOTION_PARAMS",
    "HalfCheetahFamily",
    "AntFamily",
    "HopperFamily",
    "Walker2dFamily",
    "SwimmerFamily",
]


#: The address table's first columns (every env); a family's ``addresses`` follow.
ADDRESS_COLUMNS = ("model", "data", "qpos", "qvel", "ctrl")
_ROW = column_index(ADDRESS_COLUMNS)
_M, _D, _QPOS, _QVEL, _CTRL = (_ROW[k] for k in ADDRESS_COLUMNS)

#: The parameter table's first columns (``MujocoEngine`` packs them for every family).
COMMON_PARAMS = ("frame_skip", "rne_post_constraint", "dt", "nq", "nv")
_PAR = column_index(COMMON_PARAMS)
_FRAME_SKIP, _RNE, _DT, _NQ, _NV = (_PAR[k] for k in COMMON_PARAMS)

#: The parameters every locomotion family starts with (:func:`_locomotion_params`).
LOCOMOTION_PARAMS = ("forward_reward_weight", "ctrl_cost_weight", "ctrl_cost_f32", "obs_skip")
_LOCO = column_index(COMMON_PARAMS, LOCOMOTION_PARAMS)
_FORWARD_W = _LOCO["forward_reward_weight"]
_CTRL_W = _LOCO["ctrl_cost_weight"]
_CTRL_F32 = _LOCO["ctrl_cost_f32"]
_OBS_SKIP = _LOCO["obs_skip"]


class Family:
    """How the engine steps one env class: its compiled step and what it reads.

    Subclasses set ``info`` (step info keys, in gymnasium's order), ``param_names`` and
    ``addresses`` (their columns of ``par`` and ``row``, after the common ones), implement
    :meth:`compiled` and :meth:`compiled_obs`, and :meth:`params` / :meth:`extra_addresses`
    when they have columns; :meth:`info_dtypes` and :meth:`finish_infos` have defaults.

    The compiled ``step_one(row, par, act, obs, vals, i) -> (reward, terminated)`` steps env
    ``i``: ``row`` holds its addresses (:data:`ADDRESS_COLUMNS`, then the family's), ``par``
    its parameters (:data:`COMMON_PARAMS`, then the family's), ``act`` its float32 action,
    ``obs`` its row of the pool's observation buffer, ``vals`` the ``(len(info) +
    scratch_rows, num_envs)`` float64 step-info table (row ``k`` is ``info[k]``). The compiled
    ``obs_one(row, par, obs)`` writes the observation of the env's current state (the env's
    ``_obs()``); the step uses it after the physics, and the engine's compiled reset after
    ``mj_forward``.
    """

    info: ClassVar[tuple[str, ...]] = ()
    #: Names of the family's parameters (its columns of ``par``, after COMMON_PARAMS).
    param_names: ClassVar[tuple[str, ...]] = ()
    #: Names of the family's addresses (its columns of ``row``, after ADDRESS_COLUMNS).
    addresses: ClassVar[tuple[str, ...]] = ()
    #: Rows of ``vals`` after the info rows, for values ``finish_step`` needs.
    scratch_rows: ClassVar[int] = 0
    #: Whether :meth:`finish_step` must run after each compiled step.
    finishes_step: ClassVar[bool] = False
    _step_one: ClassVar[Any] = None
    _obs_one: ClassVar[Any] = None

    @classmethod
    def extra_addresses(cls, env: Any) -> dict[str, int]:
        """Addresses of the ``MjData`` arrays the step reads beyond qpos, qvel and ctrl, by
        name (the names of ``addresses``)."""
        return {}

    @classmethod
    def params(cls, env: Any) -> dict[str, float]:
        """The family's parameters of ``env`` (its reward weights ...) by name (the names of
        ``param_names``)."""
        return {}

    @classmethod
    def row(cls, env: Any) -> list[int]:
        """``env``'s row of the address table, in column order."""
        extra = cls.extra_addresses(env)
        if set(extra) != set(cls.addresses):  # pragma: no cover - a family bug
            raise ValueError(f"{cls.__name__}: addresses {sorted(extra)}, declared {cls.addresses}")
        return [env.model._address, env.data._address, env._qpos.ctypes.data, env._qvel.ctypes.data,
                env._ctrl.ctypes.data, *(extra[k] for k in cls.addresses)]

    @classmethod
    def par(cls, env: Any) -> list[float]:
        """``env``'s row of the parameter table, in column order."""
        own = cls.params(env)
        if set(own) != set(cls.param_names):  # pragma: no cover - a family bug
            raise ValueError(f"{cls.__name__}: parameters {sorted(own)}, declared {cls.param_names}")
        return [float(env._frame_skip), float(bool(env.rne_post_constraint)), env._dt,
                float(env.model.nq), float(env.model.nv), *(own[k] for k in cls.param_names)]

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        """The dtype of each step info value (numpy's result types with ``env``'s weights)."""
        return [np.dtype(np.float64)] * len(cls.info)

    @classmethod
    def finish_infos(cls, infos: dict[str, Any]) -> None:
        """Fill the infos computed outside the compiled step (in place; one column per key)."""

    @classmethod
    def finish_step(cls, vals: np.ndarray, params: np.ndarray, reward: np.ndarray, ids: np.ndarray) -> None:
        """Finish rewards (and info rows of ``vals``) of the stepped envs ``ids`` with numpy,
        where the compiled step cannot reproduce numpy (a BLAS ``ddot``). Only called when
        ``finishes_step``."""

    @classmethod
    def compiled(cls) -> Any:
        """The family's compiled ``step_one``."""
        raise NotImplementedError

    @classmethod
    def compiled_obs(cls) -> Any:
        """The family's compiled ``obs_one``."""
        raise NotImplementedError

    @classmethod
    def step_one(cls) -> Any:
        """The compiled ``step_one`` (built once per family)."""
        fn = cls.__dict__.get("_step_one")
        if fn is None:
            fn = cls._step_one = cls.compiled()
        return fn

    @classmethod
    def obs_one(cls) -> Any:
        """The compiled ``obs_one`` (built once per family)."""
        fn = cls.__dict__.get("_obs_one")
        if fn is None:
            fn = cls._obs_one = cls.compiled_obs()
        return fn


@jit(nogil=True)
def _state_obs(row: Any, par: Any, obs: Any, skip: int, clip_qvel: bool) -> int:  # pragma: no cover - compiled
    """Write ``qpos[skip:]`` then ``qvel`` (clipped to [-10, 10] if asked) into ``obs``;
    return how many values were written."""
    nq, nv = int(par[_NQ]), int(par[_NV])
    qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)  # type: ignore[call-arg]
    qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)  # type: ignore[call-arg]
    k = 0
    for j in range(skip, nq):
        obs[k] = qpos[j]
        k += 1
    for j in range(nv):
        obs[k] = _clip(qvel[j], -10.0, 10.0) if clip_qvel else qvel[j]
        k += 1
    return k


_PHYSICS: list[Any] = []


def _physics_fn() -> Any:
    """The compiled ``physics(row, par, act)`` every family's step starts with: write the
    action into ``data.ctrl``, ``mj_step`` ``frame_skip`` times, then ``mj_rnePostConstraint``
    if the env calls it (as ``MujocoEnv.step``)."""
    if not _PHYSICS:
        fns = libmujoco_fns()
        c_step, c_rne = fns["mj_step"], fns["mj_rnePostConstraint"]

        @jit(nogil=True)
        def physics(row, par, act):  # type: ignore[no-untyped-def]  # pragma: no cover
            ctrl = numba.carray(_ptr(row[_CTRL]), act.size, np.float64)
            for j in range(act.size):
                ctrl[j] = act[j]
            for _ in range(int(par[_FRAME_SKIP])):
                c_step(row[_M], row[_D])
            if par[_RNE] != 0.0:
                c_rne(row[_M], row[_D])

        _PHYSICS.append(physics)
    return _PHYSICS[0]


def _planar_obs(clip_qvel: bool) -> Any:
    """The planar families' ``obs_one``: ``qpos[obs_skip:]`` then ``qvel``, clipped to
    [-10, 10] for Hopper and Walker2d."""

    @jit(nogil=True)
    def obs_one(row, par, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
        _state_obs(row, par, obs, int(par[_OBS_SKIP]), clip_qvel)

    return obs_one


def _ctrl_cost_is_f32(weight: Any) -> bool:
    """Whether numpy computes ``weight * sum(float32 action ** 2)`` in float32 (it does for
    Python numbers, by NEP 50's weak scalars; not for a ``numpy.float64`` weight)."""
    return type(weight * np.float32(1.0)) is np.float32


def _ctrl_dtype(weight: Any) -> np.dtype:
    """The dtype of numpy's ``weight * sum(float32 action ** 2)`` (the ``reward_ctrl`` info)."""
    return np.dtype(np.float32) if _ctrl_cost_is_f32(weight) else np.dtype(np.float64)


def _ctrl_params(weight: Any, what: str) -> dict[str, float]:
    """``ctrl_cost_weight`` and ``ctrl_cost_f32``: what :func:`_ctrl_cost` reads."""
    return {"ctrl_cost_weight": _weight(weight, what), "ctrl_cost_f32": float(_ctrl_cost_is_f32(weight))}


def _locomotion_params(env: Any, skip: int) -> dict[str, float]:
    """The :data:`LOCOMOTION_PARAMS` of ``env``: forward weight, control weight and its
    float32 flag, and how many ``qpos`` entries the observation skips."""
    return {
        "forward_reward_weight": _weight(env._forward_reward_weight, "forward_reward_weight"),
        **_ctrl_params(env._ctrl_cost_weight, "ctrl_cost_weight"),
        "obs_skip": float(skip * bool(env._exclude_current_positions_from_observation)),
    }


@jit(nogil=True)
def _ctrl_cost(act: Any, weight: float, f32: float) -> float:  # pragma: no cover - compiled
    """numpy's ``weight * np.sum(np.square(act))`` for a float32 action, as a float64: the
    squares and their pairwise sum in float32, then the product in float32 (``f32`` set: a
    Python-number weight) or in float64 (a numpy float64 weight)."""
    nu = act.size
    sq = np.empty(nu, np.float32)
    for j in range(nu):
        sq[j] = act[j] * act[j]
    s = pairwise_sum(sq, 0, nu, np.float32(0.0))
    if f32 != 0.0:
        return np.float64(np.float32(weight) * s)
    return weight * np.float64(s)


def _distance_from_origin(infos: dict[str, Any]) -> None:
    """``infos["distance_from_origin"]`` from the x and y positions, as gymnasium computes it:
    ``np.linalg.norm(qpos[0:2])`` is a BLAS ``ddot`` (which may fuse multiply-adds), and a
    ``matmul`` of 1x2 by 2x1 rows calls the same ``ddot``."""
    xy = np.stack((infos["x_position"], infos["y_position"]), axis=1)
    np.sqrt(np.matmul(xy[:, None, :], xy[:, :, None])[:, 0, 0], out=infos["distance_from_origin"])


def _weight(value: Any, what: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"the native MuJoCo engine needs a real number for {what}, got {value!r}")
    return float(value)


# HalfCheetah: the locomotion parameters only.
_HC_INFO = ("x_position", "x_velocity", "reward_forward", "reward_ctrl")
_HC = column_index(_HC_INFO)


class HalfCheetahFamily(Family):
    """``HalfCheetahEnv``: obs ``qpos[skip:]``, ``qvel``; forward reward minus control cost."""

    info = _HC_INFO
    param_names = LOCOMOTION_PARAMS

    @classmethod
    def params(cls, env: Any) -> dict[str, float]:
        return _locomotion_params(env, skip=1)

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        f64 = np.dtype(np.float64)
        return [f64, f64, f64, _ctrl_dtype(env._ctrl_cost_weight)]

    @classmethod
    def compiled_obs(cls) -> Any:
        return _planar_obs(clip_qvel=False)

    @classmethod
    def compiled(cls) -> Any:
        physics = _physics_fn()
        obs_one = cls.obs_one()
        v_x, v_xvel, v_fwd, v_ctrl = (_HC[k] for k in _HC_INFO)

        @jit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq = int(par[_NQ])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            x_before = qpos[0]
            physics(row, par, act)
            x_after = qpos[0]
            x_velocity = (x_after - x_before) / par[_DT]
            obs_one(row, par, obs)
            forward_reward = par[_FORWARD_W] * x_velocity
            ctrl_cost = _ctrl_cost(act, par[_CTRL_W], par[_CTRL_F32])
            vals[v_x, i] = x_after
            vals[v_xvel, i] = x_velocity
            vals[v_fwd, i] = forward_reward
            vals[v_ctrl, i] = -ctrl_cost
            return forward_reward - ctrl_cost, False

        return step_one


_ANT_INFO = (
    "x_position", "y_position", "distance_from_origin", "x_velocity", "y_velocity",
    "reward_forward", "reward_ctrl", "reward_contact", "reward_survive",
)
_ANT_PARAMS = (
    *LOCOMOTION_PARAMS, "contact_cost_weight", "healthy_reward", "unhealthy_reward",
    "healthy_z_lo", "healthy_z_hi", "contact_force_min", "contact_force_max",
    "terminate_when_unhealthy", "cfrc_ext_in_obs", "cfrc_ext_size",
)
_ANT_ADDRESSES = ("main_xpos", "cfrc_ext")
_ANT_P = column_index(COMMON_PARAMS, _ANT_PARAMS)
_ANT_ROW = column_index(ADDRESS_COLUMNS, _ANT_ADDRESSES)
_ANT_V = column_index(_ANT_INFO)
_ANT_CONTACT_W = _ANT_P["contact_cost_weight"]
_ANT_HEALTHY_R = _ANT_P["healthy_reward"]
_ANT_UNHEALTHY_R = _ANT_P["unhealthy_reward"]
_ANT_Z_LO = _ANT_P["healthy_z_lo"]
_ANT_Z_HI = _ANT_P["healthy_z_hi"]
_ANT_F_MIN = _ANT_P["contact_force_min"]
_ANT_F_MAX = _ANT_P["contact_force_max"]
_ANT_TERMINATE = _ANT_P["terminate_when_unhealthy"]
_ANT_CFRC_IN_OBS = _ANT_P["cfrc_ext_in_obs"]
_ANT_CFRC_SIZE = _ANT_P["cfrc_ext_size"]
_ANT_XPOS = _ANT_ROW["main_xpos"]
_ANT_CFRC = _ANT_ROW["cfrc_ext"]


class AntFamily(Family):
    """``AntEnv``: obs ``qpos[skip:]``, ``qvel``, clipped ``cfrc_ext[1:]``; four reward terms."""

    info = _ANT_INFO
    param_names = _ANT_PARAMS
    addresses = _ANT_ADDRESSES

    @classmethod
    def extra_addresses(cls, env: Any) -> dict[str, int]:
        return {"main_xpos": env._main_xpos.ctypes.data, "cfrc_ext": env._cfrc_ext.ctypes.data}

    @classmethod
    def params(cls, env: Any) -> dict[str, float]:
        low, high = env._healthy_z_range
        return {
            **_locomotion_params(env, skip=2),
            "contact_cost_weight": _weight(env._contact_cost_weight, "contact_cost_weight"),
            "healthy_reward": _weight(env._reward_if_healthy, "healthy_reward"),
            "unhealthy_reward": _weight(env._reward_if_unhealthy, "healthy_reward"),
            "healthy_z_lo": _weight(low, "healthy_z_range"),
            "healthy_z_hi": _weight(high, "healthy_z_range"),
            "contact_force_min": float(env._force_min),
            "contact_force_max": float(env._force_max),
            "terminate_when_unhealthy": float(bool(env._terminate_when_unhealthy)),
            "cfrc_ext_in_obs": float(bool(env._include_cfrc_ext_in_observation)),
            "cfrc_ext_size": float(env._cfrc_ext.size),
        }

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        f64 = np.dtype(np.float64)
        survive = np.asarray(env._reward_if_healthy).dtype
        return [f64, f64, f64, f64, f64, f64, _ctrl_dtype(env._ctrl_cost_weight), f64, survive]

    @classmethod
    def finish_infos(cls, infos: dict[str, Any]) -> None:
        _distance_from_origin(infos)

    @classmethod
    def compiled_obs(cls) -> Any:
        @jit(nogil=True)
        def obs_one(row, par, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
            k = _state_obs(row, par, obs, int(par[_OBS_SKIP]), False)
            if par[_ANT_CFRC_IN_OBS] != 0.0:  # the clipped contact forces of every body but the world
                nc = int(par[_ANT_CFRC_SIZE])
                cfrc = numba.carray(_ptr(row[_ANT_CFRC]), nc, np.float64)
                for j in range(6, nc):
                    obs[k] = _clip(cfrc[j], par[_ANT_F_MIN], par[_ANT_F_MAX])
                    k += 1

        return obs_one

    @classmethod
    def compiled(cls) -> Any:
        physics = _physics_fn()
        obs_one = cls.obs_one()
        v_x, v_y, _, v_xvel, v_yvel, v_fwd, v_ctrl, v_contact, v_survive = (_ANT_V[k] for k in _ANT_INFO)

        @jit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq, nv, nc = int(par[_NQ]), int(par[_NV]), int(par[_ANT_CFRC_SIZE])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            xpos = numba.carray(_ptr(row[_ANT_XPOS]), 3, np.float64)
            cfrc = numba.carray(_ptr(row[_ANT_CFRC]), nc, np.float64)
            x_before, y_before = xpos[0], xpos[1]
            physics(row, par, act)
            dt = par[_DT]
            x_velocity = (xpos[0] - x_before) / dt
            y_velocity = (xpos[1] - y_before) / dt
            obs_one(row, par, obs)
            fmin, fmax = par[_ANT_F_MIN], par[_ANT_F_MAX]
            sq = np.empty(nc, np.float64)
            for j in range(nc):
                c = _clip(cfrc[j], fmin, fmax)
                sq[j] = c * c
            contact_cost = par[_ANT_CONTACT_W] * pairwise_sum(sq, 0, nc, 0.0)
            finite = True
            for j in range(nq):
                finite = finite and np.isfinite(qpos[j])
            for j in range(nv):
                finite = finite and np.isfinite(qvel[j])
            healthy = finite and par[_ANT_Z_LO] <= qpos[2] <= par[_ANT_Z_HI]
            healthy_reward = par[_ANT_HEALTHY_R] if healthy else par[_ANT_UNHEALTHY_R]
            forward_reward = x_velocity * par[_FORWARD_W]
            ctrl_cost = _ctrl_cost(act, par[_CTRL_W], par[_CTRL_F32])
            # distance_from_origin: numpy's ddot, after the call (finish_infos)
            vals[v_x, i] = qpos[0]
            vals[v_y, i] = qpos[1]
            vals[v_xvel, i] = x_velocity
            vals[v_yvel, i] = y_velocity
            vals[v_fwd, i] = forward_reward
            vals[v_ctrl, i] = -ctrl_cost
            vals[v_contact, i] = -contact_cost
            vals[v_survive, i] = healthy_reward
            reward = (forward_reward + healthy_reward) - (ctrl_cost + contact_cost)
            return reward, (not healthy) and par[_ANT_TERMINATE] != 0.0

        return step_one


_HOP_INFO = (
    "x_position", "z_distance_from_origin", "x_velocity", "reward_forward", "reward_ctrl",
    "reward_survive",
)
_HOP_PARAMS = (
    *LOCOMOTION_PARAMS, "healthy_reward", "unhealthy_reward", "terminate_when_unhealthy",
    "healthy_z_lo", "healthy_z_hi", "healthy_angle_lo", "healthy_angle_hi",
    "healthy_state_lo", "healthy_state_hi", "checks_state", "init_z",
)
_HOP_P = column_index(COMMON_PARAMS, _HOP_PARAMS)
_HOP_V = column_index(_HOP_INFO)
_HOP_HEALTHY_R = _HOP_P["healthy_reward"]
_HOP_UNHEALTHY_R = _HOP_P["unhealthy_reward"]
_HOP_TERMINATE = _HOP_P["terminate_when_unhealthy"]
_HOP_Z_LO = _HOP_P["healthy_z_lo"]
_HOP_Z_HI = _HOP_P["healthy_z_hi"]
_HOP_ANGLE_LO = _HOP_P["healthy_angle_lo"]
_HOP_ANGLE_HI = _HOP_P["healthy_angle_hi"]
_HOP_STATE_LO = _HOP_P["healthy_state_lo"]
_HOP_STATE_HI = _HOP_P["healthy_state_hi"]
_HOP_CHECKS_STATE = _HOP_P["checks_state"]
_HOP_INIT_Z = _HOP_P["init_z"]


class HopperFamily(Family):
    """``HopperEnv`` (and ``Walker2dEnv``): obs ``qpos[skip:]``, ``clip(qvel, -10, 10)``;
    forward reward plus survive reward minus control cost; health from height and angle (and,
    for Hopper, ``state_vector()[2:]``), all open ranges."""

    info = _HOP_INFO
    param_names = _HOP_PARAMS
    checks_state: ClassVar[bool] = True

    @classmethod
    def params(cls, env: Any) -> dict[str, float]:
        z_lo, z_hi = env._healthy_z_range
        a_lo, a_hi = env._healthy_angle_range
        s_lo, s_hi = env._healthy_state_range if cls.checks_state else (0.0, 0.0)
        return {
            **_locomotion_params(env, skip=1),
            "healthy_reward": _weight(env._reward_if_healthy, "healthy_reward"),
            "unhealthy_reward": _weight(env._reward_if_unhealthy, "healthy_reward"),
            "terminate_when_unhealthy": float(bool(env._terminate_when_unhealthy)),
            "healthy_z_lo": _weight(z_lo, "healthy_z_range"),
            "healthy_z_hi": _weight(z_hi, "healthy_z_range"),
            "healthy_angle_lo": _weight(a_lo, "healthy_angle_range"),
            "healthy_angle_hi": _weight(a_hi, "healthy_angle_range"),
            "healthy_state_lo": _weight(s_lo, "healthy_state_range"),
            "healthy_state_hi": _weight(s_hi, "healthy_state_range"),
            "checks_state": float(cls.checks_state),
            "init_z": float(env.init_qpos[1]),
        }

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        f64 = np.dtype(np.float64)
        return [f64, f64, f64, f64, _ctrl_dtype(env._ctrl_cost_weight), np.asarray(env._reward_if_healthy).dtype]

    @classmethod
    def compiled_obs(cls) -> Any:
        return _planar_obs(clip_qvel=True)

    @classmethod
    def compiled(cls) -> Any:
        physics = _physics_fn()
        obs_one = cls.obs_one()
        v_x, v_z, v_xvel, v_fwd, v_ctrl, v_survive = (_HOP_V[k] for k in _HOP_INFO)

        @jit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq, nv = int(par[_NQ]), int(par[_NV])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            x_before = qpos[0]
            physics(row, par, act)
            x_after = qpos[0]
            x_velocity = (x_after - x_before) / par[_DT]
            obs_one(row, par, obs)
            healthy = (par[_HOP_Z_LO] < qpos[1] < par[_HOP_Z_HI]
                       and par[_HOP_ANGLE_LO] < qpos[2] < par[_HOP_ANGLE_HI])
            if healthy and par[_HOP_CHECKS_STATE] != 0.0:
                s_lo, s_hi = par[_HOP_STATE_LO], par[_HOP_STATE_HI]
                for j in range(2, nq):
                    healthy = healthy and s_lo < qpos[j] < s_hi
                for j in range(nv):
                    healthy = healthy and s_lo < qvel[j] < s_hi
            forward_reward = par[_FORWARD_W] * x_velocity
            healthy_reward = par[_HOP_HEALTHY_R] if healthy else par[_HOP_UNHEALTHY_R]
            ctrl_cost = _ctrl_cost(act, par[_CTRL_W], par[_CTRL_F32])
            vals[v_x, i] = x_after
            vals[v_z, i] = qpos[1] - par[_HOP_INIT_Z]
            vals[v_xvel, i] = x_velocity
            vals[v_fwd, i] = forward_reward
            vals[v_ctrl, i] = -ctrl_cost
            vals[v_survive, i] = healthy_reward
            terminated = (not healthy) and par[_HOP_TERMINATE] != 0.0
            return (forward_reward + healthy_reward) - ctrl_cost, terminated

        return step_one


class Walker2dFamily(HopperFamily):
    """``Walker2dEnv``: Hopper's step without the ``state_vector()`` health check."""

    checks_state = False

    @classmethod
    def step_one(cls) -> Any:
        return HopperFamily.step_one()  # the health check differs by a parameter only

    @classmethod
    def obs_one(cls) -> Any:
        return HopperFamily.obs_one()


_SWIM_INFO = (
    "x_position", "y_position", "distance_from_origin", "x_velocity", "y_velocity",
    "reward_forward", "reward_ctrl",
)
_SWIM_V = column_index(_SWIM_INFO)


class SwimmerFamily(Family):
    """``SwimmerEnv``: obs ``qpos[skip:]``, ``qvel``; forward reward minus control cost."""

    info = _SWIM_INFO
    param_names = LOCOMOTION_PARAMS

    @classmethod
    def params(cls, env: Any) -> dict[str, float]:
        return _locomotion_params(env, skip=2)

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        f64 = np.dtype(np.float64)
        return [f64, f64, f64, f64, f64, f64, _ctrl_dtype(env._ctrl_cost_weight)]

    @classmethod
    def finish_infos(cls, infos: dict[str, Any]) -> None:
        _distance_from_origin(infos)

    @classmethod
    def compiled_obs(cls) -> Any:
        return _planar_obs(clip_qvel=False)

    @classmethod
    def compiled(cls) -> Any:
        physics = _physics_fn()
        obs_one = cls.obs_one()
        v_x, v_y, _, v_xvel, v_yvel, v_fwd, v_ctrl = (_SWIM_V[k] for k in _SWIM_INFO)

        @jit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq = int(par[_NQ])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            x_before, y_before = qpos[0], qpos[1]
            physics(row, par, act)
            dt = par[_DT]
            x_velocity = (qpos[0] - x_before) / dt
            y_velocity = (qpos[1] - y_before) / dt
            obs_one(row, par, obs)
            forward_reward = par[_FORWARD_W] * x_velocity
            ctrl_cost = _ctrl_cost(act, par[_CTRL_W], par[_CTRL_F32])
            # distance_from_origin: numpy's ddot, after the call (finish_infos)
            vals[v_x, i] = qpos[0]
            vals[v_y, i] = qpos[1]
            vals[v_xvel, i] = x_velocity
            vals[v_yvel, i] = y_velocity
            vals[v_fwd, i] = forward_reward
            vals[v_ctrl, i] = -ctrl_cost
            return forward_reward - ctrl_cost, False

        return step_one
