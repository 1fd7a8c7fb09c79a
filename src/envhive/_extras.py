"""Optional dependencies (extras): imported on first use, with an error that names the extra;
and packages whose public names are imported on first use (:func:`lazy_exports`).

Examples:
    >>> require("numpy", "test", "arrays").__name__
    'numpy'
    >>> try:
    ...     require("no_such_module_here", "torch", "namespace='torch'")
    ... except Exception as err:
    ...     print(err)
    namespace='torch' needs the no_such_module_here package: pip install 'envhive[torch]'
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from envhive.errors import ConfigError

__all__ = ["require", "lazy_exports"]


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``; if it is missing, say which envhive extra has it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"{feature} needs the {module} package: pip install 'envhive[{extra}]'"
        ) from None


def lazy_exports(package: str, names: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for public names imported on first use:
    ``names`` maps each to ``"module:attr"``. A family package (kernels, MuJoCo) stays light
    to import (the engine registry imports its ``_family`` module at every start) while
    ``from envhive.kernels import CartPoleKernel`` still works.

    Examples:
        >>> getattr_, dir_ = lazy_exports("pkg", {"Path": "pathlib:Path"})
        >>> getattr_("Path").__name__, "Path" in dir_()
        ('Path', True)
    """

    def __getattr__(name: str) -> Any:
        where = names.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = where.partition(":")
        value = getattr(importlib.import_module(module), attr)
        if package in sys.modules:
            setattr(sys.modules[package], name, value)  # found directly from now on
        return value

    def __dir__() -> list[str]:
        module = sys.modules.get(package)
        return sorted({*(vars(module) if module is not None else ()), *names})

    return __getattr__, __dir__
