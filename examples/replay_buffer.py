"""Collect clean (obs, action, reward, next_obs, done) transitions for an off-policy learner.

gymnasium 1.x's default autoreset ("next_step") spends one call per episode resetting the env.
That call's row is not a transition: its "next_obs" is the first obs of a new episode and its
reward is 0. Written naively into a replay buffer, it teaches the agent that the terminal
state leads to the start state. This script collects the same data both ways:

* next_step: drop the row that follows an episode end;
* same_step: every row is a transition, and the true next obs of an ended episode is in
  info["final_obs"].

    python examples/replay_buffer.py --steps 2000
"""

from __future__ import annotations

import argparse

import numpy as np

import envhive


def collect_next_step(num_envs: int, steps: int, seed: int) -> list[tuple]:
    env = envhive.make("CartPole-v1", num_envs, autoreset="next_step", seed=seed)
    rng = np.random.default_rng(seed)
    buffer = []
    obs, _ = env.reset()
    prev_done = np.zeros(num_envs, dtype=bool)
    for _ in range(steps):
        action = rng.integers(0, 2, num_envs)
        next_obs, reward, term, trunc, _ = env.step(action)
        for i in np.flatnonzero(~prev_done):  # skip the reset row after an episode end
            buffer.append((obs[i], action[i], reward[i], next_obs[i], term[i]))
        prev_done = term | trunc
        obs = next_obs
    env.close()
    return buffer


def collect_same_step(num_envs: int, steps: int, seed: int) -> list[tuple]:
    env = envhive.make("CartPole-v1", num_envs, autoreset="same_step", seed=seed)
    rng = np.random.default_rng(seed)
    buffer = []
    obs, _ = env.reset()
    for _ in range(steps):
        action = rng.integers(0, 2, num_envs)
        next_obs, reward, term, trunc, info = env.step(action)
        ended = term | trunc
        for i in range(num_envs):
            true_next = info["final_obs"][i] if ended[i] else next_obs[i]
            buffer.append((obs[i], action[i], reward[i], true_next, term[i]))
        obs = next_obs
    env.close()
    return buffer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    a = collect_next_step(args.num_envs, args.steps, seed=0)
    b = collect_same_step(args.num_envs, args.steps, seed=0)
    for name, buf in (("next_step", a), ("same_step", b)):
        rewards = np.array([t[2] for t in buf])
        # CartPole pays 1.0 per real step: a 0.0 reward would be a leaked reset row.
        print(f"{name}: {len(buf)} transitions, {int((rewards == 0).sum())} leaked reset rows, "
              f"{int(sum(t[4] for t in buf))} terminal transitions")


if __name__ == "__main__":
    main()
