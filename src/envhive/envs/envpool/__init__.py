"""EnvPool's own engines as an envhive engine kind: every EnvPool id as ``envpool/<id>``.

``envhive.make("envpool/CheetahRun-v1", 64)`` runs DeepMind Control's cheetah in one EnvPool
pool on the native executor (:class:`~envhive.envs.envpool._engine.EnvPoolEngine`), with
envhive's autoreset modes, partial resets, async ``send``/``recv``, front ends and executors
(the others run one EnvPool env each). Needs the ``envpool`` extra; listing the ids does not
import envpool (``_ids`` reads EnvPool's registration modules as data). The kind registers
itself in ``_family``.

Examples:
    >>> from envhive.engines import compiled_env
    >>> entry = compiled_env("envpool/CartPole-v1")
    >>> entry.engine if entry is not None else "envpool"  # (without envpool: no ids)
    'envpool'
"""

__all__: list[str] = []
