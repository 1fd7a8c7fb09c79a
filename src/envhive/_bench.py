"""Throughput measurement shared by ``envhive bench`` and the scripts in ``benchmarks/``."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym

__all__ = ["Measurement", "measure_steps", "random_actions", "plain_loop", "run_interleaved", "write_results"]


@dataclass
class Measurement:
    """One throughput figure: ``steps_per_s`` env transitions per second (1 env, 1 step = 1)."""

    runner: str
    env: str
    num_envs: int
    steps_per_s: float
    seconds: float
    calls: int

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output."""
        return asdict(self)


def random_actions(space: gym.Space, count: int, seed: int = 0) -> list[Any]:
    """``count`` pre-sampled batches from a (batched) action space, so sampling is not timed.

    Examples:
        >>> from gymnasium.spaces import MultiDiscrete
        >>> len(random_actions(MultiDiscrete([2, 2]), 3))
        3
    """
    space.seed(seed)
    return [space.sample() for _ in range(count)]


def measure_steps(
    step: Callable[[Any], Any],
    actions: list[Any],
    num_envs: int,
    *,
    seconds: float = 1.0,
    min_calls: int = 20,
    runner: str = "",
    env: str = "",
) -> Measurement:
    """Call ``step(action_batch)`` repeatedly for about ``seconds``; report steps per second.

    A short warm-up runs first and is not timed.

    Examples:
        >>> m = measure_steps(lambda a: None, [0], 4, seconds=0.01, runner="noop", env="x")
        >>> m.calls >= 20 and m.steps_per_s > 0
        True
    """
    for k in range(min(10, len(actions))):
        step(actions[k])
    calls, n_act = 0, len(actions)
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(10):
            step(actions[calls % n_act])
            calls += 1
        now = time.perf_counter()
        if now >= deadline and calls >= min_calls:
            break
    elapsed = now - start
    return Measurement(runner, env, num_envs, calls * num_envs / elapsed, elapsed, calls)



def plain_loop(make_env: Callable[[], gym.Env], n: int) -> tuple[Callable[[Any], None], Callable[[], None]]:
    """The no-framework baseline: ``n`` envs stepped one after another in this process.

    Autoreset (next-step style) is done by hand. Returns ``(step(actions), close())``.

    Examples:
        >>> step, close = plain_loop(lambda: gym.make("CartPole-v1"), 2)
        >>> step([0, 1]); close()
    """
    envs = [make_env() for _ in range(n)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    done = [False] * n

    def step(actions: Any) -> None:
        for i, e in enumerate(envs):
            if done[i]:
                e.reset()
                done[i] = False
            else:
                _, _, term, trunc, _ = e.step(actions[i])
                done[i] = term or trunc

    def close() -> None:
        for e in envs:
            e.close()

    return step, close


Runner = Callable[[], tuple[Callable[[Any], Any], gym.Space, Callable[[], None]]]


def run_interleaved(
    runners: dict[str, Runner], env_id: str, n: int, seconds: float, repeats: int, width: int = 28
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Measure each runner ``repeats`` times, interleaved (this machine's speed drifts).

    A runner builds ``(step, batched action space, close)``. Prints one line per runner and
    returns ``(rows with medians, steps/s samples by runner)``.

    Examples:
        >>> def noop():
        ...     return (lambda a: None), gym.spaces.MultiDiscrete([2, 2]), (lambda: None)
        >>> rows, samples = run_interleaved({"noop": noop}, "x", 2, 0.01, 2)  # doctest: +ELLIPSIS
        x ... noop ...
        >>> len(samples["noop"])
        2
    """
    import numpy as np

    samples: dict[str, list[float]] = {name: [] for name in runners}
    calls: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, build in runners.items():
            step, space, close = build()
            try:
                m = measure_steps(step, random_actions(space, 64), n, seconds=seconds, runner=name, env=env_id)
            finally:
                close()
            samples[name].append(m.steps_per_s)
            calls[name].append(1e6 * m.seconds / m.calls)
    rows = []
    for name in runners:
        row = {"runner": name, "env": env_id, "num_envs": n,
               "steps_per_s": float(np.median(samples[name])), "samples": samples[name],
               "us_per_call": float(np.median(calls[name]))}
        rows.append(row)
        print(f"{env_id:<12} n={n:<3} {name:<{width}} {row['steps_per_s']:>11,.0f} steps/s "
              f"{row['us_per_call']:>9.1f} us/call  (min {min(samples[name]):,.0f}, "
              f"max {max(samples[name]):,.0f})", flush=True)
    return rows, samples


def write_results(path: str, rows: list[dict[str, Any]]) -> None:
    """Write benchmark rows as JSON, with the machine and versions they were measured on."""
    import numpy as np

    import envhive

    meta = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "envhive": envhive.__version__,
        "gymnasium": gym.__version__,
        "numpy": np.__version__,
    }
    with open(path, "w") as fh:
        json.dump({"meta": meta, "results": rows}, fh, indent=2)
    print("wrote", path)
