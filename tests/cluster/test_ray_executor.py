"""The ray executor's own behaviour: faults, restarts, timeouts, cleanup, options, and a pool
spread over a two-node cluster (``ray.cluster_utils.Cluster`` on this machine).

Every pool semantic (autoreset modes, seeds, calls, errors, interrupts) is checked by the
executor suites, which include ray; this file covers what only a cluster executor has.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import envhive
from envhive.testing import CountingEnv, assert_same_transcript, transcript

ray = pytest.importorskip("ray")
from envhive.executors import RayExecutor  # noqa: E402
from tests.bounded import LONG, FileGate, Watchdog, wait_until  # noqa: E402

pytestmark = pytest.mark.timeout(300)


class FlakyEnv(CountingEnv):
    """Hangs in step() at step ``fail_at`` of env tag ``bad``."""

    def __init__(self, tag: int, bad: int = -1, fail_at: int = 3):
        super().__init__(pattern=[(50, "trunc")], tag=tag)
        self.bad, self.fail_at = bad, fail_at

    def step(self, action):
        if self.tag == self.bad and self.t + 1 == self.fail_at:
            time.sleep(3600)
        return super().step(action)


def factories(n: int, **kw):
    return [lambda i=i: FlakyEnv(i, **kw) for i in range(n)]


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def gone(pid: int) -> bool:
    """The process has died (reaped, or a zombie its parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_killed_actor_is_a_worker_died_error_and_the_executor_shuts_down():
    ex = RayExecutor(2)
    env = envhive.make(factories(4), executor=ex)
    env.reset(seed=0)
    kill(ex.actor_locations()[1][1])
    with pytest.raises(envhive.WorkerDiedError) as info:
        env.step(np.zeros(4, np.int64))
    assert info.value.env_ids == [2, 3] and "on_worker_failure='restart'" in str(info.value)
    with pytest.raises(envhive.ClosedError):
        env.step(np.zeros(4, np.int64))
    env.close()


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_restart_rebuilds_the_actor_and_reports_lost_episodes_truncated(mode):
    ex = RayExecutor(2, on_worker_failure="restart")
    env = envhive.make(factories(4), executor=ex, autoreset=mode)
    env.reset(seed=0)
    for _ in range(3):
        env.step(np.ones(4, np.int64))
    old = ex.actor_locations()
    kill(old[0][1])
    obs, rew, term, trunc, info = env.step(np.ones(4, np.int64))
    assert trunc.tolist() == [True, True, False, False] and not term.any()
    assert info["_worker_restarted"].tolist() == [True, True, False, False]
    assert rew[:2].tolist() == [0.0, 0.0] and obs[2:, 2].tolist() == [4, 4]
    assert obs[:2, 1:].tolist() == [[0, 0, -1], [0, 0, -1]]  # fresh envs: episode 0, step 0
    if mode == "same_step":
        assert info["final_info"]["worker_restarted"].tolist()[:2] == [True, True]
    new = ex.actor_locations()
    assert new[0][1] != old[0][1] and new[1] == old[1]
    for _ in range(3):
        obs, rew, term, trunc, info = env.step(np.ones(4, np.int64))
    assert obs[2:, 2].tolist() == [7, 7] and "worker_restarted" not in info
    env.close()


def test_a_call_whose_actor_dies_raises_and_the_pool_goes_on():
    ex = RayExecutor(2, on_worker_failure="restart")
    env = envhive.make(factories(4), executor=ex)
    env.reset(seed=0)
    victim = ex.actor_locations()[1][1]
    kill(victim)
    assert wait_until(lambda: gone(victim))  # dead before the call, which then finds it
    with pytest.raises(envhive.WorkerDiedError, match="rebuilt"):
        env.call("render")
    assert env.get_attr("tag") == (0, 1, 2, 3)  # the rebuilt actor answers
    obs, _ = env.reset(seed=0)
    assert obs[:, 0].tolist() == [0, 1, 2, 3]
    env.close()


def test_a_hung_actor_hits_step_timeout():
    ex = RayExecutor(2, step_timeout=5.0)  # far above a healthy step, even under load
    env = envhive.make(factories(4, bad=3, fail_at=2), executor=ex)
    env.reset(seed=0)
    env.step(np.zeros(4, np.int64))
    with pytest.raises(envhive.StepTimeoutError) as info:
        env.step(np.zeros(4, np.int64))
    assert "step_timeout=5.0" in str(info.value) and info.value.env_ids == [2, 3]
    env.close()


def test_restart_after_a_timeout_rebuilds_the_hung_actor():
    ex = RayExecutor(2, step_timeout=5.0, on_worker_failure="restart")
    env = envhive.make(factories(4, bad=3, fail_at=2), executor=ex)
    env.reset(seed=0)
    env.step(np.zeros(4, np.int64))
    obs, _, _, trunc, info = env.step(np.zeros(4, np.int64))
    assert trunc.tolist() == [False, False, True, True]
    assert info["_worker_restarted"].tolist() == [False, False, True, True]
    env.close()


def _dead(handle) -> bool:
    try:
        ray.get(handle.ping.remote(), timeout=10)
    except ray.exceptions.RayActorError:
        return True
    return False


def test_close_kills_the_actors_and_frees_the_placement_group():
    ex = RayExecutor(2, placement_strategy="PACK", num_cpus=0.5)
    env = envhive.make(factories(4), executor=ex)
    env.reset(seed=0)
    handles = ex.actor_handles()
    groups = ray.util.placement_group_table()
    mine = [g for g, v in groups.items() if v["state"] == "CREATED"]
    assert len(mine) == 1 and ray.available_resources().get("CPU", 0) <= 1.0
    env.close()
    assert all(_dead(h) for h in handles)
    assert ray.util.placement_group_table()[mine[0]]["state"] == "REMOVED"
    assert wait_until(lambda: ray.available_resources().get("CPU") == ray.cluster_resources()["CPU"]), \
        ray.available_resources()
    env.close()  # idempotent


def test_a_dropped_pool_kills_its_actors():
    ex = RayExecutor(1)
    env = envhive.make(factories(2), executor=ex)
    handles = ex.actor_handles()
    del env, ex
    import gc

    gc.collect()
    assert all(_dead(h) for h in handles)


def test_options_shape_the_actors():
    ex = RayExecutor(envs_per_actor=3)
    env = envhive.make(factories(7), executor=ex, seed=0)
    assert "ray, 3 actors" in repr(env)
    assert [hi - lo for lo, hi in ex._map.bounds] == [3, 2, 2]
    env.reset()
    env.close()
    for bad in (dict(num_actors=2, envs_per_actor=2), dict(placement_strategy="RANDOM"),
                dict(on_worker_failure="ignore"), dict(num_actors=0), dict(num_cpus=-1),
                dict(resources={"sim": "one"}), dict(placement_strategy="PACK", num_cpus=0)):
        with pytest.raises(envhive.ConfigError):
            RayExecutor(**bad)


def test_a_factory_that_raises_in_the_actor_is_an_env_error_with_its_traceback():
    def bad():
        raise ValueError("no simulator here")

    with pytest.raises(envhive.EnvWorkerError, match="no simulator here") as info:
        envhive.make([bad, bad], executor="ray")
    assert "ValueError" in info.value.worker_traceback


def test_envhive_imports_and_runs_without_ray():
    code = textwrap.dedent("""
        import sys
        sys.modules["ray"] = None  # ray not installed
        import envhive
        from envhive.executors import available_executors
        assert "ray" not in available_executors(), available_executors()
        try:
            envhive.make("CartPole-v1", 2, executor="ray")
        except envhive.ConfigError as err:
            assert "not available" in str(err), err
        else:
            raise AssertionError("no error")
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_pool_across_two_nodes_matches_serial_and_survives_losing_a_node():
    """Two simulated nodes: the actors spread over both (STRICT_SPREAD), results are the
    serial executor's, and killing every actor of one node is handled as specified."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()  # this session's local instance; the next Ray pool starts it again
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        fns = [lambda i=i: CountingEnv(pattern=[(5, "term"), (3, "trunc")], tag=i) for i in range(6)]
        ex = RayExecutor(2, placement_strategy="STRICT_SPREAD", num_cpus=1, on_worker_failure="restart")
        env = envhive.make(fns, executor=ex, seed=3)
        ref = envhive.make(fns, executor="serial", seed=3)
        nodes = [node for node, _ in ex.actor_locations()]
        assert len(set(nodes)) == 2  # one actor per node
        for got, want in zip(env.reset(), ref.reset()):
            np.testing.assert_equal(got, want)
        rng = np.random.default_rng(0)
        for _ in range(12):
            actions = rng.integers(0, 2, 6)
            for got, want in zip(env.step(actions), ref.step(actions)):
                np.testing.assert_equal(got, want)
        # Every actor of the second node dies (as when the node is lost): its envs are
        # rebuilt on a replacement actor and their episodes end truncated.
        for node, pid in ex.actor_locations():
            if node == nodes[1]:
                kill(pid)
        _, _, _, trunc, info = env.step(np.zeros(6, np.int64))
        assert info["_worker_restarted"].tolist() == [False] * 3 + [True] * 3
        assert trunc[3:].all()
        env.close()
        ref.close()
        ex2 = RayExecutor(2)  # and in raise mode, a WorkerDiedError
        env = envhive.make(fns, executor=ex2)
        env.reset()
        kill(ex2.actor_locations()[1][1])
        with pytest.raises(envhive.WorkerDiedError):
            env.step(np.zeros(6, np.int64))
        env.close()
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.parametrize("space", ["text", "dict", "image"])
def test_object_and_nested_observations_cross_as_on_serial(space):
    """Object-typed leaves (text) travel in the typed reply, numeric ones as arrays; final
    observations only for envs that ended: the transcript is the serial executor's."""
    from envhive.testing import SPACE_ZOO, ZooEnv, assert_same_transcript, transcript

    fns = [lambda: ZooEnv(SPACE_ZOO[space], SPACE_ZOO["discrete"])] * 5
    got, want = (
        transcript(envhive.make(fns, executor=ex, autoreset="same_step", seed=1), 15,
                   lambda t: np.full(5, t % 2), seed=1)
        for ex in (RayExecutor(2), "serial")
    )
    assert_same_transcript(want, got)


# ---------------------------------------------------------------------------- Ctrl-C
class GatedEnv(CountingEnv):
    """With ``gates = (inside, go)``: each step opens ``inside`` (an env is running it), then
    waits until the test opens ``go``; so a SIGINT sent once ``inside`` is open lands while
    the caller waits for the actors, whatever the machine's load."""

    def __init__(self, tag: int, gates: tuple[FileGate, FileGate]) -> None:
        super().__init__(pattern=[(10**6, "trunc")], tag=tag)
        self.gates = gates

    def step(self, action):
        self.gated()
        return super().step(action)

    def gated(self) -> int:
        inside, go = self.gates
        inside.open()
        assert go.wait(), "the test never opened the gate"
        return self.tag



@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt, even in a run that inherited it ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _sigint_once_inside(inside: FileGate) -> threading.Thread:
    """A thread that sends this process a SIGINT as soon as an env is inside its step."""
    def send() -> None:
        if inside.wait():
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.usefixtures("ctrl_c_raises")
@pytest.mark.parametrize("call", ["step", "recv", "call"])
def test_ctrl_c_while_waiting_on_the_actors(call, gates):
    """A real SIGINT while ``step`` (an async ``recv``, a ``call``) waits on the actors: the call
    raises KeyboardInterrupt (within a generous bound: no hang), nothing is left in flight,
    and once the envs can finish, the pool's next reset and steps equal a fresh serial
    pool's (the interrupted step's results were dropped)."""
    inside, go = gates
    fns = [functools.partial(GatedEnv, i, gates) for i in range(4)]
    env = envhive.make(fns, executor=RayExecutor(2), batch_size=None if call == "step" else 2)
    ref = envhive.make([functools.partial(CountingEnv, pattern=[(10**6, "trunc")], tag=i) for i in range(4)],
                       executor="serial")
    try:
        go.open()
        env.reset(seed=0)
        env.step(np.zeros(4, np.int64))
        go.remove()  # the next step waits
        inside.remove()
        sender = _sigint_once_inside(inside)
        with Watchdog(LONG, f"a Ctrl-C in the ray executor's {call}"):
            with pytest.raises(KeyboardInterrupt):
                if call == "step":
                    env.step(np.zeros(4, np.int64))
                elif call == "call":
                    env.call("gated")
                else:
                    env.send(np.zeros(4, np.int64), np.arange(4))
                    env.recv()
        sender.join()
        assert env.pool.pending == 0
        go.open()  # the interrupted envs finish their step; its results are dropped
        ref.reset(seed=0)
        for _ in range(1 if call == "call" else 2):  # what the ray pool's envs did
            ref.step(np.zeros(4, np.int64))
        with Watchdog(LONG, "the ray pool after a Ctrl-C"):
            assert_same_transcript(transcript(env, 3, lambda t: np.full(4, t % 2), seed=5),
                                   transcript(ref, 3, lambda t: np.full(4, t % 2), seed=5))
            assert env.call("gated") == (0, 1, 2, 3)  # calls get their own replies
            if call == "recv":
                env.async_reset(seed=0)
                got = sorted(int(i) for _ in range(2) for i in env.recv()[4]["env_id"])
                assert got == [0, 1, 2, 3]
    finally:
        env.close()
        ref.close()
