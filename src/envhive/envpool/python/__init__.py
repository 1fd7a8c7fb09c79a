"""EnvPool's ``envpool.python`` package: its typed interface (``protocol``).

Examples:
    >>> from envhive.envpool.python import GymnasiumEnvPool
    >>> GymnasiumEnvPool.__module__
    'envhive.envpool.python.protocol'
"""

from envhive.envpool.python.protocol import DMEnvPool, EnvPool, EnvSpec, GymnasiumEnvPool

__all__ = ["DMEnvPool", "EnvPool", "EnvSpec", "GymnasiumEnvPool"]
