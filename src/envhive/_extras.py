"""Optional dependencies (extras): imported on first use, with an error that names the extra.

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
from types import ModuleType

from envhive.errors import ConfigError

__all__ = ["require"]


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``; if it is missing, say which envhive extra has it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"{feature} needs the {module} package: pip install 'envhive[{extra}]'"
        ) from None
