"""EnvPool-style asynchronous collection over worker processes, with envs built in the workers.

`recv()` hands back the first `batch_size` envs to finish, so the policy never waits for the
slowest env. The env here is a Python class holding an object that cannot be pickled (a lock,
standing in for a simulator handle such as MeltingPot's Lab2d). It works because envhive ships
the *factory* to each worker and builds the env there.

    python examples/async_workers.py --rounds 200
"""

from __future__ import annotations

import argparse
import threading
import time

import gymnasium as gym
import numpy as np

import envhive
from envhive.executors import ProcessExecutor


class SlowSim(gym.Env):
    """A toy simulator: each step takes 0.1-2 ms (some envs are slower), and it holds a lock."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Discrete(4)

    def __init__(self, slowness: float) -> None:
        self._handle = threading.Lock()  # not picklable: the env must be built where it runs
        self._slowness = slowness
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.normal(size=3).astype(np.float32), {}

    def step(self, action):
        with self._handle:
            time.sleep(self._slowness * float(self.np_random.uniform(0.1, 2.0)) * 1e-3)
        self._t += 1
        obs = self.np_random.normal(size=3).astype(np.float32)
        return obs, float(action == 0), False, self._t >= 50, {}


def policy(obs: np.ndarray) -> np.ndarray:
    return (obs[:, 0] > 0).astype(np.int64)  # any batched function of the observations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    factories = [lambda i=i: SlowSim(slowness=1.0 + 3.0 * (i % 2)) for i in range(args.num_envs)]
    env = envhive.make(factories, executor=ProcessExecutor(num_workers=args.num_envs),
                       batch_size=args.batch_size, seed=0)
    print(env)
    counts = np.zeros(args.num_envs, dtype=int)
    env.async_reset()
    start = time.perf_counter()
    for _ in range(args.rounds):
        obs, reward, term, trunc, info = env.recv()
        ids = info["env_id"]
        counts[ids] += 1
        env.send(policy(obs), ids)  # autoreset (next_step) happens inside the pool
    elapsed = time.perf_counter() - start
    print(f"{args.rounds * args.batch_size / elapsed:,.0f} env steps/s; "
          f"steps per env (fast envs are even, slow ones odd): {counts.tolist()}")
    env.close()


if __name__ == "__main__":
    main()
