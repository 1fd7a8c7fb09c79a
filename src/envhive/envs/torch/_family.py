"""The ``"torch"`` engine kind: envhive's torch batched envs, registered on import.

The engine registry (``envhive.engines``) imports this module on its first lookup; importing
it imports no torch (the envs import it when built).

Examples:
    >>> from envhive.engines import compiled_env
    >>> compiled_env("envhive/TorchPendulum-v1").engine
    'torch'
"""

from __future__ import annotations

from envhive.engines import CompiledEnv, EngineKind, register_kind

__all__: list[str] = []

register_kind(
    EngineKind("torch", "envhive.envs.torch._factory:torch_factory", "torch",
               peers="envhive.envs.torch._factory:bench_peers",
               classes="envhive.envs.torch._factory:class_factory"),
    [
        CompiledEnv("envhive/TorchCartPole-v1", "torch", "envhive.envs.torch:TorchCartPole"),
        CompiledEnv("envhive/TorchPendulum-v1", "torch", "envhive.envs.torch:TorchPendulum"),
    ],
)
