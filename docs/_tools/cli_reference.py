"""An mkdocs hook: the command-line reference page shows what ``envhive --help`` prints.

The page (docs/reference/cli.md) holds a marker line, ``<!-- envhive --help -->``; at build
time it is replaced by the help of ``envhive`` and of each of its subcommands, produced by the
very function the ``envhive`` command runs (the entry point in pyproject.toml), so the page
cannot drift from the command. ``tests/test_docs.py`` runs ``python -m envhive ... --help``
and compares it with :func:`sections`.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import pathlib
import re
import sys
from typing import Any

MARKER = "<!-- envhive --help -->"
#: The width the help is wrapped to (argparse reads $COLUMNS).
COLUMNS = "88"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def entry_point() -> Any:
    """The ``envhive`` command's function, as pyproject.toml's ``[project.scripts]`` names it."""
    # A regex rather than tomllib, which Python 3.10 lacks.
    scripts = (ROOT / "pyproject.toml").read_text().split("[project.scripts]", 1)[1]
    found = re.search(r'^envhive\s*=\s*"([\w.]+):(\w+)"', scripts, re.M)
    assert found is not None, "pyproject.toml names no envhive command in [project.scripts]"
    module, function = found.groups()
    return getattr(importlib.import_module(module), function)


def help_text(args: list[str]) -> str:
    """What ``envhive ARGS --help`` prints."""
    out = io.StringIO()
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            entry_point()([*args, "--help"])
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved
    return out.getvalue()


def subcommands(top: str) -> list[str]:
    """The subcommands listed in the top-level usage line (``{bench,tune,...}``)."""
    found = re.search(r"\{([a-z,\-]+)\}", top)
    return found.group(1).split(",") if found else []


def sections() -> list[tuple[str, str]]:
    """``(command, help)`` for ``envhive`` and each subcommand, in the order the parser has."""
    top = help_text([])
    return [("envhive", top)] + [(f"envhive {name}", help_text([name])) for name in subcommands(top)]


def render() -> str:
    parts = []
    for command, text in sections():
        parts.append(f"## `{command}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    src = str(ROOT / "src")
    if src not in sys.path:  # the docs build from a checkout without an install
        sys.path.insert(0, src)
    return markdown.replace(MARKER, render())
