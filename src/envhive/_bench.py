"""Throughput measurement shared by ``envhive bench`` and the scripts in ``benchmarks/``."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym

__all__ = [
    "Measurement", "measure_steps", "measure_env", "machine_info", "random_actions", "plain_loop",
    "run_interleaved", "write_results", "background_load",
]


@dataclass
class Measurement:
    """One throughput figure: ``steps_per_s`` env transitions per second (1 env, 1 step = 1).

    ``steps_per_s`` is the median over ``samples``, one figure per timed span; ``seconds``
    and ``calls`` add up the timed spans (warm-up excluded).
    """

    runner: str
    env: str
    num_envs: int
    steps_per_s: float
    seconds: float
    calls: int
    samples: list[float] = field(default_factory=list)

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
    spans: int = 5,
    warmup_calls: int = 20,
    min_calls: int = 20,
    runner: str = "",
    env: str = "",
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Call ``step(action_batch)`` for about ``seconds``; report the median steps per second.

    Nothing before the clock starts is timed: the caller builds and resets the env (see
    :func:`measure_env`), then ``warmup_calls`` calls run without reading ``clock`` at all
    (each returns only once every env answered, so worker processes and threads are up and
    compiled code is compiled), then one span of ``seconds / spans`` runs and is thrown away
    (adaptive waits settle, caches fill). Then ``spans`` spans of ``seconds / spans`` each
    are timed, and ``steps_per_s`` is their median: one slow span (another process, a GC
    pause) does not move it. At least ``min_calls`` calls are timed in all.

    Examples:
        >>> m = measure_steps(lambda a: None, [0], 4, seconds=0.01, runner="noop", env="x")
        >>> m.calls >= 20 and m.steps_per_s > 0 and len(m.samples) == 5
        True
    """
    n_act = len(actions)
    for k in range(warmup_calls):
        step(actions[k % n_act])
    spans = max(1, spans)
    span_s = seconds / spans
    per_span = -(-min_calls // spans)  # ceil: at least min_calls timed calls in all
    calls = warmup_calls
    samples: list[float] = []
    timed_calls, timed_s = 0, 0.0
    for span in range(spans + 1):  # span 0 is the discarded warm-up span
        done = 0
        start = clock()
        deadline = start + span_s
        while True:
            for _ in range(10):
                step(actions[calls % n_act])
                calls += 1
            done += 10
            now = clock()
            if now >= deadline and done >= per_span:
                break
        if span:
            elapsed = max(now - start, 1e-12)
            samples.append(done * num_envs / elapsed)
            timed_calls += done
            timed_s += elapsed
    return Measurement(runner, env, num_envs, statistics.median(samples), timed_s, timed_calls, samples)


def measure_env(
    build: Callable[[], Any],
    num_envs: int,
    *,
    seconds: float = 1.0,
    spans: int = 5,
    runner: str = "",
    env: str = "",
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Build a vector env, reset it, warm it up, then time its ``step`` (:func:`measure_steps`).

    ``build()`` returns anything with ``reset(seed=)``, ``step``, ``action_space`` and
    ``close()`` (an envhive pool, a gymnasium vector env). Building, the reset and the warm-up
    are never timed: the first read of ``clock`` comes after them.

    Examples:
        >>> m = measure_env(lambda: gym.make_vec("CartPole-v1", 2), 2, seconds=0.01, runner="sync")
        >>> m.num_envs, m.runner, m.steps_per_s > 0
        (2, 'sync', True)
    """
    vec = build()
    try:
        vec.reset(seed=seed)
        actions = random_actions(vec.action_space, 64, seed)
        return measure_steps(vec.step, actions, num_envs, seconds=seconds, spans=spans,
                             runner=runner, env=env, clock=clock)
    finally:
        vec.close()


def machine_info() -> dict[str, Any]:
    """Where and with what a benchmark ran: machine, CPUs, Python and package versions.

    Examples:
        >>> info = machine_info()
        >>> {"machine", "cpus", "python", "gymnasium", "numpy"} <= set(info)
        True
    """
    import numpy as np

    info: dict[str, Any] = {
        "machine": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    try:
        import envhive

        info["envhive"] = envhive.__version__
    except ImportError:  # benchmarks/ load this file in a peers-only venv
        pass
    info["gymnasium"] = gym.__version__
    info["numpy"] = np.__version__
    return info


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
    meta = machine_info()
    with open(path, "w") as fh:
        json.dump({"meta": meta, "results": rows}, fh, indent=2)
    print("wrote", path)


# A learner's stand-in: one core of matrix products (one BLAS thread), until the parent is gone.
_LOAD_CODE = """
import os, signal, sys
import numpy as np
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle: it stops us
parent = int(sys.argv[1])
a = np.random.default_rng(0).random((256, 256))
print("ready", flush=True)
while os.getppid() == parent:
    for _ in range(20):
        b = a @ a
        a = b / b.max()
"""
_ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


@contextlib.contextmanager
def background_load(processes: int) -> Iterator[list[int]]:
    """Run ``processes`` CPU-bound processes (a numpy matmul loop each, one BLAS thread: a
    learner's stand-in) while the block runs; yields their pids.

    They are stopped when the block ends, however it ends (Ctrl-C included: terminate, then
    kill after 5 s), and stop by themselves if this process dies first.

    Examples:
        >>> with background_load(1) as pids:
        ...     len(pids)
        1
    """
    env = {**os.environ, **dict.fromkeys(_ONE_THREAD, "1")}
    procs: list[subprocess.Popen[str]] = []
    try:
        for _ in range(processes):
            proc = subprocess.Popen([sys.executable, "-c", _LOAD_CODE, str(os.getpid())], env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
            procs.append(proc)
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":  # EOF: it died importing numpy
                raise RuntimeError(f"the background load process exited with code {proc.wait()}")
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
