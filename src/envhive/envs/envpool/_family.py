"""The ``"envpool"`` engine kind registers itself here (light: imports neither envpool nor numpy).

Its ids are ``envpool/<EnvPool id>`` for every id the installed EnvPool registers, listed from
EnvPool's registration modules without importing envpool (``_ids``) the first time an
``envpool/`` id is looked up or every id is listed.

Examples:
    >>> from envhive.engines import engine_kind
    >>> engine_kind("envpool").needs, engine_kind("envpool").prefix
    ('envpool', 'envpool/')
"""

from __future__ import annotations

from envhive.engines._registry import EngineKind, register_kind

__all__: list[str] = []

register_kind(EngineKind(
    "envpool", "envhive.envs.envpool._factory:envpool_factory", "envpool",
    peers="envhive.envs.envpool._factory:bench_peers",
    entries="envhive.envs.envpool._ids:envpool_entries", prefix="envpool/",
))
