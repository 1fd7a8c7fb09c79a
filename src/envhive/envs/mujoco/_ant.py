"""``Ant-v5``: gymnasium's ``AntEnv`` (v5) on ``mujoco`` directly.

Examples:
    >>> env = AntEnv()
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, sorted(info)
    ((105,), ['distance_from_origin', 'x_position', 'y_position'])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Box
from numpy.typing import NDArray

from envhive.envs.mujoco._base import MujocoEnv, StepResult, clip_ufunc

__all__ = ["AntEnv"]

_add_reduce = np.add.reduce
_square = np.square
_sqrt = np.sqrt

DEFAULT_CAMERA_CONFIG: dict[str, Any] = {"distance": 4.0}


class AntEnv(MujocoEnv):
    """gymnasium's ``Ant-v5``, bit-identical, with a built-in time limit.

    The observation is ``qpos[2:]`` (all of ``qpos`` with
    ``exclude_current_positions_from_observation=False``), ``qvel`` and, by default, the
    clipped ``cfrc_ext`` of every body but the world. The reward is
    ``forward + survive - ctrl_cost - contact_cost``; each term is in ``info`` under
    gymnasium's keys.

    Args:
        xml_file: the MJCF model.
        frame_skip: MuJoCo steps per env step.
        default_camera_config: free-camera attributes for rendering.
        forward_reward_weight: weight of the ``main_body`` x velocity.
        ctrl_cost_weight: weight of ``sum(action**2)``.
        contact_cost_weight: weight of ``sum(clip(cfrc_ext)**2)``.
        healthy_reward: reward per step while healthy.
        main_body: the body (id or name) whose motion is rewarded.
        terminate_when_unhealthy: end the episode when unhealthy.
        healthy_z_range: the torso height range (inclusive) that is healthy.
        contact_force_range: the range ``cfrc_ext`` is clipped to.
        reset_noise_scale: scale of the reset noise.
        exclude_current_positions_from_observation: leave the x, y position out of obs.
        include_cfrc_ext_in_observation: append the clipped contact forces to obs.
        max_episode_steps: the time limit (gymnasium's registration: 1000); ``None``: none.
        **kwargs: rendering options of :class:`MujocoEnv` (``render_mode``, ``width``, ...).

    Examples:
        >>> env = AntEnv(include_cfrc_ext_in_observation=False)
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape, env.action_space.shape
        ((27,), (8,))
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> list(info)[:5]
        ['x_position', 'y_position', 'distance_from_origin', 'x_velocity', 'y_velocity']
    """

    _uses_rne_post_constraint = True

    def __init__(
        self,
        xml_file: str = "ant.xml",
        frame_skip: int = 5,
        default_camera_config: dict[str, Any] = DEFAULT_CAMERA_CONFIG,
        forward_reward_weight: float = 1,
        ctrl_cost_weight: float = 0.5,
        contact_cost_weight: float = 5e-4,
        healthy_reward: float = 1.0,
        main_body: int | str = 1,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (0.2, 1.0),
        contact_force_range: tuple[float, float] = (-1.0, 1.0),
        reset_noise_scale: float = 0.1,
        exclude_current_positions_from_observation: bool = True,
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
        self._healthy_reward = healthy_reward
        self._terminate_when_unhealthy = terminate_when_unhealthy
        self._healthy_z_range = healthy_z_range
        self._contact_force_range = contact_force_range
        self._main_body = main_body
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions_from_observation = exclude_current_positions_from_observation
        self._include_cfrc_ext_in_observation = include_cfrc_ext_in_observation

        data = self.data
        nq, nv = data.qpos.size, data.qvel.size
        n_cfrc = data.cfrc_ext[1:].size
        skip = 2 * bool(exclude_current_positions_from_observation)
        obs_size = nq + nv - skip + n_cfrc * bool(include_cfrc_ext_in_observation)
        self.observation_space = Box(low=-np.inf, high=np.inf, shape=(obs_size,), dtype=np.float64)
        self.observation_structure = {
            "skipped_qpos": skip,
            "qpos": nq - skip,
            "qvel": nv,
            "cfrc_ext": n_cfrc * bool(include_cfrc_ext_in_observation),
        }

        # buf = [qpos, qvel, clip(cfrc_ext)[1:]]; the observation is a copy of buf[skip:].
        n_state = nq + nv
        buf = np.zeros(n_state + n_cfrc * bool(include_cfrc_ext_in_observation))
        self._buf = buf
        self._obs_view = buf[skip:]
        self._buf_qpos = buf[:nq]
        self._buf_qvel = buf[nq:n_state]
        self._state = buf[:n_state]
        self._state_zeros = np.zeros(n_state)
        self._cfrc_ext: NDArray[np.float64] = data.cfrc_ext
        self._cfrc_clipped = np.zeros_like(data.cfrc_ext)
        self._cfrc_squared = np.zeros_like(data.cfrc_ext)
        self._buf_cfrc = buf[n_state:].reshape(-1, 6)
        self._cfrc_clipped_tail = self._cfrc_clipped[1:]
        self._force_min = np.asarray(contact_force_range[0], dtype=np.float64)
        self._force_max = np.asarray(contact_force_range[1], dtype=np.float64)
        self._main_xpos: NDArray[np.float64] = data.xpos[self._body_id(main_body)]
        self._qpos_xy = data.qpos[0:2]
        self._reward_if_healthy = np.True_ * healthy_reward
        self._reward_if_unhealthy = np.False_ * healthy_reward

    def _step_pre(self, action: NDArray[Any]) -> Any:
        xpos = self._main_xpos
        before = (xpos[0], xpos[1])  # x_before, y_before
        self._ctrl[...] = action
        return before

    def _step_post(self, action: NDArray[Any], before: Any) -> StepResult:
        xpos = self._main_xpos
        x_before, y_before = before
        dt = self._dt
        x_velocity = (xpos[0] - x_before) / dt
        y_velocity = (xpos[1] - y_before) / dt

        qpos = self._qpos
        self._buf_qpos[...] = qpos
        self._buf_qvel[...] = self._qvel
        forces = clip_ufunc(self._cfrc_ext, self._force_min, self._force_max, out=self._cfrc_clipped)
        contact_cost = self._contact_cost_weight * _add_reduce(
            _square(forces, out=self._cfrc_squared), None
        )
        if self._include_cfrc_ext_in_observation:
            self._buf_cfrc[...] = self._cfrc_clipped_tail
        observation = self._obs_view.copy()

        # isfinite(qpos, qvel).all(): x * 0 is +-0 for finite x and NaN otherwise.
        min_z, max_z = self._healthy_z_range
        is_healthy = self._state.dot(self._state_zeros) == 0.0 and min_z <= qpos[2] <= max_z
        forward_reward = x_velocity * self._forward_reward_weight
        # is_healthy * healthy_reward, precomputed: numpy's bool_ * float costs a microsecond.
        healthy_reward = self._reward_if_healthy if is_healthy else self._reward_if_unhealthy
        ctrl_cost = self._ctrl_cost_weight * _add_reduce(_square(action))
        reward = (forward_reward + healthy_reward) - (ctrl_cost + contact_cost)
        terminated = not is_healthy and self._terminate_when_unhealthy

        xy = self._qpos_xy
        info = {
            "x_position": qpos[0],
            "y_position": qpos[1],
            "distance_from_origin": _sqrt(xy.dot(xy)),
            "x_velocity": x_velocity,
            "y_velocity": y_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
            "reward_contact": -contact_cost,
            "reward_survive": healthy_reward,
        }
        self._elapsed_steps += 1
        return observation, reward, terminated, self._elapsed_steps >= self._max_steps, info

    def _obs(self) -> NDArray[np.float64]:
        self._buf_qpos[...] = self._qpos
        self._buf_qvel[...] = self._qvel
        if self._include_cfrc_ext_in_observation:
            clip_ufunc(self._cfrc_ext, self._force_min, self._force_max, out=self._cfrc_clipped)
            self._buf_cfrc[...] = self._cfrc_clipped_tail
        return self._obs_view.copy()

    def _reset_state(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        noise_low = -self._reset_noise_scale
        noise_high = self._reset_noise_scale
        qpos = self.init_qpos + self.np_random.uniform(low=noise_low, high=noise_high, size=self.model.nq)
        qvel = self.init_qvel + self._reset_noise_scale * self.np_random.standard_normal(self.model.nv)
        return qpos, qvel

    def _reset_info(self) -> dict[str, Any]:
        xy = self._qpos_xy
        return {
            "x_position": self._qpos[0],
            "y_position": self._qpos[1],
            "distance_from_origin": _sqrt(xy.dot(xy)),
        }
