"""``Reacher-v5``: gymnasium's ``ReacherEnv`` (v5) on ``mujoco`` directly.

Examples:
    >>> env = ReacherEnv()
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, env.max_episode_steps
    ((10,), 50)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Box
from numpy.typing import NDArray

from envhive.envs.mujoco._base import MujocoEnv, StepResult

__all__ = ["ReacherEnv"]

_add_reduce = np.add.reduce
_square = np.square
_sqrt = np.sqrt
_sin = np.sin
_cos = np.cos
_subtract = np.subtract

_REACHER_CAMERA_CONFIG: dict[str, Any] = {"trackbodyid": 0}


class ReacherEnv(MujocoEnv):
    """gymnasium's ``Reacher-v5``, bit-identical, with a built-in 50-step time limit.

    The observation is ``[cos(q[:2]), sin(q[:2]), target xy, qvel[:2], (fingertip -
    target)[:2]]``. The reward is ``reward_dist + reward_ctrl`` (both in ``info``): minus the
    fingertip-to-target distance and minus ``sum(action**2)``, each weighted. The target is
    drawn uniformly in the disc of radius 0.2 at every reset and kept in ``self.goal``.

    Args:
        xml_file: the MJCF model.
        frame_skip: MuJoCo steps per env step.
        default_camera_config: free-camera attributes for rendering.
        reward_dist_weight: weight of the distance term.
        reward_control_weight: weight of the control term.
        max_episode_steps: the time limit (gymnasium's registration: 50); ``None``: none.
        **kwargs: rendering options of :class:`MujocoEnv` (``render_mode``, ``width``, ...).

    Examples:
        >>> env = ReacherEnv(reward_control_weight=0)
        >>> _ = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> bool(reward == info["reward_dist"] < 0), list(info)
        (True, ['reward_dist', 'reward_ctrl'])
    """

    def __init__(
        self,
        xml_file: str = "reacher.xml",
        frame_skip: int = 2,
        default_camera_config: dict[str, Any] = _REACHER_CAMERA_CONFIG,
        reward_dist_weight: float = 1,
        reward_control_weight: float = 1,
        max_episode_steps: int | None = 50,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            xml_file,
            frame_skip,
            max_episode_steps=max_episode_steps,
            default_camera_config=default_camera_config,
            **kwargs,
        )
        self._reward_dist_weight = reward_dist_weight
        self._reward_control_weight = reward_control_weight
        self.observation_space = Box(low=-np.inf, high=np.inf, shape=(10,), dtype=np.float64)
        self.goal: NDArray[np.float64] = np.zeros(2)

        data = self.data
        nq = self.model.nq
        buf = np.zeros(10)
        self._buf = buf
        self._buf_cos = buf[0:2]
        self._buf_sin = buf[2:4]
        self._buf_target = buf[4 : 4 + nq - 2]
        self._buf_qvel = buf[2 + nq : 4 + nq]
        self._buf_diff = buf[4 + nq : 6 + nq]
        self._theta = data.qpos[:2]
        self._qpos_target = data.qpos[2:]
        self._qvel_2 = data.qvel[:2]
        self._fingertip: NDArray[np.float64] = data.xpos[self._body_id("fingertip")]
        self._target: NDArray[np.float64] = data.xpos[self._body_id("target")]
        self._fingertip_2 = self._fingertip[:2]
        self._target_2 = self._target[:2]
        self._vec = np.zeros(3)

    def _step_post(self, action: NDArray[Any], before: Any) -> StepResult:
        observation = self._obs()
        vec = _subtract(self._fingertip, self._target, out=self._vec)
        reward_dist = -_sqrt(vec.dot(vec)) * self._reward_dist_weight
        reward_ctrl = -_add_reduce(_square(action)) * self._reward_control_weight
        self._elapsed_steps += 1
        return (
            observation,
            reward_dist + reward_ctrl,
            False,
            self._elapsed_steps >= self._max_steps,
            {"reward_dist": reward_dist, "reward_ctrl": reward_ctrl},
        )

    def _obs(self) -> NDArray[np.float64]:
        theta = self._theta
        _cos(theta, out=self._buf_cos)
        _sin(theta, out=self._buf_sin)
        self._buf_target[...] = self._qpos_target
        self._buf_qvel[...] = self._qvel_2
        _subtract(self._fingertip_2, self._target_2, out=self._buf_diff)
        return self._buf.copy()

    def _reset_state(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        qpos = self.np_random.uniform(low=-0.1, high=0.1, size=self.model.nq) + self.init_qpos
        while True:
            self.goal = self.np_random.uniform(low=-0.2, high=0.2, size=2)
            if np.linalg.norm(self.goal) < 0.2:
                break
        qpos[-2:] = self.goal
        qvel = self.init_qvel + self.np_random.uniform(low=-0.005, high=0.005, size=self.model.nv)
        qvel[-2:] = 0
        return qpos, qvel
