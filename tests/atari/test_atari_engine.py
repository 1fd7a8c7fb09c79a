"""The native Atari engine's own paths: bad actions, refused reset options and calls, a dead
worker (an error, never a hang), and clean shutdown."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

import envhive  # noqa: E402
from envhive.errors import ActionError, ConfigError, EnvWorkerError, WorkerDiedError  # noqa: E402

ID = "envhive/Pong-v5"


def engine_of(env):
    return env._pool.executor._engine


def test_bad_action_steps_nothing():
    env = envhive.make(ID, num_envs=2, seed=0, executor="native")
    env.reset()
    before = env.step(np.zeros(2, np.int64))[4]["elapsed_step"].copy()
    with pytest.raises(ActionError):
        env.step(np.array([0, 6]))
    after = env.step(np.zeros(2, np.int64))[4]["elapsed_step"]
    np.testing.assert_array_equal(after, before + 1)  # the refused step ran nowhere
    env.close()


def test_reset_options_are_refused_per_env_and_the_pool_goes_on():
    env = envhive.make(ID, num_envs=2, seed=0, executor="native")
    env.reset()
    with pytest.raises(EnvWorkerError, match="reset options"):
        env.reset(options={"full_reset": True})
    obs, _ = env.reset(seed=1)
    assert obs.shape == (2, 4, 84, 84)
    env.close()


def test_call_reads_spaces_and_refuses_the_rest():
    env = envhive.make(ID, num_envs=2, seed=0, executor="native")
    assert env.call("action_space") == (env.single_action_space,) * 2 or \
        list(env.call("action_space")) == [env.single_action_space] * 2
    with pytest.raises(ConfigError, match="worker"):
        env.call("ale")
    with pytest.raises(ConfigError):
        env.set_attr("x", [1, 2])
    env.close()


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


def test_close_stops_the_workers_and_frees_shared_memory():
    env = envhive.make(ID, num_envs=2, seed=0, executor="native")
    engine = engine_of(env)
    name = engine._shm.name
    procs = list(engine._procs)
    env.close()
    assert all(not p.is_alive() for p in procs)
    assert not os.path.exists(f"/dev/shm/{name}")
    env.close()  # idempotent


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_the_workers_write_the_pools_result_buffers_and_close_frees_them_under_views(mode):
    """The pool's result arrays are the shared block's (no copy per step); a close while the
    user still holds views of them (copy=False) unlinks the segment, and the views stay
    readable."""
    env = envhive.make(ID, num_envs=2, seed=0, executor="native", autoreset=mode, copy=False)
    engine, b = engine_of(env), env._pool.buffers
    shared = ["obs", "reward", "terminated", "truncated"] + (["final_obs"] if mode == "same_step" else [])
    assert sorted(engine._shared) == sorted(shared)
    assert all(getattr(b, name) is engine._v[name] for name in shared)
    assert b.actions is not engine._v["actions"] and b.has_seed is not engine._v["has_seed"]
    env.reset()
    obs = env.step(np.zeros(2, np.int64))[0]  # a view (copy=False)
    want = obs.copy()
    name = engine._shm.name
    env.close()
    assert not os.path.exists(f"/dev/shm/{name}")
    np.testing.assert_array_equal(obs, want)


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


def test_an_env_error_in_a_queued_command_is_that_envs_error_and_the_rest_go_on():
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
