"""Soak: random interleavings of calls and faults on every executor; hangs, wrong results and leaks must be 0.

Not a test (it runs for minutes and its schedule is random): a script that tries what an
adversarial user would, over and over, and reports what happened.

Each round builds a pool on a random executor: process (2 workers, ``on_worker_failure=
"restart"``), thread (2 threads: the caller steals shares), serial, or native (``envhive/
CartPole-v1``), with a random autoreset mode and a random ``batch_size``. Its envs (but the
native ones) sometimes step slowly and sometimes return an oversized info (up to 4 MB). It then
performs random operations: sync steps and resets (with and without options), the async API
(``send``/``recv`` loops over ``batch_size`` envs, ``async_reset``, ``step_async``/
``step_wait``), ``call``/``get_attr``/``set_attr``, a Ctrl-C (a real SIGINT from a timer
thread) during any of them, and on process pools a SIGKILL of a random worker at a random
moment. Every operation runs under a watchdog: one that does not return within ``--hang-s``
counts as a hang and dumps every thread's stack (faulthandler). After an interrupt the pool
must take a ``reset()`` whose observations are each env's step 0 (else it counts as wrong).
Each round closes its pool (sometimes with a Ctrl-C in the close, then closes it again) and
the script checks, at the end, for child processes, ``/dev/shm`` segments and semaphores of
this process, threads and file descriptors left behind.

Run (5 minutes a seed)::

    python benchmarks/soak.py --seconds 300 --seed 1 --json benchmarks/results/soak_seed1.json

It prints operations done, faults injected, hangs, wrong results and leaks (all must be 0),
and exits non-zero if any is not 0.
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
from envhive.executors import ProcessExecutor, SerialExecutor, ThreadExecutor
from envhive.executors._shm import shm_prefix
from envhive.testing import CountingEnv

sys.path.insert(0, str(Path(__file__).parent))
from interrupt_stress import settle


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


EXECUTORS = ["process", "thread", "serial", "native"]
VERBOSE = False  # --verbose: print every envhive error the operations raised
OPS = ["step"] * 6 + ["reset", "reset_opts", "async", "async_loop", "async_reset", "wait",
                      "call", "set_attr"]


def build(kind: str, n: int, mode: str, batch_size: int) -> Any:
    if kind == "native":
        return envhive.make("envhive/CartPole-v1", n, autoreset=mode, batch_size=batch_size)
    if kind == "process":
        ex: Any = ProcessExecutor(2, on_worker_failure="restart", step_timeout=10.0)
    else:
        ex = ThreadExecutor(2) if kind == "thread" else SerialExecutor()
    return envhive.make([lambda i=i: SoakEnv(i) for i in range(n)], executor=ex, autoreset=mode,
                        batch_size=batch_size)


def one_round(rng: random.Random, stats: dict[str, int], dog: Watchdog, until: float) -> None:
    kind = EXECUTORS[stats["rounds"] % len(EXECUTORS)]  # each executor in turn
    n = rng.choice([2, 4, 6])
    mode = rng.choice(["next_step", "same_step", "disabled"])
    env = build(kind, n, mode, rng.choice([n, n // 2]))
    try:
        with dog:
            env.reset(seed=rng.randrange(1000))
        for _ in range(rng.randrange(20, 120)):
            if time.monotonic() > until:
                break
            op = rng.choice(OPS)
            timer = None
            if rng.random() < 0.08:
                timer = threading.Timer(rng.uniform(0, 0.03), os.kill, (os.getpid(), signal.SIGINT))
                timer.start()
                stats["interrupts"] += 1
                stats[f"interrupts:{kind}"] = stats.get(f"interrupts:{kind}", 0) + 1
            if kind == "process" and rng.random() < 0.04:
                victim = rng.choice(env.pool.executor.worker_pids())
                threading.Timer(rng.uniform(0, 0.03), _kill, (victim,)).start()
                stats["kills"] += 1
            try:
                with dog:
                    _do(env, op, n, rng)
                stats["ops"] += 1
            except KeyboardInterrupt as err:
                stats["interrupted"] += 1
                try:
                    with dog:
                        settle(env.pool, err)  # a Ctrl-C that struck this script's code
                        _check_reset(env, kind, n, stats)
                except KeyboardInterrupt:  # its own timer fired late: once more
                    with dog:
                        _check_reset(env, kind, n, stats)
            except envhive.EnvhiveError as err:
                stats[f"error:{type(err).__name__}"] = stats.get(f"error:{type(err).__name__}", 0) + 1
                if VERBOSE:
                    print(kind, op, type(err).__name__, str(err)[:300], file=sys.stderr)
                if env.closed:
                    return
                with dog:
                    # An envhive error leaves the other envs of an async call in flight (by
                    # design): receive them before the reset.
                    if env.pool.pending:
                        try:
                            env.pool.wait()
                        except envhive.EnvhiveError:
                            pass
                    _check_reset(env, kind, n, stats)
            finally:
                if timer is not None:
                    timer.cancel()
                    timer.join()
    except KeyboardInterrupt:  # a late SIGINT (its timer fired after the operation)
        stats["interrupted"] += 1
    finally:
        _close(env, rng, stats, dog)


def _check_reset(env: Any, kind: str, n: int, stats: dict[str, int]) -> None:
    """Reset after a fault; a CountingEnv's reset observation is (tag, episode, 0, 0)."""
    try:
        obs, _ = env.reset()
    except envhive.PendingCallError as err:  # the pool was left with envs in flight
        stats["wrong"] += 1
        print(f"wrong: reset on {kind} raised {err}", file=sys.stderr)
        env.pool.wait()
        obs, _ = env.reset()
    if kind != "native" and (obs[:, 0].tolist() != list(range(n)) or obs[:, 2].any()):
        stats["wrong"] += 1
        print(f"wrong reset on {kind}: {obs.tolist()}", file=sys.stderr)


def _close(env: Any, rng: random.Random, stats: dict[str, int], dog: Watchdog) -> None:
    """Close the pool; now and then with a Ctrl-C in the close, then close it again."""
    timer = None
    if rng.random() < 0.2:
        timer = threading.Timer(rng.uniform(0, 0.01), os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        stats["interrupts"] += 1
        stats["interrupts:close"] = stats.get("interrupts:close", 0) + 1
    try:
        with dog:
            env.close()
            if timer is not None:
                time.sleep(0.015)  # the signal lands after the close at worst
    except KeyboardInterrupt:
        stats["interrupted"] += 1
    finally:
        if timer is not None:
            timer.join()
    with dog:
        env.close()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _do(env: Any, op: str, n: int, rng: random.Random) -> None:
    actions = np.array([rng.randrange(2) for _ in range(n)])
    if op == "step":
        try:
            env.step(actions)
        except envhive.ResetNeededError:
            env.reset()
    elif op == "reset" or (op == "reset_opts" and env.pool.executor.name == "native"):
        env.reset()  # kernels take no reset options
    elif op == "reset_opts":
        env.reset(options={"blob": b"o" * rng.choice([10, 300_000])})
    elif op == "async":
        env.reset()
        env.send(actions)
        for _ in range(n // env.pool.batch_size):
            env.recv()
    elif op == "async_loop":  # batch_size envs at a time, as EnvPool's async loop
        env.reset()
        env.send(actions)
        for _ in range(rng.randrange(2, 12)):
            *_, info = env.recv()
            ids = info["env_id"]
            env.send(actions[ids], ids)
        for _ in range(n // env.pool.batch_size):
            env.recv()
    elif op == "async_reset":
        env.async_reset()
        for _ in range(n // env.pool.batch_size):
            env.recv()
    elif op == "wait":
        env.reset()
        env.step_async(actions)
        env.step_wait()
    elif op == "call" and env.pool.executor.name == "native":  # no per-env objects
        assert len(env.get_attr("elapsed")) == n
    elif op == "call":
        assert len(env.call("echo", b"c" * rng.choice([1, 500_000]))) == n
    elif op == "set_attr" and env.pool.executor.name != "native":
        env.set_attr("soak_value", rng.randrange(100))
        assert len(env.get_attr("soak_value")) == n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--hang-s", type=float, default=30.0, help="an operation slower than this is a hang")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--verbose", action="store_true", help="print each envhive error raised")
    args = ap.parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    rng = random.Random(args.seed)
    warm = envhive.make(CountingEnv, 1, executor="process")  # the forkserver outlives pools
    warm.close()
    base_children, base_fds = children(), fds()
    base_threads = threading.active_count()
    stats: dict[str, int] = {"rounds": 0, "ops": 0, "interrupts": 0, "interrupted": 0, "kills": 0,
                             "wrong": 0}
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
        "threads": max(0, threading.active_count() - base_threads),
    }
    report = {"seconds": args.seconds, "seed": args.seed, **stats, "hangs": dog.hangs, "leaks": leaks}
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if dog.hangs or stats["wrong"] or any(leaks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
