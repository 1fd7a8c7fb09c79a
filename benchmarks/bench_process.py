"""Process executor vs the peers, all in one run.

Runs envhive's process executor (default; with ``cpu_affinity=True``; with ``parent_slice=True``)
against a plain for-loop over the same envs (one process),
gymnasium's SyncVectorEnv and gymnasium's AsyncVectorEnv. It covers CartPole-v1 (Python) and
Ant-v5 (MuJoCo), at 8 and 64 envs, plus per-call latency at 1 env. Writes JSON.

    python benchmarks/bench_process.py --json benchmarks/results/process.json

Ant-v5 needs ``gymnasium[mujoco]`` (``pip install -e ".[bench]"``). Without it, Ant is skipped.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import envhive
from envhive._bench import plain_loop, run_interleaved, write_results
from envhive.executors import ProcessExecutor


def _runners(env_id: str, n: int, workers: int | None) -> dict[str, Callable[[], tuple]]:
    """name -> builder returning (step, batched action space, close)."""

    def envhive_process(**kw: Any) -> Callable[[], tuple]:
        def build() -> tuple:
            env = envhive.make(env_id, n, executor=ProcessExecutor(workers, **kw), seed=0, copy=False)
            env.reset()
            return env.step, env.action_space, env.close
        return build

    def gym_vec(mode: str) -> Callable[[], tuple]:
        def build() -> tuple:
            env = gym.make_vec(env_id, n, vectorization_mode=mode)
            env.reset(seed=0)
            return env.step, env.action_space, env.close
        return build

    def loop() -> tuple:
        step, close = plain_loop(lambda: gym.make(env_id), n)
        return step, gym.vector.utils.batch_space(gym.make(env_id).action_space, n), close

    k = min(workers or os.cpu_count() or 1, n)
    runners = {f"envhive process ({k} workers)": envhive_process()}
    if k > 1 and hasattr(os, "sched_setaffinity"):
        runners[f"envhive process ({k} workers, pinned)"] = envhive_process(cpu_affinity=True)
    if k > 1:
        runners[f"envhive process ({k - 1} workers + parent slice)"] = envhive_process(parent_slice=True)
    runners |= {
        "plain for-loop (1 process)": loop,
        "gymnasium SyncVectorEnv": gym_vec("sync"),
        "gymnasium AsyncVectorEnv": gym_vec("async"),
    }
    return runners


def run_case(env_id: str, n: int, seconds: float, workers: int | None, repeats: int) -> list[dict[str, Any]]:
    """Each runner ``repeats`` times, interleaved (this machine's speed drifts); report medians."""
    runners = _runners(env_id, n, workers)
    return run_interleaved(runners, env_id, n, seconds, repeats, width=42)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (median)")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--workers", type=int, default=None, help="default: one per CPU")
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Ant-v5"])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for env_id in args.envs:
        try:
            gym.make(env_id).close()
        except Exception as err:
            print(f"skipping {env_id}: {type(err).__name__}: {err}")
            continue
        for n in [1, *args.num_envs] if env_id == "CartPole-v1" else args.num_envs:
            rows.extend(run_case(env_id, n, args.seconds, args.workers, args.repeats))
    if args.json:
        write_results(args.json, rows)


if __name__ == "__main__":
    main()
