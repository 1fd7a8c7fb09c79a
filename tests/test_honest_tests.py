"""Tests that cannot lie: the suite's own sources are scanned for what makes a test pass
whatever the code does.

* **A patch of a name that is gone.** ``pool._x = f`` or ``setattr(pool, "_x", f)`` creates
  the attribute when the code renamed it, and the test then checks nothing (a MuJoCo test
  patched a method that no longer existed and passed whatever the pool did). Private
  attributes of objects other than a test class's own (``self``/``cls``) are patched with
  ``monkeypatch.setattr``, whose default ``raising=True`` fails on a missing name.
  ``raising=False`` needs a ``# raising=False: <why>`` comment just above it saying why a
  missing name still fails the test; ``mock.patch(..., create=True)`` is refused.
* **A read of a name that is gone.** ``getattr(x, "_y", default)`` and ``hasattr(x, "_y")``
  read a renamed private attribute as the default.
* **A decision on wall-clock time.** An ``assert`` on a clock reading (``time.monotonic() -
  start < 0.5``) fails on a loaded machine: tests wait for events or counts, or wait
  boundedly with generous limits (``tests/bounded.py``). A lower bound (``elapsed >= 0.5``:
  "not before the timeout") is allowed, as a slow machine can only make it larger.

Each rule is also checked against snippets that break it (the scanner itself must fail).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _through_private(target: ast.Attribute) -> bool:
    """``x._y = ...`` or ``x._y.z = ...``: the attribute, or an object on the way to it, is
    private (a test class's own ``self._y``/``cls._y`` chains excepted)."""
    names = []
    node: ast.expr = target
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    own = isinstance(node, ast.Name) and node.id in ("self", "cls")
    if own:
        return False
    return any(_private(name) for name in names)


def _is_clock_call(node: ast.AST) -> bool:
    """``time.monotonic()``, ``time.perf_counter()``, ``time.time()``, ``monotonic()``..."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "time":
        return f.attr in CLOCKS
    return isinstance(f, ast.Name) and f.id in CLOCKS - {"time"}


def _reads_clock(node: ast.AST, clocked: set[str]) -> bool:
    return any(_is_clock_call(n) or (isinstance(n, ast.Name) and n.id in clocked)
               for n in ast.walk(node))


def _lower_bound(test: ast.expr, clocked: set[str]) -> bool:
    """``clock_expr >= c`` / ``clock_expr > c`` (or mirrored): a bound load cannot break."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, (ast.GtE, ast.Gt)):
        return _reads_clock(left, clocked) and not _reads_clock(right, clocked)
    if isinstance(op, (ast.LtE, ast.Lt)):
        return _reads_clock(right, clocked) and not _reads_clock(left, clocked)
    return False


class _Scanner(ast.NodeVisitor):
    def __init__(self, path: str, lines: list[str]) -> None:
        self.path, self.lines = path, lines
        self.found: list[Finding] = []
        self.clocked: list[set[str]] = [set()]  # names holding a clock reading, per function

    def _add(self, node: ast.AST, what: str) -> None:
        self.found.append(Finding(self.path, getattr(node, "lineno", 0), what))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.clocked.append(set())
        self.generic_visit(node)
        self.clocked.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def _targets(self, node: ast.AST, targets: list[ast.expr]) -> None:
        stack = list(targets)
        while stack:
            t = stack.pop()
            if isinstance(t, (ast.Tuple, ast.List)):
                stack.extend(t.elts)
            elif isinstance(t, ast.Starred):
                stack.append(t.value)
            elif isinstance(t, ast.Attribute) and _through_private(t):
                self._add(node, f"bare assignment to {ast.unparse(t)}, a private attribute or one "
                                "of a private object (use monkeypatch.setattr: it fails when the "
                                "name is gone)")
            elif isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) \
                    and isinstance(t.slice.value, str) and _private(t.slice.value) \
                    and ("__dict__" in ast.unparse(t.value) or ast.unparse(t.value).startswith("vars(")):
                self._add(node, f"assignment to the private attribute {ast.unparse(t)} through __dict__")

    def visit_Assign(self, node: ast.Assign) -> None:
        self._targets(node, node.targets)
        if _reads_clock(node.value, self.clocked[-1]):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.clocked[-1].add(t.id)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._targets(node, [node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._targets(node, [node.target])
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._targets(node, node.targets)
        self.generic_visit(node)

    def _justified(self, line: int) -> bool:
        above = self.lines[max(0, line - 4):line]
        return any("# raising=False:" in text for text in above)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        literal = (node.args[1].value if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                   and isinstance(node.args[1].value, str) else None)
        if isinstance(f, ast.Name) and name in ("setattr", "delattr") and len(node.args) >= 2:
            if literal is None or _private(literal):
                self._add(node, f"{ast.unparse(node)}: the builtin {name} of a private or computed "
                                "name (use monkeypatch.setattr: it fails when the name is gone)")
        if isinstance(f, ast.Name) and name == "getattr" and len(node.args) == 3 and literal and _private(literal):
            self._add(node, f"{ast.unparse(node)}: a private name read with a default "
                            "(a renamed attribute reads as the default)")
        if isinstance(f, ast.Name) and name == "hasattr" and literal and _private(literal):
            self._add(node, f"{ast.unparse(node)}: hasattr of a private name (a renamed attribute "
                            "reads as absent)")
        for kw in node.keywords:
            off = isinstance(kw.value, ast.Constant) and kw.value.value is False
            on = isinstance(kw.value, ast.Constant) and kw.value.value is True
            if kw.arg == "raising" and off and name in ("setattr", "delattr") \
                    and not self._justified(node.lineno):
                self._add(node, f"{ast.unparse(node)}: raising=False without a "
                                "'# raising=False: <why>' comment above it")
            if kw.arg == "create" and on and name in ("patch", "object", "multiple"):
                self._add(node, f"{ast.unparse(node)}: mock patching with create=True")
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        clocked = self.clocked[-1]
        if _reads_clock(node.test, clocked) and not _lower_bound(node.test, clocked):
            self._add(node, f"assert {ast.unparse(node.test)}: an assert on a clock reading "
                            "(wait for an event or a count, or boundedly: tests/bounded.py)")
        self.generic_visit(node)


def scan(source: str, path: str = "<snippet>") -> list[Finding]:
    """Every finding in one test module's source."""
    scanner = _Scanner(path, source.splitlines())
    scanner.visit(ast.parse(source, path))
    return scanner.found


#: EnvPool's own tests, vendored as EnvPool wrote them (they test EnvPool's API, with EnvPool's
#: private names; envhive.envpool gives them the names they patch): not envhive's tests.
VENDORED_AS_WRITTEN = TESTS / "envpool_suite"


def test_no_test_patches_or_reads_a_name_that_may_be_gone_or_decides_on_the_clock() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if VENDORED_AS_WRITTEN in path.parents:
            continue
        found += scan(path.read_text(), str(path.relative_to(TESTS.parent)))
    assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize("snippet", [
    "pool._step_all = None",
    "env.pool._run_all = f",
    "ex._state.caller_wake = f",
    "a._x, b = 1, 2",
    "ex._n += 1",
    "del engine._finalizer",
    "setattr(pool, '_check_open', f)",
    "setattr(owner, target, f)",
    "delattr(mod, '_x')",
    "vars(env)['_t'] = 0",
    "env.__dict__['_t'] = 0",
    "getattr(tracker, '_fd', None)",
    "hasattr(engine, '_games')",
    "monkeypatch.setattr(env, '_interp', 1, raising=False)",
    "mock.patch.object(Pool, '_x', create=True)",
    "assert time.monotonic() - start < 0.5",
    "assert 0.5 <= time.monotonic() - start < 5.0",
    "assert time.monotonic() < deadline, 'late'",
    "def f():\n    elapsed = time.perf_counter() - start\n    assert elapsed < 1.0",
    "from time import monotonic\nassert monotonic() - t0 < 2",
])
def test_the_scanner_finds_each_kind(snippet: str) -> None:
    assert scan(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "self._x = 1",
    "cls._count += 1",
    "obj.public = 1",
    "monkeypatch.setattr(pool, '_check_open', f)",
    "m.setattr(_base, name, None)",
    "setattr(ref, 'gravity', 9.8)",
    "getattr(x, '_y')",
    "getattr(x, 'y', None)",
    "# raising=False: the env sets it on one path only; its resize reads it\n"
    "monkeypatch.setattr(env, '_interp', 1, raising=False)",
    "assert time.monotonic() - start >= 0.5",
    "deadline = time.monotonic() + 30\nwhile time.monotonic() < deadline:\n    pass",
    "x.__doc__ = 'text'",
])
def test_the_scanner_lets_these_pass(snippet: str) -> None:
    assert not scan(snippet), snippet
