"""Time to first step of every compiled id, in fresh processes: cold cache, warm cache, EnvPool.

For each id, three fresh interpreters, each timing ``import``, ``make`` (8 envs) and the first
``reset`` + ``step`` after ``make``; the table shows ``make`` + first step (from calling
``make`` to the first step's results):

* cold: envhive with an empty compiled-code cache (``ENVHIVE_CACHE_DIR`` set to a new
  directory): what the first run ever pays (numba compiles);
* warm: a second process on the same directory: what every later run pays;
* EnvPool: ``envpool.make(id, "gymnasium", num_envs=8)`` for the same gymnasium id, where
  EnvPool has it.

The target (issue 14): warm first step within 1 s of ``make``. Run::

    python benchmarks/cold_start.py --json benchmarks/results/cold_start.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

_ENVHIVE_PROBE = """
import json, sys, time
t0 = time.perf_counter()
import envhive
t1 = time.perf_counter()
env = envhive.make(sys.argv[1], 8, seed=0)
t2 = time.perf_counter()
env.reset()
env.step(env.action_space.sample())
t3 = time.perf_counter()
env.close()
print(json.dumps({"import": t1 - t0, "make": t2 - t1, "first_step": t3 - t2}))
"""

_ENVPOOL_PROBE = """
import json, sys, time
import numpy as np
t0 = time.perf_counter()
import envpool
t1 = time.perf_counter()
env = envpool.make(sys.argv[1], "gymnasium", num_envs=8, seed=0)
t2 = time.perf_counter()
env.reset()
env.step(np.array([env.action_space.sample() for _ in range(8)]))
t3 = time.perf_counter()
env.close()
print(json.dumps({"import": t1 - t0, "make": t2 - t1, "first_step": t3 - t2}))
"""


def probe(code: str, env_id: str, env: dict[str, str], timeout: float) -> dict[str, float] | None:
    out = subprocess.run([sys.executable, "-c", code, env_id], capture_output=True, text=True,
                         env=env, timeout=timeout)
    if out.returncode != 0:
        print(f"  {env_id}: failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", nargs="*", default=None, help="compiled ids (default: all)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from envhive.engines._registry import compiled_ids

    ids = args.ids or list(compiled_ids())
    try:
        import envpool

        peer_ids = set(envpool.list_all_envs())
    except ImportError:
        peer_ids = set()
    results: dict[str, dict[str, object]] = {}
    print(f"{'id':34s} {'cold':>7s} {'warm':>7s} {'EnvPool':>8s}   (s: make + first reset and step)")
    for env_id in ids:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, ENVHIVE_CACHE_DIR=cache, ENVHIVE_CACHE="1")
            cold = probe(_ENVHIVE_PROBE, env_id, env, args.timeout)
            warm = probe(_ENVHIVE_PROBE, env_id, env, args.timeout)
        gym_id = env_id.split("/", 1)[1]
        peer = probe(_ENVPOOL_PROBE, gym_id, dict(os.environ), args.timeout) if gym_id in peer_ids else None
        results[env_id] = {"cold": cold, "warm": warm, "envpool": peer}

        def fmt(r: dict[str, float] | None) -> str:
            return f"{r['make'] + r['first_step']:7.2f}" if r else "      -"

        print(f"{env_id:34s} {fmt(cold)} {fmt(warm)} {fmt(peer):>8s}", flush=True)
    if args.json:
        import numba

        with open(args.json, "w") as fh:
            json.dump({
                "command": "python benchmarks/cold_start.py --json " + args.json,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "numba": numba.__version__},
                "num_envs": 8,
                "results": results,
            }, fh, indent=2)


if __name__ == "__main__":
    main()
