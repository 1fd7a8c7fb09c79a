"""Solve CartPole with the cross-entropy method on envhive's compiled CartPole kernel.

Each generation samples 64 linear policies and runs one episode of each, all 64 envs stepped
as one batch by the native executor (one compiled call per step). Every env has its own
policy: actions are computed for the whole batch with one matrix product. The kernel is
bit-identical to gymnasium's CartPole-v1, so the solved policy solves gymnasium's env too
(checked at the end).

    python examples/cem_cartpole.py --generations 15
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import envhive


def episode_returns(env: envhive.VectorEnv, weights: np.ndarray, seed: int) -> np.ndarray:
    """One episode per env, env i acting with weights[i]; returns the episodes' returns."""
    n = env.num_envs
    obs, _ = env.reset(seed=seed)
    returns = np.zeros(n)
    running = np.ones(n, dtype=bool)
    while running.any():
        actions = (np.einsum("ij,ij->i", obs, weights) > 0).astype(np.int64)
        obs, reward, terminated, truncated, _ = env.step(actions)
        returns += reward * running  # count each env's first episode only (autoreset goes on)
        running &= ~(terminated | truncated)
    return returns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=15)
    parser.add_argument("--population", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    mean, std = np.zeros(4), np.ones(4)
    env = envhive.make("envhive/CartPole-v1", args.population)
    start = time.perf_counter()
    for gen in range(args.generations):
        weights = mean + std * rng.standard_normal((args.population, 4))
        returns = episode_returns(env, weights, seed=args.seed + gen * args.population)
        elite = weights[np.argsort(returns)[-args.population // 8 :]]
        mean, std = elite.mean(axis=0), elite.std(axis=0) + 0.05
        print(f"generation {gen:2d}: mean return {returns.mean():6.1f}, best {returns.max():5.0f}")
    seconds = time.perf_counter() - start
    print(f"{env.env_steps:,} env steps in {seconds:.2f} s on {env!r}")
    env.close()

    # The kernel is gymnasium's CartPole: the policy scores the same on gymnasium's own env.
    check = gym.make("CartPole-v1")
    obs, _ = check.reset(seed=123)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = check.step(int(obs @ mean > 0))
        total += reward
        done = terminated or truncated
    print(f"gymnasium CartPole-v1 with the mean policy: return {total:.0f}")


if __name__ == "__main__":
    main()
