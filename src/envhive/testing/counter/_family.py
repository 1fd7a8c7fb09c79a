"""Registers the ``"counter"`` engine kind and its one id, ``envhive/Counter-v0``.

Examples:
    >>> from envhive.engines import compiled_env
    >>> compiled_env("envhive/Counter-v0").engine
    'counter'
"""

from envhive.engines._registry import CompiledEnv, EngineKind, register_kind

register_kind(
    EngineKind("counter", "envhive.testing.counter._engine:counter_factory", "numpy"),
    [CompiledEnv("envhive/Counter-v0", "counter", "envhive.testing.counter:CounterEnv")],
)
