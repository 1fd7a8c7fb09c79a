"""When the OS says no: out of file descriptors, out of shared memory, a taken segment name,
no more threads. Each is a :class:`envhive.ResourceError` that names the limit and how to raise
it, and leaves nothing behind (no process, no segment), at whatever stage it strikes.

The real limits are tried in child interpreters (``RLIMIT_NOFILE`` lowered just before the pool
is made); the stages the OS rarely reaches on its own (a full ``/dev/shm``, a squatted segment
name, a failed rebuild, a thread refused) are injected.
"""

from __future__ import annotations

import errno
import gc
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
from multiprocessing import shared_memory

import numpy as np
import pytest

import envhive
from envhive.executors import ProcessExecutor, _shm
from envhive.executors._shm import SharedArena, shm_prefix
from envhive.testing import CountingEnv
from tests.bounded import wait_until

pytestmark = pytest.mark.timeout(300)


def own_shm() -> set[str]:
    mine = f"{shm_prefix()}{os.getpid()}_"
    return {n for n in os.listdir("/dev/shm") if n.startswith(mine)}


settle = wait_until


@pytest.fixture(autouse=True)
def nothing_left_behind():
    before = set(multiprocessing.active_children())
    yield
    gc.collect()
    assert settle(lambda: set(multiprocessing.active_children()) <= before), "leftover workers"
    assert settle(lambda: not own_shm()), f"leftover segments {own_shm()}"


# A child interpreter: lowers its descriptor limit to (open now + headroom), makes a process
# pool, and reports what happened and what is left.
_CHILD = textwrap.dedent(
    """
    import json, multiprocessing, os, resource, sys
    import envhive
    from envhive.executors import ProcessExecutor
    from envhive.testing import CountingEnv

    headroom, workers = int(sys.argv[1]), int(sys.argv[2])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_now = len(os.listdir("/proc/self/fd")) - 1
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + headroom, hard))
    out = {}
    try:
        env = envhive.make(CountingEnv, workers, executor=ProcessExecutor(workers))
        env.reset(seed=0)
        env.step([0] * workers)
        env.close()
        out["outcome"] = "ok"
    except BaseException as err:
        out["outcome"] = type(err).__name__
        out["message"] = str(err)
        out["errno"] = getattr(err, "errno", None)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))  # room to look around
    out["children"] = len(multiprocessing.active_children())
    prefix = f"envhive_{os.getpid()}_"
    out["segments"] = sorted(n for n in os.listdir("/dev/shm") if n.startswith(prefix))
    print(json.dumps(out))
    """
)


def run_child(headroom: int, workers: int) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(headroom), str(workers)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ConnectionResetError" not in proc.stderr, "workers of a failed launch must exit quietly"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_running_out_of_descriptors_at_every_stage_of_a_launch():
    """Descriptor headroom from none to plenty: the refusal strikes at the first segment, at
    mmap, at the semaphore, at a pipe, inside the forkserver, at a later worker... Every
    outcome is a working pool or a ResourceError that names the limit; nothing is left."""
    outcomes = []
    for headroom in (0, 2, 4, 8, 14, 20, 28, 40, 200):
        got = run_child(headroom, workers=8)
        outcomes.append(got["outcome"])
        assert got["outcome"] in ("ok", "ResourceError"), got
        assert got["children"] == 0 and got["segments"] == [], got
        if got["outcome"] == "ResourceError":
            assert "file descriptors" in got["message"] and "ulimit -n" in got["message"], got
    assert outcomes[0] == "ResourceError" and outcomes[-1] == "ok", outcomes


class _PipeRefused:
    """A start-method context whose ``Pipe`` fails (EMFILE) from its ``after``-th call on."""

    def __init__(self, ctx, after: int) -> None:
        self._ctx, self.calls, self.after = ctx, 0, after

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def Pipe(self, *args, **kwargs):  # noqa: N802 - multiprocessing's name
        self.calls += 1
        if self.calls >= self.after:
            raise OSError(errno.EMFILE, "Too many open files")
        return self._ctx.Pipe(*args, **kwargs)


def test_a_pipe_refused_to_a_later_worker_is_a_resource_error(monkeypatch):
    ex = ProcessExecutor(3)
    monkeypatch.setattr(ex, "_ctx", _PipeRefused(ex._ctx, after=3))
    with pytest.raises(envhive.ResourceError, match=r"file descriptors while starting worker 2") as info:
        envhive.make(CountingEnv, 6, executor=ex)
    assert info.value.errno == errno.EMFILE
    assert isinstance(info.value, OSError)  # generic handlers keep working
    assert ex.worker_pids() == [] or not any(
        os.path.exists(f"/proc/{p}") for p in ex.worker_pids()
    )


def test_a_full_dev_shm_is_a_resource_error_not_a_later_sigbus(monkeypatch):
    """tmpfs gives pages on first touch; a /dev/shm too small (Docker: 64 MB) would SIGBUS at
    some later write. The pages are reserved when the segment is made, so it fails there."""
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_shm.os, "posix_fallocate", full)
    with pytest.raises(envhive.ResourceError, match=r"--shm-size") as info:
        envhive.make(CountingEnv, 4, executor=ProcessExecutor(2))
    assert info.value.errno == errno.ENOSPC
    assert "/dev/shm" in str(info.value)


def test_a_taken_segment_name_is_skipped_and_left_alone(monkeypatch):
    tokens = iter(["5ca77e25", "5ca77e25", "0a0a0a0a"])
    monkeypatch.setattr(_shm.secrets, "token_hex", lambda n: next(tokens))
    squat = shared_memory.SharedMemory(
        name=f"{shm_prefix()}{os.getpid()}_5ca77e25_0", create=True, size=16
    )
    try:
        squat.buf[:4] = b"mine"
        arena = SharedArena()
        a = arena.allocate((3,), np.dtype(np.int64))
        a[:] = 7
        assert arena.specs[0].name != squat.name
        arena.close()
        assert bytes(squat.buf[:4]) == b"mine"  # neither opened nor unlinked by the arena
        assert os.path.exists(f"/dev/shm/{squat.name}")
        del a
    finally:
        squat.close()
        squat.unlink()


def test_a_rebuild_refused_by_the_os_shuts_down_with_the_reason(monkeypatch):
    ex = ProcessExecutor(2, on_worker_failure="restart")
    env = envhive.make(CountingEnv, 4, executor=ex)
    env.reset(seed=0)
    os.kill(ex.worker_pids()[0], signal.SIGKILL)
    monkeypatch.setattr(ex, "_ctx", _PipeRefused(ex._ctx, after=1))
    with pytest.raises(envhive.WorkerDiedError, match="could not be rebuilt") as info:
        for _ in range(50):
            env.step(np.zeros(4, np.int64))
    assert isinstance(info.value.__cause__, envhive.ResourceError)
    assert "file descriptors" in str(info.value)
    with pytest.raises(envhive.ClosedError):
        env.step(np.zeros(4, np.int64))
    env.close()


def test_a_thread_refused_is_a_resource_error_and_closes_the_envs(monkeypatch):
    closed: list[int] = []

    class Tracked(CountingEnv):
        def close(self):
            closed.append(1)

    real_start = threading.Thread.start
    started = []

    def start(self):
        if self.name.startswith("envhive-thread") and len(started) == 1:
            raise RuntimeError("can't start new thread")
        started.append(self)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(envhive.ResourceError, match="thread 1") as info:
        envhive.make(Tracked, 4, executor="thread", num_workers=2)
    assert "ulimit -u" in str(info.value)
    assert len(closed) == 4
    monkeypatch.undo()
    assert settle(lambda: not any(t.is_alive() for t in started))
