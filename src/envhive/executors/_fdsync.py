"""Shared memory, semaphores and worker processes that need no resource tracker (Linux).

multiprocessing's shared objects have names in ``/dev/shm`` (a ``SharedMemory`` segment, a
``Semaphore`` under spawn and forkserver), and a name outlives a process killed with SIGKILL;
so multiprocessing registers each with its *resource tracker*, one more Python process
(~12 MB) that unlinks them when their owner dies, and spawn starts that tracker for every
child whatever it shares. The objects here are anonymous file descriptors instead, the
kernel's to free once the last process holding them is gone, however it ends:

* :class:`SharedBlock`: a ``memfd_create`` file, sized (and its pages reserved) at creation;
  each process maps it (:meth:`SharedBlock.map`) and the mapping keeps it alive.
* :class:`EventSemaphore`: a counting semaphore on an ``eventfd`` (``EFD_SEMAPHORE``), with
  the ``acquire(block, timeout)`` / ``release()`` of ``multiprocessing.Semaphore``.
* :func:`untracked_process`: a spawn ``Process`` whose start launches no tracker.

The first two travel to a child as its process arguments: pickled while ``Process.start()``
runs, they duplicate their descriptor into the child (``multiprocessing.reduction.DupFd``),
which rebuilds them on the same file. Anywhere else they refuse to be pickled, as
multiprocessing's semaphores do. :func:`fd_sharing` says whether this platform has them (the
native Atari engine falls back to multiprocessing's objects where it does not).

Examples:
    >>> if fd_sharing():
    ...     sem = EventSemaphore()
    ...     sem.release(); sem.release()
    ...     print(sem.acquire(False), sem.acquire(True, 0.01), sem.acquire(True, 0.01))
    ...     sem.close()
    ... else:
    ...     print(True, True, False)
    True True False
"""

from __future__ import annotations

import io
import mmap
import os
import select
import sys
import time
from multiprocessing import context, popen_spawn_posix, reduction, spawn, util
from typing import Any

from envhive.executors._spawn import resource_error

__all__ = ["EventSemaphore", "SharedBlock", "fd_sharing", "untracked_process"]

_ONE = (1).to_bytes(8, "little")  # an eventfd write adds this 64-bit count


def fd_sharing() -> bool:
    """Whether this platform has ``memfd_create`` and ``eventfd`` (Linux, Python >= 3.10).

    Examples:
        >>> fd_sharing() == (hasattr(os, "memfd_create") and hasattr(os, "eventfd"))
        True
    """
    return hasattr(os, "memfd_create") and hasattr(os, "eventfd")


def _send_fd(obj: Any, fd: int) -> Any:
    """``fd`` as the child being started will receive it (only while a Process starts)."""
    context.assert_spawning(obj)
    return reduction.DupFd(fd)


class EventSemaphore:
    """A counting semaphore on an ``eventfd`` (see the module docstring).

    ``release`` is one ``write`` (a system call, where a multiprocessing semaphore's post
    stays in user space unless someone sleeps). A failed ``acquire(False)`` is one ``poll``
    with no timeout (no exception raised and caught per try, which would cost more than the
    call). A blocking ``acquire`` sleeps in ``poll``: a signal runs
    its Python handler there and the wait goes on (PEP 475), so Ctrl-C raises
    ``KeyboardInterrupt`` out of the wait, as from ``multiprocessing.Semaphore.acquire``,
    and a handler that holds it (``deferred_interrupts``) lets the wait finish.

    Args:
        fd: an eventfd to use (a child rebuilding the parent's); ``None`` makes one, at 0.

    Examples:
        >>> if fd_sharing():
        ...     sem = EventSemaphore()
        ...     t0 = time.monotonic(); got = sem.acquire(True, 0.05)
        ...     print(got, time.monotonic() - t0 >= 0.05)
        ...     sem.close(); sem.close()  # idempotent
        ... else:
        ...     print(False, True)
        False True
    """

    __slots__ = ("_fd", "_poll")

    def __init__(self, fd: int | None = None) -> None:
        if fd is None:
            try:
                fd = os.eventfd(0, os.EFD_SEMAPHORE | os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            except OSError as err:
                raise resource_error(err, "creating a semaphore (eventfd)") from None
        self._fd = fd
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)

    def fileno(self) -> int:
        """The eventfd (-1 once closed)."""
        return self._fd

    def release(self) -> None:
        """Post once (wakes one waiter)."""
        os.write(self._fd, _ONE)

    def acquire(self, block: bool = True, timeout: float | None = None) -> bool:
        """Take one post: at once (``block=False``), or waiting up to ``timeout`` seconds
        (``None``: for ever). True if taken."""
        poll = self._poll.poll
        if not block:
            return bool(poll(0)) and self._take()
        # No try without waiting first: blocking callers have tried already (SpinPolicy.poll),
        # and a poll returns at once when a post is there.
        if timeout is None:
            while not (poll(None) and self._take()):
                pass
            return True
        deadline = time.monotonic() + timeout
        ms = max(timeout, 0.0) * 1e3  # poll rounds it up to whole milliseconds: never early
        while not (poll(ms) and self._take()):
            ms = (deadline - time.monotonic()) * 1e3
            if ms <= 0:
                return False
        return True

    def _take(self) -> bool:
        try:
            os.read(self._fd, 8)  # EFD_SEMAPHORE: takes 1 of the count
            return True
        except BlockingIOError:  # another waiter took it between the poll and the read
            return False

    def close(self) -> None:
        """Close this process's descriptor (idempotent); the semaphore lives on in others."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            self._poll.unregister(fd)
            os.close(fd)

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild_semaphore, (_send_fd(self, self._fd),)


def _rebuild_semaphore(dup: Any) -> EventSemaphore:
    return EventSemaphore(dup.detach())


class SharedBlock:
    """An anonymous shared-memory file of ``nbytes`` (``memfd_create``), to map in this
    process and in the workers it is handed to (see the module docstring).

    Its pages are reserved at creation (``posix_fallocate``), as ``SharedArena.allocate``
    does: memory too short for them raises ``ResourceError`` here, not SIGBUS at a later write.

    Args:
        nbytes: the size (at least 1).
        fd: an existing memfd (a child rebuilding the parent's block).

    Examples:
        >>> if fd_sharing():
        ...     block = SharedBlock(100)
        ...     buf = block.map(); buf[:2] = b"hi"
        ...     again = block.map()  # a second mapping sees the same pages
        ...     block.close()  # the mappings keep the memory
        ...     print(bytes(again[:2]), block.fileno())
        ... else:
        ...     print(b"hi", -1)
        b'hi' -1
    """

    __slots__ = ("_fd", "nbytes")

    def __init__(self, nbytes: int, fd: int | None = None) -> None:
        self.nbytes = nbytes = max(int(nbytes), 1)
        if fd is None:
            try:
                fd = os.memfd_create("envhive", os.MFD_CLOEXEC)
            except OSError as err:
                raise resource_error(err, "creating the shared block (memfd_create)") from None
            try:
                os.ftruncate(fd, nbytes)
                os.posix_fallocate(fd, 0, nbytes)
            except OSError as err:
                os.close(fd)
                # Not resource_error's /dev/shm advice: a memfd is not in /dev/shm (nor bound
                # by its size); only memory (and the cgroup's limit) can run out.
                raise resource_error(err, f"allocating a shared block of {nbytes / 2**20:.1f} MiB "
                                          "(memory)") from None
        self._fd = fd

    def fileno(self) -> int:
        """The memfd (-1 once closed)."""
        return self._fd

    def map(self) -> mmap.mmap:
        """A new shared mapping of the whole block; arrays over it keep it alive.

        Before Python 3.13 an ``mmap`` keeps a duplicate of the descriptor as long as it
        lives (``trackfd``): the block's last descriptor then goes with its last array."""
        if sys.version_info >= (3, 13):
            return mmap.mmap(self._fd, self.nbytes, trackfd=False)
        return mmap.mmap(self._fd, self.nbytes)

    def close(self) -> None:
        """Close this process's descriptor (idempotent). Mappings stay valid; the memory is
        freed when the last descriptor and mapping of every process are gone."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild_block, (_send_fd(self, self._fd), self.nbytes)


def _rebuild_block(dup: Any, nbytes: int) -> SharedBlock:
    return SharedBlock(nbytes, dup.detach())


class _UntrackedPopen(popen_spawn_posix.Popen):
    """spawn's ``Popen`` without the resource tracker: the same launch as CPython's
    ``popen_spawn_posix.Popen._launch`` (3.8 to 3.14), less its first step, which starts the
    tracker (one more process) and hands its descriptor to the child. A child that registers
    a named object anyway starts a tracker of its own, so nothing is ever left untracked."""

    _fds: list[int]  # set by popen_spawn_posix.Popen.__init__ (typeshed omits it)

    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        fp = io.BytesIO()
        context.set_spawning_popen(self)
        try:
            reduction.dump(prep_data, fp)
            reduction.dump(process_obj, fp)
        finally:
            context.set_spawning_popen(None)
        parent_r = child_w = child_r = parent_w = None
        try:
            parent_r, child_w = os.pipe()
            child_r, parent_w = os.pipe()
            cmd = spawn.get_command_line(pipe_handle=child_r)
            self._fds.extend([child_r, child_w])
            executable: Any = spawn.get_executable()  # str (typeshed says bytes)
            self.pid = util.spawnv_passfds(executable, cmd, self._fds)
            self.sentinel = parent_r
            with open(parent_w, "wb", closefd=False) as f:
                f.write(fp.getbuffer())
        finally:
            close_fds: Any = util.close_fds  # type: ignore[attr-defined]  # not in typeshed
            self.finalizer = util.Finalize(self, close_fds,
                                           [fd for fd in (parent_r, parent_w) if fd is not None])
            for fd in (child_r, child_w):
                if fd is not None:
                    os.close(fd)


class _UntrackedProcess(context.SpawnProcess):
    _start_method = "spawn"

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # multiprocessing's name
        return _UntrackedPopen(process_obj)


def untracked_process(**kwargs: Any) -> Any:
    """A spawn ``multiprocessing.Process(**kwargs)`` whose ``start()`` launches no resource
    tracker (see :class:`_UntrackedPopen`); its arguments may hold :class:`SharedBlock`,
    :class:`EventSemaphore` and ``multiprocessing.Pipe`` ends (passed by descriptor)."""
    return _UntrackedProcess(**kwargs)
