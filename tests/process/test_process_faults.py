"""Process executor: fault injection (raise, kill, hang) and cleanup of every process and segment."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import envhive
from envhive.executors import ProcessExecutor
from envhive.executors._shm import shm_prefix
from envhive.testing import CountingEnv
from tests.bounded import LONG, FileGate, Watchdog, wait_until

pytestmark = pytest.mark.timeout(300)


def shm_entries() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(shm_prefix())}


def own_shm() -> set[str]:
    return {n for n in shm_entries() if n.startswith(f"{shm_prefix()}{os.getpid()}_")}


def descendants(pid: int | None = None) -> set[int]:
    """Every live (non-zombie) process below ``pid`` (default: this process)."""
    root = pid or os.getpid()
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(autouse=True)
def baseline():
    """Warm up the forkserver (shared infrastructure that outlives pools), then check that a
    test leaves no worker process and no shared-memory segment of its own behind."""
    warm = envhive.make(CountingEnv, 1, executor="process")
    warm.close()
    before = descendants()
    yield
    gc.collect()
    assert wait_until(lambda: descendants() <= before), f"leftover processes {descendants() - before}"
    assert wait_until(lambda: not own_shm()), f"leftover segments {own_shm()}"


class FlakyEnv(CountingEnv):
    """Raises in step() at step ``fail_at`` of env tag ``bad``; sleeps ``sleep`` s per step;
    with ``gates = (inside, go)``, the step of env tag 0 opens ``inside`` and waits for ``go``."""

    def __init__(self, tag: int, bad: int = -1, fail_at: int = 3, sleep: float = 0.0, hang: bool = False,
                 gates: tuple[FileGate, FileGate] | None = None):
        super().__init__(pattern=[(50, "trunc")], tag=tag)
        self.bad, self.fail_at, self.sleep, self.hang, self.gates = bad, fail_at, sleep, hang, gates

    def step(self, action):
        if self.tag == self.bad and self.t + 1 == self.fail_at:
            if self.hang:
                time.sleep(3600)
            raise ZeroDivisionError("injected failure")
        if self.sleep:
            time.sleep(self.sleep)
        if self.gates is not None and self.tag == 0:
            inside, go = self.gates
            inside.open()
            assert go.wait(), "the test never opened the gate"
        return super().step(action)



def flaky_factories(n: int, **kw):
    return [lambda i=i: FlakyEnv(i, **kw) for i in range(n)]


def test_env_exception_reraised_with_env_id_and_worker_traceback():
    env = envhive.make(flaky_factories(4, bad=2), executor=ProcessExecutor(2))
    env.reset(seed=0)
    env.step(np.zeros(4, np.int64))
    env.step(np.zeros(4, np.int64))
    with pytest.raises(envhive.EnvWorkerError) as info:
        env.step(np.zeros(4, np.int64))
    err = info.value
    assert err.env_id == 2 and err.cause_type == "ZeroDivisionError"
    assert "injected failure" in err.worker_traceback and "FlakyEnv" not in str(type(err))
    assert "in step" in err.worker_traceback  # the worker's frames, not the caller's
    # The pool stays usable: the failed env must be reset, the others go on.
    with pytest.raises(envhive.ResetNeededError):
        env.step(np.zeros(4, np.int64))
    obs, _ = env.reset(options={"reset_mask": np.array([False, False, True, False])})
    assert obs[2].tolist()[1:3] == [1, 0]
    obs, *_ = env.step(np.zeros(4, np.int64))
    assert obs[:, 2].tolist() == [4, 4, 1, 4]
    env.close()


def test_sigkill_detected_fast_and_default_raises():
    ex = ProcessExecutor(2)
    env = envhive.make(flaky_factories(4), executor=ex)
    env.reset(seed=0)
    os.kill(ex.worker_pids()[1], signal.SIGKILL)
    with Watchdog(LONG, "the step of a pool whose worker was killed"):  # detected, no hang
        with pytest.raises(envhive.WorkerDiedError) as info:
            env.step(np.zeros(4, np.int64))
    assert info.value.env_ids == [2, 3] and info.value.exitcode == -signal.SIGKILL
    assert "on_worker_failure='restart'" in str(info.value)
    with pytest.raises(envhive.ClosedError):
        env.step(np.zeros(4, np.int64))
    env.close()


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_restart_reports_truncated_and_goes_on(mode):
    ex = ProcessExecutor(2, on_worker_failure="restart")
    env = envhive.make(flaky_factories(4, sleep=0.001), executor=ex, autoreset=mode)
    env.reset(seed=0)
    for _ in range(3):
        env.step(np.ones(4, np.int64))
    old = ex.worker_pids()
    os.kill(old[0], signal.SIGKILL)
    wait_until(lambda: not alive(old[0]))
    obs, rew, term, trunc, info = env.step(np.ones(4, np.int64))
    assert trunc.tolist() == [True, True, False, False] and not term.any()
    assert info["worker_restarted"].tolist()[:2] == [True, True] and info["_worker_restarted"].tolist() == [True, True, False, False]
    assert rew[:2].tolist() == [0.0, 0.0] and obs[2:, 2].tolist() == [4, 4]
    assert obs[:2, 1:].tolist() == [[0, 0, -1], [0, 0, -1]]  # fresh envs: episode 0, step 0
    if mode == "same_step":
        assert info["_final_obs"].tolist() == [True, True, False, False]
        assert info["final_info"]["worker_restarted"].tolist()[:2] == [True, True]
    assert ex.worker_pids()[0] != old[0] and ex.worker_pids()[1] == old[1]
    if mode == "disabled":
        env.reset(options={"reset_mask": np.array([True, True, False, False])})
    for _ in range(3):
        obs, rew, term, trunc, info = env.step(np.ones(4, np.int64))
    assert obs[2:, 2].tolist() == [7, 7] and "worker_restarted" not in info
    env.close()


def test_restart_of_idle_envs_reports_on_their_next_step():
    ex = ProcessExecutor(2, on_worker_failure="restart")
    env = envhive.make(flaky_factories(4), executor=ex, batch_size=2)
    env.async_reset()
    seen = [env.recv(), env.recv()]
    by_env = {int(i): k for k in range(2) for i in seen[k][4]["env_id"]}
    os.kill(ex.worker_pids()[1], signal.SIGKILL)  # envs 2 and 3, idle
    env.send(np.zeros(2, np.int64), np.array([0, 1]))
    out = env.recv()
    assert out[4]["env_id"].tolist() == [0, 1] and "worker_restarted" not in out[4]
    env.send(np.zeros(2, np.int64), np.array([2, 3]))  # detected here: lost envs restart
    out = env.recv()
    assert out[3].tolist() == [True, True] and out[4]["worker_restarted"].tolist() == [True, True]
    assert by_env
    env.close()


def test_sync_step_after_an_idle_restart_reports_the_lost_env():
    """Env 3 was idle when its worker was rebuilt: the next sync step (one fused command)
    resets it instead of stepping it, and reports that episode as truncated."""
    ex = ProcessExecutor(2, on_worker_failure="restart")
    env = envhive.make(flaky_factories(4), executor=ex, batch_size=1)
    env.reset(seed=0)
    env.step(np.ones(4, np.int64))
    old = ex.worker_pids()
    os.kill(old[1], signal.SIGKILL)  # envs 2 and 3
    wait_until(lambda: not alive(old[1]))
    env.send(np.zeros(1, np.int64), np.array([2]))
    out = env.recv()
    assert out[4]["env_id"].tolist() == [2] and out[3].tolist() == [True]
    obs, rew, term, trunc, info = env.step(np.ones(4, np.int64))
    assert trunc.tolist() == [False, False, False, True] and not term.any()
    assert info["_worker_restarted"].tolist() == [False, False, False, True]
    # env 2 ended (truncated) at its recv: next-step autoreset resets it now; env 3 is reset
    # in place of the step it was sent.
    assert obs[:, 2].tolist() == [2, 2, 0, 0]
    obs, *_ = env.step(np.ones(4, np.int64))
    assert obs[:, 2].tolist() == [3, 3, 1, 0]  # env 3's truncated episode: autoreset now
    env.close()


def test_hung_env_hits_step_timeout():
    ex = ProcessExecutor(2, step_timeout=3.0)  # far above a healthy step, even under load
    env = envhive.make(flaky_factories(4, bad=3, fail_at=2, hang=True), executor=ex)
    env.reset(seed=0)
    env.step(np.zeros(4, np.int64))
    start = time.monotonic()
    with Watchdog(LONG, "the step of a hung env with step_timeout=3"):
        with pytest.raises(envhive.StepTimeoutError) as info:
            env.step(np.zeros(4, np.int64))
    # Not before the timeout (a lower bound: a loaded machine can only make it later).
    assert time.monotonic() - start >= 3.0
    assert "step_timeout=3.0" in str(info.value) and info.value.env_ids == [2, 3]
    env.close()


def test_close_gc_and_context_manager_reap_everything():
    before_shm = own_shm()
    env = envhive.make(CountingEnv, 4, executor=ProcessExecutor(2))
    env.reset(seed=0)
    assert len(own_shm()) > len(before_shm)
    env.close()
    env.close()
    assert own_shm() == before_shm
    env = envhive.make(CountingEnv, 4, executor=ProcessExecutor(2))
    env.reset(seed=0)
    del env  # garbage collection alone must reap workers and unlink segments
    gc.collect()
    assert wait_until(lambda: own_shm() == before_shm)
    with envhive.make(CountingEnv, 4, executor=ProcessExecutor(2)) as env:
        env.reset(seed=0)
    assert own_shm() == before_shm


SCRIPT = textwrap.dedent(
    """
    import faulthandler, os, signal, sys, time, numpy as np, envhive
    from envhive.executors import ProcessExecutor
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for stacks on a hang
    # A process started from a background job inherits SIGINT ignored (bash does that without
    # job control), and Python then keeps ignoring it: this test is about Ctrl-C, so take it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from envhive.testing import CountingEnv

    class Slow(CountingEnv):
        def step(self, action):
            time.sleep(0.05)
            return super().step(action)

    ex = ProcessExecutor(2)
    env = envhive.make(lambda: Slow(pattern=[(10**6, "trunc")]), 4, executor=ex)
    env.reset(seed=0)
    print(" ".join(map(str, ex.worker_pids())), flush=True)
    mode = sys.argv[1]
    if mode == "exit":
        sys.exit(0)          # no close(): interpreter exit must clean up
    while True:
        env.step(np.zeros(4, np.int64))   # until SIGINT / SIGKILL
    """
)


@pytest.mark.parametrize("how", ["exit", "sigint", "sigkill"])
def test_parent_exit_interrupt_or_kill_leaves_nothing(tmp_path, how):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), "exit" if how == "exit" else "loop"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2, proc.stderr.read()
    time.sleep(0.3)
    if how == "sigint":
        proc.send_signal(signal.SIGINT)  # KeyboardInterrupt in the parent's step loop
    elif how == "sigkill":
        proc.kill()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)  # faulthandler: every thread's stack to stderr
        time.sleep(1.0)
        proc.kill()
        proc.wait()
        pytest.fail(f"the parent hung after {how}; its stacks:\n{proc.stderr.read()}")
    prefix = f"{shm_prefix()}{proc.pid}_"
    assert wait_until(lambda: not any(alive(p) for p in pids)), "workers outlived their parent"
    assert wait_until(lambda: not any(n.startswith(prefix) for n in shm_entries()))
    if how == "sigint":
        assert "KeyboardInterrupt" in proc.stderr.read()


def test_idle_workers_use_no_cpu():
    ex = ProcessExecutor(2)
    env = envhive.make(CountingEnv, 4, executor=ex)
    env.reset(seed=0)
    for _ in range(20):
        env.step(np.zeros(4, np.int64))

    def cpu_seconds() -> float:
        total = 0
        for pid in ex.worker_pids():
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
        return total / os.sysconf("SC_CLK_TCK")

    before = cpu_seconds()
    time.sleep(1.0)
    assert cpu_seconds() - before < 0.1  # two idle workers: blocked, not spinning
    env.close()


class PidEnv(gym.Env):
    observation_space = spaces.Box(0, 2**31, (1,), np.int64)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.array([os.getpid()]), {}

    def step(self, action):
        return np.array([os.getpid()]), 0.0, False, False, {}


@pytest.mark.parametrize(("num_envs", "workers"), [(5, 2), (7, 3), (3, 8)])
def test_uneven_slices_each_env_in_one_worker(num_envs, workers):
    env = envhive.make(PidEnv, num_envs, executor=ProcessExecutor(workers))
    obs, _ = env.reset()
    pids = obs[:, 0].tolist()
    k = min(workers, num_envs)
    assert len(set(pids)) == k and os.getpid() not in pids
    assert pids == sorted(pids, key=pids.index)  # contiguous slices
    sizes = sorted(pids.count(p) for p in set(pids))
    assert max(sizes) - min(sizes) <= 1
    env.close()


def test_async_recv_returns_first_finished():
    def slow_first(i):
        return lambda: FlakyEnv(i, sleep=0.3 if i == 0 else 0.0)

    env = envhive.make([slow_first(i) for i in range(4)], executor=ProcessExecutor(4), batch_size=2)
    env.async_reset()
    got = sorted(env.recv()[4]["env_id"].tolist() + env.recv()[4]["env_id"].tolist())
    assert got == [0, 1, 2, 3]
    env.send(np.zeros(4, np.int64), np.arange(4))
    first = env.recv()[4]["env_id"].tolist()
    assert 0 not in first  # env 0 is 0.3 s slower than the others
    assert 0 in env.recv()[4]["env_id"].tolist()
    env.close()


class OptionsEnv(CountingEnv):
    """Reports ``options["level"]`` in its reset info. With ``options["inside"]`` (a path),
    first makes ``<inside>.<pid>`` (this process is inside the reset) and waits for the file
    ``options["go"]``."""

    def reset(self, *, seed=None, options=None):
        options = options or {}
        if "inside" in options:
            with open(f"{options['inside']}.{os.getpid()}", "w"):
                pass
            assert wait_until(lambda: os.path.exists(options["go"])), "the test never said go"
        obs, info = super().reset(seed=seed, options=options)
        return obs, {**info, "level": options.get("level", -1)}


def test_restart_during_a_reset_resends_its_options(tmp_path):
    """A worker killed inside ``reset(seed=..., options=...)`` is rebuilt and the reset resent
    with the same seeds and options: the fresh envs get them, and their rows say the worker
    restarted."""
    import threading

    ex = ProcessExecutor(2, on_worker_failure="restart")
    env = envhive.make(OptionsEnv, 4, executor=ex, autoreset="disabled")
    env.reset(seed=0)  # tags (obs[:, 0]) are the first reset's seeds: 0, 1, 2, 3
    victim = ex.worker_pids()[0]
    inside, go = str(tmp_path / "inside"), str(tmp_path / "go")

    def kill_inside() -> None:  # when the victim is inside the reset: kill it, then say go
        if wait_until(lambda: os.path.exists(f"{inside}.{victim}")):
            os.kill(victim, signal.SIGKILL)
            wait_until(lambda: not alive(victim))
        with open(go, "w"):
            pass

    killer = threading.Thread(target=kill_inside)
    killer.start()
    try:
        obs, info = env.reset(seed=10, options={"inside": inside, "go": go, "level": 5})
    finally:
        killer.join()
    assert info["level"].tolist() == [5, 5, 5, 5]
    # The rebuilt envs 0 and 1 were reset with their seeds (10, 11): their first seeded reset.
    assert obs[:, 0].tolist() == [10, 11, 2, 3]
    assert info["_worker_restarted"].tolist() == [True, True, False, False]
    assert victim not in ex.worker_pids()
    env.close()


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_close_itself_unlinks_every_named_semaphore(method):
    """Semaphores are named (``/dev/shm/sem.mp-*``) under forkserver and spawn; ``close()``
    unlinks them, without waiting for garbage collection, including those of a worker that
    was rebuilt."""
    ex = ProcessExecutor(2, start_method=method, on_worker_failure="restart")
    env = envhive.make(CountingEnv, 4, executor=ex)
    gc.disable()  # close() alone must do it
    try:
        env.reset(seed=0)

        def names():
            sems = [ex._state.done_sem] + [wk.cmd_sem for wk in ex._state.workers]
            return {"sem." + s._semlock.name.lstrip("/") for s in sems}

        first = names()
        os.kill(ex.worker_pids()[0], signal.SIGKILL)
        env.step(np.zeros(4, np.int64))  # the worker is rebuilt with a new semaphore
        second = names()
        assert first - second, "a rebuilt worker gets a new semaphore"
        assert not (first - second) & set(os.listdir("/dev/shm")), "the old one is unlinked"
        assert second <= set(os.listdir("/dev/shm"))
        env.close()
        assert not second & set(os.listdir("/dev/shm"))
    finally:
        gc.enable()


def test_commands_queued_on_a_dying_worker_come_back_restarted(gates):
    """Env 1's step waits in worker 0's queue behind env 0's while the worker is killed: both
    come back truncated with ``worker_restarted`` (env 1 is reset in place of its step, not
    stepped on a never-reset env)."""
    ex = ProcessExecutor(2, on_worker_failure="restart")
    env = envhive.make(flaky_factories(4, gates=gates), executor=ex, batch_size=1)
    env.async_reset(seed=0)
    for _ in range(4):
        env.recv()
    victim = ex.worker_pids()[0]  # envs 0 and 1
    env.send(np.ones(1, np.int64), np.array([0]))
    env.send(np.ones(1, np.int64), np.array([1]))  # queued: the worker is busy with env 0
    assert gates[0].wait()  # env 0 is inside its step (and stays there: no go)
    os.kill(victim, signal.SIGKILL)
    got = {}
    for _ in range(2):
        _, rew, term, trunc, info = env.recv()
        got[int(info["env_id"][0])] = (bool(trunc[0]), bool(term[0]), bool(info["worker_restarted"][0]))
    assert got == {0: (True, False, True), 1: (True, False, True)}
    env.close()


def _dies_when_flagged(flag: str, tag: int):
    if os.path.exists(flag):
        os._exit(7)
    return FlakyEnv(tag)


def test_a_replacement_that_dies_while_building_is_a_clear_error(tmp_path):
    flag = str(tmp_path / "die")
    ex = ProcessExecutor(2, on_worker_failure="restart")
    env = envhive.make([lambda i=i: _dies_when_flagged(flag, i) for i in range(4)], executor=ex)
    env.reset(seed=0)
    open(flag, "w").close()  # from now on every new worker dies while building its envs
    os.kill(ex.worker_pids()[0], signal.SIGKILL)
    with pytest.raises(envhive.WorkerDiedError, match="could not be rebuilt") as info:
        env.step(np.ones(4, np.int64))
    assert info.value.env_ids == [0, 1]
    with pytest.raises(envhive.ClosedError):
        env.step(np.ones(4, np.int64))
    env.close()


def test_a_worker_dying_while_building_at_make_is_a_worker_died_error(tmp_path):
    flag = str(tmp_path / "die")
    open(flag, "w").close()
    with pytest.raises(envhive.WorkerDiedError, match="while building envs") as info:
        envhive.make([lambda i=i: _dies_when_flagged(flag, i) for i in range(2)],
                     executor=ProcessExecutor(2))
    assert info.value.exitcode == 7


def test_arrays_handed_out_stay_valid_after_close():
    """copy=False observations (and the pool's own buffers) point into shared memory; after
    close() they must stay readable and writable, never a crash (run in a child process: a
    regression would be a segfault)."""
    code = textwrap.dedent("""
        import gc, numpy as np, envhive
        from envhive.testing import CountingEnv
        env = envhive.make(CountingEnv, 4, executor="process", copy=False)
        obs, _ = env.reset(seed=0)
        pool = env.pool
        env.close()
        gc.collect()
        total = int(obs.sum())
        pool.buffers.ops[:] = 1
        print("ok", total)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def test_step_timeout_stops_the_hung_worker_before_shutting_down(monkeypatch):
    """The StepTimeoutError came after 3x step_timeout in raise mode: the shutdown first waited
    (2 s) for the hung worker to heed CLOSE, which it never does. The hung worker must already
    be stopped when the shutdown begins (no timing here: what the shutdown finds)."""
    from envhive.executors import _handles

    found: list[list[bool]] = []
    shutdown = _handles.Shutdown.__call__

    def spy(self):
        found.append([wk.proc is not None and wk.proc.is_alive() for wk in self.workers])
        shutdown(self)

    monkeypatch.setattr(_handles.Shutdown, "__call__", spy)
    ex = ProcessExecutor(2, step_timeout=3.0)
    env = envhive.make(flaky_factories(4, bad=3, fail_at=2, hang=True), executor=ex)
    env.reset(seed=0)
    env.step(np.zeros(4, np.int64))
    with pytest.raises(envhive.StepTimeoutError):
        env.step(np.zeros(4, np.int64))
    assert found and found[0] == [True, False], f"alive at shutdown (worker 0, hung worker 1): {found[0]}"
    env.close()
