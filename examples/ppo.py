"""PPO on an envhive pool, in one file, readable top to bottom (the CleanRL style).

    python examples/ppo.py                                   # envhive/CartPole-v1 to return 475
    python examples/ppo.py --env-id envhive/HalfCheetah-v5 --total-steps 1000000

What envhive does here: ``envhive.make(env_id, num_envs, autoreset="same_step")`` steps all
envs as one batch (the compiled ids run on the native executor, no Python per env). In
same_step mode an env that ends is reset inside the same step: ``obs`` is already the next
episode's first observation and ``info["final_obs"]`` holds the true last one, so no rollout
slot is wasted on a reset transition, and an episode cut by the time limit (truncated) is
bootstrapped from the value of its real final observation rather than treated as a failure.

Discrete action spaces get a categorical policy; Box ones a diagonal Gaussian with
observations normalized by running statistics and rewards scaled by the running std of the
discounted return (what PPO needs on MuJoCo). Training stops when the mean return of the last
``--window`` episodes reaches ``--target`` (default: 475 for CartPole, none otherwise).
"""

from __future__ import annotations

import argparse
import time
from collections import deque

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

import envhive


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="PPO on an envhive pool")
    p.add_argument("--env-id", default="envhive/CartPole-v1")
    p.add_argument("--num-envs", type=int, default=None, help="default: 16 (discrete), 32 (continuous)")
    p.add_argument("--num-steps", type=int, default=None, help="rollout length per env per update")
    p.add_argument("--total-steps", type=int, default=500_000)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=None)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--target", type=float, default=None, help="stop at this mean return")
    p.add_argument("--window", type=int, default=50, help="episodes in the mean return")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--executor", default="auto")
    return p.parse_args()


class RunningStats:
    """Running mean and variance of a stream of batches (Chan et al.'s parallel update)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 1e-4

    def update(self, batch: np.ndarray) -> None:
        b_mean, b_var, b_count = batch.mean(0), batch.var(0), batch.shape[0]
        delta, total = b_mean - self.mean, self.count + b_count
        self.mean = self.mean + delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / total
        self.var, self.count = m2 / total, total


def layer(n_in: int, n_out: int, std: float = np.sqrt(2)) -> nn.Linear:
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class Agent(nn.Module):
    """Separate actor and critic MLPs (two hidden layers of 64, tanh)."""

    def __init__(self, obs_dim: int, act_dim: int, discrete: bool) -> None:
        super().__init__()
        self.discrete = discrete
        self.critic = nn.Sequential(layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0))
        self.actor = nn.Sequential(layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, act_dim, 0.01))
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def dist(self, obs: torch.Tensor) -> Categorical | Normal:
        out = self.actor(obs)
        return Categorical(logits=out) if self.discrete else Normal(out, self.log_std.exp())

    def log_prob(self, d: Categorical | Normal, action: torch.Tensor) -> torch.Tensor:
        lp = d.log_prob(action)
        return lp if self.discrete else lp.sum(-1)


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    # -- the envs: one envhive pool, same_step autoreset ----------------------------------
    with envhive.make(args.env_id, 1) as probe:
        discrete = isinstance(probe.single_action_space, gym.spaces.Discrete)
    n = args.num_envs or (16 if discrete else 32)
    steps = args.num_steps or 64
    lr = args.lr or (2.5e-3 if discrete else 3e-4)
    epochs = args.epochs or (8 if discrete else 10)
    ent_coef = args.ent_coef if args.ent_coef is not None else 0.0
    target = args.target if args.target is not None else (475.0 if "CartPole" in args.env_id else None)
    env = envhive.make(args.env_id, n, autoreset="same_step", seed=args.seed, executor=args.executor)
    obs_dim = int(np.prod(env.single_observation_space.shape))
    act_space = env.single_action_space
    act_dim = int(act_space.n) if discrete else int(np.prod(act_space.shape))
    print(f"{args.env_id}: {env!r}")

    obs_stats = None if discrete else RunningStats((obs_dim,))
    ret_stats = None if discrete else RunningStats(())
    discounted = np.zeros(n)

    def prepare(o: np.ndarray) -> torch.Tensor:
        o = o.reshape(len(o), -1).astype(np.float64)
        if obs_stats is not None:
            o = np.clip((o - obs_stats.mean) / np.sqrt(obs_stats.var + 1e-8), -10, 10)
        return torch.as_tensor(o, dtype=torch.float32)

    agent = Agent(obs_dim, act_dim, discrete)
    optim = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)

    # Rollout storage: one row per step, one column per env.
    b_obs = torch.zeros((steps, n, obs_dim))
    b_act = torch.zeros((steps, n) if discrete else (steps, n, act_dim))
    b_logp, b_rew, b_val = torch.zeros((steps, n)), torch.zeros((steps, n)), torch.zeros((steps, n))
    b_term, b_cut = torch.zeros((steps, n)), torch.zeros((steps, n))  # cut: truncated, not terminated
    b_boot = torch.zeros((steps, n))  # the value of a cut episode's real final observation

    obs, _ = env.reset(seed=args.seed)
    if obs_stats is not None:
        obs_stats.update(obs.reshape(n, -1))
    returns, lengths = np.zeros(n), np.zeros(n, np.int64)
    finished: deque[float] = deque(maxlen=args.window)
    total, updates, t0 = 0, args.total_steps // (n * steps), time.perf_counter()
    solved_at = None

    for update in range(1, updates + 1):
        for g in optim.param_groups:  # linear learning-rate decay
            g["lr"] = lr * (1.0 - (update - 1) / updates)

        # -- collect a rollout ------------------------------------------------------------
        for t in range(steps):
            x = prepare(obs)
            with torch.no_grad():
                d = agent.dist(x)
                action = d.sample()
                b_logp[t], b_val[t] = agent.log_prob(d, action), agent.value(x)
            b_obs[t], b_act[t] = x, action
            a = action.numpy()
            if not discrete:  # the Gaussian's sample, clipped into the Box
                a = np.clip(a, act_space.low, act_space.high).astype(act_space.dtype)
            obs, reward, term, trunc, info = env.step(a)
            total += n
            returns += reward
            lengths += 1
            done = term | trunc
            for i in np.flatnonzero(done):
                finished.append(float(returns[i]))
                returns[i], lengths[i] = 0.0, 0
            r = reward
            if ret_stats is not None:  # scale rewards by the std of the discounted return
                discounted = discounted * args.gamma * (1 - done) + reward
                ret_stats.update(discounted)
                r = reward / np.sqrt(ret_stats.var + 1e-8)
            b_rew[t] = torch.as_tensor(r, dtype=torch.float32)
            b_term[t] = torch.as_tensor(term, dtype=torch.float32)
            b_boot[t] = 0.0
            cut = np.flatnonzero(trunc & ~term)
            b_cut[t] = torch.as_tensor(trunc & ~term, dtype=torch.float32)
            if cut.size:  # a time limit is not a failure: bootstrap from the real last obs
                final = np.stack([info["final_obs"][i] for i in cut])
                with torch.no_grad():
                    b_boot[t, cut] = agent.value(prepare(final))
            if obs_stats is not None:
                obs_stats.update(obs.reshape(n, -1))

        # -- advantages (GAE): an ended env's next value is its bootstrap, not the reset obs'
        with torch.no_grad():
            next_val = agent.value(prepare(obs))
        adv = torch.zeros((steps, n))
        last = torch.zeros(n)
        for t in reversed(range(steps)):
            nxt = next_val if t == steps - 1 else b_val[t + 1]
            ended = b_term[t] + b_cut[t]  # the episode ended here: next obs is another's
            nxt = torch.where(b_cut[t] > 0, b_boot[t], nxt * (1 - b_term[t]))
            delta = b_rew[t] + args.gamma * nxt - b_val[t]
            last = delta + args.gamma * args.gae_lambda * (1 - ended) * last
            adv[t] = last
        ret = adv + b_val

        # -- optimize the clipped surrogate ------------------------------------------------
        flat = lambda x: x.reshape(steps * n, *x.shape[2:])  # noqa: E731
        f_obs, f_act, f_logp, f_adv, f_ret, f_val = map(flat, (b_obs, b_act, b_logp, adv, ret, b_val))
        size = steps * n
        mb = size // args.minibatches
        for _ in range(epochs):
            perm = torch.randperm(size)
            for start in range(0, size, mb):
                idx = perm[start:start + mb]
                d = agent.dist(f_obs[idx])
                logp = agent.log_prob(d, f_act[idx])
                ratio = (logp - f_logp[idx]).exp()
                a_mb = f_adv[idx]
                a_mb = (a_mb - a_mb.mean()) / (a_mb.std() + 1e-8)
                pg = torch.max(-a_mb * ratio, -a_mb * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
                v = agent.value(f_obs[idx])
                v_clipped = f_val[idx] + (v - f_val[idx]).clamp(-args.clip, args.clip)
                v_loss = 0.5 * torch.max((v - f_ret[idx]) ** 2, (v_clipped - f_ret[idx]) ** 2).mean()
                entropy = d.entropy() if discrete else d.entropy().sum(-1)
                loss = pg + args.vf_coef * v_loss - ent_coef * entropy.mean()
                optim.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optim.step()

        mean = float(np.mean(finished)) if finished else float("nan")
        if update % 10 == 0 or update == updates:
            print(f"step {total:>8,}  mean return (last {len(finished)}) {mean:8.1f}  "
                  f"{total / (time.perf_counter() - t0):,.0f} steps/s", flush=True)
        if target is not None and len(finished) == args.window and mean >= target:
            solved_at = total
            break

    env.close()
    took = time.perf_counter() - t0
    mean = float(np.mean(finished)) if finished else float("nan")
    if solved_at is not None:
        print(f"solved: mean return {mean:.1f} over the last {args.window} episodes at step {solved_at:,} ({took:.0f} s)")
    else:
        print(f"done: mean return {mean:.1f} over the last {len(finished)} episodes after {total:,} steps ({took:.0f} s)")
        if target is not None:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
