"""Thread executor vs serial vs gymnasium's SyncVectorEnv, all in one run.

Every runner steps the same envs, built by the same factory (``gymnasium.make(env_id)``), with
the same pre-sampled random actions. Runners are interleaved over ``--repeats`` rounds (this
machine's speed drifts) and the median is reported. Writes JSON.

    python benchmarks/bench_thread.py --json benchmarks/results/thread.json

The default env, Ant-v5 (MuJoCo), needs ``gymnasium[mujoco]`` (``pip install -e ".[bench]"``).
MuJoCo's ``mj_step`` releases the GIL, which is what the thread executor needs. Add
``--envs CartPole-v1`` to see a pure-Python env, which the GIL serializes.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

import envhive
from envhive._bench import run_interleaved, write_results
from envhive.executors import SerialExecutor, ThreadExecutor


def _runners(env_id: str, n: int, threads: int | None) -> dict[str, Callable[[], tuple]]:
    """name -> builder returning (step, batched action space, close)."""

    def factory() -> gym.Env:
        return gym.make(env_id)

    def envhive_pool(make_executor: Callable[[], Any]) -> Callable[[], tuple]:
        def build() -> tuple:
            env = envhive.make(factory, n, executor=make_executor(), seed=0, copy=False)
            env.reset()
            return env.step, env.action_space, env.close
        return build

    def gym_sync() -> tuple:
        env = gym.vector.SyncVectorEnv([factory] * n)
        env.reset(seed=0)
        return env.step, env.action_space, env.close

    k = min(threads or os.cpu_count() or 1, n)
    return {
        f"envhive thread ({k} threads)": envhive_pool(lambda: ThreadExecutor(k)),
        "envhive serial": envhive_pool(SerialExecutor),
        "gymnasium SyncVectorEnv": gym_sync,
    }


def run_case(env_id: str, n: int, seconds: float, threads: int | None, repeats: int) -> list[dict[str, Any]]:
    """Each runner ``repeats`` times, interleaved; report medians."""
    runners = _runners(env_id, n, threads)
    rows, samples = run_interleaved(runners, env_id, n, seconds, repeats, width=28)
    serial = float(np.median(samples["envhive serial"]))
    for name in runners:
        if name.startswith("envhive thread"):
            print(f"{env_id:<12} n={n:<3} thread / serial = {np.median(samples[name]) / serial:.2f}x", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (median)")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--threads", type=int, default=None, help="default: one per CPU")
    parser.add_argument("--envs", nargs="+", default=["Ant-v5"])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for env_id in args.envs:
        try:
            gym.make(env_id).close()
        except Exception as err:
            print(f"skipping {env_id}: {type(err).__name__}: {err}")
            continue
        for n in args.num_envs:
            rows.extend(run_case(env_id, n, args.seconds, args.threads, args.repeats))
    if args.json:
        write_results(args.json, rows)


if __name__ == "__main__":
    main()
