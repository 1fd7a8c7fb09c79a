"""executor="auto" against the best configuration ``envhive tune`` finds, and against gymnasium.

For each env and ``num_envs``, in one run: every executor and worker count ``envhive tune``
times, gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv``, then ``envhive.make`` with its
defaults (auto measures the env again at ``make``, as a user's call would); for envs that wait,
also the default executor with async ``send``/``recv`` (``batch_size = num_envs // 2``).

    python benchmarks/bench_auto.py --json benchmarks/results/auto.json
    python benchmarks/bench_auto.py --background-load 1 --json benchmarks/results/auto.json

``--background-load N`` runs everything twice in one JSON (``conditions``): on the machine as it
is, then beside N CPU-bound processes (a numpy matmul loop each: a learner's stand-in, started
and stopped by the script, Ctrl-C included), auto's own probe included. Each condition's
summary has the default against the best configuration and against serial.

Every configuration is measured ``--rounds`` times, interleaved, and each figure is its median
over the rounds: on a machine shared with other jobs one round is a lottery.

Envs: ``auto_envs:waiting`` (a 2 ms wait per step), ``auto_envs:cpu_bound`` (~0.2 ms of
Python), gymnasium's ``Ant-v5`` and ``ALE/Pong-v5``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any

import cloudpickle
from gymnasium.vector.utils import batch_space

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import auto_envs

import envhive
from envhive._bench import background_load, machine_info
from envhive._cli_bench import Task
from envhive._cli_bench import _measure_all as measure_all
from envhive._cli_tune import _factory, candidate_tasks, choice_json, sensible_workers
from envhive.executors import AutoChoice, auto_choice
from envhive.executors._spawn import usable_cpus

# Workers unpickle the factories by value: they need not import this folder.
cloudpickle.register_pickle_by_value(auto_envs)

ENVS = ["auto_envs:waiting", "auto_envs:cpu_bound", "Ant-v5", "ALE/Pong-v5"]
DEFAULT = "envhive default (auto)"
SERIAL = "envhive serial"
ASYNC = "envhive default, async recv"


def _target(env: str, n: int) -> Any:
    if env.startswith("auto_envs:"):
        return [getattr(auto_envs, env.split(":")[1])] * n
    return env


class _AsyncLoop:
    """``envhive.make`` with its defaults driven EnvPool-style, as ``measure_env`` drives a
    vector env: each ``step`` takes the first ``batch`` envs to finish and sends them back."""

    def __init__(self, env: str, n: int, batch: int) -> None:
        self.vec = envhive.make(_target(env, n), n, seed=0, batch_size=batch, copy=False)
        self.action_space = batch_space(self.vec.single_action_space, batch)

    def reset(self, seed: int) -> None:
        self.vec.async_reset(seed=seed)

    def step(self, actions: Any) -> None:
        info = self.vec.recv()[4]
        self.vec.send(actions, info["env_id"])

    def close(self) -> None:
        self.vec.close()


def _tasks(env: str, n: int, choice: AutoChoice) -> list[Task]:
    """tune's candidates and peers, the default, and (for waiting envs) the default async."""
    cores = usable_cpus()
    tasks = candidate_tasks(env, n, cores=cores, max_workers=sensible_workers(choice, n, cores))
    tasks.append(Task(env, env, n, DEFAULT, False,
                      lambda: envhive.make(_target(env, n), n, seed=0, copy=False)))
    costs = choice.costs
    if costs is not None and costs.problem is None and costs.step_cpu < 0.5 * costs.step_wall:
        batch = max(1, n // 2)
        tasks.append(Task(env, env, batch, f"{ASYNC} (batch {batch})", False,
                          lambda: _AsyncLoop(env, n, batch)))
    return tasks


def one(env: str, n: int, seconds: float, spans: int, rounds: int) -> dict[str, Any]:
    """Every configuration, ``rounds`` times interleaved (the machine's speed drifts); the
    figure of each is its median over the rounds."""
    choice = auto_choice([_factory(env)] * n)
    tasks = _tasks(env, n, choice)
    default_repr = repr_of(env, n)
    figures: dict[str, list[float]] = {t.runner: [] for t in tasks}
    for _ in range(rounds):
        for row in measure_all(tasks, seconds, spans):
            figures[row.task.runner].append(row.m.steps_per_s)
    med = {k: statistics.median(v) for k, v in figures.items()}
    peers = {t.runner for t in tasks if t.peer}
    ours = {k: v for k, v in med.items() if k not in peers and k != DEFAULT and not k.startswith(ASYNC)}
    best = max(ours, key=lambda k: ours[k])
    peer = max(peers, key=lambda k: med[k])
    summary: dict[str, Any] = {
        "auto_choice": choice.label(), "auto_reason": choice.reason, "default_repr": default_repr,
        "best_found": best, "best_steps_per_s": med[best],
        "default_steps_per_s": med[DEFAULT], "default_vs_best": med[DEFAULT] / med[best],
        "default_vs_serial": med[DEFAULT] / med[SERIAL],
        "fastest_gymnasium": peer, "gymnasium_steps_per_s": med[peer],
        "default_vs_gymnasium": med[DEFAULT] / med[peer],
    }
    line = (f"== {env} x{n}: default {med[DEFAULT]:,.0f} ({choice.label()}) = "
            f"{summary['default_vs_best']:.2f}x best ({best} {med[best]:,.0f}), "
            f"{summary['default_vs_serial']:.2f}x serial, "
            f"{summary['default_vs_gymnasium']:.2f}x {peer} ({med[peer]:,.0f})")
    for k in med:
        if k.startswith(ASYNC):
            summary.update(async_runner=k, async_steps_per_s=med[k],
                           async_vs_gymnasium=med[k] / med[peer])
            line += f"; {k} {med[k]:,.0f} = {med[k] / med[peer]:.2f}x"
    print(line, flush=True)
    return {"env": env, "num_envs": n, "rounds": rounds, "summary": summary,
            "auto": choice_json(choice),
            "steps_per_s": med, "rounds_steps_per_s": figures}


def repr_of(env: str, n: int) -> str:
    """What ``repr`` says of ``envhive.make(env, n)`` with its defaults."""
    with envhive.make(_target(env, n), n) as vec:
        return repr(vec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seconds", type=float, default=0.4)
    parser.add_argument("--spans", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--background-load", type=int, default=0, metavar="N",
                        help="also run everything beside N CPU-bound processes (default 0: no)")
    parser.add_argument("--json", default="benchmarks/results/auto.json")
    args = parser.parse_args()
    try:
        import ale_py
        import gymnasium as gym

        gym.register_envs(ale_py)
    except ImportError:
        pass
    # The run's context: other jobs on the machine move every figure (docs/executors.md).
    doc: dict[str, Any] = {"command": "python " + " ".join(sys.argv), "machine": machine_info(),
                           "settings": vars(args), "conditions": []}
    for load in sorted({0, args.background_load}):
        print(f"== background load: {load} busy process{'es' * (load != 1)}", flush=True)
        start = os.getloadavg()
        with background_load(load):  # stopped however the run ends, Ctrl-C included
            runs = [one(env, n, args.seconds, args.spans, args.rounds) for env in args.envs
                    for n in args.num_envs]
        doc["conditions"].append({"background_load": load, "loadavg_start": start,
                                  "loadavg_end": os.getloadavg(), "runs": runs})
        with open(args.json, "w") as fh:  # after each condition: a cut run keeps what it has
            json.dump(doc, fh, indent=2, default=str)
    for cond in doc["conditions"]:
        for run in cond["runs"]:
            s = run["summary"]
            print(f"load {cond['background_load']}: {run['env']} x{run['num_envs']}: "
                  f"{s['auto_choice']} {s['default_vs_best']:.2f}x best ({s['best_found']}), "
                  f"{s['default_vs_serial']:.2f}x serial")
    print("wrote", args.json)


if __name__ == "__main__":
    main()
