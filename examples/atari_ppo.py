"""PPO on an Atari game, in one file, readable top to bottom (CleanRL's ``ppo_atari_envpool``).

    python examples/atari_ppo.py                                  # envhive/Breakout-v5, 200K steps
    python examples/atari_ppo.py --env-id envhive/Pong-v5 --total-steps 1000000

What envhive does here: ``envhive.make("envhive/Breakout-v5", 8, autoreset="same_step")``
runs the 8 games on the native executor's Atari engine (C++ threads in this process, frames
written straight into the pool's buffers) with EnvPool's preprocessing: 84x84 grayscale, 4
stacked frames, frame skip 4, up to 30 no-ops and FIRE at reset. The policy trains on clipped
rewards (``np.sign``) and the
printed returns are the games' real scores (the unclipped rewards the env returns). In
same_step mode an ended game is reset inside the step, so no rollout slot is wasted; a game
cut by the time limit is bootstrapped from the value of its real last frame
(``info["final_obs"]``).

On a 2-core machine this will not master the game in minutes; it shows the loop end to end.
Measured (2026-11-28, the 2-core machine, idle): ``--total-steps 20000`` went from a mean
return of 1.3 (the first 20 games, about random play) to 1.9 (the last 20) in 65 s, ~300
steps/s, most of it the CNN's training on the CPU.
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
    p = argparse.ArgumentParser(description="PPO on an envhive Atari pool")
    p.add_argument("--env-id", default="envhive/Breakout-v5")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128, help="rollout length per env per update")
    p.add_argument("--total-steps", type=int, default=200_000)
    p.add_argument("--lr", type=float, default=2.5e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--clip", type=float, default=0.1)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--executor", default="auto")
    return p.parse_args()


def layer(module: nn.Module, std: float = np.sqrt(2)) -> nn.Module:
    nn.init.orthogonal_(module.weight, std)  # type: ignore[arg-type]
    nn.init.zeros_(module.bias)  # type: ignore[arg-type]
    return module


class Agent(nn.Module):
    """The Nature-DQN torso shared by a categorical actor and a critic."""

    def __init__(self, frames: int, actions: int) -> None:
        super().__init__()
        self.torso = nn.Sequential(
            layer(nn.Conv2d(frames, 32, 8, stride=4)), nn.ReLU(),
            layer(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
            nn.Flatten(), layer(nn.Linear(64 * 7 * 7, 512)), nn.ReLU(),
        )
        self.actor = layer(nn.Linear(512, actions), 0.01)
        self.critic = layer(nn.Linear(512, 1), 1.0)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        return self.torso(obs.float() / 255.0)  # uint8 frames in, scaled here

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.features(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor) -> tuple[Categorical, torch.Tensor]:
        h = self.features(obs)
        return Categorical(logits=self.actor(h)), self.critic(h).squeeze(-1)


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # the env workers use the other core(s)
    n, steps = args.num_envs, args.num_steps

    # -- the envs: one envhive pool, same_step autoreset, frames as uint8 ----------------
    env = envhive.make(args.env_id, n, autoreset="same_step", seed=args.seed, executor=args.executor)
    print(f"{args.env_id}: {env!r}")
    shape = env.single_observation_space.shape
    agent = Agent(shape[0], int(env.single_action_space.n))
    optim = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)

    b_obs = torch.zeros((steps, n, *shape), dtype=torch.uint8)
    b_act, b_logp = torch.zeros((steps, n)), torch.zeros((steps, n))
    b_rew, b_val = torch.zeros((steps, n)), torch.zeros((steps, n))
    b_term, b_cut, b_boot = torch.zeros((steps, n)), torch.zeros((steps, n)), torch.zeros((steps, n))

    obs, _ = env.reset(seed=args.seed)
    returns = np.zeros(n)
    finished: deque[float] = deque(maxlen=20)
    total, updates, t0 = 0, max(1, args.total_steps // (n * steps)), time.perf_counter()

    for update in range(1, updates + 1):
        for g in optim.param_groups:  # linear learning-rate decay
            g["lr"] = args.lr * (1.0 - (update - 1) / updates)

        # -- collect a rollout ------------------------------------------------------------
        for t in range(steps):
            x = torch.from_numpy(obs)
            with torch.no_grad():
                d, v = agent.act(x)
                action = d.sample()
            b_obs[t], b_act[t], b_logp[t], b_val[t] = x, action, d.log_prob(action), v
            obs, reward, term, trunc, info = env.step(action.numpy())
            total += n
            returns += reward  # the real score (the env does not clip: reward_clip=False)
            for i in np.flatnonzero(term | trunc):
                finished.append(float(returns[i]))
                returns[i] = 0.0
            b_rew[t] = torch.as_tensor(np.sign(reward), dtype=torch.float32)  # clipped for learning
            b_term[t] = torch.as_tensor(term, dtype=torch.float32)
            cut = np.flatnonzero(trunc & ~term)
            b_cut[t] = torch.as_tensor(trunc & ~term, dtype=torch.float32)
            b_boot[t] = 0.0
            if cut.size:  # a time limit is not a loss: bootstrap from the real last frames
                final = torch.from_numpy(np.stack([info["final_obs"][i] for i in cut]))
                with torch.no_grad():
                    b_boot[t, cut] = agent.value(final)

        # -- advantages (GAE) -------------------------------------------------------------
        with torch.no_grad():
            next_val = agent.value(torch.from_numpy(obs))
        adv, last = torch.zeros((steps, n)), torch.zeros(n)
        for t in reversed(range(steps)):
            nxt = next_val if t == steps - 1 else b_val[t + 1]
            nxt = torch.where(b_cut[t] > 0, b_boot[t], nxt * (1 - b_term[t]))
            delta = b_rew[t] + args.gamma * nxt - b_val[t]
            last = delta + args.gamma * args.gae_lambda * (1 - b_term[t] - b_cut[t]) * last
            adv[t] = last
        ret = adv + b_val

        # -- optimize the clipped surrogate ------------------------------------------------
        f_obs = b_obs.reshape(steps * n, *shape)
        f_act, f_logp, f_adv, f_ret = (x.reshape(-1) for x in (b_act, b_logp, adv, ret))
        size = steps * n
        mb = size // args.minibatches
        for _ in range(args.epochs):
            perm = torch.randperm(size)
            for start in range(0, size, mb):
                idx = perm[start:start + mb]
                d, v = agent.act(f_obs[idx])
                ratio = (d.log_prob(f_act[idx]) - f_logp[idx]).exp()
                a = f_adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
                loss = pg + args.vf_coef * 0.5 * ((v - f_ret[idx]) ** 2).mean() - args.ent_coef * d.entropy().mean()
                optim.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optim.step()

        mean = float(np.mean(finished)) if finished else float("nan")
        if update % 5 == 0 or update == updates:
            print(f"step {total:>8,}  mean return (last {len(finished)} games) {mean:6.1f}  "
                  f"{total / (time.perf_counter() - t0):,.0f} steps/s", flush=True)

    env.close()
    mean = float(np.mean(finished)) if finished else float("nan")
    print(f"done: mean return {mean:.1f} over the last {len(finished)} games after {total:,} steps "
          f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
