"""Atari steps per second and memory: envhive vs EnvPool vs ale-py's ``AtariVectorEnv``, one run.

Run (with envhive importable, e.g. ``PYTHONPATH=src``; needs ``envpool`` and ``ale-py``):

    python benchmarks/bench_atari.py [--games Pong Breakout] [--envs 1 8 64] [--seconds 3]
        [--repeats 2] [--out benchmarks/results/atari.json]

Every configuration (game x num_envs x sync/async) runs each library in a fresh subprocess,
interleaved, ``--repeats`` times; the best rate of each is kept (the machine is shared, so the
best run is the least disturbed one). Same preprocessing everywhere: 84x84 grayscale, stack 4,
frame skip 4, max-pool, up to 30 no-ops, fire reset, no reward clipping, random actions.

* sync: ``step`` of every env.
* ``envhive`` is the default (``executor="auto"``: the native executor's Atari engine, one
  C++ thread per core; the caller alone for one env); ``envhive_process`` is ``AtariEnv`` on
  the process executor (``executor="process"``: where the engine cannot run, the fallback).
* async: ``batch_size = num_envs / 2``; ``recv`` the first half to finish, ``send`` them
  their actions (EnvPool's ``send``/``recv``; envhive's, which are the same API;
  ``AtariVectorEnv`` with ``batch_size``, whose ``step`` sends to the last batch received).

CPU: CPU seconds (user + system) of the process, its threads and its worker processes per
env step, the least of the repeats: what a step costs, less sensitive to the machine's load
than the rate (envhive's parent process counts, waiting included).

Memory: the proportional set size (PSS, shared pages split between the processes that map
them) summed over the process and its children, after the run, divided by ``num_envs``; RSS
summed too, and each process's (envhive: the parent, then its workers; EnvPool: one).
Rates are env steps per second (one step of one env = 1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

_SNAKE = {"Pong": "pong", "Breakout": "breakout"}


def _mem_kb(pid: int, field: str) -> int:
    if field == "Pss":
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1])
        except OSError:
            return 0
        return 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _tree(pid: int) -> list[int]:
    out = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        kids = []
    for k in kids:
        out.extend(_tree(k))
    return out


def _cpu_s() -> float:
    """CPU seconds (user + system) used so far by this process, its threads and its children
    that are alive (worker processes)."""
    total = 0
    for pid in _tree(os.getpid()):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def _memory() -> dict[str, Any]:
    pids = _tree(os.getpid())
    rss = [_mem_kb(p, "VmRSS") / 1024 for p in pids]
    return {
        "pss_mb": sum(_mem_kb(p, "Pss") for p in pids) / 1024,
        "rss_mb": sum(rss),
        "rss_mb_by_process": [round(r, 1) for r in rss],  # this process first, then its children
        "processes": len(pids),
    }


def _make(lib: str, game: str, n: int, batch: int) -> tuple[Any, Any]:
    """(env, action count)."""
    if lib == "envpool":
        import envpool

        env = envpool.make(f"{game}-v5", env_type="gymnasium", num_envs=n, batch_size=batch, seed=0)
        return env, env.action_space.n
    if lib == "ale_vector":
        from ale_py.vector_env import AtariVectorEnv

        env = AtariVectorEnv(_SNAKE[game], num_envs=n, batch_size=batch, reward_clipping=False,
                             max_num_frames_per_episode=108000)
        return env, env.single_action_space.n
    import envhive

    executor = "process" if lib == "envhive_process" else "auto"  # the fallback: AtariEnv in workers
    env = envhive.make(f"envhive/{game}-v5", num_envs=n, batch_size=batch, seed=0, copy=False, executor=executor)
    return env, env.single_action_space.n


def child(lib: str, game: str, n: int, mode: str, seconds: float) -> dict[str, Any]:
    """Run one library in this process; returns its rate and memory."""
    import numpy as np

    batch = n if mode == "sync" else max(n // 2, 1)
    env, nact = _make(lib, game, n, batch)
    rng = np.random.default_rng(0)
    acts = [rng.integers(0, nact, size=batch).astype(np.int32 if lib == "ale_vector" else np.int64)
            for _ in range(64)]
    if mode == "sync":
        env.reset(seed=0) if lib != "envpool" else env.reset()

        def one(k: int) -> int:
            env.step(acts[k & 63])
            return n
    elif lib == "ale_vector":
        env.reset(seed=0)

        def one(k: int) -> int:
            env.step(acts[k & 63])  # send to the last batch received, receive the next
            return batch
    else:
        env.async_reset()
        state = {"ids": env.recv()[-1]["env_id"]}

        def one(k: int) -> int:
            env.send(acts[k & 63], state["ids"])
            state["ids"] = env.recv()[-1]["env_id"]
            return batch
    k = 0
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:  # warm-up
        one(k)
        k += 1
    steps = 0
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        steps += one(k)
        k += 1
    rate = steps / (time.perf_counter() - t0)
    cpu_us = (_cpu_s() - cpu0) / steps * 1e6
    mem = _memory()
    desc = repr(env) if lib.startswith("envhive") else lib
    env.close()
    return {"rate": rate, "cpu_us": cpu_us, "mem": mem, "desc": desc}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", nargs="+", default=["Pong", "Breakout"])
    ap.add_argument("--envs", nargs="+", type=int, default=[1, 8, 64])
    ap.add_argument("--modes", nargs="+", default=["sync", "async"])
    ap.add_argument("--libs", nargs="+", default=["envhive", "envhive_process", "envpool", "ale_vector"])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/results/atari.json")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        lib, game, n, mode, seconds = args.child
        print(json.dumps(child(lib, game, int(n), mode, float(seconds))))
        return
    results: list[dict[str, Any]] = []
    for game in args.games:
        for n in args.envs:
            for mode in args.modes:
                if mode == "async" and n == 1:
                    continue  # batch_size = num_envs / 2 needs 2 envs
                best: dict[str, dict[str, Any]] = {}
                runs: dict[str, list[dict[str, Any]]] = {}
                for _ in range(args.repeats):
                    for lib in args.libs:
                        cmd = [sys.executable, __file__, "--child", lib, game, str(n), mode, str(args.seconds)]
                        proc = subprocess.run(cmd, capture_output=True, text=True)
                        line = [x for x in proc.stdout.splitlines() if x.startswith("{")]
                        if proc.returncode or not line:
                            print(f"{lib} {game} x{n} {mode} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                            continue
                        r = json.loads(line[-1])
                        runs.setdefault(lib, []).append(r)
                        if lib not in best or r["rate"] > best[lib]["rate"]:
                            best[lib] = r
                row: dict[str, Any] = {"game": game, "num_envs": n, "mode": mode}
                for lib, r in best.items():
                    row[lib] = round(r["rate"], 1)
                    row[f"{lib}_cpu_us_per_step"] = round(min(x["cpu_us"] for x in runs[lib]), 1)
                    row[f"{lib}_pss_mb_per_env"] = round(r["mem"]["pss_mb"] / n, 2)
                    row[f"{lib}_rss_mb"] = round(r["mem"]["rss_mb"], 1)
                    row[f"{lib}_rss_mb_by_process"] = r["mem"]["rss_mb_by_process"]  # summed above
                    if lib.startswith("envhive"):
                        row[f"{lib}_executor"] = r["desc"]
                peers = [row[p] for p in ("envpool", "ale_vector") if p in row]
                for mine in ("envhive", "envhive_process"):
                    if mine in row and peers:
                        row[f"{mine}_vs_best_peer"] = round(row[mine] / max(peers), 3)
                print(json.dumps(row), flush=True)
                results.append(row)
    meta = {"command": " ".join(sys.argv), "cpus": os.cpu_count(), "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
