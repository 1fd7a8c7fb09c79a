"""Interrupt stress: Ctrl-C at random moments of every call, executor and front end; hangs and wrong results must be 0.

Not a test (it runs for minutes): a script that presses Ctrl-C the way a user does, at any
moment, over and over, and reports what happened.

Each cell is an executor (serial; thread, 2 threads for 4 envs, so the caller steals shares;
process, 2 workers; native, ``envhive/CartPole-v1``; atari, ``envhive/Pong-v5`` on the native
executor's Atari engine (the caller and a C++ thread); atari_process, ``envhive/Pong-v5`` on the
process executor, 2 workers: where the engine cannot run), an operation (a loop of sync ``step``
(TorchRL: ``rollout``), a loop of ``reset``, an async ``send``/``recv`` loop over half the
envs, a loop of ``send`` of every env then ``wait`` (gymnasium: ``step_async``/
``step_wait``), a loop of ``call``, or ``close`` with work in flight) and a front end
(gymnasium, TorchRL, SB3). A real SIGINT (a timer thread's ``os.kill``) is sent at a random delay into
the operation, ``--trials`` times per cell. After each interrupt:

* the pool must still be usable: a seeded ``reset()`` then 3 steps must give exactly what a
  fresh pool of the same cell gives (else the trial counts as *wrong*, as does any error);
* ``close`` (cut short, then called again, as a user would) must leave no ``/dev/shm``
  segment, no worker process, no worker thread (the Atari engine's C++ threads included:
  the process's thread count must be back where it was) (else *wrong*).

Every trial runs under a watchdog: one that does not finish within ``--hang-s`` counts as a
*hang*, dumps every thread's stack, and is broken out of (SIGUSR1) so the run goes on.

Run (about 10 minutes; ``interrupts`` counts the SIGINTs that landed inside the operation,
``landed_after`` those that came after a close had already returned)::

    python benchmarks/interrupt_stress.py --trials 25 --json benchmarks/results/interrupt_stress.json

It prints one line per cell and a summary, and exits non-zero if any hang or wrong result.
"""

from __future__ import annotations

import argparse
import dis
import faulthandler
import functools
import gc
import json
import os
import random
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

import envhive
from envhive.executors import ProcessExecutor, SerialExecutor, ThreadExecutor
from envhive.executors._shm import shm_prefix
from envhive.testing import CountingEnv

N = 4  # envs per pool
SEED = 123  # the seeded reset of the check


class StressEnv(CountingEnv):
    """A CountingEnv a ``nap_p`` share of whose steps and resets take 1-8 ms, the others no
    time (seeded per env). Trials alternate 0.25 (SIGINTs land in envs and in waits) and 0
    (they land in envhive's own bookkeeping)."""

    def __init__(self, tag: int) -> None:
        super().__init__(pattern=[(10**6, "trunc")], tag=tag)
        self.rng = random.Random(tag)
        self.nap_p = 0.25

    def _nap(self) -> None:
        if self.nap_p and self.rng.random() < self.nap_p:
            time.sleep(self.rng.uniform(0.001, 0.008))

    def step(self, action: Any):
        self._nap()
        return super().step(action)

    def reset(self, *, seed: Any = None, options: Any = None):
        self._nap()
        return super().reset(seed=seed, options=options)

    def nap(self, seconds: float) -> int:
        time.sleep(seconds)
        return int(self.tag or 0)


EXECUTORS = ["serial", "thread", "process", "native", "atari", "atari_process"]
NATIVE = ("native", "atari", "atari_process")  # compiled ids: the whole frame compared
OPS = ["step", "reset", "recv", "wait", "call", "close"]
APIS = ["gymnasium", "torchrl", "sb3"]


def build(executor: str, api: str) -> Any:
    if executor in NATIVE:
        env_id = "envhive/CartPole-v1" if executor == "native" else "envhive/Pong-v5"
        where: Any = ProcessExecutor(2) if executor == "atari_process" else "native"
        return envhive.make(env_id, N, api=api, batch_size=N // 2, seed=0, executor=where)
    ex: Any = {"serial": SerialExecutor, "thread": lambda: ThreadExecutor(2),
               "process": lambda: ProcessExecutor(2)}[executor]()
    return envhive.make([functools.partial(StressEnv, i) for i in range(N)], executor=ex,
                        api=api, batch_size=N // 2)


class FrontEnd:
    """The operations of one cell, written once per front end."""

    def __init__(self, env: Any, api: str, native: bool) -> None:
        self.env, self.api, self.native = env, api, native
        self.pool = env.pool if api != "gymnasium" else env._pool
        self.zeros = np.zeros(N, np.int64)
        if api == "torchrl":
            # TorchRL's rollout imports modules lazily (pandas) the first time: a Ctrl-C inside
            # that import leaves a half-built module in sys.modules, and every later rollout
            # fails (Python's, not envhive's). Import them before any Ctrl-C.
            env.rollout(2, break_when_any_done=False)

    def seeded_reset(self) -> np.ndarray:
        if self.api == "gymnasium":
            return np.asarray(self.env.reset(seed=SEED)[0])
        if self.api == "sb3":
            self.env.seed(SEED)
            return np.asarray(self.env.reset())
        self.env.set_seed(SEED)
        return self.env.reset()["observation"].numpy()

    def step(self) -> np.ndarray:
        if self.api == "gymnasium":
            return np.asarray(self.env.step(self.zeros)[0])
        if self.api == "sb3":
            return np.asarray(self.env.step(self.zeros)[0])
        td = self.env.reset() if not hasattr(self, "_td") else self._td
        td["action"] = self.env.action_spec.zero()
        out = self.env.step(td)
        self._td = out["next"].exclude("reward", "done", "terminated", "truncated")
        return out["next", "observation"].numpy()

    def transcript(self) -> np.ndarray:
        """A seeded reset and 3 steps: what the check compares with a fresh pool's."""
        if hasattr(self, "_td"):
            del self._td
        rows = [self.seeded_reset()]
        if self.api == "torchrl":
            self._td = self.env.reset()  # set_seed reset already; TorchRL wants its own td
            rows[0] = self._td["observation"].numpy() if self.native else rows[0]
        rows += [self.step() for _ in range(3)]
        out = np.stack(rows)
        # CountingEnv: (tag, episode, step, action); the episode count differs between a
        # fresh pool and an interrupted one, the rest must not.
        return out if self.native else out[..., [0, 2, 3]]

    # -- the interrupted operations (loops run until the Ctrl-C) -------------------------
    def loop_step(self) -> None:
        while True:
            if self.api == "torchrl":
                self.env.rollout(8, break_when_any_done=False)
            else:
                self.env.step(self.zeros)

    def loop_reset(self) -> None:
        while True:
            if self.api == "torchrl":
                self.env.reset()
            else:
                self.env.reset()

    def loop_recv(self) -> None:
        # The gymnasium front end's own async API; the pool's for the others (theirs have none).
        send, recv = (self.env.send, self.env.recv) if self.api == "gymnasium" else (
            self.pool.send, self.pool.recv)
        send(self.zeros)
        while True:
            got = recv()
            ids = got[4]["env_id"] if self.api == "gymnasium" else got.env_ids
            send(self.zeros[: len(ids)], ids)

    def loop_wait(self) -> None:
        # gymnasium's step_async/step_wait (Pool.wait underneath); the pool's for the others.
        while True:
            if self.api == "gymnasium":
                self.env.step_async(self.zeros)
                self.env.step_wait()
            else:
                self.pool.send(self.zeros)
                self.pool.wait()

    def loop_call(self) -> None:
        while True:
            if self.native:  # compiled ids have no per-env objects, only these attributes
                self.pool.call("elapsed" if "CartPole" in repr(self.env) else "action_space")
            elif self.api == "sb3":
                self.env.env_method("nap", 0.002)
            elif self.api == "gymnasium":
                self.env.call("nap", 0.002)
            else:
                self.pool.call("nap", (0.002,))


class Hung(BaseException):
    """Raised in the main thread by the watchdog (not an Exception: a trial does not catch it)."""


class Watchdog:
    """Count a trial that outlives ``limit`` as a hang, dump the stacks, and break it."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.hangs = 0
        signal.signal(signal.SIGUSR1, self._raise)

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise Hung

    def __enter__(self) -> Watchdog:
        self._stop = threading.Event()
        self.fired = False
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        if self._stop.wait(self.limit):
            return
        self.fired = True
        faulthandler.dump_traceback(all_threads=True)
        while not self._stop.wait(0.5):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
        # (stops once the trial gave up)

    def __exit__(self, *exc: Any) -> bool:
        self._stop.set()
        self._thread.join()
        if self.fired:
            self.hangs += 1
        return exc[0] is Hung  # a broken-out trial is counted, not raised


def own_segments() -> list[str]:
    return [s for s in os.listdir("/dev/shm") if s.startswith(f"{shm_prefix()}{os.getpid()}_")]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("envhive-thread")]


_ENVHIVE_DIR = os.path.dirname(os.path.abspath(envhive.__file__))


def settle(pool: Any, err: BaseException) -> None:
    """Before the check: what a user does after a Ctrl-C that struck *their* code.

    A Ctrl-C inside an envhive call must leave nothing in flight (the contract under test, so
    nothing is done here). One that struck the script's own code between two calls (an async
    loop between ``recv`` and ``send``) leaves the envs the script sent in flight, as they
    should be: the script receives them (``wait``) before its ``reset()``.
    """
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    inside = tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(
        _ENVHIVE_DIR) and not at_entry(tb)
    if not inside and pool.pending and not pool.closed:
        try:
            pool.wait()
        except envhive.EnvhiveError:
            pass


def at_entry(tb: Any) -> bool:
    """Whether the interrupt was delivered as its frame's function was entered (at its
    ``RESUME``, where Python checks for signals, before its first line ran): the call did
    nothing yet, as if the Ctrl-C had struck the caller just before it."""
    for ins in dis.get_instructions(tb.tb_frame.f_code):
        if ins.opname == "RESUME":
            return bool(tb.tb_lasti <= ins.offset)
    return False


def sigint_after(seconds: float) -> threading.Timer:
    gc.collect()  # a Ctrl-C inside a finalizer is printed and dropped, not raised
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def run_cell(executor: str, op: str, api: str, trials: int, rng: random.Random,
             dog: Watchdog, max_delay: float) -> dict[str, Any]:
    native = executor in NATIVE
    fresh = FrontEnd(build(executor, api), api, native)
    want = fresh.transcript()
    fresh.pool.send(fresh.zeros)
    t0 = time.perf_counter()
    fresh.env.close()
    # How long a close with work in flight takes here: the close trials' SIGINTs come within
    # 1.5 times that (a fixed range would land almost always after a fast close).
    close_s = time.perf_counter() - t0
    cell = {"executor": executor, "op": op, "api": api, "close_s": round(close_s, 5),
            "interrupts": 0, "landed_after": 0,
            "hangs": 0, "wrong": 0, "errors": []}
    fe = None if op == "close" else FrontEnd(build(executor, api), api, native)
    for trial in range(trials):
        hangs_before, fresh_needed = dog.hangs, False
        with dog:
            try:
                if op == "close":
                    _close_trial(executor, api, rng, cell, 1.5 * close_s)
                else:
                    assert fe is not None
                    _loop_trial(fe, op, trial, want, rng, cell, max_delay)
            except (Exception, KeyboardInterrupt) as err:  # the pool did not take the check
                cell["wrong"] += 1
                where = "; ".join(f"{f.name}:{f.lineno}" for f in traceback.extract_tb(err.__traceback__)[-4:])
                cell["errors"].append(f"{type(err).__name__}: {str(err)[:200]} (at {where})")
                fresh_needed = True
        if dog.hangs > hangs_before:
            cell["hangs"] += 1
            fresh_needed = True
        if fresh_needed and fe is not None:  # a pool that failed is of no more use: a new one
            _quietly_close(fe)
            fe = FrontEnd(build(executor, api), api, native)
    if fe is not None:
        fe.env.close()
    return cell


def _loop_trial(fe: FrontEnd, op: str, trial: int, want: np.ndarray, rng: random.Random,
                cell: dict[str, Any], max_delay: float) -> None:
    """Ctrl-C into a loop of ``op``; then a seeded reset and 3 steps must equal a fresh pool's."""
    if not fe.native:
        fe.pool.set_attr("nap_p", 0.25 * (trial % 2))
    fe.transcript()
    timer = None
    try:  # the timer starts inside: a SIGINT after ~0 s lands in this try too
        timer = sigint_after(rng.uniform(0.0, max_delay))
        getattr(fe, f"loop_{op}")()
    except KeyboardInterrupt as err:
        cell["interrupts"] += 1
        if timer is not None:
            timer.join()
        settle(fe.pool, err)
    except Exception as err:  # the loop failed by itself, before the Ctrl-C: say why
        if timer is not None:
            timer.cancel()
            timer.join()
        raise AssertionError(f"the {op} loop raised before the Ctrl-C: {err!r}") from err
    finally:
        if timer is not None:
            timer.join()
    got = fe.transcript()
    if got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError(f"after the interrupt: {got.tolist()} != {want.tolist()}")


def _quietly_close(fe: FrontEnd) -> None:
    try:
        fe.env.close()
    except (Exception, KeyboardInterrupt):
        pass


def _close_trial(executor: str, api: str, rng: random.Random, cell: dict[str, Any],
                 max_delay: float) -> None:
    """Ctrl-C during ``close()`` with work in flight; a second close must leave nothing (of
    this trial's pool: what an earlier trial leaked counts there, once)."""
    segments_before, threads_before = set(own_segments()), set(worker_threads())
    os_threads_before = len(os.listdir("/proc/self/task"))  # C++ threads too
    fe = FrontEnd(build(executor, api), api, executor in NATIVE)
    fe.seeded_reset()
    pids = fe.pool.executor.worker_pids() if executor in ("process", "atari_process") else []
    fe.pool.send(fe.zeros)  # in flight while the pool closes
    timer = None
    closed = False
    try:
        timer = sigint_after(rng.uniform(0.0, max_delay))
        fe.env.close()
        closed = True
        time.sleep(max_delay + 0.01)  # the signal lands after the close, at worst
    except KeyboardInterrupt:
        cell["landed_after" if closed else "interrupts"] += 1
    finally:
        if timer is not None:
            timer.join()
    fe.env.close()  # the user closes again
    left = {"segments": sorted(set(own_segments()) - segments_before),
            "processes": [p for p in pids if alive(p)],
            "threads": sorted(set(worker_threads()) - threads_before),
            "os_threads": [] if len(os.listdir("/proc/self/task")) <= os_threads_before else ["more"]}
    if any(left.values()):
        cell["wrong"] += 1
        cell["errors"].append(f"left after close: {({k: len(v) for k, v in left.items()})}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20, help="interrupts per cell")
    ap.add_argument("--max-delay", type=float, default=0.15, help="latest SIGINT, seconds")
    ap.add_argument("--hang-s", type=float, default=15.0, help="a trial slower than this is a hang")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--executors", nargs="*", default=EXECUTORS)
    ap.add_argument("--ops", nargs="*", default=OPS)
    ap.add_argument("--apis", nargs="*", default=APIS)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    rng = random.Random(args.seed)
    dog = Watchdog(args.hang_s)
    warm = envhive.make(CountingEnv, 1, executor="process")  # the forkserver outlives pools
    warm.close()
    start = time.monotonic()
    cells = []
    for executor in args.executors:
        for op in args.ops:
            for api in args.apis:
                cell = run_cell(executor, op, api, args.trials, rng, dog, args.max_delay)
                cells.append(cell)
                print(f"{executor:8} {op:6} {api:10} interrupts {cell['interrupts']:4} "
                      f"hangs {cell['hangs']} wrong {cell['wrong']}"
                      + (f"  {cell['errors'][0]}" if cell["errors"] else ""), flush=True)
    total = {key: sum(c[key] for c in cells) for key in ("interrupts", "landed_after", "hangs", "wrong")}
    report = {"seed": args.seed, "trials_per_cell": args.trials, "max_delay_s": args.max_delay,
              "seconds": round(time.monotonic() - start, 1), **total, "cells": cells}
    print(json.dumps({k: v for k, v in report.items() if k != "cells"}, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if total["hangs"] or total["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
