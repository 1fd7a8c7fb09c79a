"""Per-call time of ``env.step`` on CartPole-v1: gymnasium's SyncVectorEnv and each envhive executor.

    python benchmarks/bench_percall.py --json benchmarks/results/percall.json

For each ``--num-envs`` (default 1, 8, 64): gymnasium's ``SyncVectorEnv``, envhive's serial,
thread, process (their defaults) and native (``envhive/CartPole-v1``) pools, each built, reset
and warmed up, then ``step`` called with one fixed action batch in a tight loop; the figure is
the best of ``--spans`` spans of ``--seconds`` (the least disturbed one), in µs per call.
The env is stepped past its episode ends (gymnasium warns once; the pools autoreset).
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

import envhive
from envhive._bench import write_results


def per_call_us(step: Any, actions: np.ndarray, spans: int, seconds: float) -> float:
    for _ in range(200):
        step(actions)
    best = float("inf")
    for _ in range(spans):
        calls, start = 0, time.perf_counter()
        while True:
            for _ in range(50):
                step(actions)
            calls += 50
            elapsed = time.perf_counter() - start
            if elapsed > seconds:
                break
        best = min(best, elapsed / calls)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--spans", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for n in args.num_envs:
        actions = np.zeros(n, np.int64)
        builders: dict[str, Any] = {
            "gymnasium SyncVectorEnv": lambda n=n: gym.vector.SyncVectorEnv(
                [lambda: gym.make("CartPole-v1")] * n),
            "envhive serial": lambda n=n: envhive.make("CartPole-v1", n, executor="serial", seed=0),
            "envhive thread": lambda n=n: envhive.make("CartPole-v1", n, executor="thread", seed=0),
            "envhive process": lambda n=n: envhive.make("CartPole-v1", n, executor="process", seed=0),
            "envhive native": lambda n=n: envhive.make("envhive/CartPole-v1", n, seed=0),
        }
        for name, build in builders.items():
            env = build()
            try:
                env.reset(seed=0)
                us = per_call_us(env.step, actions, args.spans, args.seconds)
            finally:
                env.close()
            rows.append({"runner": name, "env": "CartPole-v1", "num_envs": n, "us_per_call": us})
            print(f"n={n:<3} {name:<26} {us:8.2f} us per call", flush=True)
    if args.json:
        write_results(args.json, rows)


if __name__ == "__main__":
    main()
