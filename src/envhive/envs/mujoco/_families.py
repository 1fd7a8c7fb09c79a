"""Compiled steps of envhive's MuJoCo envs, one *family* per env class (see ``_native``).

A family's compiled ``step_one`` is the env's ``_step_post`` written again in numba with the
same operations in the same order and dtypes: numpy's pairwise summation
(:func:`pairwise_sum`), ``float32`` control costs where numpy computes them in ``float32``,
NaN-propagating clips. The one quantity numpy computes with BLAS (Ant's
``distance_from_origin``, a ``ddot`` that may fuse multiply-adds) is computed by numpy after the
call (:meth:`Family.finish_infos`), with the same ``ddot``. The tests check every output bit for
bit against the env's own ``step`` and against gymnasium's envs.

Examples:
    >>> import numpy as np
    >>> a = np.arange(20, dtype=np.float32) / 7
    >>> bool(pairwise_sum(a, 0, a.size, np.float32(0)) == np.add.reduce(a))
    True
    >>> native_family(HalfCheetahEnv).info
    ('x_position', 'x_velocity', 'reward_forward', 'reward_ctrl')
"""

from __future__ import annotations

import ctypes
from typing import Any, ClassVar

import numba
import numpy as np

from envhive.envs.mujoco._ant import AntEnv
from envhive.envs.mujoco._base import MujocoEnv
from envhive.envs.mujoco._batch import _find_library
from envhive.envs.mujoco._planar import HalfCheetahEnv, HopperEnv, SwimmerEnv, Walker2dEnv
from envhive.errors import ConfigError
from envhive.kernels._kernel import _address_to_voidptr as _ptr

__all__ = ["Family", "pairwise_sum", "native_family", "first_bad_action"]

# Columns of the per-env address table; families append their own after _FIRST_EXTRA.
_M, _D, _QPOS, _QVEL, _CTRL, _FIRST_EXTRA = range(6)
# Columns of the per-env parameter table; families append theirs after _FIRST_PARAM.
_FRAME_SKIP, _RNE, _DT, _NQ, _NV, _FIRST_PARAM = range(6)


def _libmujoco() -> tuple[Any, Any]:
    """``(mj_step, mj_rnePostConstraint)`` of the ``libmujoco`` the ``mujoco`` package ships."""
    fns = _libmujoco_fns()
    return fns["mj_step"], fns["mj_rnePostConstraint"]


_FNS: dict[str, Any] = {}


def _libmujoco_fns() -> dict[str, Any]:
    """``libmujoco``'s ``(model, data) -> void`` functions the engine calls, through ctypes."""
    if not _FNS:
        path = _find_library()
        if path is None:  # pragma: no cover - every mujoco wheel ships it
            raise ConfigError("the native MuJoCo engine needs libmujoco, which was not found")
        lib = ctypes.CDLL(path)
        for name in ("mj_step", "mj_rnePostConstraint", "mj_resetData", "mj_forward"):
            fn = getattr(lib, name)
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            _FNS[name] = fn
    return _FNS


@numba.njit(nogil=True)
def pairwise_sum(a: Any, lo: int, n: int, zero: Any) -> Any:  # pragma: no cover - compiled
    """``numpy.add.reduce(a[lo:lo + n])``, bit for bit: numpy's pairwise summation.

    numpy sums float arrays from 0 in blocks of 8 partial sums, splitting above 128
    elements; the result differs from a running sum in the last bits. ``zero`` is a zero of
    ``a``'s dtype (the result has that dtype).
    """
    if n < 8:
        res = zero
        for k in range(n):
            res += a[lo + k]
        return res
    if n <= 128:
        r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
        r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
        k = 8
        m = n - n % 8
        while k < m:
            r0 += a[lo + k]
            r1 += a[lo + k + 1]
            r2 += a[lo + k + 2]
            r3 += a[lo + k + 3]
            r4 += a[lo + k + 4]
            r5 += a[lo + k + 5]
            r6 += a[lo + k + 6]
            r7 += a[lo + k + 7]
            k += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while k < n:
            res += a[lo + k]
            k += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise_sum(a, lo, n2, zero) + pairwise_sum(a, lo + n2, n - n2, zero)


@numba.njit(nogil=True)
def _clip(x: float, lo: float, hi: float) -> float:  # pragma: no cover - compiled
    """numpy's float clip: NaN in ``x`` propagates, else ``min(max(x, lo), hi)``.

    Ties keep the first operand, as numpy's maximum/minimum do: that decides the sign of a
    zero result (``clip(0.0, -0.0, 1.0)`` is ``0.0``).
    """
    if x != x:
        return x
    t = x if x >= lo else lo
    if t != t:
        return t
    return t if t <= hi else hi


@numba.njit(nogil=True)
def first_bad_action(actions: Any, lo: Any, hi: Any) -> int:  # pragma: no cover - compiled
    """The first row of ``actions`` with a value outside ``[lo, hi]`` (or NaN), else -1."""
    n, d = actions.shape
    for i in range(n):
        for j in range(d):
            v = actions[i, j]
            if not (v >= lo[j] and v <= hi[j]):
                return i
    return -1


class Family:
    """How the engine steps one env class: its compiled step and what it reads.

    Subclasses set ``env_cls``, ``info`` (step info keys, in gymnasium's order) and implement
    :meth:`extra_addresses`, :meth:`params`, :meth:`compiled` and :meth:`compiled_obs`;
    :meth:`info_dtypes` and :meth:`finish_infos` have defaults.

    The compiled ``step_one(row, par, act, obs, vals, i) -> (reward, terminated)`` steps env
    ``i``: ``row`` holds its addresses (:data:`_M`, :data:`_D`, qpos, qvel, ctrl, then the
    family's), ``par`` its parameters (frame_skip, rne flag, dt, then the family's), ``act``
    its float32 action, ``obs`` its row of the pool's observation buffer, ``vals`` the
    ``(len(info), num_envs)`` float64 step-info table. The compiled ``obs_one(row, par, obs)``
    writes the observation of the env's current state (the env's ``_obs()``); the step uses
    it after the physics, and the engine's compiled reset after ``mj_forward``.
    """

    env_cls: ClassVar[type[MujocoEnv]]
    info: ClassVar[tuple[str, ...]] = ()
    #: Rows of ``vals`` after the info rows, for values ``finish_step`` needs.
    scratch_rows: ClassVar[int] = 0
    #: Whether :meth:`finish_step` must run after each compiled step.
    finishes_step: ClassVar[bool] = False
    _step_one: ClassVar[Any] = None
    _obs_one: ClassVar[Any] = None

    @classmethod
    def extra_addresses(cls, env: Any) -> list[int]:
        """Addresses of the ``MjData`` arrays the step reads beyond qpos, qvel and ctrl."""
        return []

    @classmethod
    def params(cls, env: Any) -> list[float]:
        """The family's parameters of ``env`` (its reward weights ...), as floats."""
        return []

    @classmethod
    def info_dtypes(cls, env: Any) -> list[np.dtype]:
        """The dtype of each step info value (numpy's result types with ``env``'s weights)."""
        return [np.dtype(np.float64)] * len(cls.info)

    @classmethod
    def finish_infos(cls, infos: dict[str, Any]) -> None:
        """Fill the infos computed outside the compiled step (in place)."""

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
        fn = cls.__dict__.get("_step_one")
        if fn is None:
            fn = cls._step_one = cls.compiled()
        return fn

    @classmethod
    def obs_one(cls) -> Any:
        fn = cls.__dict__.get("_obs_one")
        if fn is None:
            fn = cls._obs_one = cls.compiled_obs()
        return fn


@numba.njit(nogil=True)
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
        c_step, c_rne = _libmujoco()

        @numba.njit(nogil=True)
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
    """The planar families' ``obs_one``: ``qpos[skip:]`` (skip in the family's 4th parameter)
    then ``qvel``, clipped to [-10, 10] for Hopper and Walker2d."""
    p = _FIRST_PARAM

    @numba.njit(nogil=True)
    def obs_one(row, par, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
        _state_obs(row, par, obs, int(par[p + 3]), clip_qvel)

    return obs_one


def _ctrl_cost_is_f32(weight: Any) -> bool:
    """Whether numpy computes ``weight * sum(float32 action ** 2)`` in float32 (it does for
    Python numbers, by NEP 50's weak scalars; not for a ``numpy.float64`` weight)."""
    return type(weight * np.float32(1.0)) is np.float32


def _ctrl_dtype(weight: Any) -> np.dtype:
    """The dtype of numpy's ``weight * sum(float32 action ** 2)`` (the ``reward_ctrl`` info)."""
    return np.dtype(np.float32) if _ctrl_cost_is_f32(weight) else np.dtype(np.float64)


def _ctrl_params(weight: Any, what: str) -> list[float]:
    """``[weight, float32 flag]``: what :func:`_ctrl_cost` reads from a family's parameters."""
    return [_weight(weight, what), float(_ctrl_cost_is_f32(weight))]


def _locomotion_params(env: Any, skip: int) -> list[float]:
    """The first four parameters of the locomotion families: forward weight, control weight
    and its float32 flag, and how many ``qpos`` entries the observation skips."""
    return [
        _weight(env._forward_reward_weight, "forward_reward_weight"),
        *_ctrl_params(env._ctrl_cost_weight, "ctrl_cost_weight"),
        float(skip * bool(env._exclude_current_positions_from_observation)),
    ]


@numba.njit(nogil=True)
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


class HalfCheetahFamily(Family):
    """``HalfCheetahEnv``: obs ``qpos[skip:]``, ``qvel``; forward reward minus control cost."""

    env_cls = HalfCheetahEnv
    info = ("x_position", "x_velocity", "reward_forward", "reward_ctrl")

    @classmethod
    def params(cls, env: Any) -> list[float]:
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

        @numba.njit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq = int(par[_NQ])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            x_before = qpos[0]
            physics(row, par, act)
            x_after = qpos[0]
            x_velocity = (x_after - x_before) / par[_DT]
            obs_one(row, par, obs)
            forward_reward = par[_FIRST_PARAM] * x_velocity
            ctrl_cost = _ctrl_cost(act, par[_FIRST_PARAM + 1], par[_FIRST_PARAM + 2])
            vals[0, i] = x_after
            vals[1, i] = x_velocity
            vals[2, i] = forward_reward
            vals[3, i] = -ctrl_cost
            return forward_reward - ctrl_cost, False

        return step_one


class AntFamily(Family):
    """``AntEnv``: obs ``qpos[skip:]``, ``qvel``, clipped ``cfrc_ext[1:]``; four reward terms."""

    env_cls = AntEnv
    info = (
        "x_position", "y_position", "distance_from_origin", "x_velocity", "y_velocity",
        "reward_forward", "reward_ctrl", "reward_contact", "reward_survive",
    )

    @classmethod
    def extra_addresses(cls, env: Any) -> list[int]:
        return [env._main_xpos.ctypes.data, env._cfrc_ext.ctypes.data]

    @classmethod
    def params(cls, env: Any) -> list[float]:
        low, high = env._healthy_z_range
        return [
            *_locomotion_params(env, skip=2),
            _weight(env._contact_cost_weight, "contact_cost_weight"),
            _weight(env._reward_if_healthy, "healthy_reward"),
            _weight(env._reward_if_unhealthy, "healthy_reward"),
            _weight(low, "healthy_z_range"),
            _weight(high, "healthy_z_range"),
            float(env._force_min),
            float(env._force_max),
            float(bool(env._terminate_when_unhealthy)),
            float(bool(env._include_cfrc_ext_in_observation)),
            float(env._cfrc_ext.size),
        ]

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
        p = _FIRST_PARAM

        @numba.njit(nogil=True)
        def obs_one(row, par, obs):  # type: ignore[no-untyped-def]  # pragma: no cover
            k = _state_obs(row, par, obs, int(par[p + 3]), False)
            if par[p + 12] != 0.0:  # the clipped contact forces of every body but the world
                nc = int(par[p + 13])
                cfrc = numba.carray(_ptr(row[_FIRST_EXTRA + 1]), nc, np.float64)
                for j in range(6, nc):
                    obs[k] = _clip(cfrc[j], par[p + 9], par[p + 10])
                    k += 1

        return obs_one

    @classmethod
    def compiled(cls) -> Any:
        physics = _physics_fn()
        obs_one = cls.obs_one()
        p = _FIRST_PARAM

        @numba.njit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq, nv, nc = int(par[_NQ]), int(par[_NV]), int(par[p + 13])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            xpos = numba.carray(_ptr(row[_FIRST_EXTRA]), 3, np.float64)
            cfrc = numba.carray(_ptr(row[_FIRST_EXTRA + 1]), nc, np.float64)
            x_before, y_before = xpos[0], xpos[1]
            physics(row, par, act)
            dt = par[_DT]
            x_velocity = (xpos[0] - x_before) / dt
            y_velocity = (xpos[1] - y_before) / dt
            obs_one(row, par, obs)
            fmin, fmax = par[p + 9], par[p + 10]
            sq = np.empty(nc, np.float64)
            for j in range(nc):
                c = _clip(cfrc[j], fmin, fmax)
                sq[j] = c * c
            contact_cost = par[p + 4] * pairwise_sum(sq, 0, nc, 0.0)
            finite = True
            for j in range(nq):
                finite = finite and np.isfinite(qpos[j])
            for j in range(nv):
                finite = finite and np.isfinite(qvel[j])
            healthy = finite and par[p + 7] <= qpos[2] <= par[p + 8]
            healthy_reward = par[p + 5] if healthy else par[p + 6]
            forward_reward = x_velocity * par[p]
            ctrl_cost = _ctrl_cost(act, par[p + 1], par[p + 2])
            vals[0, i] = qpos[0]
            vals[1, i] = qpos[1]
            vals[3, i] = x_velocity
            vals[4, i] = y_velocity
            vals[5, i] = forward_reward
            vals[6, i] = -ctrl_cost
            vals[7, i] = -contact_cost
            vals[8, i] = healthy_reward
            reward = (forward_reward + healthy_reward) - (ctrl_cost + contact_cost)
            return reward, (not healthy) and par[p + 11] != 0.0

        return step_one


class HopperFamily(Family):
    """``HopperEnv`` (and ``Walker2dEnv``): obs ``qpos[skip:]``, ``clip(qvel, -10, 10)``;
    forward reward plus survive reward minus control cost; health from height and angle (and,
    for Hopper, ``state_vector()[2:]``), all open ranges."""

    env_cls: ClassVar[type[MujocoEnv]] = HopperEnv
    info = (
        "x_position", "z_distance_from_origin", "x_velocity", "reward_forward", "reward_ctrl",
        "reward_survive",
    )
    checks_state: ClassVar[bool] = True

    @classmethod
    def params(cls, env: Any) -> list[float]:
        z_lo, z_hi = env._healthy_z_range
        a_lo, a_hi = env._healthy_angle_range
        s_lo, s_hi = env._healthy_state_range if cls.checks_state else (0.0, 0.0)
        return [
            *_locomotion_params(env, skip=1),
            _weight(env._reward_if_healthy, "healthy_reward"),
            _weight(env._reward_if_unhealthy, "healthy_reward"),
            float(bool(env._terminate_when_unhealthy)),
            _weight(z_lo, "healthy_z_range"),
            _weight(z_hi, "healthy_z_range"),
            _weight(a_lo, "healthy_angle_range"),
            _weight(a_hi, "healthy_angle_range"),
            _weight(s_lo, "healthy_state_range"),
            _weight(s_hi, "healthy_state_range"),
            float(cls.checks_state),
            float(env.init_qpos[1]),
        ]

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
        p = _FIRST_PARAM

        @numba.njit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq, nv = int(par[_NQ]), int(par[_NV])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            qvel = numba.carray(_ptr(row[_QVEL]), nv, np.float64)
            x_before = qpos[0]
            physics(row, par, act)
            x_after = qpos[0]
            x_velocity = (x_after - x_before) / par[_DT]
            obs_one(row, par, obs)
            healthy = par[p + 7] < qpos[1] < par[p + 8] and par[p + 9] < qpos[2] < par[p + 10]
            if healthy and par[p + 13] != 0.0:
                s_lo, s_hi = par[p + 11], par[p + 12]
                for j in range(2, nq):
                    healthy = healthy and s_lo < qpos[j] < s_hi
                for j in range(nv):
                    healthy = healthy and s_lo < qvel[j] < s_hi
            forward_reward = par[p] * x_velocity
            healthy_reward = par[p + 4] if healthy else par[p + 5]
            ctrl_cost = _ctrl_cost(act, par[p + 1], par[p + 2])
            vals[0, i] = x_after
            vals[1, i] = qpos[1] - par[p + 14]
            vals[2, i] = x_velocity
            vals[3, i] = forward_reward
            vals[4, i] = -ctrl_cost
            vals[5, i] = healthy_reward
            return (forward_reward + healthy_reward) - ctrl_cost, (not healthy) and par[p + 6] != 0.0

        return step_one


class Walker2dFamily(HopperFamily):
    """``Walker2dEnv``: Hopper's step without the ``state_vector()`` health check."""

    env_cls = Walker2dEnv
    checks_state = False

    @classmethod
    def step_one(cls) -> Any:
        return HopperFamily.step_one()  # the health check differs by a parameter only

    @classmethod
    def obs_one(cls) -> Any:
        return HopperFamily.obs_one()


class SwimmerFamily(Family):
    """``SwimmerEnv``: obs ``qpos[skip:]``, ``qvel``; forward reward minus control cost."""

    env_cls = SwimmerEnv
    info = (
        "x_position", "y_position", "distance_from_origin", "x_velocity", "y_velocity",
        "reward_forward", "reward_ctrl",
    )

    @classmethod
    def params(cls, env: Any) -> list[float]:
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
        p = _FIRST_PARAM

        @numba.njit(nogil=True)
        def step_one(row, par, act, obs, vals, i):  # type: ignore[no-untyped-def]  # pragma: no cover
            nq = int(par[_NQ])
            qpos = numba.carray(_ptr(row[_QPOS]), nq, np.float64)
            x_before, y_before = qpos[0], qpos[1]
            physics(row, par, act)
            dt = par[_DT]
            x_velocity = (qpos[0] - x_before) / dt
            y_velocity = (qpos[1] - y_before) / dt
            obs_one(row, par, obs)
            forward_reward = par[p] * x_velocity
            ctrl_cost = _ctrl_cost(act, par[p + 1], par[p + 2])
            vals[0, i] = qpos[0]
            vals[1, i] = qpos[1]
            vals[3, i] = x_velocity
            vals[4, i] = y_velocity
            vals[5, i] = forward_reward
            vals[6, i] = -ctrl_cost
            return forward_reward - ctrl_cost, False

        return step_one


_FAMILIES: dict[type, type[Family]] = {
    f.env_cls: f for f in (HalfCheetahFamily, AntFamily, HopperFamily, Walker2dFamily, SwimmerFamily)
}


def native_family(env_cls: Any) -> type[Family] | None:
    """The compiled family of ``env_cls`` (exactly that class), or ``None``."""
    if env_cls not in _FAMILIES:
        from envhive.envs.mujoco import _families_small  # registers the smaller envs' families

        _FAMILIES.update({f.env_cls: f for f in _families_small.FAMILIES})
    return _FAMILIES.get(env_cls)
