"""Front ends' per-call cost: each front end vs the raw pool, and SB3's own VecEnvs, one run.

    python benchmarks/bench_frontends.py --json benchmarks/results/frontends.json

For CartPole-v1 at each ``--num-envs`` (default 1, 8, 64), interleaved ``--repeats`` times:

* the raw pool (``api="pool"``: ``pool.step``, the neutral ``Batch``), and the gymnasium,
  dm_env and SB3 front ends over the same serial pool: what each adds per call (SB3's against
  the raw pool in its own autoreset mode, same_step);
* SB3's ``DummyVecEnv`` vs envhive ``api="sb3"`` on the serial executor, and SB3's
  ``SubprocVecEnv`` vs ``api="sb3"`` on the process executor (one worker per CPU).

Every runner is built, reset and warmed up before it is timed (``envhive._bench``); actions
are pre-sampled. Rows report steps/s (calls x num_envs / s) and µs per call, medians.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

import gymnasium as gym

import envhive
from envhive._bench import run_interleaved, write_results

ENV = "CartPole-v1"


def _envhive(n: int, api: str, executor: str = "serial", autoreset: str | None = None) -> Any:
    env = envhive.make(ENV, n, executor=executor, api=api, seed=0, autoreset=autoreset)
    if api == "pool":
        env.reset(seed=0)
        space = gym.vector.utils.batch_space(env.action_space, n)
        return env.step, space, env.close
    if api == "dm_env":
        env.reset()
        return env.step, gym.vector.utils.batch_space(gym.spaces.Discrete(2), n), env.close
    if api == "sb3":
        env.reset()

        def step(actions: Any) -> Any:
            return env.step(actions)

        return step, gym.vector.utils.batch_space(env.action_space, n), env.close
    env.reset(seed=0)
    return env.step, env.action_space, env.close


def _sb3(n: int, kind: str) -> Any:
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    fns = [functools.partial(gym.make, ENV) for _ in range(n)]
    venv = DummyVecEnv(fns) if kind == "dummy" else SubprocVecEnv(fns)
    venv.seed(0)
    venv.reset()
    return venv.step, gym.vector.utils.batch_space(venv.action_space, n), venv.close


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for n in args.num_envs:
        runners = {
            "envhive raw pool (serial)": functools.partial(_envhive, n, "pool"),
            # SB3's front end runs its pool in same_step mode (ended envs reset in the step).
            "envhive raw pool (serial, same_step)": functools.partial(
                _envhive, n, "pool", "serial", "same_step"),
            "envhive gymnasium (serial)": functools.partial(_envhive, n, "gymnasium"),
            "envhive dm_env (serial)": functools.partial(_envhive, n, "dm_env"),
            "envhive sb3 (serial)": functools.partial(_envhive, n, "sb3"),
            "SB3 DummyVecEnv": functools.partial(_sb3, n, "dummy"),
            "envhive sb3 (process)": functools.partial(_envhive, n, "sb3", "process"),
            "SB3 SubprocVecEnv": functools.partial(_sb3, n, "subproc"),
        }
        got, _ = run_interleaved(runners, ENV, n, args.seconds, args.repeats)
        by = {row["runner"]: row for row in got}
        for row in got:
            # Over the raw pool in the same autoreset mode (SB3's: same_step).
            raw = by["envhive raw pool (serial" + (", same_step)" if "sb3" in row["runner"] else ")")]
            row["us_above_raw_pool"] = row["us_per_call"] - raw["us_per_call"]
        for ours, peer in (("envhive sb3 (serial)", "SB3 DummyVecEnv"),
                           ("envhive sb3 (process)", "SB3 SubprocVecEnv")):
            by[ours]["vs_peer"] = by[ours]["steps_per_s"] / by[peer]["steps_per_s"]
            print(f"n={n:<3} {ours}: {by[ours]['vs_peer']:.2f}x {peer}")
        for row in got[2:5]:
            print(f"n={n:<3} {row['runner']}: +{row['us_above_raw_pool']:.1f} us per call over the raw pool")
        rows += got
    if args.json:
        write_results(args.json, rows)


if __name__ == "__main__":
    main()
