"""``envhive bench``: envhive's steps/s next to gymnasium's, measured in the same run.

For each env id, each ``num_envs`` and each executor, one figure: the median steps/s of a few
timed spans, timed only after the env was built, reset and warmed up (:func:`measure_env`).
The peer is measured at the same ``num_envs`` right after: gymnasium's ``SyncVectorEnv`` for
the general executors, gymnasium's numpy-vectorized env (``vector_entry_point``) for a
compiled kernel id. The run ends with a table (steps/s and the ratio to the peer), a JSON file
and a PNG plot in an output folder.

Examples:
    >>> tasks = plan_tasks(["envhive/CartPole-v1"], [1, 8], None)
    >>> [(t.num_envs, t.runner, t.peer) for t in tasks]  # doctest: +NORMALIZE_WHITESPACE
    [(1, 'envhive native', False), (1, 'gymnasium vector_entry_point', True),
     (8, 'envhive native', False), (8, 'gymnasium vector_entry_point', True)]
    >>> ratio_text(12.34, "gymnasium SyncVectorEnv")
    '12.3x gymnasium SyncVectorEnv'
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import envhive
from envhive._bench import Measurement, machine_info, measure_env
from envhive._registry import resolve_id
from envhive.engines import compiled_env, engine_kind, load_entry_point
from envhive.engines._peers import SYNC, VECTOR, gymnasium_peers
from envhive.executors import available_executors, compiled_runner

__all__ = ["Task", "plan_tasks", "ratio_text", "round_trip_note", "run_bench", "add_bench_arguments"]

#: A figure whose fastest timed span beats its slowest by more than this is marked unstable.
UNSTABLE = 1.5

FOOTER = (
    "vector_entry_point: gymnasium's numpy-vectorized implementation of the same env (one numpy "
    "call steps the whole batch), the fastest gymnasium has.\n"
    "Which executor: serial for cheap Python envs (no worker round trip to pay); process for "
    "expensive envs or envs that cannot be pickled (built inside the workers); thread for envs "
    "whose step releases the GIL (MuJoCo); native for envhive's compiled ids (envhive/CartPole-v1, "
    "envhive/Ant-v5, ...). executor=\"auto\" picks for you."
)


@dataclass
class Task:
    """One point to measure: ``runner`` on ``num_envs`` copies of ``measured_id``.

    ``env_id`` is the id asked for (the table groups by it); a peer runs gymnasium's own id.
    """

    env_id: str
    measured_id: str
    num_envs: int
    runner: str
    peer: bool
    build: Callable[[], Any]

    @property
    def label(self) -> str:
        """Short text for the progress display."""
        return f"{self.measured_id} x{self.num_envs} {self.runner}"


def _envhive_builder(env_id: str, n: int, executor: str) -> Callable[[], Any]:
    return lambda: envhive.make(env_id, n, executor=executor, seed=0, copy=False)


def _plan(env_id: str, chosen: Sequence[str] | None, n: int) -> tuple[list[str], list[tuple[str, str, Callable[[], Any]]]]:
    """(executors, peers) for one env id at ``n`` envs: a compiled id's peers come from its
    engine kind (``EngineKind.peers``; by default gymnasium's own env of that name), any other
    id's peer is gymnasium's ``SyncVectorEnv``."""
    compiled = compiled_env(env_id)
    if compiled is None:
        return list(chosen or available_executors(include_cluster=False)), gymnasium_peers(env_id, n, vectorized=False)
    kind = engine_kind(compiled.engine)
    if kind.peers is not None:
        return list(chosen or ["native"]), load_entry_point(kind.peers)(compiled, n)
    return list(chosen or ["native"]), gymnasium_peers(env_id.removeprefix("envhive/"), n, vectorized=False)


def plan_tasks(env_ids: Sequence[str], num_envs: Sequence[int], executors: Sequence[str] | None,
               peers: bool = True) -> list[Task]:
    """Every point of a run, in order: per env id and ``num_envs``, envhive's executors, then
    the peers (so each ratio compares figures taken seconds apart)."""
    tasks: list[Task] = []
    for env_id in env_ids:
        for n in num_envs:
            names, found = _plan(env_id, executors, n)
            for name in names:
                tasks.append(Task(env_id, env_id, n, f"envhive {name}", False,
                                  _envhive_builder(env_id, n, name)))
            if peers:
                tasks.extend(Task(env_id, measured, n, label, True, build)
                             for label, measured, build in found)
    return tasks


def ratio_text(ratio: float, peer: str) -> str:
    """How a figure compares with its peer, e.g. ``'12.3x gymnasium SyncVectorEnv'``.

    Examples:
        >>> ratio_text(0.84, "gymnasium SyncVectorEnv")
        '0.84x gymnasium SyncVectorEnv'
    """
    return f"{ratio:.2g}x {peer}" if ratio < 1 else f"{ratio:.1f}x {peer}"


@dataclass
class Row:
    """A measured task with its ratio to the peer of its group (``None``: no peer)."""

    task: Task
    m: Measurement
    vs_peer: float | None = None
    peer_runner: str | None = None

    @property
    def unstable(self) -> bool:
        """The timed spans differ by more than :data:`UNSTABLE` (something else ran)."""
        low = min(self.m.samples, default=0.0)
        return low > 0 and max(self.m.samples) / low > UNSTABLE

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: the measurement plus the group, the peer flag and the ratio."""
        d = self.m.as_dict()
        d.update(group=self.task.env_id, peer=self.task.peer, vs_peer=self.vs_peer,
                 peer_runner=self.peer_runner)
        return d


def _with_ratios(rows: list[Row]) -> list[Row]:
    """Each envhive row's ratio to the fastest peer of its group (env id and ``num_envs``)."""
    peers: dict[tuple[str, int], Row] = {}
    for r in rows:
        if r.task.peer:
            key = (r.task.env_id, r.task.num_envs)
            if key not in peers or r.m.steps_per_s > peers[key].m.steps_per_s:
                peers[key] = r
    for r in rows:
        p = peers.get((r.task.env_id, r.task.num_envs))
        if p is not None and not r.task.peer and p.m.steps_per_s > 0:
            r.vs_peer = r.m.steps_per_s / p.m.steps_per_s
            r.peer_runner = p.task.runner
    return rows


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def _stdout_console() -> Any:
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:  # a file or a pipe: no terminal width to fit
        console.width = 100
    return console


def _measure_all(tasks: list[Task], seconds: float, spans: int) -> list[Row]:
    """Measure every task, with a progress bar on a terminal (else one line per point)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = _stderr_console()
    rows: list[Row] = []

    def one(task: Task) -> Row:
        m = measure_env(task.build, task.num_envs, seconds=seconds, spans=spans,
                        runner=task.runner, env=task.measured_id)
        return Row(task, m)

    def done(i: int, printer: Any) -> None:
        row = rows[-1]
        printer.print(f"[{i}/{len(tasks)}] {row.task.label}: {row.m.steps_per_s:,.0f} steps/s",
                      markup=False, highlight=False, soft_wrap=True)

    if not console.is_terminal:  # a log: one line per point
        for i, task in enumerate(tasks, 1):
            rows.append(one(task))
            done(i, console)
        return rows
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task("bench", total=len(tasks))
        for i, task in enumerate(tasks, 1):
            progress.update(bar, description=f"{task.label:<46}")
            rows.append(one(task))
            done(i, progress.console)  # above the bar, which goes away at the end
            progress.advance(bar)
    return rows


def round_trip_note(rows: list[Row]) -> str:
    """What a call on the process executor at 1 env costs beyond serial's, per env id with
    both rows in the run: the round trip to its worker. ``''`` without such a pair.

    Examples:
        >>> def row(runner, steps_per_s):
        ...     task = Task("CartPole-v1", "CartPole-v1", 1, runner, False, lambda: None)
        ...     return Row(task, Measurement(runner, "CartPole-v1", 1, steps_per_s, 1.0, 1))
        >>> print(round_trip_note([row("envhive serial", 125_000), row("envhive process", 50_000)]))
        process at 1 env (CartPole-v1): 20.0 us per call, serial 8.0 us: the round trip to the worker process costs ~12.0 us per call, which a step must outweigh for processes to pay off
    """
    per_call = {(r.task.env_id, r.task.runner): 1e6 / r.m.steps_per_s
                for r in rows if r.task.num_envs == 1 and not r.task.peer and r.m.steps_per_s > 0}
    notes = []
    for (env_id, runner), us in per_call.items():
        serial = per_call.get((env_id, "envhive serial"))
        if runner == "envhive process" and serial is not None:
            notes.append(f"process at 1 env ({env_id}): {us:.1f} us per call, serial {serial:.1f} us: "
                         f"the round trip to the worker process costs ~{us - serial:.1f} us per call, "
                         "which a step must outweigh for processes to pay off")
    return "\n".join(notes)


def _table(rows: list[Row], env_id: str) -> Any:
    from rich.table import Table

    group = [r for r in rows if r.task.env_id == env_id]
    peer = next((r.task for r in group if r.task.peer), None)
    title = f"{env_id}" + (f"  (peer: {peer.runner} on {peer.measured_id})" if peer else "")
    table = Table(title=title, title_justify="left", title_style="bold")
    table.add_column("num_envs", justify="right")
    table.add_column("runner")
    table.add_column("steps/s", justify="right")
    table.add_column("vs peer (same run)")
    last_n = None
    for r in group:
        if last_n is not None and r.task.num_envs != last_n:
            table.add_section()
        last_n = r.task.num_envs
        figure = f"{r.m.steps_per_s:,.0f}" + (" [yellow]*[/yellow]" if r.unstable else "  ")
        if r.task.peer:
            table.add_row(str(r.task.num_envs), r.task.runner, figure, "<- the peer (1x)",
                          style="dim")
        elif r.vs_peer is None:
            table.add_row(str(r.task.num_envs), r.task.runner, figure, "-")
        else:
            colour = "green" if r.vs_peer >= 1 else "red"
            ratio = ratio_text(r.vs_peer, r.peer_runner or "")
            table.add_row(str(r.task.num_envs), r.task.runner, figure,
                          f"[{colour}]{ratio}[/{colour}]")
    return table


def _out_dir(out: str | None) -> Path:
    if out is not None:
        path = Path(out)
        path.mkdir(parents=True, exist_ok=True)
        return path
    base = Path("envhive-bench") / time.strftime("%Y%m%d-%H%M%S")
    path, k = base, 1
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    path.mkdir(parents=True)
    return path


_COLOURS = {
    "envhive serial": "tab:blue", "envhive thread": "tab:orange", "envhive process": "tab:green",
    "envhive native": "tab:purple", SYNC: "black", VECTOR: "tab:gray",
}


def plot(rows: list[Row], path: Path, title: str) -> None:
    """steps/s against num_envs (log-log), one line per runner; peers dashed.

    One panel per underlying gymnasium env (``envhive/CartPole-v1`` and ``CartPole-v1`` share
    one). Uses matplotlib's Agg canvas directly: no global backend is switched.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels: dict[str, dict[str, list[Row]]] = {}
    for r in rows:
        base = r.task.measured_id if r.task.peer else r.task.env_id.removeprefix("envhive/")
        label = r.task.runner
        if r.task.peer:
            label += " (peer)"
        elif r.task.env_id != base:
            label += f" ({r.task.env_id})"
        panels.setdefault(base, {}).setdefault(label, []).append(r)
    fig = Figure(figsize=(8.8 * len(panels), 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (base, lines) in zip(axes, panels.items()):
        ns: set[int] = set()
        for label, line in lines.items():
            xs = [r.task.num_envs for r in line]
            ys = [r.m.steps_per_s for r in line]
            ns.update(xs)
            is_peer = line[0].task.peer
            ax.plot(xs, ys, linestyle="--" if is_peer else "-", marker="s" if is_peer else "o",
                    linewidth=1.6 if is_peer else 2.2, label=label,
                    color=_COLOURS.get(line[0].task.runner))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sorted(ns), [str(n) for n in sorted(ns)])
        ax.minorticks_off()
        ax.set_xlabel("num_envs")
        ax.set_ylabel("env steps/s (median)")
        ax.set_title(base)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title, fontsize="small")
    fig.savefig(path, dpi=110)


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat (Linux), else ``None``."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_cores(seconds: float = 0.3) -> float | None:
    """How many cores other processes keep busy, sampled over ``seconds`` while this one
    sleeps (Linux; ``None`` elsewhere).

    Examples:
        >>> used = busy_cores(0.05)
        >>> used is None or used >= 0
        True
    """
    first = _cpu_times()
    time.sleep(seconds)
    second = _cpu_times()
    if first is None or second is None or second[1] <= first[1]:
        return None
    return (second[0] - first[0]) / (second[1] - first[1]) * (os.cpu_count() or 1)


def _busy_note(info: dict[str, Any]) -> str:
    """A warning when other processes are keeping the cores busy as the run starts."""
    used = busy_cores()
    if used is None:
        return ""
    info["busy_cores_at_start"] = round(used, 2)
    if used < 0.5:
        return ""
    return (f"note: other processes are keeping {used:.1f} of {info.get('cpus')} cores busy: "
            "the figures will be lower and noisier (most for executors that wait on worker "
            "processes or threads).")


def run_bench(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """The ``envhive bench`` command (``argv``: its arguments, recorded in the JSON)."""
    for env_id in args.env:  # a mistyped id fails here, before anything runs
        resolve_id(env_id, None, None)
    out = _stdout_console()
    loop = "compiled" if compiled_runner() else "Python (built without a C compiler)"
    info = machine_info()
    tasks = plan_tasks(args.env, args.num_envs, args.executor, peers=not args.no_peer)
    out.print(f"envhive {envhive.__version__} bench: {', '.join(args.env)}; num_envs "
              f"{', '.join(map(str, args.num_envs))}; {len(tasks)} points of ~{args.seconds:g} s "
              f"(median of {args.spans} spans, timed after build, reset and warm-up); "
              f"{info['cpus']} CPUs; runner loop: {loop}")
    busy = _busy_note(info)
    if busy:
        out.print(busy, style="yellow")
    rows = _with_ratios(_measure_all(tasks, args.seconds, args.spans))
    for env_id in args.env:
        out.print(_table(rows, env_id))
    if any(r.unstable for r in rows):
        out.print(f"* the timed spans of this point differ by more than {UNSTABLE:g}x: something "
                  "else was using the CPU. Rerun for a steadier figure.", style="yellow")
    trip = round_trip_note(rows)
    if trip:
        out.print(trip, style="dim", soft_wrap=True, highlight=False)
    out.print(FOOTER, style="dim")
    folder = _out_dir(args.out)
    command = shlex.join(["envhive", *argv])
    info["runner_loop"] = loop
    doc = {
        "command": command,
        "machine": info,
        "settings": {"seconds": args.seconds, "spans": args.spans, "num_envs": args.num_envs,
                     "executors": args.executor, "peers": not args.no_peer},
        "envs": args.env,
        "results": [r.as_dict() for r in rows],
    }
    written = [folder / "bench.json"]
    for path in {written[0], *([Path(args.json)] if args.json else [])}:
        path.write_text(json.dumps(doc, indent=2) + "\n")
    note = ""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        note = "plot skipped: matplotlib is not installed (pip install matplotlib)"
    else:
        shown = command if len(command) <= 80 else command[:77] + "..."
        title = (f"envhive {envhive.__version__} bench: median steps/s, {info['cpus']} CPUs, "
                 f"{info['time']}\n{shown}")
        plot(rows, folder / "bench.png", title)
        written.append(folder / "bench.png")
    out.print(f"wrote {os.path.join(str(folder), '')}: {', '.join(p.name for p in written)}",
              soft_wrap=True, highlight=False)
    if args.json:
        out.print(f"wrote {args.json}", soft_wrap=True, highlight=False)
    if note:
        out.print(note, soft_wrap=True)
    return 0


def add_bench_arguments(bench: argparse.ArgumentParser) -> None:
    """The options of ``envhive bench``."""
    bench.add_argument(
        "--env", nargs="+", default=["CartPole-v1", "envhive/CartPole-v1"],
        help="env ids (default: gymnasium's CartPole-v1 on every general executor, then "
        "envhive's compiled envhive/CartPole-v1 on the native executor)",
    )
    bench.add_argument("--num-envs", type=int, nargs="+", default=[1, 8, 64])
    bench.add_argument("--executor", action="append", help="only this executor (repeatable)")
    bench.add_argument("--seconds", type=float, default=1.0,
                       help="timed seconds per point, after build, reset and warm-up (default 1)")
    bench.add_argument("--spans", type=int, default=5,
                       help="timed spans per point; the figure is their median (default 5)")
    bench.add_argument("--no-peer", action="store_true",
                       help="skip gymnasium (SyncVectorEnv or vector_entry_point)")
    bench.add_argument("--out", help="folder for bench.json and bench.png "
                       "(default: ./envhive-bench/<date>-<time>/)")
    bench.add_argument("--json", help="also write the JSON to this file")
