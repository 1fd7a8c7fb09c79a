"""envhive inside ``jax.jit``, measured against its own eager calls and EnvPool's ``xla()`` in
the same run.

Two questions:

1. **Per-call overhead**: one sync ``step`` of ``envhive/CartPole-v1`` (1 and 8 envs) through
   the FFI path (``env.xla()``'s ``step`` in a jitted ``fori_loop``), through the ordered
   ``io_callback`` path (the same functions over the pool's eager calls, what ``api="jax"``
   uses for Python envs) and eagerly (``env.step`` with numpy arrays); microseconds per call.
2. **Jitted rollouts**: a jitted ``fori_loop`` of ``recv``/``send`` over CartPole x 64 and
   Pong x 8 (sync: ``batch_size == num_envs``; two threads for the Atari engines), envhive's
   ``xla()`` next to EnvPool's own; env steps per second, and envhive's over EnvPool's.

Each pair is measured interleaved (A, B, A, B, ...) and the median of ``--repeats`` is kept;
the JSON records the machine's load average, since a busy machine moves both.

Usage:
    python benchmarks/bench_jax.py [--seconds 1.0] [--repeats 5]
        [--out benchmarks/results/jax.json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _timed(run: Callable[[], Any], seconds: float, per_run: int) -> float:
    """Units per second of ``run`` (each run does ``per_run`` units) over about ``seconds``."""
    run()  # compiles, warms up
    runs, start = 0, time.perf_counter()
    while True:
        run()
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return runs * per_run / elapsed


def _interleaved(runs: dict[str, Callable[[], Any]], seconds: float, repeats: int, per_run: dict[str, int]) -> dict[str, float]:
    got: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeats):
        for k, run in runs.items():
            got[k].append(_timed(run, seconds, per_run[k]))
    return {k: statistics.median(v) for k, v in got.items()}


def _looped(body: Callable[[Any, Any], Any], handle: Any, length: int) -> Callable[[], Any]:
    """A run of ``length`` jitted iterations of ``body(t, handle) -> handle`` (one program),
    blocking until it is done; the handle carries on from run to run."""
    import jax

    loop = jax.jit(lambda handle: jax.lax.fori_loop(0, length, body, handle))
    state = {"handle": handle}

    def run() -> None:
        state["handle"] = loop(state["handle"])
        jax.block_until_ready(state["handle"])

    return run


def _jitted_steps(step: Callable[..., Any], handle: Any, action: Any, length: int) -> Callable[[], Any]:
    return _looped(lambda _, handle: step(handle, action)[0], handle, length)


# -------------------------------------------------------------------------- 1. per call
def per_call(num_envs: int, seconds: float, repeats: int, length: int) -> dict[str, Any]:
    import envhive
    from envhive.jax._callback import callback_functions

    ffi_env = envhive.make("envhive/CartPole-v1", num_envs, seed=0)
    cb_env = envhive.make("envhive/CartPole-v1", num_envs, seed=0)
    eager = envhive.make("envhive/CartPole-v1", num_envs, seed=0)
    try:
        handle, _, _, step = ffi_env.xla()
        cb_handle, _, _, cb_step = callback_functions(cb_env.pool)
        for env in (ffi_env, cb_env, eager):
            env.reset()
        a32 = np.zeros(num_envs, np.int32)
        a64 = np.zeros(num_envs, np.int64)

        def eager_run() -> None:
            for _ in range(length):
                eager.step(a64)

        rates = _interleaved({"ffi": _jitted_steps(step, handle, a32, length),
                              "io_callback": _jitted_steps(cb_step, cb_handle, a32, length),
                              "eager": eager_run}, seconds, repeats, dict.fromkeys(("ffi", "io_callback", "eager"), length))
    finally:
        for env in (ffi_env, cb_env, eager):
            env.close()
    return {"num_envs": num_envs, **{f"{k}_us": 1e6 / v for k, v in rates.items()}}


# -------------------------------------------------------------------------- 2. rollouts
def _rollout(recv: Callable[..., Any], send: Callable[..., Any], handle: Any, num_actions: int,
             length: int) -> Callable[[], Any]:
    def body(t: Any, handle: Any) -> Any:
        handle, (*_, info) = recv(handle)
        ids = info["env_id"]
        return send(handle, ((ids + t) % num_actions).astype(ids.dtype), ids)

    return _looped(body, handle, length)


def rollout(game: str, num_envs: int, seconds: float, repeats: int, length: int) -> dict[str, Any]:
    import envpool

    import envhive
    from envhive.executors import NativeExecutor

    if game == "CartPole":
        ours = envhive.make("envhive/CartPole-v1", num_envs, seed=0)
        peer = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=num_envs, seed=0)
        num_actions = 2
    else:
        ours = envhive.make(f"envhive/{game}-v5", num_envs, seed=0, executor=NativeExecutor(2))
        peer = envpool.make(f"{game}-v5", env_type="gymnasium", num_envs=num_envs, num_threads=2, seed=0)
        num_actions = int(peer.action_space.n)
    try:
        h_ours, recv_ours, send_ours, _ = ours.xla()
        h_peer, recv_peer, send_peer, _ = peer.xla()
        ours.async_reset()
        peer.async_reset()
        rates = _interleaved({"envhive": _rollout(recv_ours, send_ours, h_ours, num_actions, length),
                              "envpool": _rollout(recv_peer, send_peer, h_peer, num_actions, length)},
                             seconds, repeats, dict.fromkeys(("envhive", "envpool"), length * num_envs))
    finally:
        ours.close()
        peer.close()
    return {"env": game, "num_envs": num_envs, "envhive_steps_per_s": rates["envhive"],
            "envpool_steps_per_s": rates["envpool"], "ratio": rates["envhive"] / rates["envpool"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results/jax.json")
    parser.add_argument("--quick", action="store_true", help="short runs (a smoke test of the script)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats = 0.1, 1
    import envpool
    import jax

    out: dict[str, Any] = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "jax": jax.__version__, "envpool": envpool.__version__, "cpus": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
        "per_call": [per_call(n, args.seconds, args.repeats, 100) for n in (1, 8)],
        "rollouts": [rollout("CartPole", 64, args.seconds, args.repeats, 100),
                     rollout("Pong", 8, args.seconds, args.repeats, 20)],
        "loadavg_after": os.getloadavg(),
    }
    for row in out["per_call"]:
        print(f"per call, CartPole x{row['num_envs']}: ffi {row['ffi_us']:.1f} us, "
              f"io_callback {row['io_callback_us']:.1f} us, eager {row['eager_us']:.1f} us")
    for row in out["rollouts"]:
        print(f"rollout, {row['env']} x{row['num_envs']}: envhive {row['envhive_steps_per_s']:,.0f} steps/s, "
              f"EnvPool {row['envpool_steps_per_s']:,.0f} steps/s ({row['ratio']:.2f}x)")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    return out


if __name__ == "__main__":
    main()
