"""PPO with the whole training loop in one ``jax.jit``, PureJaxRL-style, on an envhive pool.

    python examples/ppo_jax.py                      # envhive/CartPole-v1, then gymnax's CartPole
    python examples/ppo_jax.py --no-gymnax          # envhive only

What envhive does here: ``env.xla()`` gives EnvPool's ``(handle, recv, send, step)``, jax
functions that step the compiled CartPole inside ``jit``. The rollout (a ``lax.scan`` of
``step``), the advantages, the epochs of minibatch updates and the outer loop over updates are
one compiled program: no Python between env steps and gradient steps. The pool runs in
same_step mode, as gymnax's ``AutoResetEnvWrapper`` does: an env that ends is reset inside the
same step, so ``obs`` is already the next episode's first observation.

The same training function then runs on gymnax's CartPole-v1 (a jax-native env, vmapped), if
gymnax is installed, and the script prints both runs' env steps per second. It reports the
mean return of the episodes that ended in the last updates; CartPole counts as solved at 475.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import envhive


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="PureJaxRL-style PPO on envhive/CartPole-v1")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--total-steps", type=int, default=500_000)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--lr", type=float, default=2.5e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-gymnax", action="store_true", help="skip the gymnax run")
    return p.parse_args()


class ActorCritic(nn.Module):
    """Two tanh MLPs of 64 units: action logits and the value (PureJaxRL's network)."""

    num_actions: int

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        def mlp(x: jax.Array, out: int, scale: float) -> jax.Array:
            for _ in range(2):
                x = nn.tanh(nn.Dense(64, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(x))
            return nn.Dense(out, kernel_init=nn.initializers.orthogonal(scale))(x)

        return mlp(x, self.num_actions, 0.01), jnp.squeeze(mlp(x, 1, 1.0), -1)


class Transition(NamedTuple):
    done: jax.Array
    action: jax.Array
    value: jax.Array
    reward: jax.Array
    log_prob: jax.Array
    obs: jax.Array


#: An env as the training loop sees it: ``(env_state, actions) -> (env_state, (obs, reward, done))``.
EnvStep = Callable[[Any, jax.Array], tuple[Any, tuple[jax.Array, jax.Array, jax.Array]]]


def make_train(args: argparse.Namespace, env_step: EnvStep, num_actions: int, obs_dim: int) -> Callable[..., Any]:
    """PPO's whole training as one function of ``(rng, env_state, first_obs)`` (jit it)."""
    n, t = args.num_envs, args.num_steps
    updates = args.total_steps // (n * t)
    minibatch = n * t // args.minibatches
    net = ActorCritic(num_actions)

    def schedule(count: jax.Array) -> jax.Array:
        done = count // (args.minibatches * args.epochs)
        return args.lr * (1.0 - done / updates)

    tx = optax.chain(optax.clip_by_global_norm(args.max_grad_norm), optax.adam(schedule, eps=1e-5))

    def train(rng: jax.Array, env_state: Any, obs: jax.Array) -> tuple[Any, dict[str, jax.Array]]:
        rng, init = jax.random.split(rng)
        params = net.init(init, jnp.zeros((1, obs_dim)))
        opt = tx.init(params)
        episode = jnp.zeros(n)  # each env's return so far

        def rollout_step(carry: Any, _: Any) -> tuple[Any, Any]:
            params, env_state, obs, episode, rng = carry
            rng, pick = jax.random.split(rng)
            logits, value = net.apply(params, obs)
            action = jax.random.categorical(pick, logits)
            log_prob = jax.nn.log_softmax(logits)[jnp.arange(n), action]
            env_state, (next_obs, reward, done) = env_step(env_state, action)
            episode = episode + reward
            ended_return = jnp.where(done, episode, jnp.nan)
            episode = jnp.where(done, 0.0, episode)
            return (params, env_state, next_obs, episode, rng), (Transition(done, action, value, reward, log_prob, obs),
                                                                   ended_return)

        def loss(params: Any, batch: Transition, advantages: jax.Array, targets: jax.Array) -> jax.Array:
            logits, value = net.apply(params, batch.obs)
            log_probs = jax.nn.log_softmax(logits)
            log_prob = jnp.take_along_axis(log_probs, batch.action[:, None], 1)[:, 0]
            v_clipped = batch.value + jnp.clip(value - batch.value, -args.clip, args.clip)
            v_loss = 0.5 * jnp.maximum((value - targets) ** 2, (v_clipped - targets) ** 2).mean()
            ratio = jnp.exp(log_prob - batch.log_prob)
            adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - args.clip, 1 + args.clip) * adv).mean()
            entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
            return pg + args.vf_coef * v_loss - args.ent_coef * entropy

        def update(carry: Any, _: Any) -> tuple[Any, jax.Array]:
            params, opt, env_state, obs, episode, rng = carry
            (params, env_state, obs, episode, rng), (traj, ended) = jax.lax.scan(
                rollout_step, (params, env_state, obs, episode, rng), None, t)
            _, last_value = net.apply(params, obs)

            def gae(carry: Any, tr: Transition) -> tuple[Any, jax.Array]:
                advantage, next_value = carry
                delta = tr.reward + args.gamma * next_value * (1 - tr.done) - tr.value
                advantage = delta + args.gamma * args.gae_lambda * (1 - tr.done) * advantage
                return (advantage, tr.value), advantage

            _, advantages = jax.lax.scan(gae, (jnp.zeros(n), last_value), traj, reverse=True)
            targets = advantages + traj.value

            def epoch(carry: Any, _: Any) -> tuple[Any, None]:
                params, opt, rng = carry
                rng, perm = jax.random.split(rng)
                order = jax.random.permutation(perm, n * t)
                flat = jax.tree.map(lambda x: x.reshape((n * t, *x.shape[2:]))[order], (traj, advantages, targets))
                batches = jax.tree.map(lambda x: x.reshape((args.minibatches, minibatch, *x.shape[1:])), flat)

                def step(carry: Any, mb: Any) -> tuple[Any, None]:
                    params, opt = carry
                    grads = jax.grad(loss)(params, *mb)
                    changes, opt = tx.update(grads, opt, params)
                    return (optax.apply_updates(params, changes), opt), None

                (params, opt), _ = jax.lax.scan(step, (params, opt), batches)
                return (params, opt, rng), None

            (params, opt, rng), _ = jax.lax.scan(epoch, (params, opt, rng), None, args.epochs)
            return (params, opt, env_state, obs, episode, rng), jnp.nanmean(ended)

        carry = (params, opt, env_state, obs, episode, rng)
        carry, returns = jax.lax.scan(update, carry, None, updates)
        return carry[2], {"returns": returns}

    return train


def run(name: str, args: argparse.Namespace, env_step: EnvStep, state: Any, obs: jax.Array,
        num_actions: int) -> tuple[float, float]:
    """Compile and run the training; print and return (final mean return, env steps/s)."""
    train = jax.jit(make_train(args, env_step, num_actions, obs.shape[-1]))
    rng = jax.random.PRNGKey(args.seed)
    compiled = train.lower(rng, state, obs).compile()
    start = time.perf_counter()
    _, metrics = compiled(rng, state, obs)
    returns = np.asarray(jax.block_until_ready(metrics["returns"]))
    seconds = time.perf_counter() - start
    steps = returns.size * args.num_envs * args.num_steps
    final = float(np.nanmean(returns[-10:]))
    print(f"{name}: mean return of the last 10 updates' episodes {final:.1f}; {steps:,} env steps in "
          f"{seconds:.1f} s ({steps / seconds:,.0f} steps/s, training included)")
    return final, steps / seconds


def main() -> None:
    args = parse_args()
    env = envhive.make("envhive/CartPole-v1", num_envs=args.num_envs, autoreset="same_step", seed=args.seed)
    handle, _, _, step = env.xla()
    obs, _ = env.reset()

    def envhive_step(handle: Any, action: jax.Array) -> tuple[Any, tuple[jax.Array, jax.Array, jax.Array]]:
        handle, (obs, reward, term, trunc, _) = step(handle, action.astype(jnp.int32))
        return handle, (obs, reward, term | trunc)

    final, _ = run("envhive/CartPole-v1 (env.xla())", args, envhive_step, handle, jnp.asarray(obs), 2)
    env.close()
    print("solved (mean return >= 475)" if final >= 475 else "not solved")
    if args.no_gymnax:
        return
    try:
        import gymnax
    except ImportError:
        print("gymnax is not installed: pip install gymnax for the comparison")
        return
    genv, params = gymnax.make("CartPole-v1")

    def gymnax_step(carry: Any, action: jax.Array) -> tuple[Any, tuple[jax.Array, jax.Array, jax.Array]]:
        state, rng = carry
        rng, key = jax.random.split(rng)
        obs, state, reward, term, trunc, _ = jax.vmap(genv.step, (0, 0, 0, None))(
            jax.random.split(key, args.num_envs), state, action, params)
        return (state, rng), (obs, reward, term | trunc)

    obs, state = jax.vmap(genv.reset, (0, None))(jax.random.split(jax.random.PRNGKey(1), args.num_envs), params)
    run("gymnax CartPole-v1 (vmapped)", args, gymnax_step, (state, jax.random.PRNGKey(2)), obs, 2)


if __name__ == "__main__":
    main()
