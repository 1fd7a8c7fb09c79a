"""Executors: the ways envhive runs envs, behind one small interface.

Users pick one by name in :func:`envhive.make` (``executor="serial"``, ...) or leave
``executor="auto"``. Authors of new executors subclass :class:`Executor` and call
:func:`register_executor`; the pool, autoreset and frontends need no change.

Examples:
    >>> from envhive.executors import available_executors
    >>> "serial" in available_executors()
    True
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from envhive._buffers import Buffers
from envhive._ops import Op
from envhive._report import Completion, EnvFactory, EnvProps
from envhive._runner import EnvRunner, compiled_runner
from envhive.errors import ConfigError
from envhive.executors import _auto
from envhive.executors._auto import AutoChoice, EnvCosts, decide
from envhive.executors._native import NativeExecutor
from envhive.executors._protocol import Executor
from envhive.executors._serial import SerialExecutor
from envhive.executors._spawn import usable_cpus
from envhive.executors._thread import ThreadExecutor

__all__ = [
    "Buffers",
    "Completion",
    "EnvFactory",
    "EnvProps",
    "EnvRunner",
    "Executor",
    "Op",
    "SerialExecutor",
    "ThreadExecutor",
    "NativeExecutor",
    "ProcessExecutor",
    "RayExecutor",
    "default_start_method",
    "compiled_runner",
    "ExecutorEntry",
    "register_executor",
    "unregister_executor",
    "available_executors",
    "resolve_executor",
    "auto_choice",
    "AutoChoice",
    "EnvCosts",
]


@dataclass(frozen=True)
class ExecutorEntry:
    """A registered executor.

    Attributes:
        name: the name users pass as ``executor=``.
        build: makes an executor from ``num_envs`` and the ``make`` keyword ``num_workers``.
        priority: ``"auto"`` picks the available executor with the highest priority.
        available: whether its dependencies are importable here.
        general: runs any env (``False``: only envs it declares, like ``native`` kernels).
        cluster: runs envs on a cluster it connects to (``ray``): never picked by ``"auto"``,
            and left out of what ``envhive check``/``bench`` run by default.
    """

    name: str
    build: Callable[[int, int | None], Executor]
    priority: int
    available: Callable[[], bool]
    general: bool = True
    cluster: bool = False


_REGISTRY: dict[str, ExecutorEntry] = {}


def register_executor(entry: ExecutorEntry) -> None:
    """Make an executor selectable by name (and by ``"auto"``).

    Examples:
        >>> from envhive.executors import SerialExecutor
        >>> register_executor(ExecutorEntry("my-serial", lambda n, w: SerialExecutor(), -1, lambda: True))
        >>> "my-serial" in available_executors()
        True
        >>> unregister_executor("my-serial")
    """
    _REGISTRY[entry.name] = entry


def unregister_executor(name: str) -> None:
    """Remove a registered executor (no error if it is not registered)."""
    _REGISTRY.pop(name, None)


def available_executors(include_specialized: bool = False, include_cluster: bool = True) -> list[str]:
    """Names of the executors usable on this machine, best first.

    Args:
        include_specialized: also list executors that run only some envs (``native``).
        include_cluster: list executors that run envs on a cluster (``ray``, when installed).

    Examples:
        >>> available_executors()[0]
        'serial'
        >>> "native" in available_executors(), "native" in available_executors(True)
        (False, True)
    """
    entries = sorted(_REGISTRY.values(), key=lambda e: -e.priority)
    return [
        e.name for e in entries
        if (e.general or include_specialized) and (include_cluster or not e.cluster) and e.available()
    ]


def _preferred(factories: Sequence[Any]) -> str | None:
    """The envs' declared executor, if they all share one (and there are at least the
    factories' ``preferred_min_envs`` envs, default 2: one env never gains from threads)."""
    preferred = {getattr(f, "preferred_executor", None) for f in factories}
    min_envs = max((getattr(f, "preferred_min_envs", 2) for f in factories), default=2)
    if len(factories) < min_envs:
        preferred.discard("thread")
    if len(preferred) == 1:
        name = preferred.pop()
        entry = _REGISTRY.get(name) if isinstance(name, str) else None
        if entry is not None and entry.available():
            return entry.name
    return None


def auto_choice(factories: Sequence[Any], probe: Callable[[Any], EnvCosts] | None = None) -> AutoChoice:
    """What ``executor="auto"`` picks for these factories, and why.

    A shared ``preferred_executor`` (compiled ids: ``native``) is taken without measuring,
    unless the native engine cannot run the envs here (``NativeFactory.native_problem``: the
    executor it names then, and why).
    Otherwise, with two envs or more, ONE env built from the first factory is measured
    (:func:`envhive.executors._auto.probe`: 32 steps or 0.1 s, then as many in two threads) and
    :func:`envhive.executors._auto.decide` picks from its costs. A registered general executor
    ranked above ``serial`` is taken as is.

    Examples:
        >>> import gymnasium as gym
        >>> auto_choice([lambda: gym.make("CartPole-v1")] * 4).executor
        'serial'
    """
    preferred = _preferred(factories)
    problem = factories[0].native_problem() if preferred == "native" else None  # type: ignore[attr-defined]
    if problem is not None:  # the env's engine cannot run here: where its envs run instead
        if len(factories) > 1 and problem.executor in available_executors():
            return AutoChoice(problem.executor, None, problem.reason, fallback=True)
        return AutoChoice("serial", None, f"{problem.reason}; one env (or no {problem.executor} "
                          "executor here): it runs in the caller", fallback=True)
    if preferred is not None:
        return AutoChoice(preferred, None, "the env declares it (preferred_executor)")
    names = available_executors(include_cluster=False)
    if names[0] != "serial":
        return AutoChoice(names[0], None, f"the highest-ranked registered executor ({names[0]})")
    if len(factories) < 2 or len(names) == 1:
        return AutoChoice("serial", None, "one env: nothing to run in parallel"
                          if len(factories) < 2 else "the only executor available")
    costs = (probe or _auto.probe)(factories[0])  # looked up here: tests inject costs
    return decide(costs, len(factories), usable_cpus(), names)


def resolve_executor(
    executor: str | Executor,
    num_envs: int,
    num_workers: int | None,
    factories: Sequence[Any] = (),
) -> tuple[Executor, bool]:
    """Turn ``make``'s ``executor`` argument into an executor; returns (executor, chosen_by_auto).

    ``"auto"`` decides with :func:`auto_choice` (``num_workers``, when given, overrides the
    worker count it picks); the executor's ``auto`` attribute then holds the
    :class:`~envhive.executors._auto.AutoChoice` (what, how many workers, why).
    """
    if isinstance(executor, Executor):
        return executor, False
    if not isinstance(executor, str):
        raise ConfigError(
            f"executor: expected a name ({', '.join(['auto', *_REGISTRY])}) or an Executor "
            f"instance, got {type(executor).__name__}"
        )
    if executor == "auto":
        choice = auto_choice(factories) if factories else AutoChoice(
            available_executors()[0], None, "no envs to measure")
        workers = num_workers if num_workers is not None else choice.num_workers
        built = _REGISTRY[choice.executor].build(num_envs, workers)
        built.auto = choice
        if isinstance(built, ThreadExecutor):
            # Switching between its threads and the caller alone is free (same envs, same
            # results): the pool's own calls check the probe's verdict under the load of the day.
            built.revisit = True
        return built, True
    entry = _REGISTRY.get(executor)
    if entry is None:
        raise ConfigError(
            f"unknown executor {executor!r}: expected one of {['auto', *_REGISTRY]}"
        )
    if not entry.available():
        raise ConfigError(f"executor {executor!r} is not available on this machine")
    return entry.build(num_envs, num_workers), False


register_executor(ExecutorEntry("serial", lambda n, w: SerialExecutor(), 0, lambda: True))
# "auto" picks threads or processes when its measurements predict a gain (_auto.py).
register_executor(ExecutorEntry("thread", lambda n, w: ThreadExecutor(w), -5, lambda: True))
register_executor(
    ExecutorEntry("native", lambda n, w: NativeExecutor(w), -20, lambda: True, general=False)
)


def _process_available() -> bool:
    # POSIX shared memory and semaphores; imported lazily so that `import envhive` works where
    # the process executor cannot run (it is then only unavailable).
    try:
        importlib.import_module("envhive.executors._process")
    except (ImportError, OSError):
        return False
    return True


def _build_process(n: int, w: int | None) -> Executor:
    from envhive.executors._process import ProcessExecutor

    return ProcessExecutor(w)


register_executor(ExecutorEntry("process", _build_process, -10, _process_available))


def _ray_available() -> bool:
    # Ray is an optional extra (pip install 'envhive[ray]'), imported only when a pool uses it.
    try:
        return importlib.util.find_spec("ray") is not None
    except ValueError:  # sys.modules["ray"] is None: imports of ray are blocked
        return False


def _build_ray(n: int, w: int | None) -> Executor:
    from envhive.executors._ray import RayExecutor

    return RayExecutor(w)


# Never picked by "auto": a cluster is the user's to choose (and starting Ray costs seconds).
register_executor(ExecutorEntry("ray", _build_ray, -30, _ray_available, cluster=True))


def __getattr__(name: str) -> Any:
    # ProcessExecutor, default_start_method and RayExecutor are imported on first use (see above).
    if name in ("ProcessExecutor", "default_start_method"):
        module = importlib.import_module("envhive.executors._process")
        return getattr(module, name)
    if name == "RayExecutor":
        return importlib.import_module("envhive.executors._ray").RayExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
