"""EnvPool's MuJoCo families (``envpool.mujoco``): ``gym``, ``dmc``, ``metaworld``,
``myosuite``, ``playground``, ``robotics``."""
