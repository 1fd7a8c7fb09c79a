"""How much memory the machine can still give, and the error for a pool that will not fit.

A pool of ``10**12`` envs used to end in a bare ``MemoryError`` (or, worse, in the kernel's
out-of-memory killer once lazily allocated pages were touched). What a pool needs per env is
known at three points, each checked before the memory is taken: envhive's own bookkeeping
(``make``, before anything is built), a compiled kernel's state, stocks and generators (when
the kernel is made) and the pool's buffers (when they are allocated, from the spec); Python
envs, whose size only shows once built, are checked after the first few are (``build_envs``).

Examples:
    >>> import errno
    >>> available_bytes() is None or available_bytes() > 0
    True
    >>> check_fits(1, "one byte")
    >>> try:
    ...     check_fits(10**20, "a pool of 10**12 envs", per_env=10**8)
    ... except ResourceError as err:
    ...     print(err.errno == errno.ENOMEM, err.strerror[:52])
    True a pool of 10**12 envs needs about 100000000000.0 GB
"""

from __future__ import annotations

import errno
import os

from envhive.errors import ResourceError

__all__ = ["available_bytes", "check_fits", "resident_bytes", "size_text"]


def available_bytes() -> int | None:
    """Memory the system can still give without swapping (``MemAvailable`` on Linux, else the
    free physical pages), in bytes; ``None`` when the platform does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def resident_bytes() -> int | None:
    """This process's resident memory in bytes (``None``: unknown on this platform)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def size_text(nbytes: float) -> str:
    """``nbytes`` for a message: ``"3.2 GB"``, ``"512.0 MB"``, ``"12.0 KB"``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} B"


def check_fits(needed: float, what: str, per_env: float | None = None) -> None:
    """Raise a :class:`~envhive.errors.ResourceError` (``errno`` ENOMEM) when ``needed``
    bytes exceed the memory available now; ``what`` names the need in the message,
    ``per_env`` (bytes) lets it say how many envs would fit."""
    free = available_bytes()
    if free is None or needed <= free:
        return
    fit = f" (at most about {int(free // per_env):,} envs fit)" if per_env else ""
    raise ResourceError(
        errno.ENOMEM,
        f"{what} needs about {size_text(needed)} of memory, but only {size_text(free)} is "
        f"available{fit}; use fewer envs, or free memory first",
    )
