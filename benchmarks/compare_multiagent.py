"""Before/after for the multi-agent path: envhive at a base commit vs this tree, one run.

The runners are ``bench_multiagent.py``'s, by name (its envs, layouts and settings), on the
serial executor, where the runner's own cost per env shows: a parallel env whose step does
next to nothing (``NullParallel``) x 64 (the cost is envhive's alone), PettingZoo's ``rps_v2`` x 64
through ``agent_layout="flat"`` (a tiny env step: per-env overhead is most of it),
``pistonball_v6`` x 8 (20 image observations per env: the copies show), and
``dmlab2d/commons_harvest`` x 8 with 7 players (RGB and vector observations per player).

How: ``compare_commits.py``'s temporary ``git worktree`` of ``--base`` with its C extension
built in place; then for every case and repeat one fresh subprocess for base and one for head
(``PYTHONPATH=<tree>/src``, checked), their order alternating each repeat so machine drift hits
both alike; medians over ``--repeats``. Each subprocess builds the runner, warms up and times
``--seconds`` (``envhive._bench.measure_steps``: the median of 5 spans).

    python benchmarks/compare_multiagent.py --base 9ae1f9c --json benchmarks/results/compare_multiagent.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent

#: (case name, bench_multiagent family, env, num_envs, runner name there).
CASES = [
    ("null x 64, flat serial", "pettingzoo", "null", 64, "envhive flat serial"),
    ("rps x 64, flat serial", "pettingzoo", "rps", 64, "envhive flat serial"),
    ("pistonball x 8, flat serial", "pettingzoo", "pistonball", 8, "envhive flat serial"),
    ("commons_harvest x 8, serial", "substrate", "commons_harvest", 8, "envhive serial"),
]


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure one runner of ``bench_multiagent.py`` in this process (envhive from the tree)."""
    sys.path.insert(0, str(HERE.parent))
    import bench_multiagent as bm
    from compare_commits import _check_tree

    import envhive._bench as bench

    where = _check_tree(spec["tree"])
    family, env, n, name = spec["family"], spec["env"], spec["num_envs"], spec["runner"]
    runners = (bm.pettingzoo_runners(env, n, 2) if family == "pettingzoo"
               else bm.substrate_runners(n, 7, 2))
    step, space, close = runners[name]()
    try:
        m = bench.measure_steps(step, bench.random_actions(space, 64), n, seconds=spec["seconds"])
    finally:
        close()
    return {**where, "rate": m.steps_per_s, "us_per_call": 1e6 * m.seconds / m.calls}


def run_one(spec: dict[str, Any], tree: Path, timeout: float) -> dict[str, Any]:
    """One measurement in a fresh subprocess with ``PYTHONPATH=<tree>/src``."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    cmd = [sys.executable, "-W", "ignore", str(HERE), "--worker", json.dumps({**spec, "tree": str(tree)})]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                           cwd=tempfile.gettempdir())  # neither tree importable from the cwd
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f}s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1][len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="9ae1f9c", help="the commit to compare with")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--only", default=None, help="cases whose name contains this")
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return
    sys.path.insert(0, str(HERE.parent))
    from compare_commits import base_worktree

    log: list[dict[str, Any]] = []
    rows = []
    with base_worktree(args.base, True, log) as base:
        for case, family, env, n, runner in CASES:
            if args.only and args.only not in case:
                continue
            spec = {"family": family, "env": env, "num_envs": n, "runner": runner,
                    "seconds": args.seconds}
            got: dict[str, list[float]] = {"base": [], "head": []}
            for rep in range(args.repeats):
                order = [("base", base), ("head", REPO)]
                for side, tree in order if rep % 2 == 0 else order[::-1]:
                    r = run_one(spec, tree, 600)
                    if "error" in r:
                        raise SystemExit(f"{case} ({side}): {r['error']}")
                    got[side].append(r["rate"])
            b, h = statistics.median(got["base"]), statistics.median(got["head"])
            rows.append({"case": case, "base": b, "head": h, "head_over_base": h / b, "samples": got})
            print(f"{case:<32} base {b:>10,.0f}  head {h:>10,.0f} steps/s  head/base {h / b:.2f}",
                  flush=True)
    if args.json:
        from envhive._bench import write_results

        write_results(args.json, rows)


if __name__ == "__main__":
    main()
