"""``envpool.mujoco.dmc.registration``: its ids are in ``envhive.envpool.registration.registry``."""
