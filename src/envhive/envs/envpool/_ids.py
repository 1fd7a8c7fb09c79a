"""EnvPool's registry, read as data: every id EnvPool registers, without importing envpool.

``import envpool`` takes seconds (it imports every family's compiled module, and matplotlib
for Jumanji's renderer), so listing ids must not do it. EnvPool registers its ids in plain
Python modules (``envpool/<family>/registration.py``, named by ``envpool/entry.py``) that
only call ``envpool.registration.register(...)``. They are read here by running each of them
in a namespace of its own, where ``envpool.registration`` is a stand-in that records every
``register`` call (and ``asset_base_path`` answers as EnvPool's would), and any other module
of the ``envpool`` package they import (MyoSuite's task table) is run the same way. Nothing is
added to ``sys.modules``: the real ``envpool`` package is imported only when an EnvPool
engine is built.

A family whose registration cannot be read this way (a future EnvPool) is skipped with a
warning; its ids are then unknown to envhive (``envpool.make`` of EnvPool itself is not
affected).

Examples:
    >>> regs = registrations()
    >>> not regs or regs["CartPole-v1"].import_path == "envpool.classic_control"
    True
    >>> not regs or regs["Pong-v5"].spec_cls
    'AtariEnvSpec'
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import os
import types
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envhive.engines._registry import CompiledEnv

__all__ = ["Registration", "registrations", "envpool_dir", "envpool_entries", "PREFIX", "family_of_path",
           "asset_base_path"]

#: envhive's ids for EnvPool's engines: ``envpool/<EnvPool id>``.
PREFIX = "envpool/"


@dataclass(frozen=True)
class Registration:
    """One EnvPool id, as ``envpool.registration.register`` received it.

    Attributes:
        id: EnvPool's id (``"CheetahRun-v1"``; an alias is an id of its own).
        import_path: EnvPool's family module (``"envpool.mujoco.dmc"``).
        spec_cls: the family's spec class name (``"DmcCheetahEnvSpec"``).
        dm_cls: its dm_env pool class name.
        gymnasium_cls: its gymnasium pool class name.
        kwargs: the id's config values (``task``, ``max_episode_steps``, ``base_path``, ...).
    """

    id: str
    import_path: str
    spec_cls: str
    dm_cls: str
    gymnasium_cls: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def max_num_players(self) -> int:
        """Players per env (``>1``: a multi-player id, run on envhive's agent axis)."""
        return int(self.kwargs.get("max_num_players", 1))


def envpool_dir() -> str | None:
    """The installed ``envpool`` package's directory, found without importing it."""
    spec = importlib.util.find_spec("envpool")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


def asset_base_path() -> str:
    """EnvPool's ``base_path``, found as EnvPool finds it: ``$ENVPOOL_ASSETS_PATH``, else the
    package itself when it holds every asset, else the ``envpool_assets`` package ("" without
    envpool)."""
    override = os.environ.get("ENVPOOL_ASSETS_PATH")
    if override:
        return os.path.abspath(override)
    root = envpool_dir()
    if root is None:
        return ""
    local = ("atari/roms", "gfootball/assets", "mujoco/assets_dmc", "procgen/assets", "vizdoom/maps")
    if all(os.path.exists(os.path.join(root, p)) for p in local):
        return os.path.abspath(root)
    spec = importlib.util.find_spec("envpool_assets")
    if spec is not None and spec.submodule_search_locations:
        return os.path.abspath(next(iter(spec.submodule_search_locations)))
    return os.path.abspath(root)


def family_of_path(import_path: str) -> str:
    """The family of an EnvPool module path: its part after ``envpool.``.

    Examples:
        >>> family_of_path("envpool.mujoco.dmc")
        'mujoco.dmc'
    """
    return import_path.removeprefix("envpool.")


class _Reader:
    """Runs EnvPool's registration modules in namespaces of their own (see the module docstring)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.found: list[Registration] = []
        stand_in = types.ModuleType("envpool.registration")
        stand_in.register = self._register  # type: ignore[attr-defined]
        stand_in.asset_base_path = self._asset_base_path  # type: ignore[attr-defined]
        stand_in.base_path = asset_base_path()  # type: ignore[attr-defined]
        stand_in.package_base_path = root  # type: ignore[attr-defined]
        self._modules: dict[str, types.ModuleType] = {"envpool.registration": stand_in}
        self._builtins = dict(vars(builtins))
        self._builtins["__import__"] = self._import

    def _register(self, task_id: str, import_path: str, spec_cls: str, dm_cls: str,
                  gymnasium_cls: str, aliases: Any = (), **kwargs: Any) -> None:
        for alias in (task_id, *aliases):
            self.found.append(Registration(alias, import_path, spec_cls, dm_cls, gymnasium_cls, dict(kwargs)))

    def _asset_base_path(self, package: str, local: str) -> str:
        # EnvPool's rule for split asset packages: an override, the wheel's own copy, the
        # assets package, else the package itself.
        override = os.environ.get("ENVPOOL_ASSETS_PATH")
        if override:
            return os.path.abspath(override)
        if os.path.exists(os.path.join(self.root, local)):
            return self.root
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            return os.path.abspath(next(iter(spec.submodule_search_locations)))
        return asset_base_path()

    def _import(self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                level: int = 0) -> Any:
        if level:
            package = (globals or {}).get("__envhive_package__", "")
            base = package.rsplit(".", level - 1)[0] if level > 1 else package
            name = f"{base}.{name}" if name else base
        if name == "envpool" or name.startswith("envpool."):
            if not fromlist:  # ``import envpool.x`` binds the real package: not in a reader
                raise ImportError(f"{name}: EnvPool's registry reader runs `from envpool... import` only")
            return self.load(name)
        return __import__(name, globals, locals, fromlist, 0)

    def load(self, name: str) -> types.ModuleType:
        """Run EnvPool's module ``name`` (``envpool.x.y``) in a namespace of its own."""
        if name in self._modules:
            return self._modules[name]
        path = os.path.join(self.root, *name.split(".")[1:])
        package = os.path.isdir(path)
        path = os.path.join(path, "__init__.py") if package else path + ".py"
        module = types.ModuleType(name)
        module.__file__ = path
        # ``__package__`` stays empty: importlib.resources would import the real package for
        # it (MyoSuite's task table tries the package's own resources first).
        module.__dict__["__envhive_package__"] = name if package else name.rpartition(".")[0]
        module.__dict__["__builtins__"] = self._builtins
        self._modules[name] = module
        with open(path, encoding="utf-8") as f:
            code = compile(f.read(), path, "exec")
        exec(code, module.__dict__)
        return module


def _registration_modules(root: str) -> list[str]:
    """The modules ``envpool/entry.py`` imports (one registration module per family)."""
    with open(os.path.join(root, "entry.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
            if alias.name.startswith("envpool.")]


_CACHE: dict[str, Registration] | None = None


def registrations() -> dict[str, Registration]:
    """Every id the installed EnvPool registers (``{}`` without envpool), read once.

    Examples:
        >>> all(r.id == k for k, r in registrations().items())
        True
    """
    global _CACHE
    if _CACHE is None:
        root = envpool_dir()
        found: dict[str, Registration] = {}
        if root is not None and os.path.isfile(os.path.join(root, "entry.py")):
            reader = _Reader(root)
            for name in _registration_modules(root):
                try:
                    reader.load(name)
                except Exception as err:  # a registration this reader cannot run: skipped
                    warnings.warn(f"envhive: EnvPool's {name} could not be read ({type(err).__name__}: "
                                  f"{err}); its ids are not listed", RuntimeWarning, stacklevel=2)
            found = {r.id: r for r in reader.found}
        _CACHE = found
    return _CACHE


def envpool_entries() -> list[CompiledEnv]:
    """The ``"envpool"`` engine kind's ids: ``envpool/<id>`` for every id EnvPool registers
    (none without envpool), listed the first time an ``envpool/`` id is looked up.

    Examples:
        >>> all(e.id.startswith("envpool/") for e in envpool_entries())
        True
    """
    return [CompiledEnv(PREFIX + r.id, "envpool", "envhive.envs.envpool._single:EnvPoolEnv", r.id)
            for r in registrations().values()]
