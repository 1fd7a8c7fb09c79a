"""``envpool.mujoco.robotics.registration``: its ids are in ``envhive.envpool.registration.registry``."""
