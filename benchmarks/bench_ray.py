"""The ray executor against serial and process on one machine, and the per-call costs a
projection to a cluster needs.

    python benchmarks/bench_ray.py --json benchmarks/results/ray.json

Measured, in one run (a local Ray instance with ``--cpus`` CPUs):

* throughput: an env with ~1 ms of pure-Python CPU work per step, ``--num-envs`` envs, sync
  ``step``: serial, process (one worker per CPU) and ray (one actor per CPU);
* latency per call at 1 env (an env with no work): process vs ray;
* the fixed costs of a ray step: a bare actor round trip (``ping``), and the caller's CPU time
  per actor per step (submitting a call and applying its result), from which
  ``docs/benchmarks.md`` projects throughput on a cluster.

Every configuration is measured ``--rounds`` times, interleaved; figures are medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import envhive
from envhive._bench import machine_info
from envhive.executors import ProcessExecutor, RayExecutor

ITERS = 1000  # calibrated by main() to ~1 ms of CPU per step


class CpuEnv(gym.Env):
    """A step that computes for ``iters`` loop iterations of pure Python (holds the GIL)."""

    observation_space = spaces.Box(-1.0, 1.0, (8,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, iters: int) -> None:
        self.iters, self._t = iters, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(8, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        x = 0
        for i in range(self.iters):
            x = (x * 31 + i) % 1000003
        self._t += 1
        return np.full(8, x & 1, np.float32), float(action), False, self._t >= 500, {}


def calibrate(target_s: float = 1e-3) -> int:
    env = CpuEnv(20000)
    env.reset()
    start = time.perf_counter()
    for _ in range(20):
        env.step(0)
    per_iter = (time.perf_counter() - start) / (20 * 20000)
    return max(1, int(target_s / per_iter))


def steps_per_s(env: Any, n: int, seconds: float) -> tuple[float, float]:
    """(env steps per second, the caller's CPU seconds per ``step`` call)."""
    actions = np.zeros(n, np.int64)
    env.reset(seed=0)
    for _ in range(5):
        env.step(actions)
    calls, start, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        env.step(actions)
        calls += 1
    wall = time.perf_counter() - start
    return calls * n / wall, (time.process_time() - cpu) / calls


def make(kind: str, n: int, iters: int, workers: int) -> Any:
    fns = [lambda: CpuEnv(iters)] * n
    if kind == "serial":
        return envhive.make(fns, executor="serial")
    if kind == "process":
        return envhive.make(fns, executor=ProcessExecutor(min(workers, n)))
    return envhive.make(fns, executor=RayExecutor(min(workers, n)))


def ping_s(repeats: int = 300) -> float:
    ex = RayExecutor(1)
    env = envhive.make([lambda: CpuEnv(0)], executor=ex)
    handle = ex.actor_handles()[0]
    import ray

    for _ in range(20):
        ray.get(handle.ping.remote())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        ray.get(handle.ping.remote())
        times.append(time.perf_counter() - start)
    env.close()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    iters = calibrate()
    n, kinds = args.num_envs, ("serial", "process", "ray")
    pools = {kind: make(kind, n, iters, args.cpus) for kind in kinds}
    single = {kind: make(kind, 1, 0, 1) for kind in ("process", "ray")}
    rate: dict[str, list[float]] = {k: [] for k in kinds}
    caller_cpu: dict[str, list[float]] = {k: [] for k in kinds}
    latency: dict[str, list[float]] = {k: [] for k in single}
    for _ in range(args.rounds):
        for kind, env in pools.items():
            r, cpu = steps_per_s(env, n, args.seconds)
            rate[kind].append(r)
            caller_cpu[kind].append(cpu)
        for kind, env in single.items():
            r, _ = steps_per_s(env, 1, args.seconds / 2)
            latency[kind].append(1.0 / r)
    for env in [*pools.values(), *single.values()]:
        env.close()
    ping = ping_s()
    med = {k: statistics.median(v) for k, v in rate.items()}
    out = {
        "command": "python benchmarks/bench_ray.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v is not None),
        "machine": machine_info(),
        "ray": ray.__version__,
        "shared_machine": "measured under nice -n 19 on a 2-core VM shared with other jobs",
        "env_step_cpu_s": 1e-3,
        "iters": iters,
        "num_envs": n,
        "workers": args.cpus,
        "steps_per_s": med,
        "ray_vs_serial": med["ray"] / med["serial"],
        "ray_vs_process": med["ray"] / med["process"],
        "process_vs_serial": med["process"] / med["serial"],
        "latency_1env_s": {k: statistics.median(v) for k, v in latency.items()},
        "ray_ping_s": ping,
        "caller_cpu_per_step_s": {k: statistics.median(v) for k, v in caller_cpu.items()},
        "caller_cpu_per_actor_call_s": statistics.median(caller_cpu["ray"]) / min(args.cpus, n),
        "rounds": {k: v for k, v in rate.items()},
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text + "\n")
    ray.shutdown()


if __name__ == "__main__":
    main()
