"""Where an Atari env step's CPU goes on the native executor's worker-process engine's async
path (issue 21; ``ENVHIVE_ATARI_ENGINE=processes`` is set here: the default engine is now the
threaded one, ``executors/_atari_threads.py``, whose per-step costs ``bench_atari.py`` reports).

On a 2-core machine the async rate is the CPU spent per env step, so this splits it:

* ``step_us``: one game's own step in one process (``AtariEnv.advance``, resets included,
  random actions): the emulated frames, the screen grabs, the C max-pool/resize/stack;
* ``op_us``: the same through the worker's ``perform`` (the op rule, the block's columns);
* ``caller_us_per_call``: the caller's CPU (``time.thread_time``) per ``send`` + ``recv``
  of ``num_envs / 2`` envs, and how much of it is the blocking wait for the workers;
* ``cpu_share``: steps per second and the caller's and each worker's share of a core,
  over the same loop (``psutil``; the workers are the caller's children).

Usage::

    python benchmarks/probe_atari_costs.py --game pong --num-envs 8 --json F

No timing in tests: this is a probe for docs/benchmarks.md. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np


def own_step(game: str, steps: int) -> dict[str, float]:
    """µs of CPU per step of one game in this process: bare, and through ``perform``."""
    from envhive.envs.atari._env import AtariEnv
    from envhive.executors._atari_worker import layout, perform, size, views

    env = AtariEnv(game)
    env.reset(seed=0)
    acts = np.random.default_rng(0).integers(0, len(env._actions), steps)
    t0 = time.process_time()
    for k in range(steps):
        _, term, trunc = env.advance(int(acts[k]))
        if term or trunc:
            env.reset()
    bare = (time.process_time() - t0) / steps * 1e6
    fields = layout(1, 1, 8, tuple(env.frames.shape))
    v = views(bytearray(size(fields) + 64 * len(fields)), fields)
    v["a_ops"][0] = 2  # STEP_RESET: the engine's next_step op after an ended episode too
    t0 = time.process_time()
    for k in range(steps):
        v["actions"][0] = int(acts[k])
        perform(v, env, 0)
    op = (time.process_time() - t0) / steps * 1e6
    env.close()
    return {"step_us": bare, "op_us": op}


def async_loop(game: str, num_envs: int, calls: int) -> dict[str, Any]:
    """The caller's CPU per ``send`` + ``recv`` and the processes' shares of a core."""
    import psutil

    import envhive
    import envhive.executors._atari as atari

    waited = [0.0]
    take = atari.AtariEngine._take

    def timed_take(self: Any, sem: Any, once: bool = False) -> None:
        t = time.thread_time()
        try:
            take(self, sem, once)
        finally:
            waited[0] += time.thread_time() - t

    atari.AtariEngine._take = timed_take  # type: ignore[method-assign]
    bs = num_envs // 2
    env = envhive.make(f"envhive/{game.capitalize()}-v5", num_envs=num_envs, seed=0, batch_size=bs)
    acts = np.random.default_rng(0).integers(0, env.single_action_space.n, (64, bs))
    env.async_reset()
    ids = env.recv()[-1]["env_id"]

    def loop(n: int) -> None:
        nonlocal ids
        for k in range(n):
            env.send(acts[k & 63], ids)
            ids = env.recv()[-1]["env_id"]

    loop(300)
    me = psutil.Process()
    workers = me.children(recursive=True)
    before = [sum(p.cpu_times()[:2]) for p in workers]
    waited[0] = 0.0
    t0, c0 = time.perf_counter(), time.thread_time()
    loop(calls)
    c1, t1 = time.thread_time(), time.perf_counter()
    after = [sum(p.cpu_times()[:2]) for p in workers]
    env.close()
    wall = t1 - t0
    return {
        "steps_per_s": calls * bs / wall,
        "caller_us_per_call": (c1 - c0) / calls * 1e6,
        "caller_wait_us_per_call": waited[0] / calls * 1e6,
        "caller_share": (c1 - c0) / wall,
        "worker_shares": [(a - b) / wall for a, b in zip(after, before)],
    }


def main() -> None:
    os.environ["ENVHIVE_ATARI_ENGINE"] = "processes"  # the engine this probe looks into
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--game", default="pong")
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--json")
    args = ap.parse_args()
    out = {"game": args.game, "num_envs": args.num_envs, **own_step(args.game, args.steps),
           **async_loop(args.game, args.num_envs, args.calls)}
    rate = out["steps_per_s"]
    out["cpu_us_per_step"] = (out["caller_share"] + sum(out["worker_shares"])) / rate * 1e6
    out["caller_us_per_step"] = out["caller_share"] / rate * 1e6
    out["workers_us_per_step"] = sum(out["worker_shares"]) / rate * 1e6
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
