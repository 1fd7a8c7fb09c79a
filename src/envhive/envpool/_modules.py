"""What each family module of ``envhive.envpool`` holds: its spec and pool classes.

A family envhive runs itself (Atari, classic control, MuJoCo gym) defines its classes from
:data:`~envhive.envpool._families.OWN` (no envpool needed). Any other name a family module is
asked for (``DmcCheetahEnvSpec``, ``ProcgenGymnasiumEnvPool``, the MuJoCo ``Pixel`` classes) is
made on first use from EnvPool's own module of that family: the spec class takes EnvPool's
config keys and defaults, the pool classes are envhive's.

Examples:
    >>> from envhive.envpool.atari import AtariEnvSpec, AtariGymnasiumEnvPool
    >>> AtariEnvSpec.gen_config().stack_num, AtariGymnasiumEnvPool.__module__
    (4, 'envhive.envpool.atari')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from envhive.envpool._families import COMMON, OWN
from envhive.envpool._pools import DMEnvPool, GymnasiumEnvPool, pool_class
from envhive.envpool._spec import EnvSpec, spec_class

__all__ = ["own_classes", "foreign_getattr"]

_POOLS = (("DMEnvPool", DMEnvPool), ("GymnasiumEnvPool", GymnasiumEnvPool))


def own_classes(family: str) -> dict[str, Any]:
    """The spec and pool classes of every :data:`OWN` class of ``family``."""
    from envhive.envpool.registration import base_path

    module = f"envhive.envpool.{family}"
    out: dict[str, Any] = {}
    for name, fam in OWN.items():
        if fam.family != family:
            continue
        config = {**COMMON, "base_path": base_path, **fam.config}
        out[name] = spec_class(name, family, list(config), list(config.values()))
        stem = name.removesuffix("EnvSpec")
        for suffix, base in _POOLS:
            out[stem + suffix] = pool_class(stem + suffix, base, module)
    return out


def _foreign_spec(family: str, name: str) -> type[EnvSpec]:
    from envhive.envs.envpool._real import envpool_module, real_envpool

    envpool_module()
    with real_envpool():
        real = getattr(importlib.import_module(f"envpool.{family}"), name)
    return spec_class(name, family, list(real._config_keys), list(real._default_config_values))


def foreign_getattr(family: str, namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``family``: EnvPool's class names, made on first use."""
    module = f"envhive.envpool.{family}"

    def getattr_(name: str) -> Any:
        if name.endswith("EnvSpec"):
            value: Any = _foreign_spec(family, name)
        else:
            for suffix, base in _POOLS:
                if name.endswith(suffix) and not name.startswith("_"):
                    value = pool_class(name, base, module)
                    break
            else:
                raise AttributeError(f"module {module!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    return getattr_
