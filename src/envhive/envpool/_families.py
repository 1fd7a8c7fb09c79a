"""The EnvPool families envhive runs on its own engines: their config keys and defaults (EnvPool
1.2.5's, so ``gen_config`` and ``env.config`` read as in EnvPool without envpool installed)
and the ids they register.

* Atari ``<Game>-v5`` (every ROM ale-py ships): ``envhive/<Game>-v5``, EnvPool's options by
  their own names.
* classic control ``CartPole-v0/v1`` (and ``phys2d/``), ``Pendulum-v1``, ``MountainCar-v0``,
  ``MountainCarContinuous-v0``, ``Acrobot-v1``: envhive's compiled kernels.
* MuJoCo gym v5 ``Ant``, ``HalfCheetah``, ``Hopper``, ``Walker2d``, ``Swimmer``,
  ``InvertedPendulum``, ``InvertedDoublePendulum``, ``Reacher`` (compiled) and ``Humanoid``.

``tests/envpool_api/test_spec.py`` holds these tables equal to EnvPool's own.

Examples:
    >>> OWN["CartPoleEnvSpec"].ids["CartPole-v1"]
    {'max_episode_steps': 500, 'reward_threshold': 475.0}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envhive.envs.atari._options import game_name, rom_ids

__all__ = ["COMMON", "OWN", "Family", "own_ids"]

#: Every spec's first config keys and their defaults (``base_path`` is filled at make).
COMMON: dict[str, Any] = {
    "num_envs": 1, "batch_size": 0, "num_threads": 0, "max_num_players": 1, "thread_affinity_offset": -1,
    "base_path": "", "seed": 42, "env_seed": [], "gym_reset_return_info": True, "max_episode_steps": 2147483647,
}


@dataclass(frozen=True)
class Family:
    """One spec class EnvPool has and envhive runs on its own engine.

    Attributes:
        family: EnvPool's module under ``envpool.`` (``"atari"``).
        config: the class's own config keys (after :data:`COMMON`) and defaults.
        ids: EnvPool's ids of the class and what each registers (its config values).
    """

    family: str
    config: dict[str, Any]
    ids: dict[str, dict[str, Any]] = field(default_factory=dict)


_ATARI = {
    "stack_num": 4, "frame_skip": 4, "noop_max": 30, "zero_discount_on_life_loss": False,
    "episodic_life": False, "reward_clip": False, "use_fire_reset": True, "img_height": 84, "img_width": 84,
    "task": "pong", "mode": -1, "difficulty": -1, "full_action_space": False,
    "repeat_action_probability": 0.0, "use_inter_area_resize": True, "gray_scale": True,
}

_V5 = {"post_constraint": True, "max_episode_steps": 1000, "gymnasium_v5_render_camera": True}

OWN: dict[str, Family] = {
    "AtariEnvSpec": Family("atari", _ATARI),
    "CartPoleEnvSpec": Family("classic_control", {"reward_threshold": 195.0}, {
        "CartPole-v0": {"max_episode_steps": 200, "reward_threshold": 195.0},
        "phys2d/CartPole-v0": {"max_episode_steps": 200, "reward_threshold": 195.0},
        "CartPole-v1": {"max_episode_steps": 500, "reward_threshold": 475.0},
        "phys2d/CartPole-v1": {"max_episode_steps": 500, "reward_threshold": 475.0},
    }),
    "PendulumEnvSpec": Family("classic_control", {"version": 0}, {
        "Pendulum-v1": {"version": 1, "max_episode_steps": 200},
    }),
    "MountainCarEnvSpec": Family("classic_control", {"reward_threshold": -110.0},
                                 {"MountainCar-v0": {"max_episode_steps": 200}}),
    "MountainCarContinuousEnvSpec": Family("classic_control", {"reward_threshold": 90.0},
                                           {"MountainCarContinuous-v0": {"max_episode_steps": 999}}),
    "AcrobotEnvSpec": Family("classic_control", {"reward_threshold": -100.0},
                             {"Acrobot-v1": {"max_episode_steps": 500}}),
    "GymAntEnvSpec": Family("mujoco.gym", {
        "reward_threshold": 6000.0, "frame_skip": 5, "frame_stack": 1, "post_constraint": True,
        "use_contact_force": False, "legacy_healthy_reward": True, "exclude_worldbody_contact_forces": False,
        "terminate_when_unhealthy": True, "exclude_current_positions_from_observation": True,
        "xml_file": "ant.xml", "gymnasium_v5_render_camera": False, "forward_reward_weight": 1.0,
        "ctrl_cost_weight": 0.5, "contact_cost_weight": 0.0005, "healthy_reward": 1.0, "healthy_z_min": 0.2,
        "healthy_z_max": 1.0, "contact_force_min": -1.0, "contact_force_max": 1.0, "reset_noise_scale": 0.1,
    }, {"Ant-v5": {**_V5, "use_contact_force": True, "legacy_healthy_reward": False,
                   "exclude_worldbody_contact_forces": True}}),
    "GymHalfCheetahEnvSpec": Family("mujoco.gym", {
        "reward_threshold": 4800.0, "frame_skip": 5, "frame_stack": 1, "post_constraint": True,
        "exclude_current_positions_from_observation": True, "xml_file": "half_cheetah.xml",
        "gymnasium_v5_render_camera": False, "ctrl_cost_weight": 0.1, "forward_reward_weight": 1.0,
        "reset_noise_scale": 0.1,
    }, {"HalfCheetah-v5": dict(_V5)}),
    "GymHopperEnvSpec": Family("mujoco.gym", {
        "reward_threshold": 6000.0, "frame_skip": 4, "frame_stack": 1, "post_constraint": True,
        "terminate_when_unhealthy": True, "legacy_healthy_reward": True,
        "exclude_current_positions_from_observation": True, "xml_file": "hopper.xml",
        "gymnasium_v5_render_camera": False, "ctrl_cost_weight": 0.001, "forward_reward_weight": 1.0,
        "healthy_reward": 1.0, "velocity_min": -10.0, "velocity_max": 10.0, "healthy_state_min": -100.0,
        "healthy_state_max": 100.0, "healthy_angle_min": -0.2, "healthy_angle_max": 0.2, "healthy_z_min": 0.7,
        "reset_noise_scale": 0.005,
    }, {"Hopper-v5": {**_V5, "legacy_healthy_reward": False}}),
    "GymHumanoidEnvSpec": Family("mujoco.gym", {
        "frame_skip": 5, "frame_stack": 1, "post_constraint": True, "legacy_healthy_reward": True,
        "exclude_worldbody_observations": False, "exclude_root_actuator_forces": False,
        "use_contact_force": False, "forward_reward_weight": 1.25, "terminate_when_unhealthy": True,
        "exclude_current_positions_from_observation": True, "xml_file": "humanoid.xml",
        "gymnasium_v5_render_camera": False, "ctrl_cost_weight": 0.1, "healthy_reward": 5.0,
        "healthy_z_min": 1.0, "healthy_z_max": 2.0, "contact_cost_weight": 5e-07, "contact_cost_max": 10.0,
        "reset_noise_scale": 0.01,
    }, {"Humanoid-v5": {**_V5, "use_contact_force": True, "legacy_healthy_reward": False,
                        "exclude_worldbody_observations": True, "exclude_root_actuator_forces": True}}),
    "GymSwimmerEnvSpec": Family("mujoco.gym", {
        "reward_threshold": 360.0, "frame_skip": 4, "frame_stack": 1, "post_constraint": True,
        "exclude_current_positions_from_observation": True, "xml_file": "swimmer.xml",
        "gymnasium_v5_render_camera": False, "forward_reward_weight": 1.0, "ctrl_cost_weight": 0.0001,
        "reset_noise_scale": 0.1,
    }, {"Swimmer-v5": dict(_V5)}),
    "GymWalker2dEnvSpec": Family("mujoco.gym", {
        "frame_skip": 4, "frame_stack": 1, "post_constraint": True, "ctrl_cost_weight": 0.001,
        "terminate_when_unhealthy": True, "exclude_current_positions_from_observation": True,
        "legacy_healthy_reward": True, "xml_file": "walker2d.xml", "gymnasium_v5_render_camera": False,
        "forward_reward_weight": 1.0, "healthy_reward": 1.0, "healthy_z_min": 0.8, "healthy_z_max": 2.0,
        "healthy_angle_min": -1.0, "healthy_angle_max": 1.0, "velocity_min": -10.0, "velocity_max": 10.0,
        "reset_noise_scale": 0.005,
    }, {"Walker2d-v5": {**_V5, "xml_file": "walker2d_v5.xml", "legacy_healthy_reward": False}}),
    "GymInvertedPendulumEnvSpec": Family("mujoco.gym", {
        "reward_threshold": 950.0, "frame_skip": 2, "frame_stack": 1, "post_constraint": True,
        "healthy_reward": 1.0, "reward_if_not_terminated": False, "xml_file": "inverted_pendulum.xml",
        "gymnasium_v5_render_camera": False, "healthy_z_min": -0.2, "healthy_z_max": 0.2,
        "reset_noise_scale": 0.01,
    }, {"InvertedPendulum-v5": {**_V5, "reward_if_not_terminated": True}}),
    "GymInvertedDoublePendulumEnvSpec": Family("mujoco.gym", {
        "reward_threshold": 9100.0, "frame_skip": 5, "frame_stack": 1, "post_constraint": True,
        "healthy_reward": 10.0, "reward_if_not_terminated": False, "constraint_obs_dim": 3,
        "xml_file": "inverted_double_pendulum.xml", "gymnasium_v5_render_camera": False,
        "healthy_z_max": 1.0, "observation_min": -10.0, "observation_max": 10.0, "reset_noise_scale": 0.1,
    }, {"InvertedDoublePendulum-v5": {**_V5, "constraint_obs_dim": 1, "reward_if_not_terminated": True}}),
    "GymReacherEnvSpec": Family("mujoco.gym", {
        "reward_threshold": -3.75, "frame_skip": 2, "frame_stack": 1, "post_constraint": True,
        "ctrl_cost_weight": 1.0, "reward_after_step": False, "obs_include_z_distance": True,
        "dist_cost_weight": 1.0, "xml_file": "reacher.xml", "gymnasium_v5_render_camera": False,
        "reset_qpos_scale": 0.1, "reset_qvel_scale": 0.005, "reset_goal_scale": 0.2,
    }, {"Reacher-v5": {**_V5, "max_episode_steps": 50, "reward_after_step": True,
                       "obs_include_z_distance": False}}),
}


def _atari_ids() -> dict[str, dict[str, Any]]:
    return {f"{game_name(rom)}-v5": {"task": rom, "max_episode_steps": 27000} for rom in rom_ids()}


def own_ids() -> dict[str, tuple[str, dict[str, Any]]]:
    """EnvPool's ids of the families in :data:`OWN`: ``id -> (spec class, registered config)``
    (Atari: one per ROM ale-py ships).

    Examples:
        >>> own_ids()["Acrobot-v1"]
        ('AcrobotEnvSpec', {'max_episode_steps': 500})
    """
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for cls, fam in OWN.items():
        for task, kwargs in (_atari_ids() if cls == "AtariEnvSpec" else fam.ids).items():
            out[task] = (cls, dict(kwargs))
    return out
