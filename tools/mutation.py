"""Mutation testing of the modules that state the pool's rules, with mutmut (2.5).

For each module, mutmut changes one thing at a time (an operator, a constant, a comparison,
a returned value...) and runs the fast tests that cover the module; a mutant the tests do not
notice "survived". The score is the share of mutants killed. It runs in a scratch copy of the
work tree (mutmut edits the files it mutates), so the work tree and anything running from it
are untouched.

    python tools/mutation.py                      # every module below
    python tools/mutation.py _autoreset.py        # some of them
    python tools/mutation.py --list               # the modules and their tests

Writes ``mutation-results.json`` (module -> killed, survived, timeout, total, score, the
surviving mutants' diffs) in the current directory. Needs ``pip install mutmut==2.5.1``.
docs/reliability.md quotes the scores, the survivors judged equivalent and how long it takes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: module (under src/envhive/) -> the fast tests that state its rules (public API only).
MODULES: dict[str, list[str]] = {
    "_autoreset.py": ["tests/test_rules.py"],
    "_ops.py": ["tests/test_rules.py"],
    "_batch.py": ["tests/test_rules.py", "tests/test_batch.py"],
    "_infos.py": ["tests/test_rules.py", "tests/test_infos.py", "tests/test_batch.py"],
    "_books.py": ["tests/test_rules.py", "tests/test_books.py"],
    "frontends/_gymnasium.py": ["tests/test_rules.py", "tests/test_gymnasium_compat.py"],
    "frontends/_dm_env.py": ["tests/test_dm_env.py"],
    "frontends/_flat.py": ["tests/multiagent/test_views.py", "tests/multiagent/test_one_agent.py"],
    "frontends/_sb3.py": ["tests/with_torch/test_sb3_frontend.py"],
}


def _scratch() -> Path:
    """A copy of the work tree's source, tests and built extensions."""
    root = Path(tempfile.mkdtemp(prefix="envhive-mutation-"))
    for name in ("src", "tests"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(REPO / name, root / name)
    return root


def _counts(cache: Path) -> dict[str, object]:
    """Mutant statuses from mutmut's cache (a SQLite database)."""
    con = sqlite3.connect(cache)
    rows = con.execute("SELECT status, COUNT(*) FROM Mutant GROUP BY status").fetchall()
    con.close()
    by = dict(rows)
    killed = by.get("ok_killed", 0)
    survived = by.get("bad_survived", 0)
    timeout = by.get("bad_timeout", 0)
    suspicious = by.get("ok_suspicious", 0)
    total = killed + survived + timeout + suspicious
    return {"killed": killed, "survived": survived, "timeout": timeout, "suspicious": suspicious,
            "total": total, "score": round((killed + timeout) / total, 4) if total else None}


def _survivors(root: Path, env: dict[str, str]) -> list[str]:
    """The diff of each surviving mutant."""
    con = sqlite3.connect(root / ".mutmut-cache")
    ids = [r[0] for r in con.execute("SELECT id FROM Mutant WHERE status = 'bad_survived'")]
    con.close()
    out = []
    for i in ids:
        diff = subprocess.run([sys.executable, "-m", "mutmut", "show", str(i)], cwd=root, env=env,
                              capture_output=True, text=True).stdout
        out.append(diff.strip())
    return out


def run(module: str, root: Path) -> dict[str, object]:
    tests = MODULES[module]
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "ENVHIVE_CACHE_DIR": str(root / "cache"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    (root / ".mutmut-cache").unlink(missing_ok=True)
    # mutmut 2 counts only exit status 1 as "tests failed": a mutant that breaks the import
    # (pytest's status 2, collection errors) would count as survived, so any failure is 1.
    pytest = f"{sys.executable} -m pytest -x -q -p no:cacheprovider {' '.join(tests)}"
    runner = f"bash -c '{pytest} || exit 1'"
    start = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "mutmut", "run", "--paths-to-mutate", f"src/envhive/{module}",
         "--tests-dir", "tests", "--runner", runner, "--no-progress", "--simple-output"],
        cwd=root, env=env, check=False,
    )
    result = _counts(root / ".mutmut-cache")
    result["seconds"] = round(time.monotonic() - start)
    result["tests"] = tests
    result["survivors"] = _survivors(root, env)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules under src/envhive/ (default: all)")
    parser.add_argument("--list", action="store_true", help="the modules and their tests")
    parser.add_argument("--out", default="mutation-results.json")
    args = parser.parse_args()
    if args.list:
        for module, tests in MODULES.items():
            print(f"{module:<26} {' '.join(tests)}")
        return 0
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown modules {unknown}; expected some of {list(MODULES)}")
    root = _scratch()
    results = {}
    try:
        for module in args.modules or list(MODULES):
            results[module] = run(module, root)
            r = results[module]
            print(f"{module}: {r['killed']} of {r['total']} killed ({r['score']}), "
                  f"{r['survived']} survived, {r['seconds']} s", flush=True)
            Path(args.out).write_text(json.dumps(results, indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
