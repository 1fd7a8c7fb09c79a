"""Every EnvPool id through envhive: ``envhive.make("envpool/<id>", 2)``, reset and 3 steps.

For each id EnvPool 1.2.5 registers, this builds envhive's pool on EnvPool's engine, resets it
and steps it 3 times with sampled actions. An id that fails is then tried on EnvPool itself
(``envpool.make_gymnasium(id)``, reset, one step): if EnvPool fails too, the id is one EnvPool
cannot make on this machine and is listed with EnvPool's own error; if EnvPool succeeds, it is
envhive's failure and the script exits 1.

Ids run in worker processes (``--workers``, one family at a time each); a worker that dies
(a crash inside an env's C++) is replaced and the id it was on is recorded as crashed (and
tried on EnvPool alone in a process of its own, to tell whose crash it is).

Usage:
    python benchmarks/envpool_sweep.py [--out benchmarks/results/envpool_sweep.json]
        [--workers 2] [--grep TEXT] [--limit N]

Writes JSON: the EnvPool version, per-family counts (ids, ok, EnvPool cannot make), the ids
EnvPool cannot make here with its error, and envhive's failures (none expected).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from typing import Any

STEPS = 3
#: An id still running after this many seconds is hung: its worker is killed and the id tried
#: on EnvPool alone (which is bounded the same way).
ID_TIMEOUT_S = 300


def _short(err: BaseException) -> str:
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= 300 else text[:297] + "..."


def try_envhive(task: str) -> str | None:
    """``None`` if envhive makes, resets and steps ``task``, else the error."""
    import numpy as np

    import envhive

    try:  # the pool itself: multi-player ids have an agent axis
        env = envhive.make(f"envpool/{task}", 2, seed=0, api="pool")
    except Exception as err:
        return _short(err)
    try:
        env.reset()
        env.action_space.seed(0)
        for _ in range(STEPS):
            env.step(np.stack([env.action_space.sample() for _ in range(2)]))
    except Exception as err:
        return _short(err)
    finally:
        env.close()
    return None


def try_envpool(task: str) -> str | None:
    """``None`` if EnvPool itself makes, resets and steps ``task``, else EnvPool's error."""
    import numpy as np

    from envhive.envs.envpool._real import envpool_module, real_envpool

    try:
        ep = envpool_module()
        with real_envpool():
            env = ep.make_gymnasium(task, num_envs=1)
        env.reset()
        action = env.action_space.sample()
        dtype = env.spec.action_array_spec["action"].dtype
        env.step(np.asarray([action], dtype))
        env.close()
    except Exception as err:
        return _short(err)
    return None


def _worker(tasks: list[str], out: Any) -> None:
    os.chdir(tempfile.mkdtemp(prefix="envpool-sweep-"))  # ViZDoom writes where it runs
    for task in tasks:
        out.put(("start", task, None))
        try:
            why = try_envhive(task)
            theirs = try_envpool(task) if why else None
        except BaseException:
            why, theirs = traceback.format_exc(limit=3), None
        out.put(("done", task, (why, theirs)))
    out.put(("exit", None, None))


def _alone(task: str, out: Any) -> None:
    os.chdir(tempfile.mkdtemp(prefix="envpool-sweep-"))
    out.put(try_envpool(task))


def _envpool_alone(task: str) -> str:
    """EnvPool itself on ``task``, in a process of its own (it may crash too)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_alone, args=(task, q))
    p.start()
    p.join(ID_TIMEOUT_S)
    if p.exitcode is None:
        p.kill()
        return f"EnvPool hung on it (over {ID_TIMEOUT_S} s)"
    if p.exitcode != 0:
        return f"EnvPool's process died (exit code {p.exitcode})"
    why = q.get()
    return why or "ok"


def run(tasks_by_family: dict[str, list[str]], workers: int) -> dict[str, Any]:
    """Sweep every task; returns ``{task: (envhive error, EnvPool error)}``."""
    import queue

    ctx = mp.get_context("spawn")
    pending = [list(ts) for _, ts in sorted(tasks_by_family.items())]
    results: dict[str, Any] = {}
    running: list[dict[str, Any]] = []
    while pending or running:
        while pending and len(running) < workers:
            tasks = pending.pop(0)
            q = ctx.Queue()
            p = ctx.Process(target=_worker, args=(tasks, q))
            p.start()
            running.append({"p": p, "q": q, "tasks": tasks, "current": None, "done": False})
        for w in list(running):
            try:
                while True:
                    kind, task, value = w["q"].get_nowait()
                    if kind == "start":
                        w["current"], w["since"] = task, time.monotonic()
                    elif kind == "done":
                        results[task], w["current"] = value, None
                        print(f"{len(results):5d} {task}: {'ok' if value[0] is None else 'FAILED'}", flush=True)
                    else:
                        w["done"] = True
            except queue.Empty:
                pass
            if w["current"] is not None and time.monotonic() - w["since"] > ID_TIMEOUT_S:
                w["p"].kill()  # hung inside an id: recorded below as a worker that died in it
                w["p"].join(5)
            if w["done"] or not w["p"].is_alive():
                w["p"].join(5)
                running.remove(w)
                current = w["current"]
                if current is not None and not w["done"]:  # the worker died inside an id
                    results[current] = (f"the process died or hung inside envpool/{current}", _envpool_alone(current))
                    rest = w["tasks"][w["tasks"].index(current) + 1:]
                    if rest:
                        pending.insert(0, rest)
        time.sleep(0.05)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="benchmarks/results/envpool_sweep.json")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--grep", default=None, help="only ids containing this text")
    parser.add_argument("--limit", type=int, default=None, help="at most this many ids per family")
    args = parser.parse_args(argv)

    from importlib.metadata import version

    from envhive.envs.envpool._ids import registrations

    by_family: dict[str, list[str]] = defaultdict(list)
    for task, reg in sorted(registrations().items()):
        if args.grep is None or args.grep.lower() in task.lower():
            by_family[reg.import_path.removeprefix("envpool.")].append(task)
    if args.limit:
        by_family = defaultdict(list, {f: ts[: args.limit] for f, ts in by_family.items()})
    start = time.perf_counter()
    results = run(by_family, args.workers)
    family_of = {t: f for f, ts in by_family.items() for t in ts}
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"ids": 0, "ok": 0, "envpool_cannot": 0, "envhive_failed": 0})
    cannot, failed = {}, {}
    for task, (ours, theirs) in sorted(results.items()):
        c = counts[family_of[task]]
        c["ids"] += 1
        if ours is None:
            c["ok"] += 1
        elif theirs is not None and theirs != "ok":
            c["envpool_cannot"] += 1
            cannot[task] = theirs
        else:
            c["envhive_failed"] += 1
            failed[task] = ours
    report = {
        "command": "python benchmarks/envpool_sweep.py" + (f" --grep {args.grep}" if args.grep else ""),
        "envpool": version("envpool"),
        "seconds": round(time.perf_counter() - start, 1),
        "ids": len(results),
        "ok": sum(c["ok"] for c in counts.values()),
        "envpool_cannot_make_here": len(cannot),
        "envhive_failed": len(failed),
        "families": dict(sorted(counts.items())),
        "envpool_errors": cannot,
        "envhive_errors": failed,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"{report['ok']} of {report['ids']} ids ok; EnvPool cannot make {len(cannot)} here; "
          f"envhive failed on {len(failed)} ({report['seconds']} s) -> {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
