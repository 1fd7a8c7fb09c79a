"""envhive.envpool and EnvPool's engines, measured against their peers in the same run.

Two questions:

1. **Front-end cost**: what ``envhive.envpool`` adds per call over ``envhive.make``: the same
   pool (envhive's CartPole kernel on the native executor) stepped through
   ``envhive.envpool.make_gym(...).step`` and through ``envhive.make(...).step``, at 1, 8 and
   64 envs; the figure is the difference in microseconds per call.
2. **EnvPool's engine**: ``envhive.make("envpool/<id>")`` (EnvPool's engine wrapped as an
   envhive engine, gymnasium front end) against EnvPool itself (``envpool.make_gymnasium``),
   on DMC cheetah-run, a Procgen game, a MiniGrid id and a Box2D id, at 8 and 64 envs, sync
   (``step`` of every env) and async (``batch_size = num_envs // 2``: EnvPool's ``send``/``recv``
   loop). The figure is envhive's steps/s over EnvPool's.

Each pair is measured interleaved (A, B, A, B, ...) and the median of ``--repeats`` is kept;
the JSON records the machine's load average, since a busy machine moves both.

Usage:
    python benchmarks/bench_envpool.py [--seconds 1.0] [--repeats 5]
        [--out benchmarks/results/bench_envpool.json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

ENGINE_IDS = ["CheetahRun-v1", "CoinrunEasy-v0", "MiniGrid-Empty-8x8-v0", "LunarLander-v3"]


def _timed(step: Callable[[], Any], seconds: float) -> float:
    """Calls of ``step`` per second over about ``seconds`` (after a short warm-up)."""
    for _ in range(3):
        step()
    calls, start = 0, time.perf_counter()
    while True:
        for _ in range(10):
            step()
        calls += 10
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls / elapsed


def _pair(a: Callable[[], Any], b: Callable[[], Any], seconds: float, repeats: int) -> tuple[float, float]:
    ra, rb = [], []
    for _ in range(repeats):
        ra.append(_timed(a, seconds))
        rb.append(_timed(b, seconds))
    return statistics.median(ra), statistics.median(rb)


# -------------------------------------------------------------------------- 1. front-end cost
def frontend_cost(num_envs: int, seconds: float, repeats: int) -> dict[str, Any]:
    import envhive
    import envhive.envpool as envpool

    ours = envpool.make_gym("CartPole-v1", num_envs=num_envs, seed=0)
    plain = envhive.make("envhive/CartPole-v1", num_envs, seed=0, max_episode_steps=500)
    ours.reset(), plain.reset()
    a32 = np.zeros(num_envs, np.int32)
    a64 = np.zeros(num_envs, np.int64)
    try:
        r_ours, r_plain = _pair(lambda: ours.step(a32), lambda: plain.step(a64), seconds, repeats)
    finally:
        ours.close(), plain.close()
    return {"num_envs": num_envs, "envhive.envpool_us": 1e6 / r_ours, "envhive.make_us": 1e6 / r_plain,
            "added_us": 1e6 / r_ours - 1e6 / r_plain}


# -------------------------------------------------------------------------- 2. EnvPool's engine
def _actions(space: Any, count: int, dtype: Any) -> list[np.ndarray]:
    space.seed(0)
    return [np.asarray([space.sample() for _ in range(count)], dtype) for _ in range(16)]


def _loop(env: Any, acts: list[Any], sync: bool) -> Callable[[], Any]:
    """One call of EnvPool's loop on ``env`` (EnvPool's pool or envhive's, the same API):
    ``step`` of every env (sync), or ``send`` the batch received and ``recv`` the next."""
    k = [0]
    if sync:
        env.reset()

        def step() -> Any:
            k[0] += 1
            return env.step(acts[k[0] % 16])

        return step
    env.async_reset()
    ids = [env.recv()[-1]["env_id"]]

    def cycle() -> Any:
        k[0] += 1
        env.send(acts[k[0] % 16], ids[0])
        ids[0] = env.recv()[-1]["env_id"]

    return cycle


def _envpool_loops(task: str, n: int, batch: int) -> tuple[Callable[[], Any], Any]:
    from envhive.envs.envpool._real import envpool_module, real_envpool

    ep = envpool_module()
    with real_envpool():
        env = ep.make_gymnasium(task, num_envs=n, batch_size=batch, seed=0)
    dtype = env.spec.action_array_spec["action"].dtype
    return _loop(env, _actions(env.action_space, batch, dtype), batch == n), env


def _envhive_loops(task: str, n: int, batch: int) -> tuple[Callable[[], Any], Any]:
    import envhive

    env = envhive.make(f"envpool/{task}", n, batch_size=batch, seed=0)
    acts = _actions(env.single_action_space, batch, env.single_action_space.dtype)
    return _loop(env, acts, batch == n), env


def engine_ratio(task: str, n: int, mode: str, seconds: float, repeats: int) -> dict[str, Any]:
    batch = n if mode == "sync" else n // 2
    ours, env_a = _envhive_loops(task, n, batch)
    theirs, env_b = _envpool_loops(task, n, batch)
    try:
        r_ours, r_theirs = _pair(ours, theirs, seconds, repeats)
    finally:
        env_a.close(), env_b.close()
    return {"task": task, "num_envs": n, "mode": mode, "envhive_steps_per_s": r_ours * batch,
            "envpool_steps_per_s": r_theirs * batch, "ratio": r_ours / r_theirs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results/bench_envpool.json")
    parser.add_argument("--quick", action="store_true", help="one repeat of 0.2 s each (a smoke run)")
    parser.add_argument("--tasks", nargs="*", default=ENGINE_IDS, help="EnvPool ids for part 2")
    parser.add_argument("--skip-frontend", action="store_true", help="part 2 only")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats = 0.2, 1
    report: dict[str, Any] = {
        "command": "python " + " ".join(["benchmarks/bench_envpool.py", *(argv or sys.argv[1:])]),
        "cpus": os.cpu_count(), "load_before": os.getloadavg(),
        "frontend": [], "engine": [],
    }
    for n in () if args.skip_frontend else (1, 8, 64):
        row = frontend_cost(n, args.seconds, args.repeats)
        report["frontend"].append(row)
        print(f"front end x{n}: +{row['added_us']:.1f} us per step "
              f"({row['envhive.envpool_us']:.1f} vs {row['envhive.make_us']:.1f})", flush=True)
    for task in args.tasks:
        for n in (8, 64):
            for mode in ("sync", "async"):
                row = engine_ratio(task, n, mode, args.seconds, args.repeats)
                report["engine"].append(row)
                print(f"{task} x{n} {mode}: {row['ratio']:.3f}x EnvPool "
                      f"({row['envhive_steps_per_s']:.0f} vs {row['envpool_steps_per_s']:.0f} steps/s)", flush=True)
    report["load_after"] = os.getloadavg()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"-> {args.out} (load average {report['load_before'][0]:.1f} before, {report['load_after'][0]:.1f} after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
