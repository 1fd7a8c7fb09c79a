"""``envpool.mujoco.myosuite.registration``: its ids are in ``envhive.envpool.registration.registry``."""
