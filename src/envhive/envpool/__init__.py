"""EnvPool's Python API over envhive: ``import envhive.envpool as envpool``.

EnvPool client code runs unchanged: ``envpool.make_gym``, ``make_gymnasium``, ``make_dm``,
``make(task_id, env_type=...)``, ``make_spec``, ``list_all_envs``, ``register``, the
``registration`` and ``python.protocol`` modules and each family's module with its spec and
pool classes (``envpool.atari.AtariEnvSpec``, ...). The pools are envhive pools (any executor,
async ``send``/``recv``): Atari, classic control and MuJoCo gym v5 ids run on envhive's own
engines (no envpool needed), every other EnvPool id on EnvPool's engine wrapped as an envhive
engine (the ``envpool`` extra). docs/envpool.md ("Coming from EnvPool") says what differs and
why.

For code you do not edit (``import envpool`` inside it), :func:`install` makes ``envpool`` and
its submodules resolve to this package in the running process.

Examples:
    >>> import envhive.envpool as envpool
    >>> env = envpool.make_gym("CartPole-v1", num_envs=4, seed=0)
    >>> obs, info = env.reset()
    >>> obs.shape, info["env_id"].tolist()
    ((4, 4), [0, 1, 2, 3])
    >>> obs, rew, term, trunc, info = env.step(np.zeros(4, np.int32))
    >>> rew.dtype.name, env.action_space
    ('float32', Discrete(2))
    >>> env.close()
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

import numpy as np

from envhive.envpool.python.protocol import DMEnvPool, EnvPool, EnvSpec, GymnasiumEnvPool
from envhive.envpool.registration import (
    list_all_envs,
    make,
    make_dm,
    make_gym,
    make_gymnasium,
    make_spec,
    register,
)
from envhive.envs.envpool._real import STASH

#: The EnvPool release whose API this package follows.
__version__ = "1.2.5"
__all__ = ["register", "make", "make_dm", "make_gym", "make_gymnasium", "make_spec", "list_all_envs",
           "EnvSpec", "EnvPool", "DMEnvPool", "GymnasiumEnvPool", "install"]


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``envpool`` and ``envpool.*`` as this package's modules (the same objects)."""

    #: Marks the finder for ``envs.envpool._real``, which sets it aside while EnvPool runs.
    envhive_envpool_alias = True

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "envpool" and not fullname.startswith("envpool."):
            return None
        own = "envhive." + fullname
        if importlib.util.find_spec(own) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module("envhive." + spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module is envhive's, already imported."""


_ALIAS = _Alias()


def install() -> None:
    """Make ``import envpool`` (and ``envpool.atari``, ``envpool.registration``, ...) resolve to
    ``envhive.envpool`` in this process: for code that imports envpool itself.

    A real ``envpool`` imported before stays what it was (and EnvPool's engines keep using it
    under its own name, so they work either way).

    Examples:
        >>> import envhive.envpool
        >>> envhive.envpool.install()
        >>> import envpool, envpool.atari
        >>> envpool is envhive.envpool, envpool.atari.AtariEnvSpec.__module__
        (True, 'envhive.envpool.atari')
        >>> envhive.envpool.uninstall()
    """
    if _ALIAS not in sys.meta_path:
        sys.meta_path.insert(0, _ALIAS)
    for name in [m for m in sys.modules if m == "envpool" or m.startswith("envpool.")]:
        if not sys.modules[name].__name__.startswith("envhive."):
            sys.modules[STASH + name] = sys.modules.pop(name)


def uninstall() -> None:
    """Undo :func:`install`: ``envpool`` is EnvPool again (if installed).

    Examples:
        >>> uninstall()
    """
    if _ALIAS in sys.meta_path:
        sys.meta_path.remove(_ALIAS)
    for name in [m for m in sys.modules if m == "envpool" or m.startswith("envpool.")]:
        if sys.modules[name].__name__.startswith("envhive."):
            del sys.modules[name]
    for name in [m for m in sys.modules if m.startswith(STASH)]:
        sys.modules[name.removeprefix(STASH)] = sys.modules.pop(name)


_ = np  # the doctest above uses np from this namespace
