"""``envpool.minigrid.registration``: its ids are in ``envhive.envpool.registration.registry``."""
