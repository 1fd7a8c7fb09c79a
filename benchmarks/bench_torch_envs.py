"""Torch batched envs on the CPU: envhive/TorchCartPole-v1 against the numba kernel and
gymnasium's own numpy-vectorized CartPole, same run.

Two TorchCartPole lines: numpy in and out (host buffers: the engine copies results into
them), and ``device="cpu"`` with tensor actions (resident buffers: tensors in and out, the
configuration an accelerator would use; one copy of the flags to the host per step).

Each configuration: ``envhive.make(id, N)`` (or ``gymnasium.make_vec("CartPole-v1", N,
vectorization_mode="vector_entry_point")``), reset, 16 pre-sampled action batches, warm-up,
then ``--reps`` spans of ``--seconds`` of ``env.step``; median env-steps per second. torch uses
one intra-op thread (``torch.set_num_threads(1)``), as the numba kernel uses one core.

Run::

    python benchmarks/bench_torch_envs.py --json benchmarks/results/torch_envs.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np


def measure(make, n: int, seconds: float, reps: int, tensors: bool = False) -> float:
    env = make(n)
    env.reset(seed=0)
    acts = [np.random.default_rng(i).integers(0, 2, n) for i in range(16)]
    if tensors:
        import torch

        acts = [torch.from_numpy(a) for a in acts]
    for t in range(20):
        env.step(acts[t % 16])
    rates = []
    for _ in range(reps):
        k, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            env.step(acts[k % 16])
            k += 1
        rates.append(n * k / (time.perf_counter() - t0))
    env.close()
    return statistics.median(rates)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-envs", type=int, nargs="+", default=[256, 4096])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import gymnasium as gym
    import torch

    import envhive

    torch.set_num_threads(1)
    configs = {
        "envhive/TorchCartPole-v1 (torch, cpu)": lambda n: envhive.make("envhive/TorchCartPole-v1", n),
        "envhive/TorchCartPole-v1 (device='cpu', resident)": lambda n: envhive.make(
            "envhive/TorchCartPole-v1", n, device="cpu"),
        "envhive/CartPole-v1 (numba kernel)": lambda n: envhive.make("envhive/CartPole-v1", n),
        "gymnasium CartPole-v1 vector_entry_point (numpy)": lambda n: gym.make_vec(
            "CartPole-v1", n, vectorization_mode="vector_entry_point"),
    }
    results: dict[str, dict[str, float]] = {}
    for n in args.num_envs:
        for name, make in configs.items():
            rate = measure(make, n, args.seconds, args.reps, tensors="resident" in name)
            results.setdefault(name, {})[str(n)] = rate
            print(f"{name:52s} N={n:5d} {rate:14,.0f} steps/s", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({
                "command": "python benchmarks/bench_torch_envs.py --json " + args.json,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "torch": torch.__version__, "torch_threads": 1},
                "results": results,
            }, fh, indent=2)


if __name__ == "__main__":
    main()
