"""Starting and stopping worker processes: what the process executor needs from the OS.

Kept apart from ``_process.py`` (the executor's protocol and bookkeeping): hiding the user's
``__main__`` from spawned children, CPU pinning, stopping a process for sure, and saying
clearly which OS limit was hit when the OS refuses a resource (:func:`resource_error`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from envhive.engines._threaded import usable_cpus
from envhive.errors import ConfigError, ResourceError

__all__ = [
    "main_hidden", "affinity_cpus", "usable_cpus", "stop_process", "resource_error", "FDS_PER_WORKER",
]

#: File descriptors a worker process holds in the parent (its pipe end, its process sentinel,
#: the forkserver's status pipe), measured; the first worker also starts the forkserver and the
#: resource tracker (about 20 more).
FDS_PER_WORKER = 3


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


def _open_fds() -> int | None:
    """Descriptors open in this process (``-1``: too many to even look), ``None``: unknown."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # minus listdir's own descriptor
    except OSError as err:
        return -1 if err.errno in (errno.EMFILE, errno.ENFILE) else None


def resource_error(err: BaseException, doing: str, shm_bytes: int = 0) -> ResourceError:
    """A :class:`ResourceError` for the OS's refusal ``err`` while ``doing`` (e.g. "starting
    worker 3"): which limit, its value, and how to raise it. ``shm_bytes``: the size of the
    shared-memory segment being made, if that was it.

    Examples:
        >>> err = resource_error(OSError(errno.EMFILE, "Too many open files"), "starting worker 3")
        >>> err.errno == errno.EMFILE, "file descriptors" in str(err)
        (True, True)
    """
    import resource

    code = getattr(err, "errno", None)
    what = f"{type(err).__name__}: {err}"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    fds = _open_fds()
    # Running out of descriptors also shows up under other names: the forkserver hanging up
    # (EOFError: it could not receive the descriptors or fork), tempfile finding "no usable
    # temporary directory" (it cannot open a test file). Hence the check of the count.
    at_limit = fds == -1 or (
        fds is not None and soft != resource.RLIM_INFINITY and fds + FDS_PER_WORKER >= soft
    )
    if code in (errno.EMFILE, errno.ENFILE) or at_limit or isinstance(err, EOFError):
        if code in (errno.EMFILE, errno.ENFILE):
            lead = f"ran out of file descriptors while {doing} ({what})"
        else:
            lead = f"failed while {doing} ({what}), most likely for lack of file descriptors"
        scope = "the system-wide limit (fs.file-max)" if code == errno.ENFILE else "this process's limit"
        count = "all" if fds == -1 else str(fds)
        message = (
            f"{lead}: {count} open; {scope}: soft {soft}, hard {hard} (the forkserver has the "
            f"same). Each worker process holds about {FDS_PER_WORKER} in this process, plus "
            "what its envs open. Raise the limit (ulimit -n, or resource.setrlimit("
            "resource.RLIMIT_NOFILE, (hard, hard)) before making the pool) or use fewer workers"
        )
    elif shm_bytes and code in (errno.ENOSPC, errno.ENOMEM, errno.EFBIG):
        try:
            st = os.statvfs("/dev/shm")
            free = f"{st.f_bavail * st.f_frsize / 2**20:.1f} MiB free of {st.f_blocks * st.f_frsize / 2**20:.1f} MiB"
        except OSError:
            free = "its size unknown"
        message = (
            f"out of shared memory while {doing} ({what}): a segment of "
            f"{shm_bytes / 2**20:.1f} MiB does not fit in /dev/shm ({free}). In a container, "
            "give it more (docker run --shm-size=2g), or use fewer envs or smaller observations"
        )
    elif code == errno.EAGAIN or isinstance(err, RuntimeError):
        message = (
            f"the OS refused a new process or thread while {doing} ({what}): the limit on "
            "processes per user (ulimit -u) or on memory was reached. Use fewer workers"
        )
    else:
        message = f"the OS refused a resource while {doing} ({what})"
    return ResourceError(code, message) if code is not None else ResourceError(message)
