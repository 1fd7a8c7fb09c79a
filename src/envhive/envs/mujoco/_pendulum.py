"""``InvertedPendulum-v5`` and ``InvertedDoublePendulum-v5`` on ``mujoco`` directly.

Each is gymnasium's v5 env of the same name, bit-identical, with the 1000-step time limit of
gymnasium's registration built in.

Examples:
    >>> env = InvertedPendulumEnv()
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, info
    ((4,), {})
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Box
from numpy.typing import NDArray

from envhive.envs.mujoco._base import MujocoEnv, StepResult, clip_ufunc

__all__ = ["InvertedDoublePendulumEnv", "InvertedPendulumEnv"]

_sin = np.sin
_cos = np.cos
_MINUS_TEN = np.asarray(-10.0)
_TEN = np.asarray(10.0)

_PENDULUM_CAMERA_CONFIG: dict[str, Any] = {"trackbodyid": 0, "distance": 2.04}


class InvertedPendulumEnv(MujocoEnv):
    """gymnasium's ``InvertedPendulum-v5``, bit-identical, with a built-in time limit.

    The observation is ``[qpos, qvel]``; the reward is 1 per step (an ``int``, as in
    gymnasium) until the pole leaves ``|angle| <= 0.2`` or the state stops being finite.

    Args:
        xml_file: the MJCF model.
        frame_skip: MuJoCo steps per env step.
        default_camera_config: free-camera attributes for rendering.
        reset_noise_scale: scale of the uniform reset noise.
        max_episode_steps: the time limit (gymnasium's registration: 1000); ``None``: none.
        **kwargs: rendering options of :class:`MujocoEnv` (``render_mode``, ``width``, ...).

    Examples:
        >>> env = InvertedPendulumEnv()
        >>> _ = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> reward, terminated, info
        (1, False, {'reward_survive': 1})
    """

    def __init__(
        self,
        xml_file: str = "inverted_pendulum.xml",
        frame_skip: int = 2,
        default_camera_config: dict[str, Any] = _PENDULUM_CAMERA_CONFIG,
        reset_noise_scale: float = 0.01,
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
        self._reset_noise_scale = reset_noise_scale
        self.observation_space = Box(low=-np.inf, high=np.inf, shape=(4,), dtype=np.float64)
        nq, nv = self.model.nq, self.model.nv
        self.observation_structure = {"qpos": nq, "qvel": nv}
        buf = np.zeros(nq + nv)
        self._buf = buf
        self._buf_qpos = buf[:nq]
        self._buf_qvel = buf[nq:]
        self._zeros = np.zeros(nq + nv)

    def _step_post(self, action: NDArray[Any], before: Any) -> StepResult:
        buf = self._buf
        self._buf_qpos[...] = self._qpos
        self._buf_qvel[...] = self._qvel
        observation = buf.copy()
        # not isfinite(obs).all(): x * 0 is +-0 for finite x and NaN otherwise.
        terminated = bool(buf.dot(self._zeros) != 0.0 or abs(buf[1]) > 0.2)
        reward = int(not terminated)
        self._elapsed_steps += 1
        return (
            observation,
            reward,
            terminated,
            self._elapsed_steps >= self._max_steps,
            {"reward_survive": reward},
        )

    def _obs(self) -> NDArray[np.float64]:
        self._buf_qpos[...] = self._qpos
        self._buf_qvel[...] = self._qvel
        return self._buf.copy()

    def _reset_state(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        noise_low = -self._reset_noise_scale
        noise_high = self._reset_noise_scale
        qpos = self.init_qpos + self.np_random.uniform(size=self.model.nq, low=noise_low, high=noise_high)
        qvel = self.init_qvel + self.np_random.uniform(size=self.model.nv, low=noise_low, high=noise_high)
        return qpos, qvel


class InvertedDoublePendulumEnv(MujocoEnv):
    """gymnasium's ``InvertedDoublePendulum-v5``, bit-identical, with a built-in time limit.

    The observation is ``[qpos[:1], sin(qpos[1:]), cos(qpos[1:]), clip(qvel, -10, 10),
    clip(qfrc_constraint, -10, 10)[:1]]``. The reward is ``alive_bonus - distance_penalty -
    velocity_penalty``, and the episode ends when the tip's height ``y <= 1``.

    Args:
        xml_file: the MJCF model.
        frame_skip: MuJoCo steps per env step.
        default_camera_config: free-camera attributes for rendering (gymnasium's default is
            ``None`` too).
        healthy_reward: the alive bonus per step.
        reset_noise_scale: scale of the reset noise.
        max_episode_steps: the time limit (gymnasium's registration: 1000); ``None``: none.
        **kwargs: rendering options of :class:`MujocoEnv` (``render_mode``, ``width``, ...).

    Examples:
        >>> env = InvertedDoublePendulumEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape
        (9,)
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> list(info)
        ['reward_survive', 'distance_penalty', 'velocity_penalty']
    """

    def __init__(
        self,
        xml_file: str = "inverted_double_pendulum.xml",
        frame_skip: int = 5,
        default_camera_config: dict[str, Any] | None = None,
        healthy_reward: float = 10.0,
        reset_noise_scale: float = 0.1,
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
        self._healthy_reward = healthy_reward
        self._reset_noise_scale = reset_noise_scale
        self.observation_space = Box(low=-np.inf, high=np.inf, shape=(9,), dtype=np.float64)
        data = self.data
        nq, nv = self.model.nq, self.model.nv
        n_angles = nq - 1
        buf = np.zeros(1 + 2 * n_angles + nv + 1)
        self._buf = buf
        self._buf_x = buf[0:1]
        self._buf_sin = buf[1 : 1 + n_angles]
        self._buf_cos = buf[1 + n_angles : 1 + 2 * n_angles]
        self._buf_qvel = buf[1 + 2 * n_angles : 1 + 2 * n_angles + nv]
        self._buf_qfrc = buf[-1:]
        self._qpos_x = data.qpos[:1]
        self._qpos_angles = data.qpos[1:]
        self._qfrc_constraint_x = data.qfrc_constraint[:1]
        self._tip_xpos: NDArray[np.float64] = data.site_xpos[0]

    def _step_post(self, action: NDArray[Any], before: Any) -> StepResult:
        tip = self._tip_xpos
        x = tip[0]
        y = tip[2]
        observation = self._obs()
        terminated = bool(y <= 1)
        qvel = self._qvel
        v1 = qvel[1]
        v2 = qvel[2]
        dist_penalty = 0.01 * x**2 + (y - 2) ** 2
        vel_penalty = 1e-3 * v1**2 + 5e-3 * v2**2
        alive_bonus = self._healthy_reward * int(not terminated)
        reward = alive_bonus - dist_penalty - vel_penalty
        info = {
            "reward_survive": alive_bonus,
            "distance_penalty": -dist_penalty,
            "velocity_penalty": -vel_penalty,
        }
        self._elapsed_steps += 1
        return observation, reward, terminated, self._elapsed_steps >= self._max_steps, info

    def _obs(self) -> NDArray[np.float64]:
        self._buf_x[...] = self._qpos_x
        angles = self._qpos_angles
        _sin(angles, out=self._buf_sin)
        _cos(angles, out=self._buf_cos)
        clip_ufunc(self._qvel, _MINUS_TEN, _TEN, out=self._buf_qvel)
        clip_ufunc(self._qfrc_constraint_x, _MINUS_TEN, _TEN, out=self._buf_qfrc)
        return self._buf.copy()

    def _reset_state(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        noise_low = -self._reset_noise_scale
        noise_high = self._reset_noise_scale
        return (
            self.init_qpos + self.np_random.uniform(low=noise_low, high=noise_high, size=self.model.nq),
            self.init_qvel + self.np_random.standard_normal(self.model.nv) * self._reset_noise_scale,
        )
