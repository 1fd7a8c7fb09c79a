"""The package's layering, read from the source: who may import whom, and no import cycles.

Layers, bottom up (each may import the layers below it and its own):

* base: the op rules (``_ops``), errors, spaces and codecs, the agent axis (``_agents``),
  buffers, reports, results, infos, memory and argument checks, optional imports, held
  interrupts (``_interrupts``), the compiled ``_runloop``;
* runners: ``_perform`` (the one Python definition of an op on one env), ``_runner``
  (``EnvRunner``: a slice of Python envs; its loop in C), ``_agent_runner`` (multi-agent), and
  ``envs.multiagent``, the adapters with which the runner builds a multi-agent env;
* engines: ``envhive.engines``, the protocol, the registry and the shared bases: base only;
* families: ``envhive.kernels``, every ``envhive.envs.<name>`` and the test family
  ``envhive.testing.counter`` (each owns its game, engine, factory and ``_family``
  registration): base, runners and engines, never another family;
* executors: ``envhive.executors``, the ways envs are run: base, runners and engines, never
  a family;
* everything else (the pool, its books, front ends, ``envhive.envpool``, ``make``, the
  registry of ids, the CLI, the rest of ``envhive.testing``) on top.

Every import statement counts for the layering, including the lazy ones inside functions and
those under ``if TYPE_CHECKING:``. Cycles are looked for among the imports that run (all but
``TYPE_CHECKING`` ones): a module importing, at any point, a module that imports it back.
"""

from __future__ import annotations

import ast
import importlib.machinery
import pathlib
import subprocess
import sys

import pytest

import envhive

pytestmark = pytest.mark.timeout(300)

SRC = pathlib.Path(envhive.__file__).resolve().parent

BASE = ("envhive._ops", "envhive.errors", "envhive._spaces", "envhive._agents", "envhive._extras",
        "envhive._arguments", "envhive._memory", "envhive._results", "envhive._buffers",
        "envhive._report", "envhive._infos", "envhive._interrupts", "envhive._runloop")
RUNNERS = ("envhive._perform", "envhive._runner", "envhive._agent_runner", "envhive.envs.multiagent")
ENGINES = ("envhive.engines",)
FAMILIES = ("envhive.kernels", "envhive.envs", "envhive.testing.counter")  # envs.multiagent: a runner
EXECUTORS = ("envhive.executors",)

#: Layer -> what its modules may import besides their own package (in order: first match).
LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "base": (BASE, BASE),
    "runners": (RUNNERS, BASE + RUNNERS),
    "engines": (ENGINES, BASE),
    "families": (FAMILIES, BASE + RUNNERS + ENGINES),
    "executors": (EXECUTORS, BASE + RUNNERS + ENGINES),
}



def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    """A package, a ``.py`` module or a compiled extension of that dotted name."""
    base = SRC.parent / name.replace(".", "/")
    if (base / "__init__.py").exists() or base.with_suffix(".py").exists():
        return True
    return any((base.parent / (base.name + suffix)).exists() for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def _import_nodes(tree: ast.AST, runtime_only: bool) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if runtime_only and _is_type_checking(node):
            assert isinstance(node, ast.If)
            todo.extend(node.orelse)  # the body never runs
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def imports_of(path: pathlib.Path, name: str | None = None, runtime_only: bool = False) -> set[str]:
    """The envhive modules ``path`` (module ``name``) imports (``from envhive import x``
    counts as ``envhive.x`` when ``x`` is a module, else as ``envhive``); with
    ``runtime_only``, not those under ``if TYPE_CHECKING:``."""
    name = name or _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(), str(path)), runtime_only):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
            continue
        if node.level:
            base = package.split(".")
            base = base[: len(base) - node.level + 1]
            module = ".".join([*base, node.module] if node.module else base)
        else:
            module = node.module or ""
        for alias in node.names:
            sub = f"{module}.{alias.name}"
            found.add(sub if _is_module(sub) else module)  # else a name defined in the module
    return {m for m in found if m == "envhive" or m.startswith("envhive.")}


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def layer_of(module: str) -> str | None:
    for layer, (members, _) in LAYERS.items():
        if _under(module, members):
            return layer
    return None


def _own_package(module: str) -> str:
    """What a module may import freely: its family (``envhive.envs.mujoco``) or top package."""
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[1] == "envs" and len(parts) > 2 else ".".join(parts[:2])


def layer_violations(modules: dict[str, pathlib.Path]) -> list[str]:
    """Every import that breaks the layering, as ``"importer -> imported"``."""
    bad = []
    for name, path in modules.items():
        layer = layer_of(name)
        if layer is None:
            continue  # the top: may import anything
        allowed = (*LAYERS[layer][1], _own_package(name))
        bad += [f"{name} -> {m}" for m in sorted(imports_of(path, name))
                if not _under(m, allowed) and not (layer == "base" and m == "envhive._runloop")]
    return bad


def import_cycles(modules: dict[str, pathlib.Path]) -> list[set[str]]:
    """The strongly connected components of more than one module (or a module importing
    itself) in the graph of imports that run (Tarjan's algorithm, iterative)."""
    graph = {name: sorted(m for m in imports_of(path, name, runtime_only=True) if m in modules)
             for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            edges = graph[node]
            if i < len(edges):
                work.append((node, i + 1))
                nxt = edges[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.add(m)
                    if m == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    cycles.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return cycles


def test_the_walk_sees_the_layers():
    assert {"envhive.engines", "envhive.kernels._kernel", "envhive.envs.mujoco._native",
            "envhive._ops", "envhive.errors", "envhive._perform"} <= set(MODULES)
    assert "envhive._ops" in imports_of(MODULES["envhive.engines._compiled"])
    assert "envhive.envs.atari._cframes" in imports_of(MODULES["envhive.envs.atari._frames"])
    assert layer_of("envhive.envs.torch._engine") == "families"
    assert layer_of("envhive.envs.multiagent._players") == "runners"
    assert layer_of("envhive._pool") is None
    # A TYPE_CHECKING import counts for the layering, not for cycles.
    runner_types = imports_of(MODULES["envhive._agent_runner"])
    assert "envhive._runner" in runner_types
    assert "envhive._runner" not in imports_of(MODULES["envhive._agent_runner"], runtime_only=True)


def test_layering():
    assert layer_violations(MODULES) == []


def _fake_modules(tmp_path: pathlib.Path, files: dict[str, str]) -> dict[str, pathlib.Path]:
    """Module name -> a file holding ``files[name]``, for the walks above."""
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
    return {name: tmp_path / f"{name}.py" for name in files}


def test_a_violation_is_caught(tmp_path):
    """An engine importing an executor or a family, a family importing another, an executor
    importing a family, and the base importing the pool are all reported (lazy imports inside
    functions included)."""
    files = {
        "envhive.engines._bad": "def f():\n    from envhive.executors._native import NativeExecutor\n"
                                "from envhive.kernels import _engine\n",
        "envhive.envs.mujoco._bad": "from envhive.envs.torch import _engine\nfrom envhive.envs.mujoco import _base\n",
        "envhive.executors._bad": "from envhive.envs.mujoco import _native\n",
        "envhive._ops": "from envhive import _pool\n",
    }
    assert layer_violations(_fake_modules(tmp_path, files)) == [
        "envhive.engines._bad -> envhive.executors._native",
        "envhive.engines._bad -> envhive.kernels._engine",
        "envhive.envs.mujoco._bad -> envhive.envs.torch._engine",
        "envhive.executors._bad -> envhive.envs.mujoco._native",
        "envhive._ops -> envhive._pool",
    ]


def test_no_import_cycle():
    cycles = import_cycles(MODULES)
    assert cycles == []


def test_a_cycle_is_caught(tmp_path):
    """A lazy import back counts; one under TYPE_CHECKING does not."""
    files = {
        "envhive._a": "import envhive._b\n",
        "envhive._b": "def f():\n    from envhive._c import g\n",
        "envhive._c": "import envhive._a\n",
        "envhive._d": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import envhive._e\n",
        "envhive._e": "from envhive._d import h\n",
    }
    assert import_cycles(_fake_modules(tmp_path, files)) == [{"envhive._a", "envhive._b", "envhive._c"}]


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
