"""``envpool.mujoco.gym.registration``: ``gym_mujoco_envs``, EnvPool's table of MuJoCo gym
tasks, versions and time limits.

Examples:
    >>> gym_mujoco_envs[0]
    ('Ant', ('v3', 'v4', 'v5'), 1000)
"""

__all__ = ["gym_mujoco_envs"]

gym_mujoco_envs = [
    ("Ant", ("v3", "v4", "v5"), 1000),
    ("HalfCheetah", ("v3", "v4", "v5"), 1000),
    ("Hopper", ("v3", "v4", "v5"), 1000),
    ("Humanoid", ("v3", "v4", "v5"), 1000),
    ("HumanoidStandup", ("v2", "v4", "v5"), 1000),
    ("InvertedDoublePendulum", ("v2", "v4", "v5"), 1000),
    ("InvertedPendulum", ("v2", "v4", "v5"), 1000),
    ("Pusher", ("v2", "v4", "v5"), 100),
    ("Reacher", ("v2", "v4", "v5"), 50),
    ("Swimmer", ("v3", "v4", "v5"), 1000),
    ("Walker2d", ("v3", "v4", "v5"), 1000),
]
