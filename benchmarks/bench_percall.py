"""Per-call time of ``env.step`` on CartPole-v1: gymnasium's SyncVectorEnv and each envhive executor.

    python benchmarks/bench_percall.py --json benchmarks/results/percall.json

For each ``--num-envs`` (default 1, 8, 64): gymnasium's ``SyncVectorEnv``, envhive's serial,
thread, process (their defaults) and native (``envhive/CartPole-v1``) pools, each built, reset
and warmed up, then ``step`` called with one fixed action batch in a tight loop; the figure is
the best of ``--spans`` spans of ``--seconds`` (the least disturbed one), in µs per call.
The env is stepped past its episode ends (gymnasium warns once; the pools autoreset).

``--floor`` measures instead how far any serial vector env can be ahead of ``SyncVectorEnv``
on these envs (below, ``FLOOR_DOC``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

import envhive
from envhive._bench import machine_info, write_results

FLOOR_DOC = """The floor under any serial vector env of gymnasium's CartPole-v1: the envs' own steps.

``envhive bench`` compares the serial executor with gymnasium's ``SyncVectorEnv`` on
``gym.make("CartPole-v1")`` envs. Both call the same env objects (with the wrappers
``gym.make`` adds: ``TimeLimit``, ``OrderEnforcing``, ``PassiveEnvChecker``) once per env per
step, and reset those whose episode ended; nothing a vector env does can make those calls
cheaper. ``--floor`` measures, in one run and interleaved, per ``step`` call of ``num_envs``
envs:

* ``sync``: gymnasium's ``SyncVectorEnv`` (``gym.make_vec(..., vectorization_mode="sync")``);
* ``serial``: ``envhive.make("CartPole-v1", n, executor="serial")``;
* ``env``: the time spent *inside* the envs' ``step`` and ``reset`` during a ``SyncVectorEnv``
  run whose envs are wrapped in a timer (``perf_counter_ns`` around the inner call, so the
  timer's own cost is outside what it counts): the envs' own work per call, with the resets
  of a real run. Every vector env pays at least this.

``sync / env`` is the most any serial vector env could be ahead of ``SyncVectorEnv``, even one
whose own work were free: a target above it cannot be met with these envs.

    python benchmarks/bench_percall.py --floor --json benchmarks/results/serial_floor.json
"""


def per_call_us(step: Any, actions: np.ndarray, spans: int, seconds: float) -> float:
    for _ in range(200):
        step(actions)
    best = float("inf")
    for _ in range(spans):
        calls, start = 0, time.perf_counter()
        while True:
            for _ in range(50):
                step(actions)
            calls += 50
            elapsed = time.perf_counter() - start
            if elapsed > seconds:
                break
        best = min(best, elapsed / calls)
    return best * 1e6


class _Timed(gym.Wrapper):
    """Counts the nanoseconds spent inside the wrapped env's ``step`` and ``reset``."""

    spent = 0

    def step(self, action: Any) -> Any:
        t = time.perf_counter_ns()
        out = self.env.step(action)
        _Timed.spent += time.perf_counter_ns() - t
        return out

    def reset(self, **kwargs: Any) -> Any:
        t = time.perf_counter_ns()
        out = self.env.reset(**kwargs)
        _Timed.spent += time.perf_counter_ns() - t
        return out


def _env_time(n: int, actions: list[np.ndarray], calls: int) -> float:
    """µs spent inside the envs per ``SyncVectorEnv.step`` of ``n`` timed envs."""
    env = gym.vector.SyncVectorEnv([lambda: _Timed(gym.make("CartPole-v1")) for _ in range(n)])
    env.reset(seed=0)
    for k in range(200):
        env.step(actions[k & 63])
    _Timed.spent = 0
    for k in range(calls):
        env.step(actions[k & 63])
    env.close()
    return _Timed.spent / calls / 1e3


def _vector(make: Callable[[], Any]) -> tuple[Callable[[np.ndarray], None], Callable[[], None]]:
    env = make()
    env.reset(seed=0)
    return env.step, env.close


def _time(step: Callable[[np.ndarray], None], actions: list[np.ndarray], seconds: float) -> float:
    """Median µs per call over 5 spans of ``seconds / 5``."""
    spans = []
    k = 0
    for _ in range(5):
        calls = 0
        t0 = time.perf_counter()
        end = t0 + seconds / 5
        while time.perf_counter() < end:
            step(actions[k & 63])
            k += 1
            calls += 1
        spans.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(spans)


def floor(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=FLOOR_DOC.splitlines()[0])
    ap.add_argument("--floor", action="store_true")
    ap.add_argument("--num-envs", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is kept")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = []
    for n in args.num_envs:
        rng = np.random.default_rng(0)
        actions = [rng.integers(0, 2, n) for _ in range(64)]
        runners = {
            "sync": lambda n=n: _vector(lambda: gym.make_vec("CartPole-v1", n, vectorization_mode="sync")),
            "serial": lambda n=n: _vector(lambda: envhive.make("CartPole-v1", n, executor="serial")),
        }
        built = {name: make() for name, make in runners.items()}
        for step, _ in built.values():
            _time(step, actions, 0.2)  # warm-up
        got: dict[str, list[float]] = {name: [] for name in (*runners, "env")}
        calls = max(200, int(20000 / n))
        for _ in range(args.rounds):
            for name, (step, _) in built.items():
                got[name].append(_time(step, actions, args.seconds))
            got["env"].append(_env_time(n, actions, calls))
        for _, close in built.values():
            close()
        us = {name: statistics.median(v) for name, v in got.items()}
        row = {"num_envs": n, "us_per_call": {k: round(v, 2) for k, v in us.items()},
               "sync_over_env": round(us["sync"] / us["env"], 3),
               "serial_vs_sync": round(us["sync"] / us["serial"], 3),
               "rounds_us": {k: [round(x, 2) for x in v] for k, v in got.items()}}
        rows.append(row)
        print(f"x{n}: inside the envs {us['env']:.2f} us, SyncVectorEnv {us['sync']:.2f}, serial "
              f"{us['serial']:.2f}; most any serial vector env can be ahead of SyncVectorEnv: "
              f"{row['sync_over_env']:.3f}x; serial is {row['serial_vs_sync']:.3f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "python benchmarks/bench_percall.py --floor " + " ".join(
                f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
                for k, v in vars(args).items() if v is not None and k not in ("json", "floor")) + f" --json {args.json}",
                "machine": machine_info(), "rows": rows}, f, indent=1)


def main() -> None:
    if "--floor" in sys.argv[1:]:
        floor(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--spans", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for n in args.num_envs:
        actions = np.zeros(n, np.int64)
        builders: dict[str, Any] = {
            "gymnasium SyncVectorEnv": lambda n=n: gym.vector.SyncVectorEnv(
                [lambda: gym.make("CartPole-v1")] * n),
            "envhive serial": lambda n=n: envhive.make("CartPole-v1", n, executor="serial", seed=0),
            "envhive thread": lambda n=n: envhive.make("CartPole-v1", n, executor="thread", seed=0),
            "envhive process": lambda n=n: envhive.make("CartPole-v1", n, executor="process", seed=0),
            "envhive native": lambda n=n: envhive.make("envhive/CartPole-v1", n, seed=0),
        }
        for name, build in builders.items():
            env = build()
            try:
                env.reset(seed=0)
                us = per_call_us(env.step, actions, args.spans, args.seconds)
            finally:
                env.close()
            rows.append({"runner": name, "env": "CartPole-v1", "num_envs": n, "us_per_call": us})
            print(f"n={n:<3} {name:<26} {us:8.2f} us per call", flush=True)
    if args.json:
        write_results(args.json, rows)


if __name__ == "__main__":
    main()
