"""Planar runners: ``HalfCheetah-v5``, ``Hopper-v5``, ``Walker2d-v5`` and ``Swimmer-v5``.

Each is gymnasium's v5 env of the same name on ``mujoco`` directly, bit-identical, with the
time limit of gymnasium's registration built in.

Examples:
    >>> env = HopperEnv()
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, sorted(info)
    ((11,), ['x_position', 'z_distance_from_origin'])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Box
from numpy.typing import NDArray

from envhive.envs.mujoco._base import MujocoEnv, StepResult, clip_ufunc

__all__ = ["HalfCheetahEnv", "HopperEnv", "SwimmerEnv", "Walker2dEnv"]

_add_reduce = np.add.reduce
_min_reduce = np.minimum.reduce
_max_reduce = np.maximum.reduce
_square = np.square
_sqrt = np.sqrt
_MINUS_TEN = np.asarray(-10.0)
_TEN = np.asarray(10.0)

_WALKER_CAMERA_CONFIG: dict[str, Any] = {
    "trackbodyid": 2,
    "distance": 4.0,
    "lookat": np.array((0.0, 0.0, 1.15)),
    "elevation": -20.0,
}
_HOPPER_CAMERA_CONFIG: dict[str, Any] = {**_WALKER_CAMERA_CONFIG, "distance": 3.0}
_CHEETAH_CAMERA_CONFIG: dict[str, Any] = {"distance": 4.0}


class _PlanarEnv(MujocoEnv):
    """Shared setup: ``buf = [qpos, qvel]`` and the observation is a copy of ``buf[skip:]``."""

    def _setup_obs(self, skip: int) -> None:
        nq, nv = self.model.nq, self.model.nv
        self.observation_space = Box(low=-np.inf, high=np.inf, shape=(nq + nv - skip,), dtype=np.float64)
        self.observation_structure = {"skipped_qpos": skip, "qpos": nq - skip, "qvel": nv}
        buf = np.zeros(nq + nv)
        self._buf = buf
        self._obs_view = buf[skip:]
        self._buf_qpos = buf[:nq]
        self._buf_qvel = buf[nq:]

    def _step_pre(self, action: NDArray[Any]) -> Any:
        self._ctrl[...] = action
        return self._qpos[0]  # x_before, for the x velocity

    def _obs(self) -> NDArray[np.float64]:
        self._buf_qpos[...] = self._qpos
        self._buf_qvel[...] = self._qvel
        return self._obs_view.copy()


class HalfCheetahEnv(_PlanarEnv):
    """gymnasium's ``HalfCheetah-v5``, bit-identical, with a built-in time limit.

    The observation is ``qpos[1:]`` (all of ``qpos`` with
    ``exclude_current_positions_from_observation=False``) and ``qvel``. The reward is
    ``forward_reward_weight * x_velocity - ctrl_cost_weight * sum(action**2)``.

    Args:
        xml_file: the MJCF model.
        frame_skip: MuJoCo steps per env step.
        default_camera_config: free-camera attributes for rendering.
        forward_reward_weight: weight of the x velocity.
        ctrl_cost_weight: weight of ``sum(action**2)``.
        reset_noise_scale: scale of the reset noise.
        exclude_current_positions_from_observation: leave the x position out of obs.
        max_episode_steps: the time limit (gymnasium's registration: 1000); ``None``: none.
        **kwargs: rendering options of :class:`MujocoEnv` (``render_mode``, ``width``, ...).

    Examples:
        >>> env = HalfCheetahEnv(ctrl_cost_weight=0.0)
        >>> obs, _ = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> bool(reward == info["reward_forward"]), terminated
        (True, False)
    """

    def __init__(
        self,
        xml_file: str = "half_cheetah.xml",
        frame_skip: int = 5,
        default_camera_config: dict[str, Any] = _CHEETAH_CAMERA_CONFIG,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 0.1,
        reset_noise_scale: float = 0.1,
        exclude_current_positions_from_observation: bool = True,
        max_episode_steps: int | None = 1000,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            xml_file,
            frame_skip,
            max_episode_steps=max_episode_steps,
            default_camera_config=default_camera_config,
            **kwargs,
        )
        self._forward_reward_weight = forward_reward_weight
        self._ctrl_cost_weight = ctrl_cost_weight
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions_from_observation = exclude_current_positions_from_observation
        self._setup_obs(1 * bool(exclude_current_positions_from_observation))

    def _step_post(self, action: NDArray[Any], before: Any) -> StepResult:
        qpos = self._qpos
        x_after = qpos[0]
        x_velocity = (x_after - before) / self._dt

        self._buf_qpos[...] = qpos
        self._buf_qvel[...] = self._qvel
        observation = self._obs_view.copy()

        forward_reward = self._forward_reward_weight * x_velocity
        ctrl_cost = self._ctrl_cost_weight * _add_reduce(_square(action))
        info = {
            "x_position": x_after,
            "x_velocity": x_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
        }
        self._elapsed_steps += 1
        return (
            observation,
            forward_reward - ctrl_cost,
            False,
            self._elapsed_steps >= self._max_steps,
            info,
        )

    def _reset_state(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        noise_low = -self._reset_noise_scale
        noise_high = self._reset_noise_scale
        qpos = self.init_qpos + self.np_random.uniform(low=noise_low, high=noise_high, size=self.model.nq)
        qvel = self.init_qvel + self._reset_noise_scale * self.np_random.standard_normal(self.model.nv)
        return qpos, qvel

    def _reset_info(self) -> dict[str, Any]:
        return {"x_position": self._qpos[0]}


class _HopperWalkerEnv(_PlanarEnv):
    """Hopper and Walker2d: same observation (clipped ``qvel``), rewards and reset."""

    _forward_reward_weight: float
    _ctrl_cost_weight: float
    _healthy_reward: float
    _terminate_when_unhealthy: bool
    _healthy_z_range: tuple[float, float]
    _healthy_angle_range: tuple[float, float]
    _reset_noise_scale: float
    _reward_if_healthy: Any
    _reward_if_unhealthy: Any

    def _setup_obs(self, skip: int) -> None:
        super()._setup_obs(skip)
        nq = self.model.nq
        # The velocities in the observation are clipped in the fresh copy, in place.
        self._obs_qvel_start = nq - skip
        self._state_tail = self._buf[2:]  # state_vector()[2:], for Hopper's healthy_state

    def _is_healthy(self) -> Any:
        raise NotImplementedError

    def _step_post(self, action: NDArray[Any], before: Any) -> StepResult:
        qpos = self._qpos
        x_after = qpos[0]
        x_velocity = (x_after - before) / self._dt

        self._buf_qpos[...] = qpos
        self._buf_qvel[...] = self._qvel
        observation = self._obs_view.copy()
        velocity = observation[self._obs_qvel_start :]
        clip_ufunc(velocity, _MINUS_TEN, _TEN, out=velocity)

        is_healthy = self._is_healthy()
        forward_reward = self._forward_reward_weight * x_velocity
        # is_healthy * healthy_reward, precomputed: numpy's bool_ * float costs a microsecond.
        healthy_reward = self._reward_if_healthy if is_healthy else self._reward_if_unhealthy
        ctrl_cost = self._ctrl_cost_weight * _add_reduce(_square(action))
        reward = (forward_reward + healthy_reward) - ctrl_cost
        terminated = not is_healthy and self._terminate_when_unhealthy
        info = {
            "x_position": x_after,
            "z_distance_from_origin": qpos[1] - self.init_qpos[1],
            "x_velocity": x_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
            "reward_survive": healthy_reward,
        }
        self._elapsed_steps += 1
        return observation, reward, terminated, self._elapsed_steps >= self._max_steps, info

    def _obs(self) -> NDArray[np.float64]:
        observation = super()._obs()
        velocity = observation[self._obs_qvel_start :]
        clip_ufunc(velocity, _MINUS_TEN, _TEN, out=velocity)
        return observation

    def _reset_state(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        noise_low = -self._reset_noise_scale
        noise_high = self._reset_noise_scale
        qpos = self.init_qpos + self.np_random.uniform(low=noise_low, high=noise_high, size=self.model.nq)
        qvel = self.init_qvel + self.np_random.uniform(low=noise_low, high=noise_high, size=self.model.nv)
        return qpos, qvel

    def _reset_info(self) -> dict[str, Any]:
        return {
            "x_position": self._qpos[0],
            "z_distance_from_origin": self._qpos[1] - self.init_qpos[1],
        }


class HopperEnv(_HopperWalkerEnv):
    """gymnasium's ``Hopper-v5``, bit-identical, with a built-in time limit.

    The observation is ``qpos[1:]`` (all of ``qpos`` with
    ``exclude_current_positions_from_observation=False``) and ``clip(qvel, -10, 10)``. The
    reward is ``forward + survive - ctrl_cost``; healthy means every entry of
    ``state_vector()[2:]`` inside ``healthy_state_range`` and the height and angle inside
    theirs (all open ranges).

    Args:
        xml_file: the MJCF model.
        frame_skip: MuJoCo steps per env step.
        default_camera_config: free-camera attributes for rendering.
        forward_reward_weight: weight of the x velocity.
        ctrl_cost_weight: weight of ``sum(action**2)``.
        healthy_reward: reward per step while healthy.
        terminate_when_unhealthy: end the episode when unhealthy.
        healthy_state_range: range of ``state_vector()[2:]``.
        healthy_z_range: range of the torso height ``qpos[1]``.
        healthy_angle_range: range of the torso angle ``qpos[2]``.
        reset_noise_scale: scale of the uniform reset noise.
        exclude_current_positions_from_observation: leave the x position out of obs.
        max_episode_steps: the time limit (gymnasium's registration: 1000); ``None``: none.
        **kwargs: rendering options of :class:`MujocoEnv` (``render_mode``, ``width``, ...).

    Examples:
        >>> env = HopperEnv(exclude_current_positions_from_observation=False)
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape
        (12,)
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> info["reward_survive"], terminated
        (1.0, False)
    """

    def __init__(
        self,
        xml_file: str = "hopper.xml",
        frame_skip: int = 4,
        default_camera_config: dict[str, Any] = _HOPPER_CAMERA_CONFIG,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-3,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_state_range: tuple[float, float] = (-100.0, 100.0),
        healthy_z_range: tuple[float, float] = (0.7, float("inf")),
        healthy_angle_range: tuple[float, float] = (-0.2, 0.2),
        reset_noise_scale: float = 5e-3,
        exclude_current_positions_from_observation: bool = True,
        max_episode_steps: int | None = 1000,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            xml_file,
            frame_skip,
            max_episode_steps=max_episode_steps,
            default_camera_config=default_camera_config,
            **kwargs,
        )
        self._forward_reward_weight = forward_reward_weight
        self._ctrl_cost_weight = ctrl_cost_weight
        self._healthy_reward = healthy_reward
        self._terminate_when_unhealthy = terminate_when_unhealthy
        self._healthy_state_range = healthy_state_range
        self._healthy_z_range = healthy_z_range
        self._healthy_angle_range = healthy_angle_range
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions_from_observation = exclude_current_positions_from_observation
        self._setup_obs(1 * bool(exclude_current_positions_from_observation))
        # is_healthy is a Python bool here, as in gymnasium.
        self._reward_if_healthy = True * healthy_reward
        self._reward_if_unhealthy = False * healthy_reward

    def _is_healthy(self) -> bool:
        # Called right after buf = [qpos, qvel] was filled: buf[2:] is state_vector()[2:].
        qpos = self._qpos
        z = qpos[1]
        angle = qpos[2]
        state = self._state_tail
        min_state, max_state = self._healthy_state_range
        min_z, max_z = self._healthy_z_range
        min_angle, max_angle = self._healthy_angle_range
        # all(min < state < max); NaN fails both comparisons, as in gymnasium.
        healthy_state = min_state < _min_reduce(state) and _max_reduce(state) < max_state
        healthy_z = min_z < z < max_z
        healthy_angle = min_angle < angle < max_angle
        return bool(healthy_state and healthy_z and healthy_angle)


class Walker2dEnv(_HopperWalkerEnv):
    """gymnasium's ``Walker2d-v5``, bit-identical, with a built-in time limit.

    The observation is ``qpos[1:]`` (all of ``qpos`` with
    ``exclude_current_positions_from_observation=False``) and ``clip(qvel, -10, 10)``. The
    reward is ``forward + survive - ctrl_cost``; healthy means the torso height and angle
    inside their (open) ranges.

    Args:
        xml_file: the MJCF model (v5 uses ``walker2d_v5.xml``, with symmetric feet friction).
        frame_skip: MuJoCo steps per env step.
        default_camera_config: free-camera attributes for rendering.
        forward_reward_weight: weight of the x velocity.
        ctrl_cost_weight: weight of ``sum(action**2)``.
        healthy_reward: reward per step while healthy.
        terminate_when_unhealthy: end the episode when unhealthy.
        healthy_z_range: range of the torso height ``qpos[1]``.
        healthy_angle_range: range of the torso angle ``qpos[2]``.
        reset_noise_scale: scale of the uniform reset noise.
        exclude_current_positions_from_observation: leave the x position out of obs.
        max_episode_steps: the time limit (gymnasium's registration: 1000); ``None``: none.
        **kwargs: rendering options of :class:`MujocoEnv` (``render_mode``, ``width``, ...).

    Examples:
        >>> env = Walker2dEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape, env.action_space.shape
        ((17,), (6,))
    """

    def __init__(
        self,
        xml_file: str = "walker2d_v5.xml",
        frame_skip: int = 4,
        default_camera_config: dict[str, Any] = _WALKER_CAMERA_CONFIG,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-3,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (0.8, 2.0),
        healthy_angle_range: tuple[float, float] = (-1.0, 1.0),
        reset_noise_scale: float = 5e-3,
        exclude_current_positions_from_observation: bool = True,
        max_episode_steps: int | None = 1000,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            xml_file,
            frame_skip,
            max_episode_steps=max_episode_steps,
            default_camera_config=default_camera_config,
            **kwargs,
        )
        self._forward_reward_weight = forward_reward_weight
        self._ctrl_cost_weight = ctrl_cost_weight
        self._healthy_reward = healthy_reward
        self._terminate_when_unhealthy = terminate_when_unhealthy
        self._healthy_z_range = healthy_z_range
        self._healthy_angle_range = healthy_angle_range
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions_from_observation = exclude_current_positions_from_observation
        self._setup_obs(1 * bool(exclude_current_positions_from_observation))
        # is_healthy is an np.bool_ here, as in gymnasium.
        self._reward_if_healthy = np.True_ * healthy_reward
        self._reward_if_unhealthy = np.False_ * healthy_reward

    def _is_healthy(self) -> Any:
        qpos = self._qpos
        z = qpos[1]
        angle = qpos[2]
        min_z, max_z = self._healthy_z_range
        min_angle, max_angle = self._healthy_angle_range
        healthy_z = min_z < z < max_z
        healthy_angle = min_angle < angle < max_angle
        return healthy_z and healthy_angle  # an np.bool_, as in gymnasium


class SwimmerEnv(_PlanarEnv):
    """gymnasium's ``Swimmer-v5``, bit-identical, with a built-in time limit.

    The observation is ``qpos[2:]`` (all of ``qpos`` with
    ``exclude_current_positions_from_observation=False``) and ``qvel``. The reward is
    ``forward_reward_weight * x_velocity - ctrl_cost_weight * sum(action**2)``.

    Args:
        xml_file: the MJCF model.
        frame_skip: MuJoCo steps per env step.
        default_camera_config: free-camera attributes for rendering.
        forward_reward_weight: weight of the x velocity.
        ctrl_cost_weight: weight of ``sum(action**2)``.
        reset_noise_scale: scale of the uniform reset noise.
        exclude_current_positions_from_observation: leave the x, y position out of obs.
        max_episode_steps: the time limit (gymnasium's registration: 1000); ``None``: none.
        **kwargs: rendering options of :class:`MujocoEnv` (``render_mode``, ``width``, ...).

    Examples:
        >>> env = SwimmerEnv()
        >>> obs, info = env.reset(seed=0)
        >>> obs.shape, list(info)
        ((8,), ['x_position', 'y_position', 'distance_from_origin'])
    """

    def __init__(
        self,
        xml_file: str = "swimmer.xml",
        frame_skip: int = 4,
        default_camera_config: dict[str, Any] | None = None,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-4,
        reset_noise_scale: float = 0.1,
        exclude_current_positions_from_observation: bool = True,
        max_episode_steps: int | None = 1000,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            xml_file,
            frame_skip,
            max_episode_steps=max_episode_steps,
            default_camera_config=default_camera_config,
            **kwargs,
        )
        self._forward_reward_weight = forward_reward_weight
        self._ctrl_cost_weight = ctrl_cost_weight
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions_from_observation = exclude_current_positions_from_observation
        self._setup_obs(2 * bool(exclude_current_positions_from_observation))
        self._qpos_xy = self.data.qpos[0:2]

    def _step_pre(self, action: NDArray[Any]) -> Any:
        qpos = self._qpos
        before = (qpos[0], qpos[1])  # x_before, y_before
        self._ctrl[...] = action
        return before

    def _step_post(self, action: NDArray[Any], before: Any) -> StepResult:
        qpos = self._qpos
        x_before, y_before = before
        x_after = qpos[0]
        y_after = qpos[1]
        dt = self._dt
        x_velocity = (x_after - x_before) / dt
        y_velocity = (y_after - y_before) / dt

        self._buf_qpos[...] = qpos
        self._buf_qvel[...] = self._qvel
        observation = self._obs_view.copy()

        forward_reward = self._forward_reward_weight * x_velocity
        ctrl_cost = self._ctrl_cost_weight * _add_reduce(_square(action))
        xy = self._qpos_xy
        info = {
            "x_position": x_after,
            "y_position": y_after,
            "distance_from_origin": _sqrt(xy.dot(xy)),
            "x_velocity": x_velocity,
            "y_velocity": y_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
        }
        self._elapsed_steps += 1
        return (
            observation,
            forward_reward - ctrl_cost,
            False,
            self._elapsed_steps >= self._max_steps,
            info,
        )

    def _reset_state(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        noise_low = -self._reset_noise_scale
        noise_high = self._reset_noise_scale
        qpos = self.init_qpos + self.np_random.uniform(low=noise_low, high=noise_high, size=self.model.nq)
        qvel = self.init_qvel + self.np_random.uniform(low=noise_low, high=noise_high, size=self.model.nv)
        return qpos, qvel

    def _reset_info(self) -> dict[str, Any]:
        xy = self._qpos_xy
        return {
            "x_position": self._qpos[0],
            "y_position": self._qpos[1],
            "distance_from_origin": _sqrt(xy.dot(xy)),
        }
