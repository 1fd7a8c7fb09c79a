"""``envhive tune ENV``: time every executor and worker count that makes sense for one env.

The table marks what ``executor="auto"`` picks by default (from its own short probe, see
``executors/_auto.py``), so the default can be checked against the best found here. Each point
is measured as ``envhive bench`` measures (``envhive._cli_bench._measure_all``: build,
reset and warm-up untimed, then the median of a few timed spans), with gymnasium's
``SyncVectorEnv`` and ``AsyncVectorEnv`` of the same env in the same run. The run writes
``tune.json`` and ``tune.png`` to an output folder.

Examples:
    >>> [t.runner for t in candidate_tasks("CartPole-v1", 4, cores=2, peers=False)]
    ['envhive serial', 'envhive thread x2', 'envhive thread x4', 'envhive process x2', 'envhive process x4']
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

import envhive
from envhive._bench import background_load, machine_info
from envhive._cli_bench import Row, Task, _out_dir, _plan
from envhive._cli_bench import _measure_all as measure_all
from envhive._cli_bench import _stdout_console as stdout_console
from envhive._registry import resolve_id
from envhive.engines import compiled_env
from envhive.executors import AutoChoice, auto_choice, available_executors, resolve_executor
from envhive.executors._auto import MAX_WORKERS_PER_CORE
from envhive.executors._spawn import usable_cpus

__all__ = ["candidate_tasks", "worker_counts", "sensible_workers", "default_label", "choice_json", "run_tune",
           "add_tune_arguments"]

SYNC_PEER = "gymnasium SyncVectorEnv"
ASYNC_PEER = "gymnasium AsyncVectorEnv"


def worker_counts(num_envs: int, cores: int) -> list[int]:
    """Worker counts worth timing: the cores, then doubling up to one per env.

    Examples:
        >>> worker_counts(64, 2)
        [2, 4, 8, 16, 32, 64]
        >>> worker_counts(3, 4)
        [3]
    """
    counts, k = [], min(cores, num_envs)
    while k < num_envs:
        counts.append(k)
        k *= 2
    return [*counts, num_envs]


def _factory(env: str) -> Callable[[], Any]:
    """One env's factory: ``package.module:callable`` or a registered id."""
    from envhive._cli_check import _import, is_factory_target

    if is_factory_target(env):
        return _import(env)
    return resolve_id(env, None, None)[0]


def _builder(env: str, factory: Callable[[], Any], n: int, name: str, workers: int | None) -> Callable[[], Any]:
    from envhive._cli_check import is_factory_target

    what: Any = [factory] * n if is_factory_target(env) else env

    def build() -> Any:
        executor = resolve_executor(name, n, workers)[0]
        return envhive.make(what, n, executor=executor, seed=0, copy=False)

    return build


def _peers(env: str, factory: Callable[[], Any], n: int) -> list[Task]:
    def sync() -> Any:
        return gym.vector.SyncVectorEnv([factory] * n, copy=False)

    def async_() -> Any:
        return gym.vector.AsyncVectorEnv([factory] * n, copy=False)

    return [Task(env, env, n, SYNC_PEER, True, sync), Task(env, env, n, ASYNC_PEER, True, async_)]


def candidate_tasks(env: str, num_envs: int, *, cores: int | None = None,
                    peers: bool = True, max_workers: int | None = None) -> list[Task]:
    """Every configuration to time for ``env`` at ``num_envs``: serial, thread and process at
    each of :func:`worker_counts` up to ``max_workers`` (native alone for a compiled id), then
    gymnasium's peers."""
    cores = cores or usable_cpus()
    limit = max_workers or num_envs
    factory = _factory(env)
    tasks: list[Task] = []
    if compiled_env(env) is not None:
        tasks.append(Task(env, env, num_envs, "envhive native", False,
                          _builder(env, factory, num_envs, "native", None)))
        if peers:  # the compiled id's own peers, as envhive bench measures them
            tasks.extend(Task(env, measured, num_envs, label, True, build)
                         for label, measured, build in _plan(env, ["native"], num_envs)[1])
        return tasks
    names = available_executors()
    tasks.append(Task(env, env, num_envs, "envhive serial", False,
                      _builder(env, factory, num_envs, "serial", None)))
    for name in ("thread", "process"):
        if name in names and num_envs > 1:
            tasks.extend(Task(env, env, num_envs, f"envhive {name} x{k}", False,
                              _builder(env, factory, num_envs, name, k))
                         for k in worker_counts(num_envs, cores) if k <= limit)
    if peers:
        tasks.extend(_peers(env, factory, num_envs))
    return tasks


def sensible_workers(choice: AutoChoice, num_envs: int, cores: int) -> int:
    """The most workers worth timing: one per env for an env that waits (or that the probe
    could not measure, or on a busy machine, where more workers win more of the cores' time),
    else 4 per core (a computing env gains nothing beyond the cores; auto's own limit).

    Examples:
        >>> from envhive.executors import AutoChoice, EnvCosts
        >>> cpu = EnvCosts(1e-3, 1e-3, 0.0, 16, 0.0, True, 8)
        >>> sensible_workers(AutoChoice("process", 2, "", cpu), 64, 2)
        8
    """
    costs = choice.costs
    if (costs is None or costs.problem is not None or costs.step_cpu < 0.5 * costs.step_wall
            or costs.others > 0):
        return num_envs
    return min(num_envs, MAX_WORKERS_PER_CORE * cores)


def default_label(choice: AutoChoice, num_envs: int, cores: int) -> str:
    """The runner label of ``auto``'s choice, as :func:`candidate_tasks` names it.

    Examples:
        >>> from envhive.executors import AutoChoice
        >>> default_label(AutoChoice("process", None, ""), 16, 2)
        'envhive process x2'
    """
    if choice.executor in ("serial", "native"):
        return f"envhive {choice.executor}"
    workers = choice.num_workers or min(cores, num_envs)
    return f"envhive {choice.executor} x{workers}"


def _table(rows: list[Row], default: str, choice: AutoChoice) -> Any:
    from rich.table import Table

    ours = [r for r in rows if not r.task.peer]
    best = max(ours, key=lambda r: r.m.steps_per_s)
    peer = max((r for r in rows if r.task.peer), key=lambda r: r.m.steps_per_s, default=None)
    first = rows[0].task
    table = Table(title=f"{first.env_id} x{first.num_envs}", title_justify="left", title_style="bold")
    for col, justify in (("runner", "left"), ("steps/s", "right"), ("vs best", "right"),
                         ("vs gymnasium", "right"), ("", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        mark = ("<- default (auto)" if r.task.runner == default else "") + (
            "  best" if r is best else "")
        vs_peer = "-" if peer is None or r.task.peer else f"{r.m.steps_per_s / peer.m.steps_per_s:.2f}x"
        table.add_row(r.task.runner, f"{r.m.steps_per_s:,.0f}",
                      f"{r.m.steps_per_s / best.m.steps_per_s:.2f}x", vs_peer, mark,
                      style="dim" if r.task.peer else ("bold" if mark else None))
    table.caption = f"auto: {choice.label()}: {choice.reason}"
    return table


def plot_tune(rows: list[Row], default: str, path: Path, title: str) -> None:
    """One horizontal bar per runner (steps/s), the default in green, peers in grey."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.5, 0.35 * len(rows) + 1.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    labels = [r.task.runner + (" (default)" if r.task.runner == default else "") for r in rows]
    colours = ["tab:green" if r.task.runner == default else "tab:gray" if r.task.peer
               else "tab:blue" for r in rows]
    ax.barh(labels[::-1], [r.m.steps_per_s for r in rows][::-1], color=colours[::-1])
    ax.set_xlabel("env steps/s (median)")
    ax.set_title(title, fontsize="small")
    fig.savefig(path, dpi=110)


def choice_json(choice: AutoChoice) -> dict[str, Any]:
    """``auto``'s choice as JSON: executor, workers, reason, predictions and measured costs.

    Examples:
        >>> from envhive.executors import AutoChoice
        >>> choice_json(AutoChoice("serial", None, "one env"))["executor"]
        'serial'
    """
    return {"executor": choice.executor, "num_workers": choice.num_workers,
            "reason": choice.reason, "predicted": choice.predicted,
            "predicted_idle": choice.predicted_idle,
            "costs": None if choice.costs is None else dataclasses.asdict(choice.costs),
            "other_busy_cores": None if choice.costs is None else choice.costs.others}


def tune(env: str, num_envs: int, seconds: float, spans: int, peers: bool = True) -> dict[str, Any]:
    """Run the probe and every candidate; the JSON document (without the command)."""
    cores = usable_cpus()
    choice = auto_choice([_factory(env)] * num_envs)
    tasks = candidate_tasks(env, num_envs, cores=cores, peers=peers,
                            max_workers=sensible_workers(choice, num_envs, cores))
    default = default_label(choice, num_envs, cores)
    rows = measure_all(tasks, seconds, spans)
    return {"env": env, "num_envs": num_envs, "cores": cores, "default": default,
            "auto": choice_json(choice),
            "results": [r.as_dict() for r in rows], "_rows": rows, "_choice": choice}


def run_tune(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """The ``envhive tune`` command."""
    out = stdout_console()
    info = machine_info()
    docs = []
    load = args.background_load
    beside = f", beside {load} busy background process{'es' * (load != 1)}" if load else ""
    with background_load(load):  # stopped however the run ends, Ctrl-C included
        for n in args.num_envs:
            out.print(f"envhive tune {args.env} x{n}: every executor and worker count, "
                      f"~{args.seconds:g} s each, {usable_cpus()} usable CPUs{beside}", highlight=False,
                      soft_wrap=True)
            doc = tune(args.env, n, args.seconds, args.spans, peers=not args.no_peer)
            rows, choice = doc.pop("_rows"), doc.pop("_choice")
            out.print(_table(rows, doc["default"], choice))
            docs.append((doc, rows))
    folder = _out_dir(args.out or time.strftime("envhive-tune/%Y%m%d-%H%M%S"))
    command = shlex.join(["envhive", *argv])
    full = {"command": command, "machine": info,
            "settings": {"seconds": args.seconds, "spans": args.spans, "background_load": load},
            "runs": [d for d, _ in docs]}
    written = [folder / "tune.json"]
    for path in {written[0], *([Path(args.json)] if args.json else [])}:
        path.write_text(json.dumps(full, indent=2, default=str) + "\n")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        out.print("plot skipped: matplotlib is not installed (pip install matplotlib)")
    else:
        for doc, rows in docs:
            name = f"tune-{doc['num_envs']}.png" if len(docs) > 1 else "tune.png"
            plot_tune(rows, doc["default"], folder / name,
                      f"envhive tune {args.env} x{doc['num_envs']} ({info['cpus']} CPUs, {info['time']})")
            written.append(folder / name)
    out.print(f"wrote {os.path.join(str(folder), '')}: {', '.join(p.name for p in written)}",
              soft_wrap=True, highlight=False)
    return 0


def _processes(text: str) -> int:
    count = int(text)
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected a count of processes >= 0, got {text}")
    return count


def add_tune_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``envhive tune``."""
    parser.add_argument("env", metavar="ENV_ID | module:factory")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[16])
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="timed seconds per configuration (default 1)")
    parser.add_argument("--spans", type=int, default=5)
    parser.add_argument("--no-peer", action="store_true",
                        help="skip gymnasium's SyncVectorEnv and AsyncVectorEnv")
    parser.add_argument("--background-load", type=_processes, default=0, metavar="N",
                        help="run N CPU-bound processes (a numpy matmul loop each, a learner's "
                        "stand-in) during the run, auto's probe included (default 0)")
    parser.add_argument("--out", help="folder for tune.json and tune.png "
                        "(default: ./envhive-tune/<date>-<time>/)")
    parser.add_argument("--json", help="also write the JSON to this file")
