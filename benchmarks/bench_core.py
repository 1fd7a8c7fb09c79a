"""Core overhead: envhive's serial executor vs gymnasium SyncVectorEnv vs a plain for-loop.

The serial executor is the reference every other executor is checked against; this script
shows what its validation, autoreset and buffer bookkeeping cost per call, with the peers
measured in the same run.

    python benchmarks/bench_core.py --json benchmarks/results/core.json
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import envhive
from envhive._bench import measure_steps, plain_loop, random_actions, write_results


class NoopEnv(gym.Env):
    """Does nothing: isolates the vector layer's own per-call cost."""

    observation_space = spaces.Box(-1, 1, (4,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self._obs = np.zeros(4, np.float32)

    def reset(self, *, seed=None, options=None):
        return self._obs, {}

    def step(self, action):
        return self._obs, 1.0, False, False, {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (median)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    cases = {"CartPole-v1": lambda: gym.make("CartPole-v1"), "Noop": NoopEnv}
    rows = []
    for env_name, make_env in cases.items():
        for n in args.num_envs:

            def envhive_serial(f=make_env, k=n):
                env = envhive.make(f, k, executor="serial", copy=False)
                env.reset(seed=0)
                return env.step, env.action_space, env.close

            def gym_sync(f=make_env, k=n):
                env = gym.vector.SyncVectorEnv([f] * k, copy=False)
                env.reset(seed=0)
                return env.step, env.action_space, env.close

            def loop(f=make_env, k=n):
                step, close = plain_loop(f, k)
                return step, spaces.MultiDiscrete([2] * k), close

            runners = {"envhive serial": envhive_serial, "gymnasium SyncVectorEnv": gym_sync,
                       "plain for-loop": loop}
            samples: dict[str, list[tuple[float, float]]] = {k: [] for k in runners}
            for _ in range(args.repeats):
                for name, build in runners.items():
                    step, space, close = build()
                    m = measure_steps(step, random_actions(space, 64), n, seconds=args.seconds)
                    close()
                    samples[name].append((m.steps_per_s, 1e6 * m.seconds / m.calls))
            for name, got in samples.items():
                sps = float(np.median([g[0] for g in got]))
                us = float(np.median([g[1] for g in got]))
                rows.append({"runner": name, "env": env_name, "num_envs": n, "steps_per_s": sps,
                             "us_per_call": us, "samples": [g[0] for g in got]})
                print(f"{env_name:<12} n={n:<3} {name:<24} {sps:>11,.0f} steps/s {us:>8.1f} us/call",
                      flush=True)
    if args.json:
        write_results(args.json, rows)


if __name__ == "__main__":
    main()
