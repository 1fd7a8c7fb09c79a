"""The package's layering, read from the source: who may import whom, and no import cycles.

Layers, bottom up:

* base: ``_ops``, ``_buffers``, ``_report``, ``_spaces``, ``errors``, ``_memory`` (what
  fits), ``_results`` (what an env may return) (plus ``_runner``, the
  Python op runner compiled engines reuse for ``call``/``set_attr``);
* compiled code: ``engines`` (protocol, registry, shared compiled helpers), ``kernels``,
  ``envs``: they import the base and ``engines``, never ``executors``;
* executors, the pool and the frontends (``make``, ``VectorEnv``, the CLI, ...).

Every import statement counts, including the lazy ones inside functions.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

import envhive

pytestmark = pytest.mark.timeout(120)

SRC = pathlib.Path(envhive.__file__).resolve().parent

BASE = ("envhive._ops", "envhive._buffers", "envhive._report", "envhive._spaces", "envhive.errors",
        "envhive._agents",
        "envhive._memory", "envhive._results")
#: What compiled code (engines, kernels, envs) may import from envhive, besides its own package.
COMPILED_MAY_IMPORT = (*BASE, "envhive._extras", "envhive._runner", "envhive.engines", "envhive._infos")
#: What the base must never import: everything above it.
ABOVE_BASE = (
    "envhive._pool", "envhive.executors", "envhive.engines", "envhive.kernels", "envhive.envs",
    "envhive._runner", "envhive._make", "envhive._vector_env", "envhive._registry",
    "envhive._gym_register", "envhive._cli", "envhive._bench", "envhive._autoreset",
    "envhive._infos", "envhive.testing", "envhive.__main__",
)


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(name: str) -> bool:
    return (SRC.parent / name.replace(".", "/") / "__init__.py").exists()


def imports_of(path: pathlib.Path, name: str | None = None) -> set[str]:
    """The envhive modules ``path`` (module ``name``) imports (``from envhive import x``
    counts as ``envhive.x`` when ``x`` is a module, else as ``envhive``)."""
    name = name or _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                if _is_package(sub) or (SRC.parent / (sub.replace(".", "/") + ".py")).exists():
                    found.add(sub)
                else:
                    found.add(module)  # a name defined in the module itself
    return {m for m in found if m == "envhive" or m.startswith("envhive.")}


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def layer_violations(modules: dict[str, pathlib.Path]) -> list[str]:
    """Every import that breaks the layering, as ``"importer -> imported"``."""
    bad = []
    for name, path in modules.items():
        imported = imports_of(path, name)
        for layer in ("envhive.engines", "envhive.kernels", "envhive.envs"):
            if _under(name, (layer,)):
                bad += [f"{name} -> {m}" for m in sorted(imported)
                        if not _under(m, (*COMPILED_MAY_IMPORT, layer))]
        if _under(name, BASE):
            bad += [f"{name} -> {m}" for m in sorted(imported) if m == "envhive" or _under(m, ABOVE_BASE)]
    return bad


def test_the_walk_sees_the_layers():
    assert {"envhive.engines", "envhive.kernels._kernel", "envhive.envs.mujoco._native",
            "envhive._ops", "envhive.errors"} <= set(MODULES)
    assert "envhive._ops" in imports_of(MODULES["envhive.engines._compiled"])


def test_layering():
    assert layer_violations(MODULES) == []


def test_a_violation_is_caught(tmp_path):
    """An engine importing an executor, and the base importing the pool, are both reported
    (lazy imports inside functions included)."""
    (tmp_path / "bad_engine.py").write_text(
        "def f():\n    from envhive.executors._native import NativeExecutor\n"
    )
    (tmp_path / "bad_ops.py").write_text("from envhive import _pool\n")
    fake = {
        "envhive.engines._bad": tmp_path / "bad_engine.py",
        "envhive._ops": tmp_path / "bad_ops.py",
    }
    assert layer_violations(fake) == [
        "envhive.engines._bad -> envhive.executors._native",
        "envhive._ops -> envhive._pool",
    ]


def test_every_module_imports_alone():
    """Each module imports first, with no envhive module loaded (an import cycle fails
    there), and importing envhive does not import numba. One child interpreter for all of
    them, its envhive modules dropped before each import: a fresh interpreter per module
    would spend a minute re-importing numpy, gymnasium and numba."""
    names = [m for m in MODULES if not m.endswith("__main__")]
    code = (
        "import importlib, sys\n"
        "import envhive\n"
        "assert 'numba' not in sys.modules, 'importing envhive imported numba'\n"
        "for name in sys.argv[1:]:\n"
        "    for m in [k for k in sys.modules if k == 'envhive' or k.startswith('envhive.')]:\n"
        "        del sys.modules[m]\n"
        "    importlib.import_module(name)\n"
    )
    # One interpreter, each module imported with no envhive module loaded before it.
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
