"""``envpool.gfootball.registration``: its ids are in ``envhive.envpool.registration.registry``."""
