"""Environments implemented by envhive itself.

Subpackages:
    mujoco: MuJoCo locomotion envs (``Ant-v5``, ``Humanoid-v5``, ...) written on the
        ``mujoco`` package directly, step-for-step identical to gymnasium's v5 envs but with
        far less Python per step.

Examples:
    >>> from envhive.envs.mujoco import ENV_CLASSES, MAX_EPISODE_STEPS
    >>> sorted(ENV_CLASSES)[:3]
    ['Ant-v5', 'HalfCheetah-v5', 'Hopper-v5']
    >>> MAX_EPISODE_STEPS["Reacher-v5"]
    50
"""

__all__ = []
