"""envhive's TorchRL front end against TorchRL's own batched envs, in one run.

Benchmarks (frames = env steps; every configuration in a fresh subprocess):

1. ``CartPole-v1 x 64, rollout``: ``envhive.make("CartPole-v1", 64, api="torchrl")`` (the
   default, ``executor="auto"``: the summary's envhive figure; the row says what it chose),
   and the same with ``executor=`` process, serial and the opt-in
   ``ProcessExecutor(parent_slice=True)`` vs TorchRL's ``SerialEnv(64, GymEnv)``,
   ``ParallelEnv(2, GymEnv(num_envs=32))`` and ``GymEnv("CartPole-v1", num_envs=64)``.
   ``env.rollout(T, policy, break_when_any_done=False)``, frames/s.
2. ``CartPole-v1 x 64, collector``: the same envs under ``torchrl.collectors.Collector``
   (``frames_per_batch=64*50``), frames/s.
3. ``compiled CartPole x 256``: ``envhive.make("envhive/CartPole-v1", 256, api="torchrl")`` vs
   ``GymEnv("CartPole-v1", num_envs=256)`` (gymnasium's AsyncVectorEnv under TorchRL), rollout.
4. The front end's own cost: the same compiled pool stepped raw (``pool.step``) vs through
   ``TorchRLEnv.rollout``; reported as microseconds per batch step.

The policy is the same for everyone: 64 action batches pre-sampled from the env's own action
spec (one-hot or categorical, whatever the env declares), handed out in turn (no network, no
sampling in the timed loop). Each measurement: warm-up, then ``--reps`` timed spans, median.

Run (about 5 minutes on 2 cores)::

    python benchmarks/bench_torchrl.py --json benchmarks/results/torchrl.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

CONFIGS = {
    # name: (group, description)
    "envhive default x64": ("cartpole64", "envhive.make('CartPole-v1', 64, api='torchrl')"),
    "envhive process x64": ("cartpole64", "envhive.make('CartPole-v1', 64, api='torchrl', executor='process')"),
    "envhive serial x64": ("cartpole64", "envhive.make('CartPole-v1', 64, api='torchrl', executor='serial')"),
    "envhive process parent_slice x64": ("cartpole64", "envhive.make('CartPole-v1', 64, api='torchrl', executor=ProcessExecutor(parent_slice=True))"),
    "torchrl SerialEnv(64)": ("cartpole64", "SerialEnv(64, lambda: GymEnv('CartPole-v1'))"),
    "torchrl ParallelEnv(2 x 32)": ("cartpole64", "ParallelEnv(2, lambda: GymEnv('CartPole-v1', num_envs=32))"),
    "torchrl GymEnv(num_envs=64)": ("cartpole64", "GymEnv('CartPole-v1', num_envs=64)"),
    "envhive compiled x256": ("compiled256", "envhive.make('envhive/CartPole-v1', 256, api='torchrl')"),
    "torchrl GymEnv(num_envs=256)": ("compiled256", "GymEnv('CartPole-v1', num_envs=256)"),
}


def build(name: str):
    from torchrl.envs import GymEnv, ParallelEnv, SerialEnv

    import envhive

    if name == "envhive default x64":
        return envhive.make("CartPole-v1", 64, api="torchrl")
    if name == "envhive process x64":
        return envhive.make("CartPole-v1", 64, api="torchrl", executor="process")
    if name == "envhive serial x64":
        return envhive.make("CartPole-v1", 64, api="torchrl", executor="serial")
    if name == "envhive process parent_slice x64":
        from envhive.executors import ProcessExecutor

        return envhive.make("CartPole-v1", 64, api="torchrl", executor=ProcessExecutor(parent_slice=True))
    if name == "torchrl SerialEnv(64)":
        return SerialEnv(64, lambda: GymEnv("CartPole-v1"))
    if name == "torchrl ParallelEnv(2 x 32)":
        return ParallelEnv(2, lambda: GymEnv("CartPole-v1", num_envs=32))
    if name == "torchrl GymEnv(num_envs=64)":
        return GymEnv("CartPole-v1", num_envs=64)
    if name == "envhive compiled x256":
        return envhive.make("envhive/CartPole-v1", 256, api="torchrl")
    if name == "torchrl GymEnv(num_envs=256)":
        return GymEnv("CartPole-v1", num_envs=256)
    raise ValueError(name)


def worker(name: str, mode: str, seconds: float, reps: int) -> dict:
    import torch

    torch.set_num_threads(1)
    env = build(name)
    frames_per_step = env.batch_size.numel()
    actions = [env.action_spec.rand() for _ in range(64)]
    counter = [0]

    def policy(td):
        counter[0] += 1
        return td.set("action", actions[counter[0] % 64])

    rates = []
    if mode == "rollout":
        env.rollout(20, policy, break_when_any_done=False)
        for _ in range(reps):
            steps, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                env.rollout(50, policy, break_when_any_done=False)
                steps += 50
            rates.append(steps * frames_per_step / (time.perf_counter() - t0))
    elif mode == "collector":
        from torchrl.collectors import Collector

        fpb = frames_per_step * 50
        collector = Collector(env, policy, frames_per_batch=fpb, total_frames=-1)
        it = iter(collector)
        next(it)
        for _ in range(reps):
            frames, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                frames += next(it).numel()
            rates.append(frames / (time.perf_counter() - t0))
        collector.shutdown()
    elif mode == "raw":
        import numpy as np

        pool = env.pool
        pool.reset()
        acts = [np.asarray(a) for a in actions]
        for t in range(200):
            pool.step(acts[t % 64])
        for _ in range(reps):
            steps, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                for t in range(100):
                    pool.step(acts[t % 64])
                steps += 100
            rates.append(steps * frames_per_step / (time.perf_counter() - t0))
    described = repr(env)
    try:
        env.close()
    except Exception:
        pass
    return {"median": statistics.median(rates), "rates": rates, "frames_per_step": frames_per_step,
            "env": described}


def run(name: str, mode: str, seconds: float, reps: int, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--worker", name, "--mode", mode,
           "--seconds", str(seconds), "--reps", str(reps)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="per timed span")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600.0, help="per subprocess, seconds")
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="rollout", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.mode, args.seconds, args.reps)))
        return

    import torch
    import torchrl

    import envhive

    plan = [(name, "rollout") for name in CONFIGS]
    plan += [(name, "collector") for name, (group, _) in CONFIGS.items() if group == "cartpole64"]
    plan += [("envhive compiled x256", "raw")]
    results: dict[str, dict] = {}
    for name, mode in plan:
        t0 = time.perf_counter()
        got = run(name, mode, args.seconds, args.reps, args.timeout)
        results[f"{name} | {mode}"] = {"config": CONFIGS[name][1], "mode": mode, **got}
        rate = f"{got['median']:,.0f}" if "median" in got else got["error"]
        print(f"# {name} [{mode}]: {rate} frames/s ({time.perf_counter() - t0:.0f} s)", flush=True)

    def rate(key: str) -> float | None:
        return results.get(key, {}).get("median")

    summary: dict[str, object] = {}
    for mode in ("rollout", "collector"):
        ours = rate(f"envhive default x64 | {mode}")
        peers = {n: rate(f"{n} | {mode}") for n, (g, _) in CONFIGS.items() if g == "cartpole64" and n.startswith("torchrl")}
        best_name, best = max(((n, r) for n, r in peers.items() if r), key=lambda x: x[1], default=(None, None))
        summary[f"cartpole64 {mode}: envhive default / TorchRL best ({best_name})"] = (
            round(ours / best, 1) if ours and best else None)
    ours, peer = rate("envhive compiled x256 | rollout"), rate("torchrl GymEnv(num_envs=256) | rollout")
    summary["compiled256 rollout: envhive / TorchRL GymEnv(num_envs=256)"] = round(ours / peer, 1) if ours and peer else None
    raw = rate("envhive compiled x256 | raw")
    if ours and raw:
        per_front = 256 / ours * 1e6
        per_raw = 256 / raw * 1e6
        summary["compiled256 us per batch step: raw pool / through TorchRLEnv.rollout / front end's share"] = (
            round(per_raw, 1), round(per_front, 1), round(per_front - per_raw, 1))
    print("\n| benchmark | frames/s |\n|---|---:|")
    for key, r in results.items():
        print(f"| {key} | {r['median']:,.0f} |" if "median" in r else f"| {key} | {r['error']} |")
    print()
    for k, v in summary.items():
        print(f"* {k}: {v}")
    if args.json:
        out = {
            "command": "python benchmarks/bench_torchrl.py " + " ".join(sys.argv[1:]),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "torch": torch.__version__, "torchrl": torchrl.__version__,
                        "envhive": envhive.__version__},
            "results": results, "summary": summary,
        }
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
