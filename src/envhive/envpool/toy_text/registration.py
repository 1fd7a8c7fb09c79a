"""``envpool.toy_text.registration``: its ids are in ``envhive.envpool.registration.registry``."""
