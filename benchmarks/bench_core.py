"""Core overhead: envhive's serial executor vs gymnasium SyncVectorEnv vs a plain for-loop.

The serial executor is the reference every other executor is checked against; this script
shows what its validation, autoreset and buffer bookkeeping cost per call, with the peers
measured in the same run.

    python benchmarks/bench_core.py --json benchmarks/results/core.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import envhive
from envhive._bench import measure_steps, random_actions


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


def plain_loop(make_env, n: int):
    """A for-loop over n envs with manual next-step autoreset: the no-framework baseline."""
    envs = [make_env() for _ in range(n)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    done = [False] * n

    def step(actions):
        for i, e in enumerate(envs):
            if done[i]:
                e.reset()
                done[i] = False
            else:
                _, _, te, tr, _ = e.step(actions[i])
                done[i] = te or tr

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    cases = {"CartPole-v1": lambda: gym.make("CartPole-v1"), "Noop": NoopEnv}
    rows = []
    for env_name, make_env in cases.items():
        for n in args.num_envs:
            runners = {
                "envhive serial": lambda f=make_env, k=n: envhive.make(f, k, executor="serial", copy=False),
                "gymnasium SyncVectorEnv": lambda f=make_env, k=n: gym.vector.SyncVectorEnv([f] * k, copy=False),
            }
            for name, build in runners.items():
                env = build()
                env.reset(seed=0)
                m = measure_steps(env.step, random_actions(env.action_space, 64), n,
                                  seconds=args.seconds, runner=name, env=env_name)
                env.close()
                rows.append(m.as_dict() | {"us_per_call": 1e6 * m.seconds / m.calls})
            step = plain_loop(make_env, n)
            acts = random_actions(spaces.MultiDiscrete([2] * n), 64)
            m = measure_steps(step, acts, n, seconds=args.seconds, runner="plain for-loop", env=env_name)
            rows.append(m.as_dict() | {"us_per_call": 1e6 * m.seconds / m.calls})
            for r in rows[-3:]:
                print(f"{r['env']:<12} n={n:<3} {r['runner']:<24} {r['steps_per_s']:>11,.0f} steps/s "
                      f"{r['us_per_call']:>8.1f} us/call")
    if args.json:
        meta = {"machine": platform.platform(), "python": platform.python_version(),
                "cpus": __import__("os").cpu_count(), "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                "envhive": envhive.__version__, "gymnasium": gym.__version__}
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "results": rows}, fh, indent=2)
        print("wrote", args.json)


if __name__ == "__main__":
    main()
