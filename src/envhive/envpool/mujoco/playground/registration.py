"""``envpool.mujoco.playground.registration``: its ids are in ``envhive.envpool.registration.registry``."""
