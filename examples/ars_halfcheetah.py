"""Augmented Random Search (ARS, Mania et al. 2018) on envhive's compiled HalfCheetah-v5.

Each iteration perturbs a linear policy in ``--directions`` random directions, both ways, and
runs one episode per perturbed policy: 2 x directions envs stepped as one batch by the native
MuJoCo engine (physics, observations and rewards of the whole batch in one compiled, threaded
call). Every env has its own policy; the actions of the batch are one ``einsum``. The engine is
bit-identical to gymnasium's HalfCheetah-v5, so at the end the learned policy is replayed on
gymnasium's own env with the same seed and gets exactly the same return.

    python examples/ars_halfcheetah.py --iterations 50      # ~1 s per iteration on 2 cores
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import envhive


def rollouts(env: envhive.VectorEnv, policies: np.ndarray, seed: int) -> np.ndarray:
    """One episode per env (env i acting with the linear policy ``policies[i]``); returns."""
    obs, _ = env.reset(seed=seed)
    returns = np.zeros(env.num_envs)
    running = np.ones(env.num_envs, dtype=bool)
    while running.any():
        actions = np.clip(np.einsum("nij,nj->ni", policies, obs), -1.0, 1.0).astype(np.float32)
        obs, reward, terminated, truncated, _ = env.step(actions)
        returns += reward * running  # each env's first episode only
        running &= ~(terminated | truncated)
    return returns


def replay(env: gym.Env, policy: np.ndarray, seed: int) -> float:
    """The return of ``policy`` on one single-env gymnasium-API env."""
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        action = np.clip(policy @ obs, -1.0, 1.0).astype(np.float32)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        done = terminated or truncated
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--directions", type=int, default=32)
    parser.add_argument("--top", type=int, default=16, help="best directions used per update")
    parser.add_argument("--horizon", type=int, default=1000, help="episode length (time limit)")
    parser.add_argument("--step-size", type=float, default=0.02)
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    k = args.directions
    env = envhive.make("envhive/HalfCheetah-v5", 2 * k, max_episode_steps=args.horizon)
    act_dim = env.single_action_space.shape[0]
    obs_dim = env.single_observation_space.shape[0]
    rng = np.random.default_rng(args.seed)
    policy = np.zeros((act_dim, obs_dim))
    start = time.perf_counter()
    for it in range(args.iterations):
        deltas = rng.standard_normal((k, act_dim, obs_dim))
        policies = np.concatenate([policy + args.noise * deltas, policy - args.noise * deltas])
        returns = rollouts(env, policies, seed=args.seed + it)  # same start states for +/-
        plus, minus = returns[:k], returns[k:]
        best = np.argsort(np.maximum(plus, minus))[-args.top :]
        sigma = returns[np.concatenate([best, best + k])].std() + 1e-8
        step = (plus[best] - minus[best]) @ deltas[best].reshape(len(best), -1)
        policy += args.step_size / (len(best) * sigma) * step.reshape(act_dim, obs_dim)
        print(f"iteration {it:3d}: mean return {returns.mean():8.1f}, best {returns.max():8.1f}")
    seconds = time.perf_counter() - start
    print(f"{env.env_steps:,} env steps in {seconds:.1f} s on {env!r}")
    env.close()

    # Same seed, same policy: envhive's env and gymnasium's give the very same return.
    with envhive.make("envhive/HalfCheetah-v5", 1, max_episode_steps=args.horizon) as one:
        ours = rollouts(one, policy[None], seed=1234)[0]
    theirs = replay(gym.make("HalfCheetah-v5", max_episode_steps=args.horizon), policy, seed=1234)
    same = "identical" if ours == theirs else "DIFFERENT"
    print(f"learned policy, seed 1234: envhive {ours:.6f}, gymnasium HalfCheetah-v5 {theirs:.6f} ({same})")


if __name__ == "__main__":
    main()
