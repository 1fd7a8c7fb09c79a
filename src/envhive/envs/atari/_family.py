"""The ``"atari"`` engine kind: one id per ROM ale-py ships, registered on import.

The engine registry (``envhive.engines``) imports this module on its first lookup. The ids
come from the ROM files in ale-py's package directory, listed the first time ids are listed
(``_options.atari_entries``), without importing ale_py.

Examples:
    >>> from envhive.engines import engine_kind
    >>> engine_kind("atari").needs
    'ale_py'
"""

from __future__ import annotations

from envhive.engines import EngineKind, register_kind

__all__: list[str] = []

register_kind(
    EngineKind("atari", "envhive.envs.atari._factory:atari_factory", "ale_py",
               peers="envhive.envs.atari._factory:bench_peers",
               entries="envhive.envs.atari._options:atari_entries"),
)
