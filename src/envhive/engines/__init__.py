"""Compiled engines: the protocol the ``native`` executor drives, the registry of compiled ids,
and what engines share.

An *engine* owns a whole batch of compiled envs and performs the pool's ops (``envhive._ops``)
on them in compiled code, writing straight into the pool's buffers. Every engine implements
:class:`Engine` (``props``, ``num_envs``, ``bind``, ``step_all`` -> :class:`StepAllResult`,
``run``, ``call``, ``set_attr``, ``close``; an :class:`AsyncEngine` also ``start``,
``collect``, ``take_finished`` and ``discard``), built by a :class:`NativeFactory`. Engines
live with their env families (``envhive.kernels``, ``envhive.envs.mujoco``,
``envhive.envs.torch``, ``envhive.envs.atari``, ``envhive.envs.envpool``), which register their kinds and ids here
(:func:`register_kind`, :class:`EngineKind`; looked up with :func:`compiled_ids`,
:func:`compiled_env`, :func:`native_factory`).

The package also holds what engines share (private modules, imported lazily so that importing
envhive never imports numba): the op sequence of batched engines (``_batched``), the numba
helpers (``_compiled``: the compiled op rules, numpy's pairwise sum and clip, the
address-to-pointer intrinsic; ``_jit``: the compiled-code cache), and :func:`column_index`,
which names the columns of a family's parameter and address arrays.

``TorchBatchedEnv`` and ``TorchEngine`` moved to their family, ``envhive.envs.torch``; they
are still found here under their old names.

Examples:
    >>> import envhive
    >>> from envhive.engines import Engine, compiled_env, compiled_ids
    >>> compiled_env("envhive/HalfCheetah-v5").engine
    'mujoco'
    >>> "envhive/Pendulum-v1" in compiled_ids()
    True
    >>> env = envhive.make("envhive/CartPole-v1", num_envs=2)
    >>> isinstance(env._pool.executor._engine, Engine)
    True
    >>> env.close()
"""

from typing import Any

from envhive.engines._columns import column_index
from envhive.engines._protocol import (
    AsyncEngine,
    CEntry,
    Engine,
    HasCEntry,
    NativeFactory,
    StepAllResult,
    TakesBatchSize,
)
from envhive.engines._registry import (
    CompiledEnv,
    EngineKind,
    class_factory,
    compiled_env,
    compiled_ids,
    engine_kind,
    engine_kinds,
    family_of,
    load_entry_point,
    native_factory,
    register_kind,
)

__all__ = [
    "Engine",
    "AsyncEngine",
    "CEntry",
    "HasCEntry",
    "NativeFactory",
    "StepAllResult",
    "TakesBatchSize",
    "CompiledEnv",
    "EngineKind",
    "register_kind",
    "engine_kind",
    "engine_kinds",
    "native_factory",
    "class_factory",
    "compiled_ids",
    "compiled_env",
    "family_of",
    "load_entry_point",
    "column_index",
    "TorchBatchedEnv",
    "TorchEngine",
]

#: Public names that moved to their family: found by name on first use (this package imports
#: no family).
_MOVED = {
    "TorchBatchedEnv": "envhive.envs.torch:TorchBatchedEnv",
    "TorchEngine": "envhive.envs.torch:TorchEngine",
}


def __getattr__(name: str) -> Any:
    where = _MOVED.get(name)
    if where is None:
        raise AttributeError(f"module 'envhive.engines' has no attribute {name!r}")
    value = load_entry_point(where)
    globals()[name] = value
    return value
