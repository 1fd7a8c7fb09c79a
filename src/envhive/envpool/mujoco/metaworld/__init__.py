"""EnvPool's MetaWorld family (``envpool.mujoco.metaworld``), run by EnvPool's own engine.

Its classes (``...EnvSpec``, ``...DMEnvPool``, ``...GymnasiumEnvPool``, as EnvPool names them)
are made on first use: the spec from EnvPool's (needs the ``envpool`` extra), the pools
envhive's.
"""

from envhive.envpool._modules import foreign_getattr

__getattr__ = foreign_getattr("mujoco.metaworld", globals())
