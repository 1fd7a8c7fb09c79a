"""The real ``envpool`` package, even while ``envhive.envpool.install()`` aliases its name.

``envhive.envpool.install()`` makes ``import envpool`` resolve to ``envhive.envpool`` for
client code; EnvPool's engines (this package) need EnvPool itself, whose own code imports its
modules by name (``importlib.import_module("envpool.mujoco.dmc")``). While EnvPool code runs
under :func:`real_envpool`, ``sys.modules``' ``envpool`` entries are EnvPool's (kept aside
under ``_envhive_real_<name>`` otherwise) and the alias finder is off. EnvPool's pools call
no Python import once built, so ``_send``/``_recv`` need no such care.

Examples:
    >>> with real_envpool():
    ...     pass
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from envhive._extras import require

__all__ = ["real_envpool", "envpool_module", "STASH"]

#: Where ``install()`` keeps EnvPool's own modules while the alias holds their names.
STASH = "_envhive_real_"


def _aliased(name: str) -> bool:
    return name == "envpool" or name.startswith("envpool.")


@contextmanager
def real_envpool() -> Iterator[None]:
    """Run EnvPool's Python code with its own module names (see the module docstring)."""
    finders = [f for f in (sys.meta_path or ()) if getattr(f, "envhive_envpool_alias", False)]
    if not finders:
        yield
        return
    for f in finders:
        sys.meta_path.remove(f)
    ours = {k: sys.modules.pop(k) for k in [m for m in sys.modules if _aliased(m)]}
    for key in [m for m in sys.modules if m.startswith(STASH)]:
        sys.modules[key.removeprefix(STASH)] = sys.modules.pop(key)
    try:
        yield
    finally:
        for key in [m for m in sys.modules if _aliased(m)]:
            sys.modules[STASH + key] = sys.modules.pop(key)
        sys.modules.update(ours)
        for f in reversed(finders):
            sys.meta_path.insert(0, f)


_MODULE: Any = None


def envpool_module() -> Any:
    """EnvPool itself (imported once, under :func:`real_envpool`), or the error naming the
    ``envpool`` extra."""
    global _MODULE
    if _MODULE is None:
        with real_envpool():
            _MODULE = require("envpool", "envpool", "EnvPool's engines (envpool/<id> ids)")
    return _MODULE
