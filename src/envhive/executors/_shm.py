"""Shared-memory arrays for process executors: created by the parent, mapped by workers.

The parent creates one POSIX shared-memory segment per array (``SharedMemory(create=True)``,
which registers it with multiprocessing's resource tracker, so even a parent killed with
SIGKILL has its segments unlinked by the tracker) and unlinks them all in ``close``.

Workers map the segments by name with ``shm_open`` + ``mmap`` directly. They do not go through
``SharedMemory``, because on Python < 3.13 attaching registers the segment with the resource
tracker a second time. The tracker is shared with the parent, so the worker's unregister or
exit would then unlink (or warn about) the parent's segments.

The executor's named semaphores live in ``/dev/shm`` too (``sem.mp-*``, under forkserver and
spawn); :func:`release_semaphore` unlinks one at ``close()`` rather than at garbage collection.

Examples:
    >>> arena = SharedArena()
    >>> a = arena.allocate((2, 3), np.dtype(np.float32))
    >>> a[:] = 1.5
    >>> attached = attach_arrays(arena.specs)
    >>> float(attached[0][1, 2])
    1.5
    >>> del a, attached
    >>> arena.close()
"""

from __future__ import annotations

import mmap
import os
import secrets
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from envhive.errors import ResourceError
from envhive.executors._spawn import resource_error

__all__ = ["ArraySpec", "SharedArena", "attach_arrays", "map_segment", "shm_prefix", "release_semaphore"]


def shm_prefix() -> str:
    """Prefix of every segment name envhive creates (to find leaks in /dev/shm)."""
    return "envhive_"


@dataclass(frozen=True)
class ArraySpec:
    """Where a shared array lives: segment name, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str


class SharedArena:
    """Creates shared arrays in the parent and unlinks them all on ``close``."""

    def __init__(self) -> None:
        self.specs: list[ArraySpec] = []
        self._segments: list[shared_memory.SharedMemory] = []
        self._counter = 0

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A zeroed array of ``shape``/``dtype`` in a new shared-memory segment."""
        dtype = np.dtype(dtype)
        if dtype.hasobject:
            raise TypeError("object arrays cannot live in shared memory")
        nbytes = max(int(np.prod(shape)) * dtype.itemsize, 1)
        seg = self._create(nbytes)
        self._segments.append(seg)
        try:
            # Reserve the pages now: tmpfs allocates them on first touch, and a /dev/shm too
            # small for them (Docker's default is 64 MB) would then kill the process with
            # SIGBUS at some later write. posix_fallocate fails here instead, with ENOSPC.
            os.posix_fallocate(seg._fd, 0, nbytes)  # type: ignore[attr-defined]
        except AttributeError:  # pragma: no cover - no posix_fallocate on this platform
            pass
        except OSError as err:
            raise resource_error(err, "allocating the pool's shared memory", nbytes) from None
        spec = ArraySpec(seg.name, tuple(shape), dtype.str)
        self.specs.append(spec)
        # The array gets a mapping of its own, owned by the array (as in the workers), and
        # SharedMemory's mapping is closed at once. numpy does not hold a buffer export on
        # seg.buf, so closing seg later would unmap memory arrays still point at: anything
        # touching a pool's arrays after close() (the pool itself after an interrupted call,
        # a user's copy=False observation) would crash. Now the memory lives as long as the
        # last array over it, and close() only unlinks the name.
        try:
            (array,) = attach_arrays([spec])
        except OSError as err:  # mmap holds a descriptor of its own
            raise resource_error(err, "mapping the pool's shared memory", nbytes) from None
        seg.close()
        array.fill(0)
        return array

    def _create(self, nbytes: int) -> shared_memory.SharedMemory:
        """A new segment of ``nbytes`` under a fresh name: pid, a random token, a counter.

        A name already taken (a leftover of a crashed process whose pid came back, or a
        squatter) is skipped: ``create=True`` never opens a segment it did not make.
        """
        for _ in range(8):
            name = f"{shm_prefix()}{os.getpid()}_{secrets.token_hex(4)}_{self._counter}"
            self._counter += 1
            try:
                return shared_memory.SharedMemory(name=name, create=True, size=nbytes)
            except FileExistsError:
                continue
            except OSError as err:
                raise resource_error(err, "allocating the pool's shared memory", nbytes) from None
        raise ResourceError(f"no free shared-memory segment name after 8 tries (last: {name})")

    def close(self) -> None:
        """Unlink every segment. Idempotent; arrays still referenced stay valid until freed."""
        segments, self._segments = self._segments, []
        for seg in segments:
            try:
                seg.unlink()
            except FileNotFoundError:
                pass


def _shm_open(name: str) -> int:
    try:
        import _posixshmem  # CPython's own binding, used by multiprocessing.shared_memory

        return int(_posixshmem.shm_open("/" + name.lstrip("/"), os.O_RDWR, mode=0o600))
    except ImportError:  # pragma: no cover - non-CPython
        return os.open(f"/dev/shm/{name.lstrip('/')}", os.O_RDWR)


def map_segment(name: str) -> mmap.mmap:
    """A new mapping of the existing segment ``name``, not registered with a resource
    tracker. Arrays over it keep it alive (their ``base``); nothing else unmaps it."""
    fd = _shm_open(name)
    try:
        return mmap.mmap(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def attach_arrays(specs: list[ArraySpec]) -> list[np.ndarray]:
    """Map existing segments (worker side) without registering them with a resource tracker."""
    return [np.ndarray(spec.shape, dtype=np.dtype(spec.dtype), buffer=map_segment(spec.name))
            for spec in specs]


def release_semaphore(sem: Any) -> None:
    """Unlink a multiprocessing semaphore's name now, instead of when the object is collected.

    Under forkserver and spawn a semaphore is a named POSIX semaphore (``/dev/shm/sem.mp-*``)
    so that children can open it; multiprocessing unlinks the name only from a finalizer run
    at garbage collection. ``close()`` must release every OS resource itself, so it runs that
    finalizer now (which also unregisters the name from the resource tracker). Handles still
    open keep working; the memory goes with the last one.
    """
    semlock = getattr(sem, "_semlock", None)
    name = getattr(semlock, "name", None)
    if name is None:  # fork start method: unlinked at creation
        return
    import multiprocessing.synchronize as mp_sync
    import multiprocessing.util as mp_util

    cleanup = getattr(mp_sync.SemLock, "_cleanup", None)
    for finalizer in list(getattr(mp_util, "_finalizer_registry", {}).values()):
        if getattr(finalizer, "_callback", None) is cleanup and getattr(finalizer, "_args", None) == (name,):
            try:
                finalizer()  # unlink + unregister, once; removes itself from the registry
            except OSError:
                pass
            return
    try:  # no finalizer found (another Python version's internals): do what it would do
        from multiprocessing import resource_tracker

        mp_sync.sem_unlink(name)  # type: ignore[attr-defined]
        resource_tracker.unregister(name, "semaphore")
    except (AttributeError, OSError):
        pass
