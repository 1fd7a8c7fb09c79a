"""Mutation testing of the modules that state the pool's rules, with mutmut (2.5).

For each module, mutmut changes one thing at a time (an operator, a constant, a comparison,
a returned value...) and runs the fast tests that cover the module; a mutant the tests do not
notice "survived". The score is the share of mutants killed. It runs in a scratch copy of the
work tree (mutmut edits the files it mutates), so the work tree and anything running from it
are untouched.

    python tools/mutation.py                      # every module below
    python tools/mutation.py _autoreset.py        # some of them
    python tools/mutation.py --list               # the modules and their tests

A long module can be scored in parts: ``--cache DIR`` keeps mutmut's cache of each module in
``DIR`` (one SQLite file per module) and starts from it, so a run that stopped (``--budget``
seconds per module ran out, Ctrl-C) goes on where it was: a killed mutant stays killed, the
untested ones run, survivors run again only if a test file changed since.

    python tools/mutation.py _books.py --cache .mutation --budget 1800   # repeat until done

Writes ``mutation-results.json`` (module -> mutants, run, killed, survived, timeout,
suspicious, untested, score over the mutants run, the surviving mutants' diffs) in the current
directory. Needs ``pip install mutmut==2.5.1``. docs/reliability.md quotes the scores, the
survivors judged equivalent and how long it takes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
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
    # The counter's native steps (tests/native_core) are the fast test of an engine's batched
    # step infos (engine_columns, patched at the rows an inline step reset).
    "_infos.py": ["tests/test_rules.py", "tests/test_infos.py", "tests/test_batch.py",
                  "tests/native_core/test_counter_core.py::test_native_equals_the_python_reference_in_every_mode"],
    # The books' unit tests first (scripted completions, no executor: most mutants die there);
    # the counter's async recv is the one fast test of the lean recv path (take_finished).
    "_books.py": ["tests/test_books.py", "tests/test_rules.py",
                  "tests/native_core/test_counter_core.py::test_async_send_recv_gives_each_env_the_reference_sequence"],
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
    """Mutant statuses from mutmut's cache (a SQLite database). ``total`` counts the mutants
    run (the score's denominator), ``mutants`` every mutant of the module (mutmut registers
    them all before running any; the rest are ``untested``)."""
    con = sqlite3.connect(cache)
    rows = con.execute("SELECT status, COUNT(*) FROM Mutant GROUP BY status").fetchall()
    con.close()
    by = dict(rows)
    killed = by.get("ok_killed", 0)
    survived = by.get("bad_survived", 0)
    timeout = by.get("bad_timeout", 0)
    suspicious = by.get("ok_suspicious", 0)
    total = killed + survived + timeout + suspicious
    return {"mutants": sum(by.values()), "killed": killed, "survived": survived, "timeout": timeout,
            "suspicious": suspicious, "untested": by.get("untested", 0), "total": total,
            # mutmut's "suspicious" is a mutant whose tests failed, more slowly than twice the
            # baseline run (load on the machine does that): killed, as a timeout is.
            "score": round((killed + timeout + suspicious) / total, 4) if total else None}


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


def _cache_file(cache_dir: Path, module: str) -> Path:
    return cache_dir / (module.replace("/", "__") + ".sqlite")


def run(module: str, root: Path, cache_dir: Path | None = None, budget: float | None = None
        ) -> dict[str, object]:
    tests = MODULES[module]
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "ENVHIVE_CACHE_DIR": str(root / "cache"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    cache = root / ".mutmut-cache"
    cache.unlink(missing_ok=True)
    if cache_dir is not None and _cache_file(cache_dir, module).exists():
        shutil.copy(_cache_file(cache_dir, module), cache)
    # mutmut 2 counts only exit status 1 as "tests failed": a mutant that breaks the import
    # (pytest's status 2, collection errors) would count as survived, so any failure is 1.
    pytest = f"{sys.executable} -m pytest -x -q -p no:cacheprovider {' '.join(tests)}"
    runner = f"bash -c '{pytest} || exit 1'"
    start = time.monotonic()
    # A session of its own, so that a budget that runs out ends mutmut, its workers and the
    # test run in progress together.
    proc = subprocess.Popen(
        [sys.executable, "-m", "mutmut", "run", "--paths-to-mutate", f"src/envhive/{module}",
         "--tests-dir", "tests", "--runner", runner, "--no-progress", "--simple-output"],
        cwd=root, env=env, start_new_session=True,
    )
    try:
        proc.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        print(f"{module}: budget of {budget} s ran out; the cache keeps what ran", flush=True)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # mutmut stopped mid-mutant leaves the module mutated: the next module's runs need it whole.
        shutil.copy(REPO / "src" / "envhive" / module, root / "src" / "envhive" / module)
        if cache_dir is not None and cache.exists():
            cache_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(cache, _cache_file(cache_dir, module))
    result = _counts(cache)
    result["seconds"] = round(time.monotonic() - start)
    result["tests"] = tests
    result["survivors"] = _survivors(root, env)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules under src/envhive/ (default: all)")
    parser.add_argument("--list", action="store_true", help="the modules and their tests")
    parser.add_argument("--out", default="mutation-results.json")
    parser.add_argument("--cache", type=Path, help="keep each module's mutmut cache here and resume from it")
    parser.add_argument("--budget", type=float, help="seconds per module (with --cache: resume later)")
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
            results[module] = run(module, root, args.cache, args.budget)
            r = results[module]
            print(f"{module}: {r['mutants']} mutants, {r['total']} run: {r['killed']} killed, "
                  f"{r['timeout']} timed out, {r['survived']} survived, {r['suspicious']} suspicious "
                  f"(score {r['score']}), {r['untested']} not run, {r['seconds']} s", flush=True)
            Path(args.out).write_text(json.dumps(results, indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
