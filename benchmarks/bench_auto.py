"""executor="auto" against the best configuration ``envhive tune`` finds, and against gymnasium.

For each env and ``num_envs``, in one run: every executor and worker count ``envhive tune``
times, gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv``, then ``envhive.make`` with its
defaults (auto measures the env again at ``make``, as a user's call would); for envs that wait,
also the default executor with async ``send``/``recv`` (``batch_size = num_envs // 2``).

    python benchmarks/bench_auto.py --json benchmarks/results/auto.json

Envs: ``auto_envs:waiting`` (a 2 ms wait per step), ``auto_envs:cpu_bound`` (~0.2 ms of
Python), gymnasium's ``Ant-v5`` and ``ALE/Pong-v5``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import cloudpickle
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import auto_envs

import envhive
from envhive._bench import Measurement, machine_info, measure_env, measure_steps
from envhive._cli_tune import tune

# Workers unpickle the factories by value: they need not import this folder.
cloudpickle.register_pickle_by_value(auto_envs)

ENVS = ["auto_envs:waiting", "auto_envs:cpu_bound", "Ant-v5", "ALE/Pong-v5"]


def _target(env: str, n: int) -> Any:
    if env.startswith("auto_envs:"):
        return [getattr(auto_envs, env.split(":")[1])] * n
    return env


def measure_default(env: str, n: int, seconds: float, spans: int) -> tuple[Measurement, str]:
    """``envhive.make(env, n)`` with every default but seed and copy; with its repr."""
    shown: list[str] = []

    def build() -> Any:
        vec = envhive.make(_target(env, n), n, seed=0, copy=False)
        shown.append(repr(vec))
        return vec

    m = measure_env(build, n, seconds=seconds, spans=spans, runner="envhive default (auto)", env=env)
    return m, shown[0]


def measure_async(env: str, n: int, seconds: float, spans: int) -> tuple[Measurement, str]:
    """The default executor driven EnvPool-style: ``recv`` the first half, ``send`` them back."""
    batch = max(1, n // 2)
    vec = envhive.make(_target(env, n), n, seed=0, batch_size=batch)
    try:
        shown = repr(vec)
        space = vec.single_action_space
        space.seed(0)
        actions = np.array([space.sample() for _ in range(batch)])
        vec.async_reset(seed=0)

        def step(_: Any) -> None:
            info = vec.recv()[4]
            vec.send(actions, info["env_id"])

        m = measure_steps(step, [None], batch, seconds=seconds, spans=spans,
                          runner=f"envhive default async recv (batch {batch})", env=env)
        vec.recv()  # the last send
        return m, shown
    finally:
        vec.close()


def one(env: str, n: int, seconds: float, spans: int) -> dict[str, Any]:
    doc = tune(env, n, seconds, spans)
    rows, choice = doc.pop("_rows"), doc.pop("_choice")
    default, shown = measure_default(env, n, seconds, spans)
    doc["default_measured"] = {**default.as_dict(), "repr": shown}
    ours = [r for r in rows if not r.task.peer]
    best = max(ours, key=lambda r: r.m.steps_per_s)
    peer = max((r for r in rows if r.task.peer), key=lambda r: r.m.steps_per_s)
    summary = {
        "auto_choice": choice.label(), "auto_reason": choice.reason,
        "best_found": best.task.runner, "best_steps_per_s": best.m.steps_per_s,
        "default_steps_per_s": default.steps_per_s,
        "default_vs_best": default.steps_per_s / best.m.steps_per_s,
        "fastest_gymnasium": peer.task.runner, "gymnasium_steps_per_s": peer.m.steps_per_s,
        "default_vs_gymnasium": default.steps_per_s / peer.m.steps_per_s,
    }
    costs = choice.costs
    if costs is not None and costs.problem is None and costs.step_cpu < 0.5 * costs.step_wall:
        m, shown_async = measure_async(env, n, seconds, spans)
        doc["async_measured"] = {**m.as_dict(), "repr": shown_async}
        summary["async_steps_per_s"] = m.steps_per_s
        summary["async_vs_gymnasium"] = m.steps_per_s / peer.m.steps_per_s
    doc["summary"] = summary
    print(f"== {env} x{n}: default {default.steps_per_s:,.0f} ({choice.label()}) = "
          f"{summary['default_vs_best']:.2f}x best ({best.task.runner} {best.m.steps_per_s:,.0f}), "
          f"{summary['default_vs_gymnasium']:.2f}x {peer.task.runner} ({peer.m.steps_per_s:,.0f})"
          + (f"; async recv {summary['async_steps_per_s']:,.0f} = "
             f"{summary['async_vs_gymnasium']:.2f}x" if "async_steps_per_s" in summary else ""),
          flush=True)
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seconds", type=float, default=0.6)
    parser.add_argument("--spans", type=int, default=3)
    parser.add_argument("--json", default="benchmarks/results/auto.json")
    args = parser.parse_args()
    try:
        import ale_py
        import gymnasium as gym

        gym.register_envs(ale_py)
    except ImportError:
        pass
    load = os.getloadavg()
    runs = [one(env, n, args.seconds, args.spans) for env in args.envs for n in args.num_envs]
    # The run's context: other jobs on the machine move every figure (docs/executors.md).
    doc = {"command": "python " + " ".join(sys.argv), "machine": machine_info(),
           "loadavg_start": load, "loadavg_end": os.getloadavg(),
           "settings": vars(args), "runs": runs}
    with open(args.json, "w") as fh:
        json.dump(doc, fh, indent=2, default=str)
    print("wrote", args.json)


if __name__ == "__main__":
    main()
