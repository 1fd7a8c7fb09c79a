"""``envpool.classic_control.registration``: its ids are in ``envhive.envpool.registration.registry``."""
