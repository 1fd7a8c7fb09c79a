"""Every docstring example in the envhive package runs and prints what it claims."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import envhive

pytestmark = pytest.mark.timeout(300)

# Every module, ``envhive.__main__`` included: importing a module must never run a program.
MODULES = sorted(
    info.name for info in pkgutil.walk_packages(envhive.__path__, prefix="envhive.")
)
# Modules whose docstrings must contain examples (a doctest run on them must not be empty).
MUST_HAVE_EXAMPLES = {
    "envhive", "envhive._make", "envhive._registry", "envhive.frontends._gymnasium", "envhive.frontends._dm_env", "envhive._batch", "envhive._infos", "envhive._pool",
    "envhive._spaces", "envhive._autoreset", "envhive._infos", "envhive.errors",
    "envhive.executors", "envhive.testing", "envhive.engines", "envhive.engines._protocol",
    "envhive.engines._registry", "envhive.engines._compiled", "envhive.envs.mujoco._libmujoco",
    "envhive._books",
}


def test_walk_finds_the_package():
    found = {"envhive", *MODULES}
    assert MUST_HAVE_EXAMPLES <= found, MUST_HAVE_EXAMPLES - found


@pytest.mark.parametrize("name", ["envhive", *MODULES])
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(
        module,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        verbose=False,
        report=True,
    )
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"
    if name in MUST_HAVE_EXAMPLES:
        assert result.attempted > 0, f"{name} has no doctest examples"
