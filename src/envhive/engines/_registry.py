"""The one registry of compiled envs: engine kinds, and the ids each kind runs.

An *engine kind* is a family of batched engines the ``native`` executor drives (classic-control
kernels, compiled MuJoCo, torch batched envs, ...). This module names none of them: each family
registers itself with :func:`register_kind` and an :class:`EngineKind` (the function that turns
one of its ids into a :class:`~envhive.engines.NativeFactory`, what ``envhive.make`` hands to
every executor; the package its engine needs, which ``envhive list`` checks without importing
it; optionally the peers ``envhive bench`` measures it against and a function that lists its
ids). Every id is a :class:`CompiledEnv` naming its kind. ``envhive.make``,
``envhive.list_envs``, gymnasium's registration, ``executor="auto"``, ``envhive bench``/``list``
and the MuJoCo engine's family lookup read only this module: adding a kind is one family
module, with no branch anywhere else.

Families are found, not listed (:func:`family_modules`): on the first lookup the registry
imports ``envhive.kernels._family`` and every ``envhive.envs.<name>._family``, light modules
(they import no numba, torch, ale_py or mujoco) whose import calls :func:`register_kind`. A
family installed as its own package declares its module in the entry-point group
``envhive.families``; those are imported the first time a lookup misses (an unknown id or
kind) or every id is listed, so that ``import envhive`` does not read every installed
package's metadata.

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
    >>> "envhive.kernels._family" in family_modules()
    True
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envhive.errors import ConfigError

if TYPE_CHECKING:
    from envhive.engines._protocol import NativeFactory

__all__ = [
    "class_factory",
    "CompiledEnv",
    "EngineKind",
    "register_kind",
    "engine_kind",
    "engine_kinds",
    "compiled_ids",
    "compiled_env",
    "family_of",
    "family_modules",
    "load_entry_point",
    "native_factory",
    "FAMILY_GROUP",
]

#: The entry-point group of families installed as their own packages: each entry names a
#: module whose import calls :func:`register_kind` (``my_family = "my_package._family"``).
FAMILY_GROUP = "envhive.families"
#: Where envhive's own families live: a family package itself (``envhive.kernels``), or a
#: package whose subpackages are families (``envhive.envs``: atari, mujoco, torch, ...).
_FAMILY_ROOTS = (("envhive.kernels", False), ("envhive.envs", True))


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
#: ``(env_cls, env_kwargs, max_episode_steps) -> NativeFactory | None``: the factory of an env
#: class a kind takes as it is, ``None`` for a class that is not the kind's.
ClassFactoryBuilder = Callable[[type, dict[str, Any], "int | None"], "NativeFactory | None"]
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
        classes: ``"module:attr"`` of a :data:`ClassFactoryBuilder`, for a kind whose env
            classes ``envhive.make`` takes as they are (``make(MyTorchEnv, 64)``): given a
            class, the factory when it is one of the kind's, else ``None`` (its module must
            be light to import: it is asked about every class given to ``make``).

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
    classes: str | None = None


_KINDS: dict[str, EngineKind] = {}
_COMPILED: dict[str, CompiledEnv] = {}
_PENDING: list[EngineKind] = []  # kinds whose entries are listed lazily, not yet listed
_BUILTIN_KINDS: set[str] = set()  # the kinds envhive's own families registered
# What was looked for: envhive's own families, the installed ones (entry points); "busy":
# the calling thread is importing families now (their register_kind calls must not wait).
_FOUND = {"own": False, "installed": False, "busy": False}
_LOCK = threading.RLock()


def family_modules() -> list[str]:
    """envhive's own family modules: ``envhive.kernels._family`` and every
    ``envhive.envs.<name>._family``, found in the package directories without importing
    the packages.

    Examples:
        >>> "envhive.envs.mujoco._family" in family_modules()
        True
    """
    found = []
    for root, holds_families in _FAMILY_ROOTS:
        spec = importlib.util.find_spec(root)
        places = list(spec.submodule_search_locations or []) if spec is not None else []
        packages = [(root, places)]
        if holds_families:
            packages = [(f"{root}.{info.name}", [os.path.join(p, info.name) for p in places])
                        for info in pkgutil.iter_modules(places) if info.ispkg]
        for package, dirs in packages:
            if any(info.name == "_family" for info in pkgutil.iter_modules(dirs)):
                found.append(f"{package}._family")
    return found


def _discover() -> None:
    """Import envhive's own family modules (once, before the first lookup). One of them
    failing to import is a bug in envhive: it raises, and the next lookup tries again."""
    if _FOUND["own"]:
        return
    with _LOCK:  # another thread's first lookup waits for the whole registry
        if _FOUND["own"] or _FOUND["busy"]:
            return
        _FOUND["busy"] = True
        try:
            for module in family_modules():
                before = set(_KINDS)
                importlib.import_module(module)
                _BUILTIN_KINDS.update(set(_KINDS) - before)
        finally:
            _FOUND["busy"] = False
        _FOUND["own"] = True


def _load_installed() -> None:
    """Import the family modules installed packages declare (``FAMILY_GROUP``), once. One
    that fails is skipped with a warning: a broken package must not stop every other env."""
    _discover()
    if _FOUND["installed"]:
        return
    with _LOCK:
        if _FOUND["installed"] or _FOUND["busy"]:
            return
        _FOUND["busy"] = True
        try:
            from importlib.metadata import entry_points

            for ep in entry_points(group=FAMILY_GROUP):
                try:
                    ep.load()
                except Exception as err:
                    warnings.warn(f"envhive: the env family {ep.name!r} ({ep.value}) did not "
                                  f"load: {type(err).__name__}: {err}", RuntimeWarning, stacklevel=3)
        finally:
            _FOUND["busy"] = False
        _FOUND["installed"] = True


def register_kind(kind: EngineKind, entries: Iterable[CompiledEnv] = ()) -> None:
    """Register an engine kind and its ids (or, with ``kind.entries``, how to list them).

    A family module calls it when imported (see the module docstring). envhive's own families
    are registered first, so a name taken by one of them is refused whatever the order.

    Examples:
        >>> engine_kind("torch").factory
        'envhive.envs.torch._factory:torch_factory'
    """
    _discover()
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


def _listed(prefix: str | None = None, installed: bool = True) -> dict[str, CompiledEnv]:
    """Every entry (of envhive's own families only, unless ``installed``), after listing the
    kinds whose entries are listed lazily (with ``prefix``: only the kinds whose ids may start
    with it)."""
    _load_installed() if installed else _discover()
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
    _discover()
    kind = _KINDS.get(name)
    if kind is None:
        _load_installed()
        kind = _KINDS.get(name)
    if kind is None:
        raise ConfigError(f"unknown engine kind {name!r}; registered: {sorted(_KINDS)}")
    return kind


def engine_kinds() -> list[str]:
    """The names of the registered kinds, in registration order.

    Examples:
        >>> engine_kinds()[:5]
        ['kernel', 'atari', 'envpool', 'mujoco', 'torch']
    """
    _load_installed()
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
    _discover()
    kind = _KINDS.get(engine) if engine is not None else None
    listed = _listed(prefix if prefix is not None else kind.prefix if kind is not None else None)
    return sorted(i for i, e in listed.items() if (engine is None or e.engine == engine)
                  and (prefix is None or i.startswith(prefix)))


def builtin_compiled_ids() -> list[str]:
    """The compiled ids of envhive's own families (none from installed packages), sorted:
    what ``import envhive`` registers with gymnasium.

    Examples:
        >>> "envhive/Pendulum-v1" in builtin_compiled_ids()
        True
    """
    listed = _listed("envhive/", installed=False)
    return sorted(i for i, e in listed.items() if e.engine in _BUILTIN_KINDS and i.startswith("envhive/"))


def compiled_env(env_id: str) -> CompiledEnv | None:
    """The registration of ``env_id``, or ``None`` if envhive does not compile it.

    Examples:
        >>> compiled_env("envhive/CartPole-v1").entry_point
        'envhive.kernels.classic._cartpole:CartPoleKernel'
    """
    _discover()
    entry = _COMPILED.get(env_id)
    return entry if entry is not None else _listed(env_id).get(env_id)


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


def class_factory(
    env_cls: type, env_kwargs: dict[str, Any] | None, max_episode_steps: int | None
) -> NativeFactory | None:
    """The factory of an env class a kind takes as it is (:attr:`EngineKind.classes`), or
    ``None`` when no kind takes ``env_cls``.

    Examples:
        >>> from envhive.envs.torch import TorchCartPole
        >>> class_factory(TorchCartPole, None, None).preferred_executor
        'native'
        >>> class_factory(int, None, None) is None
        True
    """
    _discover()
    for kind in list(_KINDS.values()):
        if kind.classes is not None:
            build: ClassFactoryBuilder = load_entry_point(kind.classes)
            factory = build(env_cls, dict(env_kwargs or {}), max_episode_steps)
            if factory is not None:
                return factory
    return None


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
    """The compiled family an entry names (:attr:`CompiledEnv.family`) for exactly the env
    class ``env_cls`` (its entry point), or ``None``.

    Examples:
        >>> from envhive.envs.mujoco import HalfCheetahEnv, HumanoidEnv
        >>> family_of(HalfCheetahEnv).__name__, family_of(HumanoidEnv)
        ('HalfCheetahFamily', None)
    """
    if not _FAMILIES:
        for e in _listed().values():
            if e.family is not None:
                _FAMILIES[load_entry_point(e.entry_point)] = e.family
    family = _FAMILIES.get(env_cls)
    return None if family is None else load_entry_point(family)
