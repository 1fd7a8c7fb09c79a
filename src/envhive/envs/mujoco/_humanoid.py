"""``Humanoid-v5``: gymnasium's ``HumanoidEnv`` (v5) on ``mujoco`` directly.

Examples:
    >>> env = HumanoidEnv()
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, env.action_space.shape
    ((348,), (17,))
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Box
from numpy.typing import NDArray

from envhive.envs.mujoco._base import MujocoEnv, StepResult, c_einsum, clip_scalar

__all__ = ["HumanoidEnv"]

_add_reduce = np.add.reduce
_square = np.square
_sqrt = np.sqrt

DEFAULT_CAMERA_CONFIG: dict[str, Any] = {
    "trackbodyid": 1,
    "distance": 4.0,
    "lookat": np.array((0.0, 0.0, 2.0)),
    "elevation": -20.0,
}


class HumanoidEnv(MujocoEnv):
    """gymnasium's ``Humanoid-v5``, bit-identical, with a built-in time limit.

    The observation is ``qpos[2:]`` (all of ``qpos`` with
    ``exclude_current_positions_from_observation=False``), ``qvel``, then, each optional,
    ``cinert[1:]``, ``cvel[1:]``, ``qfrc_actuator[6:]`` and ``cfrc_ext[1:]``. The reward is
    ``forward + survive - ctrl_cost - contact_cost``, where forward is the x velocity of the
    centre of mass; each term is in ``info`` under gymnasium's keys.

    Args:
        xml_file: the MJCF model.
        frame_skip: MuJoCo steps per env step.
        default_camera_config: free-camera attributes for rendering.
        forward_reward_weight: weight of the centre-of-mass x velocity.
        ctrl_cost_weight: weight of ``sum(ctrl**2)``.
        contact_cost_weight: weight of ``sum(cfrc_ext**2)``.
        contact_cost_range: the range the contact cost is clipped to.
        healthy_reward: reward per step while healthy.
        terminate_when_unhealthy: end the episode when unhealthy.
        healthy_z_range: the (open) torso height range that is healthy.
        reset_noise_scale: scale of the uniform reset noise.
        exclude_current_positions_from_observation: leave the x, y position out of obs.
        include_cinert_in_observation: append ``cinert[1:]``.
        include_cvel_in_observation: append ``cvel[1:]``.
        include_qfrc_actuator_in_observation: append ``qfrc_actuator[6:]``.
        include_cfrc_ext_in_observation: append ``cfrc_ext[1:]``.
        max_episode_steps: the time limit (gymnasium's registration: 1000); ``None``: none.
        **kwargs: rendering options of :class:`MujocoEnv` (``render_mode``, ``width``, ...).

    Examples:
        >>> env = HumanoidEnv(include_cinert_in_observation=False, include_cvel_in_observation=False)
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape
        (140,)
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> info["tendon_length"].shape
        (2,)
    """

    _uses_rne_post_constraint = True

    def __init__(
        self,
        xml_file: str = "humanoid.xml",
        frame_skip: int = 5,
        default_camera_config: dict[str, Any] = DEFAULT_CAMERA_CONFIG,
        forward_reward_weight: float = 1.25,
        ctrl_cost_weight: float = 0.1,
        contact_cost_weight: float = 5e-7,
        contact_cost_range: tuple[float, float] = (-np.inf, 10.0),
        healthy_reward: float = 5.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (1.0, 2.0),
        reset_noise_scale: float = 1e-2,
        exclude_current_positions_from_observation: bool = True,
        include_cinert_in_observation: bool = True,
        include_cvel_in_observation: bool = True,
        include_qfrc_actuator_in_observation: bool = True,
        include_cfrc_ext_in_observation: bool = True,
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
        self._contact_cost_weight = contact_cost_weight
        self._contact_cost_range = contact_cost_range
        self._healthy_reward = healthy_reward
        self._terminate_when_unhealthy = terminate_when_unhealthy
        self._healthy_z_range = healthy_z_range
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions_from_observation = exclude_current_positions_from_observation
        self._include_cinert_in_observation = include_cinert_in_observation
        self._include_cvel_in_observation = include_cvel_in_observation
        self._include_qfrc_actuator_in_observation = include_qfrc_actuator_in_observation
        self._include_cfrc_ext_in_observation = include_cfrc_ext_in_observation

        model, data = self.model, self.data
        nq, nv = data.qpos.size, data.qvel.size
        skip = 2 * bool(exclude_current_positions_from_observation)
        # (flag, name, source view) for the optional parts, in gymnasium's order. gymnasium
        # tests these flags with `is True`, so only True includes a part.
        optional = [
            (include_cinert_in_observation is True, "cinert", data.cinert[1:]),
            (include_cvel_in_observation is True, "cvel", data.cvel[1:]),
            (include_qfrc_actuator_in_observation is True, "qfrc_actuator", data.qfrc_actuator[6:]),
            (include_cfrc_ext_in_observation is True, "cfrc_ext", data.cfrc_ext[1:]),
        ]
        sizes = [src.size * flag for flag, _, src in optional]
        obs_size = nq + nv - skip + sum(sizes)
        self.observation_space = Box(low=-np.inf, high=np.inf, shape=(obs_size,), dtype=np.float64)
        self.observation_structure = {
            "skipped_qpos": skip,
            "qpos": nq - skip,
            "qvel": nv,
            **{name: size for (_, name, _), size in zip(optional, sizes)},
            "ten_length": 0,
            "ten_velocity": 0,
        }

        # buf = [qpos, qvel, *included parts]; the observation is a copy of buf[skip:].
        buf = np.zeros(nq + nv + sum(sizes))
        self._buf = buf
        self._obs_view = buf[skip:]
        pairs = [(buf[:nq], data.qpos), (buf[nq : nq + nv], data.qvel)]
        start = nq + nv
        for flag, _, src in optional:
            if flag:
                pairs.append((buf[start : start + src.size].reshape(src.shape), src))
                start += src.size
        self._copies: tuple[tuple[NDArray[np.float64], NDArray[np.float64]], ...] = tuple(pairs)

        self._body_mass: NDArray[np.float64] = model.body_mass
        self._xipos: NDArray[np.float64] = data.xipos
        self._cfrc_ext: NDArray[np.float64] = data.cfrc_ext
        self._cfrc_squared = np.zeros_like(data.cfrc_ext)
        self._ctrl_squared = np.zeros_like(data.ctrl)
        self._cost_min = np.float64(contact_cost_range[0])
        self._cost_max = np.float64(contact_cost_range[1])
        self._ten_length: NDArray[np.float64] = data.ten_length
        self._ten_velocity: NDArray[np.float64] = data.ten_velocity
        self._qpos_xy = data.qpos[0:2]
        self._reward_if_healthy = np.True_ * healthy_reward
        self._reward_if_unhealthy = np.False_ * healthy_reward

    def _step_pre(self, action: NDArray[Any]) -> Any:
        # gymnasium's mass_center(): einsum("b,bj->j", body_mass, xipos) / body_mass.sum(),
        # read live so that randomised body masses are honoured.
        mass = self._body_mass
        mass_sum = _add_reduce(mass)
        center = c_einsum("b,bj->j", mass, self._xipos)
        before = (mass_sum, center[0] / mass_sum, center[1] / mass_sum)
        self._ctrl[...] = action
        return before

    def _step_post(self, action: NDArray[Any], before: Any) -> StepResult:
        mass_sum, x_before, y_before = before
        ctrl = self._ctrl
        center = c_einsum("b,bj->j", self._body_mass, self._xipos)
        dt = self._dt
        x_velocity = (center[0] / mass_sum - x_before) / dt
        y_velocity = (center[1] / mass_sum - y_before) / dt

        for dst, src in self._copies:
            dst[...] = src
        observation = self._obs_view.copy()

        qpos = self._qpos
        min_z, max_z = self._healthy_z_range
        is_healthy = min_z < qpos[2] < max_z
        forward_reward = self._forward_reward_weight * x_velocity
        # is_healthy * healthy_reward, precomputed: numpy's bool_ * float costs a microsecond.
        healthy_reward = self._reward_if_healthy if is_healthy else self._reward_if_unhealthy
        ctrl_cost = self._ctrl_cost_weight * _add_reduce(_square(ctrl, out=self._ctrl_squared))
        contact_cost = self._contact_cost_weight * _add_reduce(
            _square(self._cfrc_ext, out=self._cfrc_squared), None
        )
        contact_cost = clip_scalar(contact_cost, self._cost_min, self._cost_max)
        reward = (forward_reward + healthy_reward) - (ctrl_cost + contact_cost)
        terminated = not is_healthy and self._terminate_when_unhealthy

        xy = self._qpos_xy
        info = {
            "x_position": qpos[0],
            "y_position": qpos[1],
            "tendon_length": self._ten_length.copy(),
            "tendon_velocity": self._ten_velocity.copy(),
            "distance_from_origin": _sqrt(xy.dot(xy)),
            "x_velocity": x_velocity,
            "y_velocity": y_velocity,
            "reward_survive": healthy_reward,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
            "reward_contact": -contact_cost,
        }
        self._elapsed_steps += 1
        return observation, reward, terminated, self._elapsed_steps >= self._max_steps, info

    def _obs(self) -> NDArray[np.float64]:
        for dst, src in self._copies:
            dst[...] = src
        return self._obs_view.copy()

    def _reset_model(self) -> NDArray[np.float64]:
        noise_low = -self._reset_noise_scale
        noise_high = self._reset_noise_scale
        qpos = self.init_qpos + self.np_random.uniform(low=noise_low, high=noise_high, size=self.model.nq)
        qvel = self.init_qvel + self.np_random.uniform(low=noise_low, high=noise_high, size=self.model.nv)
        self.set_state(qpos, qvel)
        return self._obs()

    def _reset_info(self) -> dict[str, Any]:
        xy = self._qpos_xy
        return {
            "x_position": self._qpos[0],
            "y_position": self._qpos[1],
            "tendon_length": self._ten_length.copy(),
            "tendon_velocity": self._ten_velocity.copy(),
            "distance_from_origin": _sqrt(xy.dot(xy)),
        }
