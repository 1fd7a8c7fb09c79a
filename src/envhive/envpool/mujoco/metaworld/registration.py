"""``envpool.mujoco.metaworld.registration``: its ids are in ``envhive.envpool.registration.registry``."""
