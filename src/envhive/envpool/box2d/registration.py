"""``envpool.box2d.registration``: its ids are in ``envhive.envpool.registration.registry``."""
