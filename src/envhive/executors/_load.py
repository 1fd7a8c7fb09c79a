"""How much of the usable cores a pool would really get: measured, not assumed.

A training loop shares its cores with a learner, a data loader or other jobs. The cores this
process may use (``sched_getaffinity``) say nothing about that, and neither does the load
average (a minute behind). :func:`measure_load` asks the scheduler directly: it runs one busy
thread per usable core (at most :data:`LOAD_THREADS`) for a few milliseconds, each hashing a
buffer (``hashlib`` releases the GIL on large inputs, so the threads run in parallel), and
sums the CPU time the threads got against the wall time. On an idle machine ``k`` threads
get ``k`` cores; beside ``B`` cores' worth of other busy work on ``C`` cores they get
``k C / (k + B)`` (the scheduler shares each core among its runnable tasks), which gives
``B`` (:attr:`Load.others`).

:func:`cores_for` and :func:`slowest_share` turn ``B`` into what the cost model of
``executors/_auto.py`` needs: the cores ``W`` busy workers of a pool get, and the share of a
core the slowest of them gets in a sync call.

Examples:
    >>> busy = Load(cores=2, threads=2, got=4 / 3)   # one busy process beside the probe
    >>> round(busy.others, 2), busy.busy
    (1.0, True)
    >>> round(cores_for(2, 2, busy.others), 2), slowest_share(2, 2, busy.others)
    (1.33, 0.5)
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Load", "measure_load", "cores_for", "slowest_share", "LOAD_SECONDS", "LOAD_THREADS",
           "BUSY_MIN"]

#: How long the busy threads run: a few scheduler time slices, so that each runnable task gets
#: its turn, and short next to a probe of an env worth measuring.
LOAD_SECONDS = 0.03
#: At most this many busy threads: on a big machine a few threads that get their cores show
#: it is not full, without taking every core for the probe's duration.
LOAD_THREADS = 8
#: Other work below this many busy cores is read as an idle machine: a short probe's
#: measurement noise, and the choices of an idle machine then stand.
BUSY_MIN = 0.3
#: k threads that got at least this share of k cores, with cores to spare (k < cores), only
#: show that k cores were free: nothing is known of the rest, which count as idle.
_FREE_SHARE = 0.95
_BLOCK = b"\x5a" * (1 << 18)  # hashed over and over: a fraction of a ms per call without the GIL


@dataclass(frozen=True)
class Load:
    """What a short parallel probe got of the usable cores.

    Attributes:
        cores: the cores this process may use (its affinity).
        threads: the busy threads the probe ran (one per usable core, at most
            :data:`LOAD_THREADS`).
        got: the cores they got together (the sum of their CPU times over the wall time).
        seconds: how long they ran.
    """

    cores: int
    threads: int
    got: float
    seconds: float = 0.0

    @property
    def others(self) -> float:
        """Cores' worth of other runnable work competing for the usable cores (0: idle).

        ``k`` threads beside ``B`` busy cores' worth on ``C`` cores get ``k C / (k + B)``
        cores when ``k + B > C``, so ``B = k C / got - k``; below :data:`BUSY_MIN`, 0.
        """
        k, got = self.threads, max(self.got, 1e-3)
        if k < self.cores and got >= _FREE_SHARE * k:
            return 0.0
        others = k * self.cores / got - k
        return 0.0 if others < BUSY_MIN else others

    @property
    def busy(self) -> bool:
        """Other work competes for the cores (:attr:`others` > 0)."""
        return self.others > 0

    def summary(self) -> str:
        """E.g. ``'2 busy threads got 1.3 of 2 cores: ~1.0 core busy elsewhere'``."""
        text = f"{self.threads} busy thread{'s' * (self.threads != 1)} got {self.got:.1f} of {self.cores} cores"
        if self.busy:
            return f"{text}: ~{self.others:.1f} core{'s' * (round(self.others, 1) != 1)} busy elsewhere"
        return f"{text}: idle"


def cores_for(tasks: int, cores: float, others: float) -> float:
    """The cores ``tasks`` busy tasks of a pool get on ``cores`` beside ``others`` cores' worth
    of other busy work, the scheduler sharing each core's time among its runnable tasks.

    Examples:
        >>> cores_for(2, 2, 0.0), cores_for(1, 2, 1.0), cores_for(16, 2, 1.0) > cores_for(2, 2, 1.0)
        (2.0, 1.0, True)
    """
    if tasks + others <= cores:
        return float(tasks)
    return cores * tasks / (tasks + others)


def slowest_share(workers: int, cores: float, others: float) -> float:
    """The share of a core the slowest of ``workers`` busy workers gets during a sync call.

    On an idle machine the scheduler spreads the workers evenly (each gets
    ``min(1, cores / workers)``). Other busy work never sleeps while the pool's workers wait
    for each other, so it keeps its cores' time: the worker that shares a core with it runs at
    ``1 / tasks on that core``, and the whole call waits for that worker. With ``B`` other busy
    tasks (``others``, rounded) the fullest core holds ``ceil((workers + B) / cores)`` tasks.
    Many workers dilute it (each holds back a smaller slice); ``workers == cores`` suffers most.

    Examples:
        >>> slowest_share(2, 2, 0.0), slowest_share(2, 2, 1.0), round(slowest_share(16, 2, 1.0), 3)
        (1.0, 0.5, 0.111)
    """
    busy = round(others)
    if busy < 1:
        return min(1.0, cores / workers)
    return 1.0 / max(1, math.ceil((workers + busy) / cores - 1e-9))


def _burn(start: threading.Barrier, stop_at: list[float], cpu: list[float], i: int,
          clock: Callable[[], float]) -> None:
    """One busy thread: hash until ``stop_at[0]``; its CPU time goes in ``cpu[i]``."""
    try:
        start.wait()
    except threading.BrokenBarrierError:  # another thread could not start: nothing to measure
        return
    c0 = time.thread_time()
    digest = hashlib.sha256()
    while clock() < stop_at[0]:
        digest.update(_BLOCK)
    cpu[i] = time.thread_time() - c0


def measure_load(cores: int, *, seconds: float = LOAD_SECONDS,
                 clock: Callable[[], float] = time.perf_counter) -> Load:
    """Run one busy thread per usable core (at most :data:`LOAD_THREADS`) for ``seconds`` and
    return what they got (:class:`Load`). Costs ``seconds`` of wall time and up to ``seconds``
    of CPU time on each core. A thread that cannot be started raises ``RuntimeError`` (the
    threads already started are stopped first).

    Examples:
        >>> load = measure_load(1, seconds=0.005)
        >>> load.threads, 0 < load.got <= 1.2
        (1, True)
    """
    k = max(1, min(cores, LOAD_THREADS))
    cpu = [0.0] * k
    stop_at = [math.inf]
    start = threading.Barrier(k + 1)
    threads = [threading.Thread(target=_burn, args=(start, stop_at, cpu, i, clock), daemon=True,
                                name=f"envhive-load-{i}") for i in range(k)]
    try:
        for t in threads:
            t.start()
    except RuntimeError:  # "can't start new thread"
        start.abort()
        for t in threads:
            if t.ident is not None:
                t.join()
        raise
    stop_at[0] = clock() + seconds
    start.wait()
    t0 = clock()
    for t in threads:
        t.join()
    wall = clock() - t0
    return Load(cores, k, sum(cpu) / wall if wall > 0 else float(k), wall)
