"""The documentation is checked like code.

* Every Python block of README.md and docs/ runs (blocks of one page in order, in one
  namespace, as a reader would paste them; ``>>>`` blocks as doctests). A block that must not
  run here says so on the line before it: ``<!-- docs-test: skip (why) -->``.
* The command-line reference (generated at build time by docs/_tools/cli_reference.py) is what
  ``envhive ... --help`` prints.
* The API reference (docs/reference/) renders every public name.
* benchmarks/results/ holds exactly the JSON the docs show, and every script the docs name
  exists; the site's figures are drawn by docs/_tools/make_figures.py.

The site itself is built by ``mkdocs build --strict`` in .ci/run (broken links, missing
references and docstrings that do not render fail there).
"""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import importlib.util
import os
import pathlib
import pkgutil
import re
import subprocess
import sys
import textwrap
import types
from typing import Any

import pytest

import envhive

pytestmark = pytest.mark.timeout(300)

REPO = pathlib.Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "_tools" not in p.parts)]

_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.M | re.S,
)
_SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*(?P<reason>.*?)\s*-->")
#: Optional dependencies: a page whose blocks need one that is not installed is skipped.
_OPTIONAL = {"torch", "torchrl", "tensordict", "stable_baselines3", "ray", "pettingzoo", "dm_env",
             "ale_py", "mujoco", "dmlab2d", "cv2", "mpe2", "envpool", "meltingpot", "supersuit"}


@dataclasses.dataclass
class Block:
    page: pathlib.Path
    line: int
    language: str
    code: str
    skip: str | None  # the reason, when the page marks the block as not run


def blocks(page: pathlib.Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in _FENCE.finditer(text):
        info = match["info"].strip()
        language = info.split()[0].lstrip("{.").rstrip("}") if info else ""
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
        skip = _SKIP.search(before)
        code = textwrap.dedent(match["body"])
        found.append(Block(page, line, language, code, skip["reason"] if skip else None))
    return found


def python_blocks(page: pathlib.Path) -> list[Block]:
    return [b for b in blocks(page) if b.language in ("python", "py", "pycon")]


def _page_id(page: pathlib.Path) -> str:
    return str(page.relative_to(REPO)) if page.is_relative_to(REPO) else page.name


RUNNABLE = [p for p in PAGES if python_blocks(p)]


def _close_pools(namespace: dict[str, Any]) -> None:
    for value in list(namespace.values()):
        if type(value).__module__.startswith("envhive") and callable(getattr(value, "close", None)):
            try:
                value.close()
            except Exception:
                pass


def _run(block: Block, namespace: dict[str, Any]) -> None:
    where = f"{_page_id(block.page)}:{block.line}"
    if block.code.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(block.code, namespace, where, where, block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        runner.run(test, clear_globs=False)
        namespace.update(test.globs)  # a DocTest runs in a copy of the namespace
        assert runner.failures == 0, f"{where}: {runner.failures} doctest example(s) failed"
    else:
        exec(compile(block.code, where, "exec"), namespace)


@pytest.mark.parametrize("page", RUNNABLE, ids=_page_id)
def test_python_blocks_run(page: pathlib.Path, tmp_path: pathlib.Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A page's Python blocks run in order in one namespace, in an empty working directory;
    the ids and executors a page registers are taken out again afterwards."""
    from envhive import _registry, executors

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_registry, "_ENVHIVE", dict(_registry._ENVHIVE))
    monkeypatch.setattr(executors, "_REGISTRY", dict(executors._REGISTRY))
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    try:
        for block in python_blocks(page):
            if block.skip is None:
                try:
                    _run(block, namespace)
                except ImportError as err:
                    if (err.name or "").split(".")[0] in _OPTIONAL:
                        pytest.skip(f"needs {err.name}")
                    raise
    finally:
        _close_pools(namespace)


def test_skipped_blocks_are_few_and_say_why() -> None:
    skipped = [b for p in PAGES for b in python_blocks(p) if b.skip is not None]
    assert all(b.skip.startswith("(") and len(b.skip) > 5 for b in skipped), [
        f"{_page_id(b.page)}:{b.line}" for b in skipped if not b.skip]
    ran = sum(b.skip is None for p in PAGES for b in python_blocks(p))
    assert len(skipped) <= max(5, ran // 10), [f"{_page_id(b.page)}:{b.line}" for b in skipped]


def test_the_block_finder_sees_fences_and_skip_markers(tmp_path: pathlib.Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n```python\nx = 1\n```\n\n<!-- docs-test: skip (needs a cluster) -->\n"
                    "```python\nraise SystemExit\n```\n\n```bash\nls\n```\n\n  ```py\n  y = 2\n  ```\n")
    found = blocks(page)
    assert [(b.language, b.code, b.skip) for b in found] == [
        ("python", "x = 1\n", None), ("python", "raise SystemExit\n", "(needs a cluster)"),
        ("bash", "ls\n", None), ("py", "y = 2\n", None)]
    namespace: dict[str, Any] = {}
    _run(found[0], namespace)
    assert namespace["x"] == 1
    with pytest.raises(AssertionError, match="doctest"):
        _run(Block(page, 1, "python", ">>> 1 + 1\n3\n", None), {})


def test_the_envhive_command_lines_in_the_docs_parse() -> None:
    """Every ``envhive ...`` line of a shell block is a valid command line today (its options
    exist and take what it gives them); the commands themselves are not run here."""
    import contextlib
    import io
    import shlex

    from envhive._cli import _parser

    lines = [line.split(" #")[0].strip() for p in PAGES for b in blocks(p)
             if b.language in ("bash", "sh", "shell", "console") for line in b.code.splitlines()]
    commands = [shlex.split(line)[1:] for line in lines if line.startswith("envhive ")]
    assert len(commands) >= 5
    for args in commands:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                _parser().parse_args(args)
            except SystemExit as stop:
                assert stop.code == 0, f"envhive {' '.join(args)}: {err.getvalue()}"


def test_the_envhive_check_sample_is_what_the_command_reports() -> None:
    """docs/own-env.md shows ``envhive check`` on an example factory: each line's verdict and
    check name are what the command prints today (the figures on the lines vary by machine)."""
    sample = next(b.code for b in blocks(DOCS / "own-env.md") if b.code.startswith("$ envhive check"))
    command, *shown = sample.strip().splitlines()
    printed = subprocess.run([sys.executable, "-m", "envhive", *command.split()[2:]],
                             capture_output=True, text=True, timeout=240)
    assert printed.returncode == 1, printed.stderr  # the sample factory fails two checks

    def verdicts(lines: list[str]) -> list[list[str]]:
        return [line.split()[:2] for line in lines if line.startswith("  ")]

    assert verdicts(shown) == verdicts(printed.stdout.splitlines())
    assert shown[-1] == printed.stdout.splitlines()[-1]  # "2 check(s) failed"


# --------------------------------------------------------------------------- the CLI page


def _load_tool(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, DOCS / "_tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_cli_page_is_what_envhive_help_prints() -> None:
    tool = _load_tool("cli_reference")
    assert tool.MARKER in (DOCS / "reference" / "cli.md").read_text()
    sections = tool.sections()
    commands = [command for command, _ in sections]
    assert commands[:1] == ["envhive"] and {"envhive bench", "envhive check"} <= set(commands)
    env = {**os.environ, "COLUMNS": tool.COLUMNS}
    for command, text in sections:
        printed = subprocess.run([sys.executable, "-m", "envhive", *command.split()[1:], "--help"],
                                 capture_output=True, text=True, env=env, timeout=120, check=True)
        assert printed.stdout == text, command
    rendered = tool.render()
    assert all(f"## `{command}`" in rendered for command in commands)


# --------------------------------------------------------------------------- the API reference


def _directives() -> list[tuple[str, dict[str, str]]]:
    """``(identifier, options)`` of every ``::: identifier`` in docs/reference/."""
    found = []
    for page in sorted((DOCS / "reference").glob("*.md")):
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.startswith("::: "):
                options = {}
                for follow in lines[i + 1:]:
                    if not follow.startswith("    "):
                        break
                    key, _, value = follow.strip().partition(":")
                    options[key] = value.strip()
                found.append((line[4:].strip(), options))
    return found


def _resolve(identifier: str) -> Any:
    parts = identifier.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(identifier)


def public_modules() -> list[types.ModuleType]:
    """envhive's packages and modules with no ``_`` in their path that export names."""
    names = ["envhive"] + [info.name for info in pkgutil.walk_packages(
        envhive.__path__, prefix="envhive.", onerror=lambda name: None)]
    modules = []
    for name in names:
        if any(part.startswith("_") for part in name.split(".")):
            continue
        module = importlib.import_module(name)
        if getattr(module, "__all__", None):
            modules.append(module)
    return modules


#: Public names the reference describes in prose (not from a docstring of envhive's own).
IN_PROSE = {("envhive", "AutoresetMode"), ("envhive", "__version__")}


def test_the_reference_renders_every_public_name() -> None:
    rendered: set[int] = set()
    for identifier, options in _directives():
        obj = _resolve(identifier)  # a directive naming nothing fails here, as in the build
        rendered.add(id(obj))
        if isinstance(obj, types.ModuleType) and options.get("members") != "false":
            rendered.update(id(getattr(obj, name)) for name in getattr(obj, "__all__", []))
    missing = [f"{module.__name__}.{name}" for module in public_modules()
               for name in module.__all__
               if id(getattr(module, name)) not in rendered and (module.__name__, name) not in IN_PROSE]
    assert not missing, f"public names with no entry in docs/reference/: {missing}"
    reference = (DOCS / "reference" / "envhive.md").read_text()
    assert all(f"envhive.{name}" in reference for _, name in IN_PROSE)


def test_reference_directives_name_public_paths() -> None:
    """Reference pages name public paths, so that moving a private module breaks nothing."""
    private = [i for i, _ in _directives() if any(p.startswith("_") for p in i.split("."))]
    assert not private, private


# --------------------------------------------------------------------------- benchmarks, figures


def _docs_text() -> str:
    return "\n".join(p.read_text() for p in PAGES)


def test_benchmark_results_are_exactly_the_json_the_docs_show() -> None:
    text = _docs_text()
    shown = set(re.findall(r"benchmarks/results/([\w.-]+\.json)", text))
    kept = {p.name for p in (REPO / "benchmarks" / "results").glob("*.json")}
    assert shown - kept == set(), f"the docs show results that do not exist: {shown - kept}"
    assert kept - shown == set(), f"results no page shows (delete them): {kept - shown}"


def test_the_benchmark_scripts_the_docs_name_exist_and_each_script_is_documented() -> None:
    text = _docs_text()
    named = set(re.findall(r"benchmarks/([\w-]+\.py)", text))
    scripts = {p.name for p in (REPO / "benchmarks").glob("*.py")}
    assert named - scripts == set(), named - scripts
    assert scripts - named == set(), f"scripts no page mentions: {scripts - named}"


def test_the_figures_are_drawn_by_the_script(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("matplotlib")
    written = _load_tool("make_figures").main(["--out", str(tmp_path)])
    drawn = {p.name for p in written}
    committed = {p.name for p in (DOCS / "assets").glob("*.svg")}
    assert drawn == committed
    assert all(p.stat().st_size > 1000 for p in written)
    used = _docs_text()
    assert all(f"assets/{name}" in used for name in committed), "a figure no page shows"
