"""The native Atari engines' own paths: bad actions, refused reset options and calls (both
engines); for the worker-process engine, a dead worker (an error, never a hang) and clean
shutdown. The threaded engine's own are in test_atari_threads.py."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

import envhive  # noqa: E402
from envhive.errors import ActionError, ConfigError, EnvWorkerError, WorkerDiedError  # noqa: E402
from envhive.executors import NativeExecutor  # noqa: E402

ID = "envhive/Pong-v5"


def engine_of(env):
    return env._pool.executor._engine


def test_bad_action_steps_nothing(engine):
    env = envhive.make(ID, num_envs=2, seed=0, executor="native")
    env.reset()
    before = env.step(np.zeros(2, np.int64))[4]["elapsed_step"].copy()
    with pytest.raises(ActionError):
        env.step(np.array([0, 6]))
    after = env.step(np.zeros(2, np.int64))[4]["elapsed_step"]
    np.testing.assert_array_equal(after, before + 1)  # the refused step ran nowhere
    env.close()


def test_reset_options_are_refused_per_env_and_the_pool_goes_on(engine):
    env = envhive.make(ID, num_envs=2, seed=0, executor="native")
    env.reset()
    with pytest.raises(EnvWorkerError, match="reset options"):
        env.reset(options={"full_reset": True})
    obs, _ = env.reset(seed=1)
    assert obs.shape == (2, 4, 84, 84)
    env.close()


def test_call_reads_spaces_and_refuses_the_rest(engine):
    env = envhive.make(ID, num_envs=2, seed=0, executor="native")
    assert env.call("action_space") == (env.single_action_space,) * 2 or \
        list(env.call("action_space")) == [env.single_action_space] * 2
    with pytest.raises(ConfigError, match="worker"):
        env.call("ale")
    with pytest.raises(ConfigError):
        env.set_attr("x", [1, 2])
    env.close()


@pytest.mark.usefixtures("process_engine")
def test_a_dead_worker_raises_instead_of_hanging():
    env = envhive.make(ID, num_envs=2, seed=0, executor="native")
    env.reset()
    proc = engine_of(env)._procs[1]
    proc.kill()
    proc.join(5)
    with pytest.raises(WorkerDiedError) as err:
        env.step(np.zeros(2, np.int64))
    assert err.value.env_ids == [1]  # env i belongs to worker i % 2
    env.close()


def _shared_fds() -> dict[str, int]:
    """This process's descriptors of the engine's kinds: memfd blocks, eventfd semaphores."""
    kinds = {"memfd:envhive": 0, "anon_inode:[eventfd]": 0}
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        for kind in kinds:
            kinds[kind] += target.startswith(kind) or target.startswith("/" + kind)
    return kinds


@pytest.fixture(params=["fd", "named"])
def transport(request, monkeypatch):
    """The engine's two transports: a memfd block and eventfd semaphores (Linux), or the
    fallback elsewhere, a named segment and multiprocessing's semaphores."""
    from envhive.executors import _atari, _fdsync

    if request.param == "fd" and not _fdsync.fd_sharing():
        pytest.skip("no memfd_create/eventfd here")
    if request.param == "named":
        monkeypatch.setattr(_atari, "fd_sharing", lambda: False)
    return request.param


def block_freed(engine):
    """A check, after close, that the engine's block is gone: the named segment unlinked,
    or the memfd's descriptor closed in this process."""
    if engine._shm is not None:
        name = engine._shm.name
        return lambda: not os.path.exists(f"/dev/shm/{name}")
    return lambda: engine._block.fileno() == -1


@pytest.mark.usefixtures("process_engine")
def test_close_stops_the_workers_and_frees_shared_memory(transport):
    gc.collect()  # the arrays of earlier tests' pools, which hold their mappings
    before = _shared_fds()
    env = envhive.make(ID, num_envs=2, seed=0, executor="native")
    engine = engine_of(env)
    freed = block_freed(engine)
    procs = list(engine._procs)
    env.reset()
    env.step(np.zeros(2, np.int64))
    if transport == "fd":
        assert _shared_fds()["anon_inode:[eventfd]"] == before["anon_inode:[eventfd]"] + 4
    env.close()
    assert all(not p.is_alive() for p in procs)
    assert freed()
    assert _shared_fds()["anon_inode:[eventfd]"] == before["anon_inode:[eventfd]"]
    env.close()  # idempotent
    # The pool's buffers are the block's arrays: the block's memory (and, before Python
    # 3.13, the descriptor its mapping keeps) goes with them.
    del env, engine, freed
    gc.collect()
    assert _shared_fds() == before


@pytest.mark.usefixtures("process_engine")
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_the_workers_write_the_pools_result_buffers_and_close_frees_them_under_views(mode, transport):
    """The pool's result arrays are the shared block's (no copy per step); a close while the
    user still holds views of them (copy=False) unlinks the segment, and the views stay
    readable."""
    env = envhive.make(ID, num_envs=2, seed=0, executor="native", autoreset=mode, copy=False)
    engine, b = engine_of(env), env._pool.buffers
    shared = ["obs", "reward", "terminated", "truncated"] + (["final_obs"] if mode == "same_step" else [])
    assert sorted(engine._shared) == sorted([*shared, "actions", "ops"])
    assert all(getattr(b, name) is engine._v[name] for name in shared)
    # An async command's actions and ops are written by the pool into the block; seeds are
    # copied (a seed may not fit the block's column).
    assert b.actions is engine._v["actions"] and b.ops is engine._v["a_ops"] and engine._cmd_shared
    assert b.has_seed is not engine._v["has_seed"] and b.seeds is not engine._v["seeds"]
    env.reset()
    obs = env.step(np.zeros(2, np.int64))[0]  # a view (copy=False)
    want = obs.copy()
    freed = block_freed(engine)
    env.close()
    assert freed()
    np.testing.assert_array_equal(obs, want)


@pytest.mark.usefixtures("process_engine")
def test_a_dead_worker_raises_in_async_recv_too():
    env = envhive.make(ID, num_envs=4, seed=0, executor="native", batch_size=2)
    env.async_reset()
    env.recv()
    env.recv()
    proc = engine_of(env)._procs[0]
    proc.kill()
    proc.join(5)
    env.send(np.zeros(2, np.int64), np.array([0, 2]))  # both on worker 0, which is dead
    with pytest.raises(WorkerDiedError) as err:
        env.recv()
    assert err.value.env_ids == [0, 2]
    env.close()


def test_an_env_error_in_a_queued_command_is_that_envs_error_and_the_rest_go_on(engine):
    # The pool refuses bad actions before they reach the engine; write one past it, so the
    # worker's own check raises inside a queued command.
    from envhive._ops import STEP

    env = envhive.make(ID, num_envs=4, seed=0, executor="native", batch_size=4)
    env.reset(seed=0)
    engine = engine_of(env)
    b = engine._ob
    b.ops[:] = STEP
    b.actions[:] = [0, 99, 0, 0]
    engine.start(np.arange(4, dtype=np.int64), None)
    out = engine.collect(4)
    assert sorted(out.env_ids) == [0, 2, 3]
    assert list(out.errors) == [1]
    assert out.errors[1].cause_type == "ActionError" and "99" in str(out.errors[1])
    assert sorted(out.table_ids) == [0, 2, 3]  # their infos: rows of the engine's table
    infos, finals = out.info_table.as_dicts([0, 2, 3])
    assert all(infos[i]["elapsed_step"] == 1 for i in (0, 2, 3)) and not finals
    env.close()


_NO_HELPERS = """
import json, os, sys
import numpy as np
import envhive
from envhive.executors import NativeExecutor

def tree(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(k) for k in f.read().split()]
    except OSError:
        kids = []
    return [k for kid in kids for k in [kid, *tree(kid)]]

def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\\0", b" ").decode()

env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor=NativeExecutor(2), batch_size=2)
env.reset()
env.step(np.zeros(4, np.int64))
env.async_reset()
env.recv()
env.recv()
children = [cmdline(p) for p in tree(os.getpid())]
env.close()
print(json.dumps({"running": children, "after_close": [cmdline(p) for p in tree(os.getpid())],
                  "ale_py_here": "ale_py" in sys.modules}))
"""


@pytest.mark.usefixtures("process_engine")
def test_a_pool_starts_its_workers_and_no_other_process():
    """No resource tracker and no forkserver beside the two workers: nothing the engine
    shares has a name to clean up after a SIGKILL (a memfd block, eventfd semaphores), and
    the workers are spawned. Checked in a fresh interpreter (another test's process pool
    would have started both)."""
    import json
    import subprocess
    import sys

    from envhive.executors._fdsync import fd_sharing

    if not fd_sharing():
        pytest.skip("no memfd_create/eventfd here: the fallback keeps multiprocessing's tracker")
    src = os.path.join(os.path.dirname(envhive.__file__), os.pardir)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.abspath(src), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", _NO_HELPERS], capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.splitlines()[-1])
    assert len(report["running"]) == 2, report
    assert all("spawn_main" in c for c in report["running"]), report
    assert not any("resource_tracker" in c or "forkserver" in c for c in report["running"]), report
    assert report["after_close"] == []
    assert not report["ale_py_here"]  # the games' spaces came from the workers (~8 MB less)


@pytest.mark.usefixtures("process_engine")
@pytest.mark.parametrize("game, kwargs", [
    ("Pong", {}), ("Breakout", {"gray_scale": False, "stack_num": 2}),
    ("MsPacman", {"img_height": 64, "img_width": 48, "full_action_space": True}),
])
def test_the_workers_spaces_are_the_envs_own(game, kwargs):
    native = envhive.make(f"envhive/{game}-v5", num_envs=2, executor=NativeExecutor(2), env_kwargs=kwargs)
    serial = envhive.make(f"envhive/{game}-v5", num_envs=2, executor="serial", env_kwargs=kwargs)
    try:
        assert len(engine_of(native)._procs) == 2
        assert native.single_observation_space == serial.single_observation_space
        assert native.single_action_space == serial.single_action_space
        assert native.metadata == serial.metadata
        assert native.reset(seed=3)[0].shape == serial.reset(seed=3)[0].shape
    finally:
        native.close()
        serial.close()


@pytest.mark.usefixtures("process_engine")
def test_a_game_that_fails_to_build_in_the_workers_fails_make_and_leaves_nothing(transport):
    import multiprocessing

    before = set(multiprocessing.active_children())
    with pytest.raises(EnvWorkerError, match="factory raised RuntimeError") as err:
        envhive.make(ID, num_envs=4, executor=NativeExecutor(2), env_kwargs={"mode": 99})  # Pong has none
    assert err.value.env_id == 0
    assert set(multiprocessing.active_children()) <= before


_KILLED = """
import sys, time
import envhive
from envhive.executors import NativeExecutor

env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor=NativeExecutor(2))
env.reset()
print(" ".join(str(p.pid) for p in env._pool.executor._engine._procs), flush=True)
time.sleep(120)
"""


@pytest.mark.usefixtures("process_engine")
def test_workers_exit_when_their_parent_is_sigkilled():
    """The spawned workers notice a parent that died without closing them (their parent
    sentinel) and exit; nothing of theirs has a name to leave behind."""
    import signal
    import subprocess
    import sys
    import time

    src = os.path.join(os.path.dirname(envhive.__file__), os.pardir)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.abspath(src), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED], stdout=subprocess.PIPE, text=True, env=env)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert len(pids) == 2

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)


@pytest.mark.usefixtures("process_engine")
def test_an_env_error_inside_a_round_is_that_envs_error():
    """A round reads the workers' error pipes when one poll over them says a message is
    there: the env's message comes before the worker's completion."""
    from envhive._ops import STEP

    env = envhive.make(ID, num_envs=4, seed=0, executor="native")
    env.reset(seed=0)
    engine = engine_of(env)
    engine._v["actions"][:] = [0, 0, 99, 0]  # past the pool's check: the worker's env raises
    raised = engine._round(np.arange(4), STEP)
    assert list(raised) == [2] and "IndexError" in str(raised[2])
    engine._v["actions"][:] = 0
    assert engine._round(np.arange(4), STEP) == {}  # the next round reads nothing stale
    env.close()
