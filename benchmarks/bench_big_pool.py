"""Building large native pools: make, the first (seeded or unseeded) reset and one step.

Each case runs in a fresh interpreter (so memory figures are its own): envhive's compiled
generators (kernels/_rng.py) against the per-env Python path they replaced (a numpy
``Generator`` made per env, as gymnasium does, ~10 us each), measured in the same run by
switching the family's ``uniform_bounds`` off. Both give the same numbers bit for bit.

    python benchmarks/bench_big_pool.py --sizes 100000 1000000 --json benchmarks/results/big_pool.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from envhive._bench import write_results

_CASE = """
import json, resource, sys, time
import numpy as np
import envhive
from envhive.kernels import CartPoleKernel
n, seed, path = int(sys.argv[1]), None if sys.argv[2] == "none" else 0, sys.argv[3]
if path == "python":
    CartPoleKernel.uniform_bounds = None  # the per-env numpy generators, as before
envhive.make("envhive/CartPole-v1", 4, seed=0).reset()  # compiled code loaded (or compiled) first
t0 = time.perf_counter()
env = envhive.make("envhive/CartPole-v1", n, seed=seed)
t1 = time.perf_counter()
env.reset(seed=seed)
t2 = time.perf_counter()
env.step(np.zeros(n, np.int64))
t3 = time.perf_counter()
print(json.dumps({"make_s": t1 - t0, "reset_s": t2 - t1, "step_s": t3 - t2,
                  "max_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        for seed in ("0", "none"):
            for path in ("compiled", "python"):
                done = subprocess.run([sys.executable, "-c", _CASE, str(n), seed, path],
                                      capture_output=True, text=True, check=True)
                row = {"num_envs": n, "seed": seed, "generators": path,
                       **json.loads(done.stdout.strip().splitlines()[-1])}
                rows.append(row)
                print(f"{n:>10,} seed={seed:<4} {path:<8} make {row['make_s']:6.2f} s  "
                      f"reset {row['reset_s']:6.2f} s  step {row['step_s']:.3f} s  "
                      f"max RSS {row['max_rss_gb']:.2f} GB", flush=True)
    if args.json:
        write_results(args.json, rows)


if __name__ == "__main__":
    main()
