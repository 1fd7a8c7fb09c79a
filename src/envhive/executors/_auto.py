"""``executor="auto"``: measure one env, then pick the executor and worker count from its costs.

Two separate pieces, so that the decision can be tested without timing anything:

* :func:`probe` builds ONE env from the first factory, in the caller, and times it: reset and a
  few random-action steps with the wall clock and this thread's CPU clock (an env that *waits*,
  on a simulator, a server or a model API, spends wall time but no CPU); for an env that is not
  cheap, what share of the usable cores a short parallel probe gets (``_load.measure_load``:
  other processes, a learner say, may be using them), then the same number of steps of two
  envs in two threads (how much of a step runs without the GIL); the pickled
  size and cost of its step infos (what crossing a process boundary costs beyond the
  shared-memory observations) and whether the factory can be pickled (process workers build
  envs from it). The probe env is closed; nothing it did reaches the pool, whose envs are
  built afresh and seeded at their first reset.
* :func:`decide` is a pure function of those :class:`EnvCosts`, ``num_envs`` and the cores:
  it predicts a sync step's time on each executor and worker count with a small cost model
  (:class:`Overheads`), in which other busy work takes its share of the cores, and returns an
  :class:`AutoChoice` (executor, workers, the reason with the measured figures). On a busy
  machine it takes the choice that holds best both under the load it measured and without it
  (the load may come and go), among those predicted clearly faster than serial.

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
from envhive.executors._load import Load, cores_for, measure_load, slowest_share
from envhive.executors._spawn import usable_cpus

__all__ = ["EnvCosts", "AutoChoice", "ExecutorName", "Overheads", "Load", "probe", "decide", "predict"]

#: The probe stops stepping after this many seconds or :data:`PROBE_STEPS` steps, whichever
#: comes first (the step that crosses the budget finishes): enough steps for a stable median
#: of a cheap env in well under a millisecond, and at most ~0.1 s of a slow one.
PROBE_SECONDS = 0.1
PROBE_STEPS = 32
#: Envs whose step costs less than this stay serial without the thread test: no executor
#: recovers its hand-off costs on them (docs/benchmarks.md).
CHEAP_STEP_S = 30e-6
#: A computing env gets at most this many workers per core: on a busy machine more workers win
#: more of the cores' time from the other work (a learner), and this bounds what they take.
MAX_WORKERS_PER_CORE = 4


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
        load: what a short parallel probe got of the usable cores (``None``: not measured,
            the env is cheap).
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
    load: Load | None = None

    @property
    def others(self) -> float:
        """Cores' worth of other busy work the probe measured (0: idle or not measured)."""
        return 0.0 if self.load is None else self.load.others

    def summary(self) -> str:
        """The measured figures in a few words, e.g. ``'step 2.1 ms wall, 0.03 ms CPU'``."""
        text = f"step {_time(self.step_wall)} wall, {_time(self.step_cpu)} CPU"
        if self.gil_free is not None:
            text += f", {self.gil_free:.0%} without the GIL"
        if self.info_s:
            text += f", infos cross in {_time(self.info_s)}"
        if self.load is not None:
            text += f"; {self.load.summary()}"
        return text


@dataclass(frozen=True)
class AutoChoice:
    """What ``executor="auto"`` chose, and why.

    Attributes:
        executor: the registered executor's name.
        num_workers: its worker count (``None``: the executor's default; serial has none).
        reason: one sentence with the measured figures.
        costs: the measured costs (``None``: nothing was measured).
        predicted: predicted steps/s by candidate, e.g. ``{"process x16": 7200.0}``, under
            the load the probe measured.
        fallback: the envs' own engine cannot run here, and ``reason`` says why (front ends
            show it).
        predicted_idle: on a busy machine, the same predictions without the other load
            (empty on an idle one).
    """

    executor: str
    num_workers: int | None
    reason: str
    costs: EnvCosts | None = None
    predicted: dict[str, float] = field(default_factory=dict)
    fallback: bool = False
    predicted_idle: dict[str, float] = field(default_factory=dict)

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


#: Below this many cores for the two threads, their speedup says little of the GIL: it is
#: read as if they had this many (a GIL-free step then reads as such only if it gained).
_MIN_PARALLEL = 1.2


def _gil_free(factory: Callable[[], Any], first: Any, steps: int, alone: float,
              clock: Callable[[], float], parallel: float = 2.0, waits: float | None = None,
              cpu_clock: Callable[[], float] = time.thread_time) -> float | None:
    """Share of a step that runs without the GIL, from 2 envs in 2 threads vs 1 alone.

    Amdahl with two threads on ``p`` cores (``parallel``: 2 on an idle machine, fewer when
    other work holds some of them): ``speedup = 1 / ((1 - f) + f / p)``, so
    ``f = (1 - 1/speedup) / (1 - 1/p)``. Read from the wall clock against ``alone`` (one
    step's wall time, measured earlier), a slow earlier measurement reads as a gain. So the
    speedup is also read from the threads' own CPU clocks, which the noise of that earlier
    measurement does not reach: a thread waiting for the GIL uses no CPU, so the two threads'
    CPU time over the wall time, over a step's CPU share ``1 - waits`` (``waits``: the share
    of its wall time it waits), is the speedup they got (read for steps that mostly compute,
    where a misread costs most). The lower reading is kept: a GIL-bound step read as free
    costs a pool up to half its speed on threads, the other way round only the hand-off costs
    of processes. ``None`` if a step raises in a thread (the thread executor would fail the
    same way).
    """
    second = build_env(factory, 0)
    used = [0.0, 0.0]
    try:
        second.reset()
        envs = (first, second)
        failed: list[BaseException] = []

        def run(i: int) -> None:
            try:
                _, cpus, _ = _step_loop(envs[i], _actions(envs[i], 8), lambda k: k >= steps, clock, cpu_clock)
                used[i] = sum(cpus)
            except BaseException as err:  # reported below: threads are not an option then
                failed.append(err)

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(2)]
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
    p = max(_MIN_PARALLEL, min(2.0, parallel))

    def amdahl(speedup: float) -> float:
        return min(1.0, max(0.0, (1 - 1 / max(speedup, 1e-9)) / (1 - 1 / p)))

    by_wall = amdahl(2 * steps * alone / both)
    if waits is None or waits > 0.5:
        # A step that mostly waits: its CPU share is too small a figure to divide by, and
        # the GIL it holds is the small part the wall reading already shows.
        return by_wall
    return min(by_wall, amdahl(sum(used) / (both * (1.0 - waits))))


def probe(
    factory: Callable[[], Any],
    *,
    seconds: float = PROBE_SECONDS,
    max_steps: int = PROBE_STEPS,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.thread_time,
    load: Callable[[int], Load] = measure_load,
    cores: int | None = None,
) -> EnvCosts:
    """Build one env from ``factory`` in the caller and measure its costs (then close it).

    Bounded: at most ``max_steps`` steps or ``seconds`` of steps (the step that crosses it
    finishes), then, for envs that are not cheap, ``load(cores)`` (the share of the usable
    cores a short parallel probe gets, :func:`~envhive.executors._load.measure_load`) and as
    many steps again of two envs in two threads. Exceptions from the env are not raised here:
    they give ``problem`` (the pool raises them as usual when it builds or steps its envs).

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
        gil, measured = None, None
        if wall >= CHEAP_STEP_S:
            usable = cores or usable_cpus()
            measured = _measure_load(load, usable)
            parallel = 2.0 if measured is None else cores_for(2, measured.cores, measured.others)
            others = 0.0 if measured is None else measured.others
            waits = _wait_time(wall, min(cpu, wall), usable, others) / wall
            gil = _gil_free(factory, env, len(walls), wall, clock, parallel, waits, cpu_clock)
        return EnvCosts(wall, min(cpu, wall), gil, _nbytes(obs), _info_cost(info, clock),
                        picklable, len(walls), clock() - start, load=measured)
    except Exception as err:
        return EnvCosts(0.0, 0.0, None, 0, 0.0, picklable, 0, clock() - start,
                        problem=f"stepping it raised {type(err).__name__}: {err}")
    finally:
        try:
            env.close()
        except Exception:  # the pool's own envs are closed with errors reported; not this one
            pass


def _measure_load(load: Callable[[int], Load], cores: int) -> Load | None:
    try:
        return load(cores)
    except RuntimeError:  # no thread to spare: decide as on an idle machine, as before measuring
        return None


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
def _waiting(costs: EnvCosts, cores: float) -> float:
    """The part of a step's wall time spent waiting (sleep, I/O), not computing: what is left
    beyond its CPU time at the share of a core the probe's caller got beside the other load."""
    return _wait_time(costs.step_wall, costs.step_cpu, cores, costs.others)


def _wait_time(wall: float, cpu: float, cores: float, others: float) -> float:
    """:func:`_waiting` of a step of ``wall`` and ``cpu`` seconds beside ``others`` busy cores."""
    return max(0.0, wall - cpu / cores_for(1, cores, others))


def predict(costs: EnvCosts, executor: str, workers: int, num_envs: int, cores: float,
            over: Overheads = Overheads(), others: float | None = None) -> float:
    """Predicted env steps/s of a sync step of ``num_envs`` envs on ``executor`` x ``workers``.

    A step splits into waiting (wall minus CPU: runs in parallel on any number of workers),
    CPU without the GIL (in parallel up to the cores) and CPU under the GIL (one at a time
    in one process). Threads share one GIL; processes each have their own. Beside ``others``
    cores' worth of other busy work (default: what the probe measured, ``costs.others``), the
    pool's busy tasks get their share of the cores (``_load.cores_for``) and a sync call waits
    for its slowest worker (``_load.slowest_share``).

    Examples:
        >>> c = EnvCosts(1e-3, 1e-3, 0.0, 16, 0.0, True, 8)
        >>> round(predict(c, "process", 2, 16, 2) / predict(c, "serial", 1, 16, 2), 1)
        2.0
        >>> round(predict(c, "process", 2, 16, 2, others=1.0) / predict(c, "serial", 1, 16, 2, others=1.0), 1)
        1.0
    """
    n, c = num_envs, costs.step_cpu
    others = costs.others if others is None else others
    wait = _waiting(costs, cores)
    alone = cores_for(1, cores, others)  # the caller's share of a core
    if executor == "serial":
        return n / (n * ((c + over.per_env) / alone + wait))
    workers = max(1, min(workers, n))
    per_worker = math.ceil(n / workers)
    got = cores_for(workers, cores, others)
    # On an idle machine the total-CPU bound covers workers beyond the cores (their CPU
    # interleaves with their waits); other busy work never waits, so the slowest worker runs
    # at its share of a core (slowest_share).
    share = slowest_share(workers, cores, others) if round(others) >= 1 else 1.0
    if executor == "thread":
        # Under the GIL (one thread at a time): at most the step's CPU time, since a thread
        # that waits (sleep, I/O) has released it.
        held = min(c, (1.0 - (costs.gil_free or 0.0)) * (c + wait))
        t = max(n * (held + over.per_env) / alone, n * (c + over.per_env) / got,
                per_worker * ((c + over.per_env) / share + wait)) + workers * over.thread_call
        return n / t
    if executor == "process":
        cross = over.per_env + costs.info_s
        cpu_total = n * (c + cross) + workers * over.process_cpu
        # A sync call waits for its slowest worker: each needs a core to wake on, so the
        # wake-ups queue when workers outnumber the idle cores.
        idle_cores = max(1.0, cores - others)
        t = (max(per_worker * ((c + cross) / share + wait), cpu_total / got)
             + over.process_latency * max(1.0, workers / idle_cores))
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


def _predictions(costs: EnvCosts, num_envs: int, cores: int, available: Collection[str],
                 over: Overheads, others: float) -> dict[str, float]:
    """Predicted steps/s of serial and of every candidate executor and worker count."""
    predicted = {"serial": predict(costs, "serial", 1, num_envs, cores, over, others)}
    candidates = []
    if "thread" in available and costs.gil_free is not None:
        candidates.append("thread")
    if "process" in available and costs.picklable:
        candidates.append("process")
    waits = costs.step_cpu < _waiting(costs, cores)
    counts = [k for k in _worker_counts(num_envs, cores) if waits or k <= MAX_WORKERS_PER_CORE * cores]
    for name in candidates:
        for k in counts:
            predicted[f"{name} x{k}"] = predict(costs, name, k, num_envs, cores, over, others)
    return predicted


def _fastest(predicted: dict[str, float], over: Overheads) -> str:
    """The candidate predicted fastest; processes must beat the best thread count clearly."""
    best = max(predicted, key=lambda key: predicted[key])
    threads = [k for k in predicted if k.startswith("thread")]
    if best.startswith("process") and threads:
        # Threads need no pickling, no worker start-up, and keep the envs in the caller.
        thread = max(threads, key=lambda key: predicted[key])
        if predicted[best] < over.prefer_threads * predicted[thread]:
            best = thread
    return best


def _steadiest(loaded: dict[str, float], idle: dict[str, float], over: Overheads) -> tuple[str, float]:
    """On a busy machine: among the candidates predicted ``over.leave_caller`` times faster
    than serial under the measured load, the one whose worse ratio to the best prediction,
    under that load and without it, is highest (the load may stop after ``make``, or a learner
    may only run between steps); processes need ``over.prefer_threads`` times the thread's."""
    fit = [k for k in loaded if k != "serial" and loaded[k] >= over.leave_caller * loaded["serial"]]
    if not fit:
        return "serial", 0.0
    top_loaded, top_idle = max(loaded.values()), max(idle.values())
    holds = {k: min(loaded[k] / top_loaded, idle[k] / top_idle) for k in fit}
    threads = any(k.startswith("thread") for k in fit)

    def score(k: str) -> float:
        return holds[k] / (over.prefer_threads if threads and k.startswith("process") else 1.0)

    best = max(fit, key=score)
    return best, holds[best]


def decide(costs: EnvCosts | None, num_envs: int, cores: int, available: Collection[str],
           over: Overheads = Overheads()) -> AutoChoice:
    """Pick the executor and worker count with the best predicted throughput.

    Serial unless another candidate is predicted ``over.leave_caller`` times faster; threads
    need a measured GIL-free share; processes need a picklable factory. When the probe found
    the cores busy (``costs.load``), the candidate that holds best both under that load and
    without it.

    Examples:
        >>> cheap = EnvCosts(8e-6, 8e-6, None, 16, 0.0, True, 32)
        >>> decide(cheap, 64, 2, ("serial", "thread", "process")).executor
        'serial'
        >>> cpu = EnvCosts(5e-4, 5e-4, 0.0, 16, 0.0, True, 32)
        >>> decide(cpu, 16, 2, ("serial", "thread", "process")).label()
        'process x2'
        >>> busy = EnvCosts(5e-4, 5e-4, 0.0, 16, 0.0, True, 32, load=Load(2, 2, 4 / 3))
        >>> decide(busy, 16, 2, ("serial", "thread", "process")).label()
        'process x8'
    """
    if costs is None or costs.problem is not None:
        return _unmeasured(costs, available)
    if num_envs < 2:
        return AutoChoice("serial", None, "one env: nothing to run in parallel", costs)
    if costs.step_wall < CHEAP_STEP_S:
        # Hand-offs cost more than such a step (threads ran CartPole at ~0.8x serial), and at
        # many envs a process gain is small and depends on idle cores: stay in the caller.
        return AutoChoice("serial", None, f"cheap step ({costs.summary()})", costs)
    others = costs.others
    predicted = _predictions(costs, num_envs, cores, available, over, others)
    idle: dict[str, float] = {}
    if others > 0:
        idle = _predictions(costs, num_envs, cores, available, over, 0.0)
        best, holds = _steadiest(predicted, idle, over)
    else:
        best = _fastest(predicted, over)
    gain = predicted[best] / predicted["serial"]
    if best == "serial" or gain < over.leave_caller:
        return AutoChoice("serial", None, f"no executor predicted {over.leave_caller:g}x faster "
                          f"({costs.summary()})", costs, predicted, predicted_idle=idle)
    name, count = best.split(" x")
    workers = int(count)
    waits = costs.step_cpu < _waiting(costs, cores)
    reason = f"step {'waits' if waits else 'computes'} ({costs.summary()}): {best} predicted {gain:.1f}x serial"
    if others > 0:
        reason += f" under this load, {holds:.0%} of the best with and without it"
    if workers > cores:
        reason += f"; {workers} workers > {cores} cores, " + (
            "as it waits" if waits else "for a fair share beside the other load")
    return AutoChoice(name, workers, reason, costs, predicted, predicted_idle=idle)


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
