"""Compiled engines: the protocol the ``native`` executor drives, and the registry of compiled ids.

An *engine* owns a whole batch of compiled envs and performs the pool's ops (``envhive._ops``)
on them in compiled code, writing straight into the pool's buffers. Every engine implements
:class:`Engine` (``props``, ``num_envs``, ``bind``, ``step_all`` -> :class:`StepAllResult`,
``run``, ``call``, ``set_attr``, ``close``), built by a :class:`NativeFactory`. Engine kinds
and the ids each runs are registered once, here (:func:`register_kind`, :class:`EngineKind`,
:func:`compiled_ids`, :func:`compiled_env`, :func:`native_factory`).

The package also holds what compiled engines share (private modules, imported lazily so that
importing envhive never imports numba): the ``libmujoco`` loader (``_libmujoco``), and the
numba helpers (``_compiled``: the compiled op rules, numpy's pairwise sum and clip, the
address-to-pointer intrinsic), and :func:`column_index`, which names the columns of a family's
parameter and address arrays.

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

from envhive.engines._columns import column_index
from envhive.engines._protocol import AsyncEngine, Engine, NativeFactory, StepAllResult
from envhive.engines._registry import (
    CompiledEnv,
    EngineKind,
    compiled_env,
    compiled_ids,
    engine_kind,
    engine_kinds,
    family_of,
    load_entry_point,
    native_factory,
    register_kind,
)
from envhive.engines._torch import TorchBatchedEnv, TorchEngine

__all__ = [
    "Engine",
    "AsyncEngine",
    "NativeFactory",
    "StepAllResult",
    "CompiledEnv",
    "EngineKind",
    "register_kind",
    "engine_kind",
    "engine_kinds",
    "native_factory",
    "compiled_ids",
    "compiled_env",
    "family_of",
    "load_entry_point",
    "column_index",
    "TorchBatchedEnv",
    "TorchEngine",
]
