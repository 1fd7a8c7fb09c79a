"""Pendulum-v1 as a torch batched env: gymnasium's dynamics on tensors, on any device.

State ``(theta, theta_dot)`` in float64, observations ``(cos, sin, theta_dot)`` in float32, the
action used as float32 as gymnasium's numpy arithmetic does (``0.001 * u**2`` and ``3 * u`` are
float32 products there). Reset noise comes from each env's own generator, drawn as
``PendulumEnv.reset`` draws it, so a seed gives gymnasium's first state. torch's ``sin``/``cos``
and ``x**2`` may round differently from the C library's in the last bit: trajectories match
gymnasium's to float rounding (tests/with_torch/test_torch_engine.py).

Examples:
    >>> import torch
    >>> env = TorchPendulum(2)
    >>> env.reset_envs(torch.arange(2), [0, 1]).shape
    torch.Size([2, 3])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from envhive.envs.torch._engine import NoiseStock, TorchBatchedEnv

__all__ = ["TorchPendulum"]

_MAX_SPEED = 8.0
_MAX_TORQUE = 2.0
_DT = 0.05
_M = 1.0
_L = 1.0
_HIGH = np.array([np.pi, 1.0])


class TorchPendulum(TorchBatchedEnv):
    """gymnasium's ``Pendulum-v1`` (200-step limit), batched in tensors.

    Args:
        num_envs: the batch size.
        device: where the state lives.
        max_episode_steps: time limit (default 200; 0: none).
        g: gravity (gymnasium's keyword).
    """

    default_max_episode_steps = 200
    gym_id = "Pendulum-v1"
    _obs_high = np.array([1.0, 1.0, _MAX_SPEED], dtype=np.float32)
    single_observation_space = gym.spaces.Box(-_obs_high, _obs_high, dtype=np.float32)
    single_action_space = gym.spaces.Box(-_MAX_TORQUE, _MAX_TORQUE, shape=(1,), dtype=np.float32)

    def __init__(self, num_envs: int, device: Any = "cpu", max_episode_steps: int | None = None,
                 g: float = 10.0) -> None:
        super().__init__(num_envs, device, max_episode_steps)
        torch = self.torch
        self.g = float(g)
        self.state = torch.zeros((self.num_envs, 2), dtype=torch.float64, device=self.device)
        self._noise = NoiseStock(self.num_envs, 2, lambda rng, k: rng.uniform(low=-_HIGH, high=_HIGH, size=(k, 2)))

    def _observe(self, state: Any) -> Any:
        torch = self.torch
        th = state[:, 0]
        return torch.stack((torch.cos(th), torch.sin(th), state[:, 1]), dim=1).to(torch.float32)

    def reset_envs(self, env_ids: Any, seeds: Sequence[int | None]) -> Any:
        """Gymnasium's reset: ``uniform(-[pi, 1], [pi, 1])`` from each env's generator."""
        fresh = self.torch.from_numpy(self._noise.take(self.host_ids(env_ids), seeds)).to(self.device)
        self.state[env_ids] = fresh
        self.elapsed[env_ids] = 0
        return self._observe(fresh)

    def step_envs(self, actions: Any, env_ids: Any) -> tuple[Any, Any, Any, Any]:
        """One step of envs ``env_ids``, in gymnasium's order of operations."""
        torch = self.torch
        idx = self.rows(env_ids)
        s = self.state[idx]
        th, thdot = s[:, 0], s[:, 1]
        u = actions.reshape(-1).to(torch.float32).clamp(-_MAX_TORQUE, _MAX_TORQUE)
        norm = torch.remainder(th + np.pi, 2 * np.pi) - np.pi
        effort = (torch.tensor(0.001, dtype=torch.float32, device=self.device) * (u * u)).to(torch.float64)
        costs = norm * norm + 0.1 * (thdot * thdot) + effort
        push = (torch.tensor(3.0 / (_M * _L**2), dtype=torch.float32, device=self.device) * u).to(torch.float64)
        newthdot = (thdot + ((3 * self.g) / (2 * _L) * torch.sin(th) + push) * _DT).clamp(-_MAX_SPEED, _MAX_SPEED)
        newth = th + newthdot * _DT
        new = torch.stack((newth, newthdot), dim=1)
        self.state[idx] = new
        truncated = self.tick(env_ids)
        terminated = self.torch.zeros_like(truncated)
        return self._observe(new), -costs, terminated, truncated
