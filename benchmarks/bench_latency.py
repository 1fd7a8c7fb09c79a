"""Per-call latency at 1 env: process executor vs serial vs gymnasium SyncVectorEnv, same run.

    python benchmarks/bench_latency.py --json benchmarks/results/latency.json

Reports percentiles of individual ``step`` calls (CartPole-v1 through gymnasium.make), since
the mean hides a tail of descheduling hiccups on a shared VM.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import envhive
from envhive._bench import write_results
from envhive.executors import ProcessExecutor


def latencies(step, calls: int, warmup: int = 2000) -> np.ndarray:
    acts = [np.array([i % 2]) for i in range(64)]
    out = np.empty(calls)
    for i in range(warmup):
        step(acts[i % 64])
    clock = time.perf_counter
    for i in range(calls):
        t = clock()
        step(acts[i % 64])
        out[i] = clock() - t
    return out * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    runners = {
        "envhive process (1 worker)": lambda: envhive.make(args.env, 1, executor=ProcessExecutor(1), copy=False, seed=0),
        "envhive serial": lambda: envhive.make(args.env, 1, executor="serial", copy=False, seed=0),
        "gymnasium SyncVectorEnv": lambda: gym.vector.SyncVectorEnv([lambda: gym.make(args.env)], copy=False),
    }
    rows = []
    for name, build in runners.items():
        env = build()
        env.reset(seed=0)
        ts = latencies(env.step, args.calls)
        env.close()
        p50, p90, p99 = np.percentile(ts, [50, 90, 99])
        rows.append({"runner": name, "env": args.env, "p50_us": p50, "p90_us": p90, "p99_us": p99,
                     "mean_us": float(ts.mean())})
        print(f"{name:<28} p50 {p50:6.1f} us  p90 {p90:6.1f}  p99 {p99:6.1f}  mean {ts.mean():6.1f}")
    if args.json:
        write_results(args.json, rows)


if __name__ == "__main__":
    main()
