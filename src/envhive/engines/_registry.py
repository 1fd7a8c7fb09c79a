"""The one registry of compiled envs: engine kinds, and the ids each kind runs.

An *engine kind* is a family of batched engines the ``native`` executor drives (classic-control
kernels, compiled MuJoCo, torch batched envs, ...). Each kind registers itself once, here,
with an :class:`EngineKind`: the function that turns one of its ids into a
:class:`~envhive.engines.NativeFactory` (what ``envhive.make`` hands to every executor), the
package its engine needs (``envhive list`` checks it without importing it), and, optionally,
the peers ``envhive bench`` measures it against and a function that lists its ids. Every id
is a :class:`CompiledEnv` naming its kind. ``envhive.make``, ``envhive.list_envs``,
gymnasium's registration, ``executor="auto"``, ``envhive bench``/``list`` and the MuJoCo
engine's family lookup read only this module: adding a kind is one :func:`register_kind` call
and a module, with no branch anywhere else.

Entries name their code as ``"module:attr"`` strings, imported on first use: kernels need
numba, which is slow to import, and most programs use a few ids.

Examples:
    >>> compiled_env("envhive/Ant-v5").family
    'envhive.envs.mujoco._families:AntFamily'
    >>> "envhive/CartPole-v1" in compiled_ids("kernel")
    True
    >>> compiled_env("CartPole-v1") is None
    True
    >>> engine_kind("kernel").needs
    'numba'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envhive.errors import ConfigError

if TYPE_CHECKING:
    from envhive.engines._protocol import NativeFactory

__all__ = [
    "CompiledEnv",
    "EngineKind",
    "register_kind",
    "engine_kind",
    "engine_kinds",
    "compiled_ids",
    "compiled_env",
    "family_of",
    "load_entry_point",
    "native_factory",
]


@dataclass(frozen=True)
class CompiledEnv:
    """One compiled id.

    Attributes:
        id: the id given to ``envhive.make`` (``"envhive/CartPole-v1"``).
        engine: the name of its :class:`EngineKind` (``"kernel"``, ``"mujoco"``, ...).
        entry_point: ``"module:attr"`` of what the kind builds the env from (a kernel class,
            an env class, a torch batched env class, ...), or the kind's own name for it.
        family: ``"module:attr"`` of the compiled step of the env class (MuJoCo), or any
            second name the kind needs; ``None`` if none.
        kwargs: default keywords of the id (``make(env_kwargs=)`` overrides them).

    Examples:
        >>> CompiledEnv("envhive/X-v0", "kernel", "pkg.mod:XKernel").family is None
        True
    """

    id: str
    engine: str
    entry_point: str
    family: str | None = None
    kwargs: tuple[tuple[str, Any], ...] = ()


#: ``(entry, env_kwargs, max_episode_steps) -> NativeFactory``: how a kind builds the factory
#: of one of its ids (``env_kwargs`` already merged over ``entry.kwargs``).
FactoryBuilder = Callable[[CompiledEnv, dict[str, Any], "int | None"], "NativeFactory"]
#: ``(entry, num_envs) -> [(runner label, measured id, build)]``: the peers ``envhive bench``
#: measures an id against, each ``build()`` returning a gymnasium-style vector env.
PeerBuilder = Callable[[CompiledEnv, int], list[tuple[str, str, Callable[[], Any]]]]


@dataclass(frozen=True)
class EngineKind:
    """A kind of batched engine, registered once with :func:`register_kind`.

    Attributes:
        name: what :attr:`CompiledEnv.engine` says (``"kernel"``).
        factory: ``"module:attr"`` of a :data:`FactoryBuilder`.
        needs: the top-level module its engine imports (``"numba"``): ``envhive list``
            marks its ids unbuildable where that module is missing, without importing it.
        peers: ``"module:attr"`` of a :data:`PeerBuilder` (``None``: gymnasium's
            ``SyncVectorEnv`` over the id without its ``envhive/`` prefix).
        entries: ``"module:attr"`` of a function returning the kind's :class:`CompiledEnv`
            entries, called the first time ids are listed (for kinds whose ids come from
            data, e.g. the ROMs a package ships; it must not import ``needs``); ``None``:
            the entries are given to :func:`register_kind`.
        prefix: every id of the kind starts with it (``"envpool/"``); its lazy ``entries``
            are then listed only when such an id is looked up or every id is listed
            (``None``: whenever any id is).

    Examples:
        >>> EngineKind("x", "pkg.mod:factory", "numpy").peers is None
        True
    """

    name: str
    factory: str
    needs: str
    peers: str | None = None
    entries: str | None = None
    prefix: str | None = None


_KINDS: dict[str, EngineKind] = {}
_COMPILED: dict[str, CompiledEnv] = {}
_PENDING: list[EngineKind] = []  # kinds whose entries are listed lazily, not yet listed


def register_kind(kind: EngineKind, entries: Iterable[CompiledEnv] = ()) -> None:
    """Register an engine kind and its ids (or, with ``kind.entries``, how to list them).

    Examples:
        >>> engine_kind("torch").factory
        'envhive.engines._torch:torch_factory'
    """
    if kind.name in _KINDS and _KINDS[kind.name] != kind:
        raise ConfigError(f"engine kind {kind.name!r} is already registered as {_KINDS[kind.name]}")
    _KINDS[kind.name] = kind
    for e in entries:
        _add(e)
    if kind.entries is not None:
        _PENDING.append(kind)


def _add(entry: CompiledEnv) -> None:
    if entry.engine not in _KINDS:
        raise ConfigError(f"{entry.id}: unknown engine kind {entry.engine!r}; register it first")
    _COMPILED[entry.id] = entry


def _listed(prefix: str | None = None) -> dict[str, CompiledEnv]:
    """Every entry, after listing the kinds whose entries are listed lazily (with ``prefix``:
    only the kinds whose ids may start with it)."""
    for kind in list(_PENDING):
        if prefix is not None and kind.prefix is not None and not (
            prefix.startswith(kind.prefix) or kind.prefix.startswith(prefix)
        ):
            continue
        _PENDING.remove(kind)
        assert kind.entries is not None
        for e in load_entry_point(kind.entries)():
            _add(e)
    return _COMPILED


def engine_kind(name: str) -> EngineKind:
    """The registered kind ``name``.

    Examples:
        >>> engine_kind("mujoco").needs
        'mujoco'
    """
    kind = _KINDS.get(name)
    if kind is None:
        raise ConfigError(f"unknown engine kind {name!r}; registered: {sorted(_KINDS)}")
    return kind


def engine_kinds() -> list[str]:
    """The names of the registered kinds, in registration order.

    Examples:
        >>> engine_kinds()[:3]
        ['kernel', 'torch', 'mujoco']
    """
    return list(_KINDS)


def compiled_ids(engine: str | None = None, prefix: str | None = None) -> list[str]:
    """The compiled ids (of one engine kind, or all; with ``prefix``, those starting with it),
    sorted.

    Examples:
        >>> compiled_ids("mujoco")[:2]
        ['envhive/Ant-v5', 'envhive/HalfCheetah-v5']
        >>> compiled_ids(prefix="envhive/Cart")
        ['envhive/CartPole-v1']
    """
    kind = _KINDS.get(engine) if engine is not None else None
    listed = _listed(prefix if prefix is not None else kind.prefix if kind is not None else None)
    return sorted(i for i, e in listed.items() if (engine is None or e.engine == engine)
                  and (prefix is None or i.startswith(prefix)))


def compiled_env(env_id: str) -> CompiledEnv | None:
    """The registration of ``env_id``, or ``None`` if envhive does not compile it.

    Examples:
        >>> compiled_env("envhive/CartPole-v1").entry_point
        'envhive.kernels.classic._cartpole:CartPoleKernel'
    """
    entry = _COMPILED.get(env_id)
    return entry if entry is not None or not _PENDING else _listed(env_id).get(env_id)


def native_factory(
    entry: CompiledEnv, env_kwargs: dict[str, Any] | None, max_episode_steps: int | None
) -> NativeFactory:
    """The factory of a compiled id, built by its kind (``env_kwargs`` over the id's own).

    Examples:
        >>> f = native_factory(compiled_env("envhive/CartPole-v1"), None, None)
        >>> f().action_space, f.preferred_executor
        (Discrete(2), 'native')
    """
    build: FactoryBuilder = load_entry_point(engine_kind(entry.engine).factory)
    return build(entry, {**dict(entry.kwargs), **(env_kwargs or {})}, max_episode_steps)


def load_entry_point(entry_point: str) -> Any:
    """Import ``"module:attr"`` and return the attribute.

    Examples:
        >>> load_entry_point("envhive.engines._registry:CompiledEnv") is CompiledEnv
        True
    """
    module, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module), attr)


_FAMILIES: dict[Any, Any] = {}


def family_of(env_cls: Any) -> Any | None:
    """The compiled MuJoCo family registered for exactly ``env_cls``, or ``None``.

    Examples:
        >>> from envhive.envs.mujoco import HalfCheetahEnv, HumanoidEnv
        >>> family_of(HalfCheetahEnv).__name__, family_of(HumanoidEnv)
        ('HalfCheetahFamily', None)
    """
    if not _FAMILIES:
        for e in _listed().values():
            if e.engine == "mujoco" and e.family is not None:
                _FAMILIES[load_entry_point(e.entry_point)] = e.family
    family = _FAMILIES.get(env_cls)
    return None if family is None else load_entry_point(family)


# ---------------------------------------------------------------------- the built-in kinds
def _kernel(id: str, entry_point: str) -> CompiledEnv:
    return CompiledEnv(f"envhive/{id}", "kernel", f"envhive.kernels.classic.{entry_point}")


def _mujoco(id: str, env_cls: str, family: str) -> CompiledEnv:
    return CompiledEnv(
        f"envhive/{id}", "mujoco", f"envhive.envs.mujoco:{env_cls}", f"envhive.envs.mujoco.{family}"
    )


register_kind(
    EngineKind("kernel", "envhive.kernels._adapter:kernel_factory", "numba",
               peers="envhive.kernels._adapter:bench_peers"),
    [
        _kernel("CartPole-v1", "_cartpole:CartPoleKernel"),
        _kernel("Pendulum-v1", "_pendulum:PendulumKernel"),
        _kernel("MountainCar-v0", "_mountain_car:MountainCarKernel"),
        _kernel("MountainCarContinuous-v0", "_mountain_car:MountainCarContinuousKernel"),
        _kernel("Acrobot-v1", "_acrobot:AcrobotKernel"),
    ],
)
register_kind(
    EngineKind("torch", "envhive.engines._torch:torch_factory", "torch",
               peers="envhive.engines._torch:bench_peers"),
    [
        CompiledEnv("envhive/TorchCartPole-v1", "torch", "envhive.envs.torch:TorchCartPole"),
        CompiledEnv("envhive/TorchPendulum-v1", "torch", "envhive.envs.torch:TorchPendulum"),
    ],
)
register_kind(
    EngineKind("mujoco", "envhive.envs.mujoco._factory:mujoco_factory", "mujoco"),
    [
        _mujoco("Ant-v5", "AntEnv", "_families:AntFamily"),
        _mujoco("HalfCheetah-v5", "HalfCheetahEnv", "_families:HalfCheetahFamily"),
        _mujoco("Hopper-v5", "HopperEnv", "_families:HopperFamily"),
        _mujoco("Swimmer-v5", "SwimmerEnv", "_families:SwimmerFamily"),
        _mujoco("Walker2d-v5", "Walker2dEnv", "_families:Walker2dFamily"),
        _mujoco("InvertedPendulum-v5", "InvertedPendulumEnv", "_families_small:InvertedPendulumFamily"),
        _mujoco(
            "InvertedDoublePendulum-v5", "InvertedDoublePendulumEnv",
            "_families_small:InvertedDoublePendulumFamily",
        ),
        _mujoco("Reacher-v5", "ReacherEnv", "_families_small:ReacherFamily"),
    ],
)
register_kind(
    EngineKind("atari", "envhive.executors._atari_factory:atari_factory", "ale_py",
               peers="envhive.executors._atari_factory:bench_peers",
               entries="envhive.envs.atari._options:atari_entries"),
)

# Families that register themselves from their package's ``_family.py`` (a light module).
# Until the registry discovers them itself, each is named here.
for _family in ("envhive.envs.envpool._family",):
    importlib.import_module(_family)
