"""Starting and stopping worker processes: what the process executor needs from the OS.

Kept apart from ``_process.py`` (the executor's protocol and bookkeeping): hiding the user's
``__main__`` from spawned children, CPU pinning, and stopping a process for sure.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from envhive.errors import ConfigError

__all__ = ["main_hidden", "affinity_cpus", "stop_process"]


@contextlib.contextmanager
def main_hidden() -> Iterator[None]:
    """Start processes without making them re-import the user's ``__main__``.

    spawn and forkserver children normally re-run the main script (hence the usual
    ``if __name__ == "__main__"`` guard). envhive workers never need it: their entry point is
    in envhive and factories travel cloudpickled by value. Hiding where ``__main__`` lives while
    starting them makes guard-less scripts and notebooks work.
    """
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved: dict[str, Any] = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def affinity_cpus(cpu_affinity: bool | Sequence[int] | None) -> list[int]:
    """The CPUs workers are pinned to, round robin (empty: no pinning); checks the argument."""
    if cpu_affinity is None or cpu_affinity is False:
        return []
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError("cpu_affinity: pinning processes to CPUs needs Linux (os.sched_setaffinity)")
    allowed = sorted(os.sched_getaffinity(0))
    if cpu_affinity is True:
        return allowed
    if isinstance(cpu_affinity, (str, bytes)) or not isinstance(cpu_affinity, Sequence):
        raise ConfigError(f"cpu_affinity: expected True, None or a list of CPU ids, got {cpu_affinity!r}")
    cpus = list(cpu_affinity)
    bad = [c for c in cpus if isinstance(c, bool) or not isinstance(c, int) or c not in allowed]
    if not cpus or bad:
        raise ConfigError(
            f"cpu_affinity: expected CPU ids this process may use ({allowed}), got {cpus!r}"
        )
    return cpus


def stop_process(proc: Any) -> None:
    if proc is None or proc.pid is None:  # never started (a start can be cut short)
        return
    if proc.is_alive():
        proc.terminate()
        proc.join(1.0)
    if proc.is_alive():
        proc.kill()
        proc.join(1.0)
