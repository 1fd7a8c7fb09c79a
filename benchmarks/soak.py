"""Soak: random interleavings of calls and faults against process pools; hangs and leaks must be 0.

Not a test (it runs for minutes and its schedule is random): a script that tries what an
adversarial user would, over and over, and reports what happened.

Each round builds a process pool (2 workers, ``on_worker_failure="restart"``, a random
autoreset mode) of envs whose step info is sometimes oversized (up to 4 MB), then performs
random operations: sync steps and resets (with and without options), async send/recv,
``call``/``get_attr``/``set_attr``, a Ctrl-C (a real SIGINT from a timer thread) during any of
them, a SIGKILL of a random worker at a random moment. Every operation runs under a watchdog:
one that does not return within ``--hang-s`` counts as a hang and dumps every thread's stack
(faulthandler). After an interrupt the pool must take a ``reset()``. Each round closes its pool
and the script checks, at the end, for child processes, ``/dev/shm`` segments and semaphores of
this process, and file descriptors left behind.

Run (about 3 minutes)::

    python benchmarks/soak.py --seconds 180 --json benchmarks/results/soak.json

It prints operations done, faults injected, hangs (must be 0) and leaks (must be 0), and exits
non-zero if either is not 0.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

import envhive
from envhive.executors import ProcessExecutor
from envhive.executors._shm import shm_prefix
from envhive.testing import CountingEnv


class SoakEnv(CountingEnv):
    """CountingEnv with a slow step now and then and an oversized info now and then."""

    def __init__(self, tag: int) -> None:
        super().__init__(pattern=[(7, "term"), (5, "trunc")], tag=tag)
        self.rng = random.Random(tag)

    def step(self, action: Any):
        if self.rng.random() < 0.05:
            time.sleep(0.05)
        obs, rew, term, trunc, info = super().step(action)
        if self.rng.random() < 0.02:
            info = {**info, "blob": b"x" * self.rng.choice([100, 70_000, 4 << 20])}
        return obs, rew, term, trunc, info

    def echo(self, value: Any) -> Any:
        return value


def children() -> set[int]:
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                out.add(int(entry))
    return out


def own_shm() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(f"{shm_prefix()}{os.getpid()}_")}


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Watchdog:
    """Counts an operation that does not return within ``limit`` seconds as a hang."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.hangs = 0

    def __enter__(self) -> Watchdog:
        faulthandler.dump_traceback_later(self.limit, exit=False)
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc: Any) -> None:
        faulthandler.cancel_dump_traceback_later()
        if time.monotonic() - self.start > self.limit:
            self.hangs += 1


def one_round(rng: random.Random, stats: dict[str, int], dog: Watchdog, until: float) -> None:
    n = rng.choice([2, 4, 6])
    mode = rng.choice(["next_step", "same_step", "disabled"])
    ex = ProcessExecutor(2, on_worker_failure="restart", step_timeout=10.0)
    env = envhive.make([lambda i=i: SoakEnv(i) for i in range(n)], executor=ex, autoreset=mode)
    try:
        with dog:
            env.reset(seed=rng.randrange(1000))
        for _ in range(rng.randrange(20, 120)):
            if time.monotonic() > until:
                break
            op = rng.choice(["step"] * 6 + ["reset", "reset_opts", "async", "call", "set_attr"])
            timer = None
            if rng.random() < 0.08:
                timer = threading.Timer(rng.uniform(0, 0.03), os.kill, (os.getpid(), signal.SIGINT))
                timer.start()
                stats["interrupts"] += 1
            if rng.random() < 0.04:
                victim = rng.choice(ex.worker_pids())
                threading.Timer(rng.uniform(0, 0.03), _kill, (victim,)).start()
                stats["kills"] += 1
            try:
                with dog:
                    _do(env, op, n, rng)
                stats["ops"] += 1
            except KeyboardInterrupt:
                stats["interrupted"] += 1
                try:
                    with dog:
                        env.reset()
                except KeyboardInterrupt:  # its own timer fired late: once more
                    with dog:
                        env.reset()
            except envhive.EnvhiveError as err:
                stats[f"error:{type(err).__name__}"] = stats.get(f"error:{type(err).__name__}", 0) + 1
                if env.closed:
                    return
                with dog:
                    env.reset()
            finally:
                if timer is not None:
                    timer.cancel()
                    timer.join()
    except KeyboardInterrupt:  # a late SIGINT (its timer fired after the operation)
        stats["interrupted"] += 1
    finally:
        with dog:
            env.close()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _do(env: Any, op: str, n: int, rng: random.Random) -> None:
    actions = np.array([rng.randrange(3) for _ in range(n)])
    if op == "step":
        try:
            env.step(actions)
        except envhive.ResetNeededError:
            env.reset()
    elif op == "reset":
        env.reset()
    elif op == "reset_opts":
        env.reset(options={"blob": b"o" * rng.choice([10, 300_000])})
    elif op == "async":
        env.reset()
        env.send(actions)
        env.recv()
    elif op == "call":
        assert len(env.call("echo", b"c" * rng.choice([1, 500_000]))) == n
    elif op == "set_attr":
        env.set_attr("soak_value", rng.randrange(100))
        assert len(env.get_attr("soak_value")) == n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--hang-s", type=float, default=30.0, help="an operation slower than this is a hang")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    rng = random.Random(args.seed)
    warm = envhive.make(CountingEnv, 1, executor="process")  # the forkserver outlives pools
    warm.close()
    base_children, base_fds = children(), fds()
    stats: dict[str, int] = {"rounds": 0, "ops": 0, "interrupts": 0, "interrupted": 0, "kills": 0}
    dog = Watchdog(args.hang_s)
    until = time.monotonic() + args.seconds
    while time.monotonic() < until:
        try:
            one_round(rng, stats, dog, until)
        except KeyboardInterrupt:
            stats["interrupted"] += 1
        stats["rounds"] += 1
    time.sleep(0.5)
    gc.collect()
    leaks = {
        "processes": len(children() - base_children),
        "segments": len(own_shm()),
        "fds": max(0, fds() - base_fds),
    }
    report = {"seconds": args.seconds, "seed": args.seed, **stats, "hangs": dog.hangs, "leaks": leaks}
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if dog.hangs or any(leaks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
