"""Independent PPO with parameter sharing on a PettingZoo env, through envhive's flattened view.

    python examples/multiagent_ppo.py                         # MPE simple_spread (pip install mpe2)
    python examples/multiagent_ppo.py --plot curve.png        # and save the learning curve

What envhive does here: ``envhive.make(factory, num_envs, agent_layout="flat")`` runs a
PettingZoo ``ParallelEnv`` per env (built inside the executor's workers) and folds the agents
into the batch axis, so one policy acts for every agent of every env (parameter sharing, as
PufferLib and MAPPO's "independent" baselines do). ``info["active"]`` masks rows that are
padding (agents dead or not yet joined): their transitions are left out of the loss. In
same_step mode an env that ends is reset in the same step, every agent's last observation in
``info["final_obs"]``: a truncated episode (MPE's time limit) is bootstrapped from it.
"""

from __future__ import annotations

import argparse
import time
from collections import deque

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

import envhive


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--num-steps", type=int, default=50, help="rollout length per env per update")
    p.add_argument("--total-steps", type=int, default=2_000_000, help="agent steps")
    p.add_argument("--lr", type=float, default=7e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--executor", default="process")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default=None, help="save the learning curve (PNG) here")
    return p.parse_args()


def make_env():
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=3, max_cycles=25, continuous_actions=False)


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()

        def mlp(out: int, std: float) -> nn.Sequential:
            last = nn.Linear(64, out)
            nn.init.orthogonal_(last.weight, std)
            nn.init.zeros_(last.bias)
            return nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), last)

        self.actor, self.critic = mlp(n_actions, 0.01), mlp(1, 1.0)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def act(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        dist = Categorical(logits=self.actor(obs))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(obs)


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    env = envhive.make(make_env, args.num_envs, executor=args.executor, autoreset="same_step",
                       agent_layout="flat", seed=args.seed)
    rows, T = env.num_envs, args.num_steps  # rows: (env, agent) pairs
    print(f"{env!r}: {rows} agent rows, obs {env.single_observation_space.shape}, "
          f"actions {env.single_action_space}")
    agent = Agent(int(np.prod(env.single_observation_space.shape)), int(env.single_action_space.n))
    opt = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)

    obs_buf = torch.zeros((T, rows, *env.single_observation_space.shape))
    act_buf = torch.zeros((T, rows), dtype=torch.long)
    logp_buf, rew_buf, done_buf, val_buf, mask_buf = (torch.zeros((T, rows)) for _ in range(5))
    obs_np, info = env.reset()
    obs = torch.as_tensor(obs_np, dtype=torch.float32)
    active = torch.as_tensor(info["active"], dtype=torch.float32)
    returns, running = deque(maxlen=100), np.zeros(rows)
    curve: list[tuple[int, float]] = []
    steps, start = 0, time.time()
    while steps < args.total_steps:
        for t in range(T):
            with torch.no_grad():
                action, logp, _, value = agent.act(obs)
            obs_buf[t], act_buf[t], logp_buf[t], val_buf[t], mask_buf[t] = obs, action, logp, value, active
            obs_np, reward, term, trunc, info = env.step(action.numpy())
            reward = reward.astype(np.float32)
            running += reward * mask_buf[t].numpy()  # the env's rewards (before bootstrapping)
            ended = trunc & ~term
            if "final_obs" in info and ended.any():  # time limit: bootstrap from the true last obs
                last = torch.as_tensor(np.stack(info["final_obs"][ended]), dtype=torch.float32)
                with torch.no_grad():
                    reward[ended] += args.gamma * agent.value(last).numpy()
            rew_buf[t] = torch.as_tensor(reward)
            done_buf[t] = torch.as_tensor(term | trunc, dtype=torch.float32)
            for r in np.flatnonzero(term | trunc):
                returns.append(running[r])
                running[r] = 0.0
            obs = torch.as_tensor(obs_np, dtype=torch.float32)
            active = torch.as_tensor(info["active"], dtype=torch.float32) if "active" in info else torch.ones(rows)
            steps += int(mask_buf[t].sum())
        with torch.no_grad():  # GAE over each agent row
            next_value = agent.value(obs)
            adv = torch.zeros_like(rew_buf)
            last = torch.zeros(rows)
            for t in reversed(range(T)):
                nv = next_value if t == T - 1 else val_buf[t + 1]
                nonterminal = 1.0 - done_buf[t]
                delta = rew_buf[t] + args.gamma * nv * nonterminal - val_buf[t]
                last = delta + args.gamma * args.gae_lambda * nonterminal * last
                adv[t] = last
            ret = adv + val_buf
        b_obs, b_act, b_logp, b_adv, b_ret, b_mask = (
            x.reshape(T * rows, *x.shape[2:]) for x in (obs_buf, act_buf, logp_buf, adv, ret, mask_buf))
        keep = b_mask > 0  # padding rows (inactive agents) are not transitions
        b_obs, b_act, b_logp, b_adv, b_ret = (x[keep] for x in (b_obs, b_act, b_logp, b_adv, b_ret))
        size = b_obs.shape[0] // args.minibatches
        for _ in range(args.epochs):
            order = torch.randperm(b_obs.shape[0])
            for k in range(args.minibatches):
                mb = order[k * size:(k + 1) * size]
                _, logp, entropy, value = agent.act(b_obs[mb], b_act[mb])
                ratio = (logp - b_logp[mb]).exp()
                a = b_adv[mb]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
                loss = pg + 0.5 * ((value - b_ret[mb]) ** 2).mean() - args.ent_coef * entropy.mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                opt.step()
        if returns:
            curve.append((steps, float(np.mean(returns))))
            print(f"agent steps {steps:>9,}  mean agent return (last {len(returns)}) "
                  f"{curve[-1][1]:8.2f}  {steps / (time.time() - start):8,.0f} agent steps/s", flush=True)
    env.close()
    if args.plot and curve:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        xs, ys = zip(*curve)
        plt.figure(figsize=(6, 3.5))
        plt.plot(xs, ys)
        plt.xlabel("agent steps")
        plt.ylabel("mean episode return per agent")
        plt.title(f"simple_spread_v3 (N=3): shared PPO, {args.num_envs} envs")
        plt.tight_layout()
        plt.savefig(args.plot, dpi=100)
        print("wrote", args.plot)


if __name__ == "__main__":
    main()
