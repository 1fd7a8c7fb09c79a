"""``executor="auto"``: measure one env, then pick the executor and worker count from its costs.

Two separate pieces, so that the decision can be tested without timing anything:

* :func:`probe` builds ONE env from the first factory, in the caller, and times it: reset and a
  few random-action steps with the wall clock and this thread's CPU clock (an env that *waits*,
  on a simulator, a server or a model API, spends wall time but no CPU), then the same number
  of steps of two envs in two threads (how much of a step runs without the GIL), the pickled
  size and cost of its step infos (what crossing a process boundary costs beyond the
  shared-memory observations) and whether the factory can be pickled (process workers build
  envs from it). The probe env is closed; nothing it did reaches the pool, whose envs are
  built afresh and seeded at their first reset.
* :func:`decide` is a pure function of those :class:`EnvCosts`, ``num_envs`` and the cores:
  it predicts a sync step's time on each executor and worker count with a small cost model
  (:class:`Overheads`) and returns an :class:`AutoChoice` (executor, workers, the reason with
  the measured figures).

Examples:
    >>> costs = EnvCosts(step_wall=2e-3, step_cpu=2e-5, gil_free=1.0, obs_bytes=32,
    ...                  info_s=0.0, picklable=True, steps=32)
    >>> choice = decide(costs, num_envs=16, cores=2, available=("serial", "thread", "process"))
    >>> choice.executor, choice.num_workers
    ('process', 16)
"""

from __future__ import annotations

import copy
import math
import pickle
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from envhive._runner import build_env

__all__ = ["EnvCosts", "AutoChoice", "ExecutorName", "Overheads", "probe", "decide", "predict"]

#: The probe stops stepping after this many seconds or :data:`PROBE_STEPS` steps, whichever
#: comes first (the step that crosses the budget finishes): enough steps for a stable median
#: of a cheap env in well under a millisecond, and at most ~0.1 s of a slow one.
PROBE_SECONDS = 0.1
PROBE_STEPS = 32
#: Envs whose step costs less than this stay serial without the thread test: no executor
#: recovers its hand-off costs on them (docs/benchmarks.md).
CHEAP_STEP_S = 30e-6


@dataclass(frozen=True)
class EnvCosts:
    """What the probe measured of one env (seconds are per env step).

    Attributes:
        step_wall: median wall time of a step.
        step_cpu: median CPU time of a step (the stepping thread's own clock).
        gil_free: the share of a step's wall time that runs without the GIL, from two envs
            stepped in two threads against one (``None``: not measured, the env is cheap or
            its step failed in a thread).
        obs_bytes: the observation's size (bytes): what a worker writes into shared memory.
        info_s: the time to pickle and unpickle a step's infos (what a process worker sends
            through its pipe; ``0``: empty infos).
        picklable: the factory can be pickled (needed by process workers).
        steps: how many steps were timed.
        probe_s: how long the probe took, env builds included.
        problem: why the probe could not measure (the env could not be built or stepped in
            the caller), else ``None``.
    """

    step_wall: float
    step_cpu: float
    gil_free: float | None
    obs_bytes: int
    info_s: float
    picklable: bool
    steps: int
    probe_s: float = 0.0
    problem: str | None = None

    def summary(self) -> str:
        """The measured figures in a few words, e.g. ``'step 2.1 ms wall, 0.03 ms CPU'``."""
        text = f"step {_time(self.step_wall)} wall, {_time(self.step_cpu)} CPU"
        if self.gil_free is not None:
            text += f", {self.gil_free:.0%} without the GIL"
        if self.info_s:
            text += f", infos cross in {_time(self.info_s)}"
        return text


@dataclass(frozen=True)
class AutoChoice:
    """What ``executor="auto"`` chose, and why.

    Attributes:
        executor: the registered executor's name.
        num_workers: its worker count (``None``: the executor's default; serial has none).
        reason: one sentence with the measured figures.
        costs: the measured costs (``None``: nothing was measured).
        predicted: predicted steps/s by candidate, e.g. ``{"process x16": 7200.0}``.
        fallback: the envs' own engine cannot run here, and ``reason`` says why (front ends
            show it).
    """

    executor: str
    num_workers: int | None
    reason: str
    costs: EnvCosts | None = None
    predicted: dict[str, float] = field(default_factory=dict)
    fallback: bool = False

    def label(self) -> str:
        """``'process x16'``, ``'serial'``."""
        return self.executor + (f" x{self.num_workers}" if self.num_workers else "")


class ExecutorName(str):
    """An executor's name (equal to the plain string) that also says why ``auto`` chose it.

    Examples:
        >>> import envhive
        >>> with envhive.make("CartPole-v1", 4) as env:
        ...     env.executor == "serial", env.executor.why.startswith("cheap step")
        (True, True)
    """

    #: ``executor="auto"``'s reason, with the measured figures (``None``: not chosen by auto).
    why: str | None = None
    #: The whole :class:`AutoChoice` (``None``: not chosen by auto).
    choice: AutoChoice | None = None

    @classmethod
    def of(cls, executor: Any) -> ExecutorName:
        """The name of ``executor`` (an ``Executor``), with ``auto``'s reason if it chose it."""
        name = cls(executor.name)
        choice = getattr(executor, "auto", None)
        if choice is not None:
            name.choice, name.why = choice, choice.reason
        return name


@dataclass(frozen=True)
class Overheads:
    """The cost model's fixed costs (seconds), measured on a 2-core VM (docs/executors.md).

    Attributes:
        per_env: the pool's and runner's Python work per env step (every executor).
        thread_call: one worker thread's wake-up and hand-back per sync call.
        process_cpu: CPU time of one worker round trip (post, wake, sweep; both sides).
        process_latency: wall time a sync call waits for one worker to wake, per worker
            beyond one per idle core.
        leave_caller: the predicted gain needed to leave the caller's thread (threads) or
            process (processes): they cost start-up and, for processes, pickling.
        prefer_threads: the predicted gain processes need over the best thread count.
    """

    per_env: float = 4e-6
    thread_call: float = 45e-6
    process_cpu: float = 60e-6
    process_latency: float = 20e-6
    leave_caller: float = 1.2
    prefer_threads: float = 1.15


def _time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


# ---------------------------------------------------------------------------- the probe
def _actions(env: Any, count: int) -> list[Any]:
    # A seeded copy: the env's own action space (possibly shared with other envs) keeps its
    # RNG, so the probe changes no stream the pool's envs or the user read later.
    space = copy.deepcopy(env.action_space)
    space.seed(0)
    return [space.sample() for _ in range(count)]


def _step_loop(env: Any, actions: list[Any], stop: Callable[[int], bool],
               clock: Callable[[], float], cpu: Callable[[], float]) -> tuple[list[float], list[float], Any]:
    """Step ``env`` until ``stop(steps)``; per-step wall and CPU times and the last info."""
    walls: list[float] = []
    cpus: list[float] = []
    info: Any = {}
    k = 0
    while not stop(k):
        t0, c0 = clock(), cpu()
        _, _, terminated, truncated, info = env.step(actions[k % len(actions)])
        walls.append(clock() - t0)
        cpus.append(cpu() - c0)
        k += 1
        if terminated or truncated:
            env.reset()
    return walls, cpus, info


def _info_cost(info: Any, clock: Callable[[], float]) -> float:
    """Seconds to pickle and unpickle ``info`` (a process worker's pipe message)."""
    if not info:
        return 0.0
    try:
        t0 = clock()
        for _ in range(5):
            pickle.loads(pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL))
        return (clock() - t0) / 5
    except Exception:  # not picklable: the process executor reports it per step anyway
        return 0.0


def _gil_free(factory: Callable[[], Any], first: Any, steps: int, alone: float,
              clock: Callable[[], float]) -> float | None:
    """Share of a step that runs without the GIL, from 2 envs in 2 threads vs 1 alone.

    Amdahl with two threads: ``speedup = 1 / ((1 - f) + f / 2)``, so ``f = 2 (1 - 1/speedup)``.
    ``None`` if a step raises in a thread (the thread executor would fail the same way).
    """
    second = build_env(factory, 0)
    try:
        second.reset()
        envs = (first, second)
        failed: list[BaseException] = []

        def run(env: Any) -> None:
            try:
                _step_loop(env, _actions(env, 8), lambda k: k >= steps, clock, time.thread_time)
            except BaseException as err:  # reported below: threads are not an option then
                failed.append(err)

        threads = [threading.Thread(target=run, args=(e,), daemon=True) for e in envs]
        t0 = clock()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        both = clock() - t0
    finally:
        second.close()
    if failed or both <= 0:
        return None
    speedup = 2 * steps * alone / both
    return min(1.0, max(0.0, 2 * (1 - 1 / speedup)))


def probe(
    factory: Callable[[], Any],
    *,
    seconds: float = PROBE_SECONDS,
    max_steps: int = PROBE_STEPS,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.thread_time,
) -> EnvCosts:
    """Build one env from ``factory`` in the caller and measure its costs (then close it).

    Bounded: at most ``max_steps`` steps or ``seconds`` of steps (the step that crosses it
    finishes), then, for envs that are not cheap, as many steps again of two envs in two
    threads. Exceptions from the env are not raised here: they give ``problem`` (the pool
    raises them as usual when it builds or steps its envs).

    Examples:
        >>> import gymnasium as gym
        >>> costs = probe(lambda: gym.make("CartPole-v1"))
        >>> costs.problem is None and costs.steps > 0 and costs.obs_bytes == 16
        True
    """
    start = clock()
    picklable = _picklable(factory)
    try:
        env = build_env(factory, 0)  # as a worker builds it (a multi-agent env gets its agent axis)
    except Exception as err:
        return EnvCosts(0.0, 0.0, None, 0, 0.0, picklable, 0, clock() - start,
                        problem=f"building it raised {type(err).__name__}: {err}")
    try:
        obs, _ = env.reset()
        actions = _actions(env, 8)
        deadline = clock() + seconds
        walls, cpus, info = _step_loop(
            env, actions, lambda k: k >= max_steps or (k >= 3 and clock() > deadline), clock, cpu_clock
        )
        wall, cpu = _median(walls), _median(cpus)
        gil = None
        if wall >= CHEAP_STEP_S:
            gil = _gil_free(factory, env, len(walls), wall, clock)
        return EnvCosts(wall, min(cpu, wall), gil, _nbytes(obs), _info_cost(info, clock),
                        picklable, len(walls), clock() - start)
    except Exception as err:
        return EnvCosts(0.0, 0.0, None, 0, 0.0, picklable, 0, clock() - start,
                        problem=f"stepping it raised {type(err).__name__}: {err}")
    finally:
        try:
            env.close()
        except Exception:  # the pool's own envs are closed with errors reported; not this one
            pass


def _picklable(factory: Any) -> bool:
    try:
        cloudpickle.dumps(factory)
    except Exception:
        return False
    return True


def _nbytes(obs: Any) -> int:
    if hasattr(obs, "nbytes"):
        return int(obs.nbytes)
    if isinstance(obs, dict):
        return sum(_nbytes(v) for v in obs.values())
    if isinstance(obs, tuple):
        return sum(_nbytes(v) for v in obs)
    return 64  # a Python object: pickled through the pipe; small in practice


# ---------------------------------------------------------------------------- the decision
def predict(costs: EnvCosts, executor: str, workers: int, num_envs: int, cores: float,
            over: Overheads = Overheads()) -> float:
    """Predicted env steps/s of a sync step of ``num_envs`` envs on ``executor`` x ``workers``.

    A step splits into waiting (wall minus CPU: runs in parallel on any number of workers),
    CPU without the GIL (in parallel up to the cores) and CPU under the GIL (one at a time
    in one process). Threads share one GIL; processes each have their own.

    Examples:
        >>> c = EnvCosts(1e-3, 1e-3, 0.0, 16, 0.0, True, 8)
        >>> round(predict(c, "process", 2, 16, 2) / predict(c, "serial", 1, 16, 2), 1)
        2.0
    """
    n, w, c = num_envs, costs.step_wall, costs.step_cpu
    if executor == "serial":
        return n / (n * (w + over.per_env))
    workers = max(1, min(workers, n))
    per_worker = math.ceil(n / workers)
    if executor == "thread":
        # Under the GIL (one thread at a time): at most the step's CPU time, since a thread
        # that waits (sleep, I/O) has released it.
        held = min(c, (1.0 - (costs.gil_free or 0.0)) * w)
        free_cpu = c - held  # GIL-free CPU: in parallel up to the cores
        t = max(n * (held + over.per_env), n * (held + free_cpu + over.per_env) / min(workers, cores),
                per_worker * (w + over.per_env)) + workers * over.thread_call
        return n / t
    if executor == "process":
        cross = over.per_env + costs.info_s
        cpu_total = n * (c + cross) + workers * over.process_cpu
        # A sync call waits for its slowest worker: each needs a core to wake on, so the
        # wake-ups queue when workers outnumber the idle cores.
        t = max(per_worker * (w + cross), cpu_total / cores) + over.process_latency * max(1.0, workers / cores)
        return n / t
    return 0.0


def _worker_counts(num_envs: int, cores: int) -> list[int]:
    """Worker counts worth predicting: 1, 2, 4, ... up to ``num_envs``, and the cores."""
    counts = {min(cores, num_envs), num_envs}
    k = 1
    while k < num_envs:
        counts.add(k)
        k *= 2
    return sorted(counts)


def decide(costs: EnvCosts | None, num_envs: int, cores: int, available: Collection[str],
           over: Overheads = Overheads()) -> AutoChoice:
    """Pick the executor and worker count with the best predicted throughput.

    Serial unless another candidate is predicted ``over.leave_caller`` times faster; threads
    need a measured GIL-free share; processes need a picklable factory.

    Examples:
        >>> cheap = EnvCosts(8e-6, 8e-6, None, 16, 0.0, True, 32)
        >>> decide(cheap, 64, 2, ("serial", "thread", "process")).executor
        'serial'
        >>> cpu = EnvCosts(5e-4, 5e-4, 0.0, 16, 0.0, True, 32)
        >>> decide(cpu, 16, 2, ("serial", "thread", "process")).label()
        'process x2'
    """
    if costs is None or costs.problem is not None:
        return _unmeasured(costs, available)
    if num_envs < 2:
        return AutoChoice("serial", None, "one env: nothing to run in parallel", costs)
    if costs.step_wall < CHEAP_STEP_S:
        # Hand-offs cost more than such a step (threads ran CartPole at ~0.8x serial), and at
        # many envs a process gain is small and depends on idle cores: stay in the caller.
        return AutoChoice("serial", None, f"cheap step ({costs.summary()})", costs)
    # Other processes' load is not subtracted from the cores: the scheduler shares the CPU
    # per runnable process, so a pool's W workers win W shares (bench_auto.py, docs).
    usable = float(cores)
    predicted: dict[str, float] = {"serial": predict(costs, "serial", 1, num_envs, usable, over)}
    candidates = []
    if "thread" in available and costs.gil_free is not None:
        candidates.append("thread")
    if "process" in available and costs.picklable:
        candidates.append("process")
    for name in candidates:
        for k in _worker_counts(num_envs, cores):
            predicted[f"{name} x{k}"] = predict(costs, name, k, num_envs, usable, over)
    best = max(predicted, key=lambda key: predicted[key])
    threads = [k for k in predicted if k.startswith("thread")]
    if best.startswith("process") and threads:
        # Processes must beat the best thread count clearly: threads need no pickling, no
        # worker start-up, and keep the envs in the caller.
        thread = max(threads, key=lambda key: predicted[key])
        if predicted[best] < over.prefer_threads * predicted[thread]:
            best = thread
    gain = predicted[best] / predicted["serial"]
    if best == "serial" or gain < over.leave_caller:
        return AutoChoice("serial", None, f"no executor predicted {over.leave_caller:g}x faster "
                          f"({costs.summary()})", costs, predicted)
    name, count = best.split(" x")
    workers = int(count)
    kind = "waits" if costs.step_cpu < 0.5 * costs.step_wall else "computes"
    more = f"; {workers} workers > {cores} cores, as it waits" if workers > cores else ""
    reason = (f"step {kind} ({costs.summary()}): {best} predicted {gain:.1f}x serial{more}")
    return AutoChoice(name, workers, reason, costs, predicted)


def _unmeasured(costs: EnvCosts | None, available: Collection[str]) -> AutoChoice:
    """The choice when the env could not be measured in the caller."""
    problem = "not measured" if costs is None or costs.problem is None else costs.problem
    if (costs is not None and problem.startswith("building") and costs.picklable
            and "process" in available):
        # Maybe it builds only in a fresh process (one instance per process, a library that
        # must not be initialised twice): process workers build their own envs. A factory that
        # always raises gives the same EnvWorkerError (env 0, its traceback) from a worker.
        return AutoChoice("process", None, f"could not build an env in the caller "
                          f"({problem.split(': ', 1)[-1]}): envs are built in worker processes",
                          costs)
    return AutoChoice("serial", None, f"serial, as before measuring ({problem})", costs)
