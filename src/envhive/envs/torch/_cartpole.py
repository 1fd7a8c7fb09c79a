"""CartPole-v1 as a torch batched env: gymnasium's dynamics on tensors, on any device.

The state is float64 (as gymnasium's), observations float32. Reset noise is drawn on the host
from each env's own ``gymnasium.utils.seeding.np_random`` generator, exactly as
``CartPoleEnv.reset`` draws it, so a seed gives gymnasium's first state; the dynamics then run
as batched tensor arithmetic in gymnasium's operation order. torch's ``sin``/``cos`` may differ
from the C library's in the last bit, so trajectories match gymnasium's to ~1e-12, not bit for
bit (tests/envs/test_torch_cartpole.py).

Examples:
    >>> import torch
    >>> env = TorchCartPole(3)
    >>> obs = env.reset_envs(torch.arange(3), [0, 1, 2])
    >>> obs.shape, obs.dtype
    (torch.Size([3, 4]), torch.float32)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from envhive.engines._cartpole_math import FORCE_MAG, THETA_THRESHOLD, X_THRESHOLD, euler_step
from envhive.envs.torch._engine import NoiseStock, TorchBatchedEnv

__all__ = ["TorchCartPole"]

_FORCE_MAG = FORCE_MAG
_THETA_THRESHOLD = THETA_THRESHOLD
_X_THRESHOLD = X_THRESHOLD


class TorchCartPole(TorchBatchedEnv):
    """gymnasium's ``CartPole-v1`` (Euler integrator, 500-step limit), batched in tensors.

    Args:
        num_envs: the batch size.
        device: where the state lives.
        max_episode_steps: time limit (default 500; 0: none).
    """

    default_max_episode_steps = 500
    gym_id = "CartPole-v1"
    _high = np.array([_X_THRESHOLD * 2, np.inf, _THETA_THRESHOLD * 2, np.inf], dtype=np.float32)
    single_observation_space = gym.spaces.Box(-_high, _high, dtype=np.float32)
    single_action_space = gym.spaces.Discrete(2)

    def __init__(self, num_envs: int, device: Any = "cpu", max_episode_steps: int | None = None) -> None:
        super().__init__(num_envs, device, max_episode_steps)
        torch = self.torch
        self.state = torch.zeros((self.num_envs, 4), dtype=torch.float64, device=self.device)
        self._noise = NoiseStock(self.num_envs, 4, lambda rng, k: rng.uniform(low=-0.05, high=0.05, size=(k, 4)))

    def reset_envs(self, env_ids: Any, seeds: Sequence[int | None]) -> Any:
        """Gymnasium's reset of each env in ``env_ids``: uniform(-0.05, 0.05) from its own
        generator (re-made from the seed when one is given)."""
        noise = self._noise.take(self.host_ids(env_ids), seeds)
        fresh = self.torch.from_numpy(noise).to(self.device)
        self.state[env_ids] = fresh
        self.elapsed[env_ids] = 0
        return fresh.to(self.torch.float32)

    def step_envs(self, actions: Any, env_ids: Any) -> tuple[Any, Any, Any, Any]:
        """One Euler step of envs ``env_ids``, in gymnasium's order of operations."""
        torch = self.torch
        idx = self.rows(env_ids)
        s = self.state[idx]
        x, x_dot, theta, theta_dot = s[:, 0], s[:, 1], s[:, 2], s[:, 3]
        force = torch.where(actions == 1, _FORCE_MAG, -_FORCE_MAG).to(torch.float64)
        x, x_dot, theta, theta_dot = euler_step(
            x, x_dot, theta, theta_dot, force, torch.cos(theta), torch.sin(theta)
        )
        new = torch.stack((x, x_dot, theta, theta_dot), dim=1)
        self.state[idx] = new
        terminated = (x < -_X_THRESHOLD) | (x > _X_THRESHOLD) | (theta < -_THETA_THRESHOLD) | (
            theta > _THETA_THRESHOLD)
        truncated = self.tick(env_ids)
        reward = torch.ones(s.shape[0], dtype=torch.float64, device=self.device)
        return new.to(torch.float32), reward, terminated, truncated
