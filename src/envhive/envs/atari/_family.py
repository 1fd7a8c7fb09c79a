"""Registers the ``"atari"`` engine kind: ``envhive/<Game>-v5`` for every ROM ale-py ships.

Light on purpose (the registry imports it on its first lookup): its ids are listed from
ale-py's ROM directory without importing ale_py, and everything else is named by
``"module:attr"`` strings imported on first use.

Examples:
    >>> from envhive.engines import engine_kind
    >>> engine_kind("atari").needs
    'ale_py'
"""

from envhive.engines._registry import EngineKind, register_kind

register_kind(
    EngineKind("atari", "envhive.envs.atari._factory:atari_factory", "ale_py",
               peers="envhive.envs.atari._factory:bench_peers",
               entries="envhive.envs.atari._options:atari_entries"),
)
