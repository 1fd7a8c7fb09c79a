"""The threaded core's C entry (``envhive/batch_api.h``), driven through ctypes on the counter:
a foreign caller (e.g. a JAX FFI handler) runs ops on the bound buffers with no Python in the
loop (ctypes releases the GIL around each call), and gets what the Python methods give."""

from __future__ import annotations

import numpy as np
import pytest

import envhive
from envhive._ops import RESET, STEP_RESET
from envhive.executors import NativeExecutor
from tests.capi import api_of, ptr

counter = pytest.importorskip("envhive.testing.counter")
if counter._engine._counter is None:
    pytest.skip("the counter's C++ module is not built (no C++ compiler)", allow_module_level=True)

pytestmark = pytest.mark.timeout(120)

def test_run_start_and_collect_through_the_c_entry_equal_the_reference():
    n = 4
    env = envhive.make("envhive/Counter-v0", num_envs=n, executor=NativeExecutor(2),
                       env_kwargs={"size": 6, "limit": 7}, autoreset="same_step")
    ref = envhive.make("envhive/Counter-v0", num_envs=n, executor="serial",
                       env_kwargs={"size": 6, "limit": 7}, autoreset="same_step")
    engine = env._pool.executor._engine
    capsule = engine.c_api()
    api = api_of(capsule)
    assert api.num_envs == n
    b = env._pool.buffers
    ids, out = np.arange(n, dtype=np.int64), np.zeros(n, np.int64)
    # Seeded resets: the seeds go to the game's column as the Python side hands them over.
    want, _ = ref.reset(seed=[5, 6, 7, 8])
    b.ops[:] = RESET
    for i in range(n):
        engine._reseed_env(i, 5 + i)
    assert api.run(api.handle, ptr(ids), n, ptr(out)) == n
    assert sorted(out.tolist()) == ids.tolist()
    np.testing.assert_array_equal(b.obs, want)
    for t in range(30):
        a = np.array([(t + i) % 3 for i in range(n)], np.int64)
        obs, reward, term, trunc, info = ref.step(a)
        b.ops[:], b.actions[:] = STEP_RESET, a
        if t % 2:  # sync
            assert api.run(api.handle, ptr(ids), n, ptr(out)) == n
        else:  # async: start, then collect every env
            assert api.start(api.handle, ptr(ids), n) == 0
            got = 0
            while got < n:
                k = api.collect(api.handle, n - got, ptr(out[got:]))
                assert k > 0
                got += k
            assert sorted(out.tolist()) == ids.tolist()
        np.testing.assert_array_equal(b.obs, obs)
        np.testing.assert_array_equal(b.reward, reward)
        np.testing.assert_array_equal(b.terminated, term)
        np.testing.assert_array_equal(b.truncated, trunc)
        ended = term | trunc
        if ended.any():
            np.testing.assert_array_equal(b.final_obs[ended], np.stack(info["final_obs"][ended]))
    env.close()
    ref.close()
    # The capsule keeps the object alive, not open: calls after close fail with the reason.
    assert api.run(api.handle, ptr(ids), n, ptr(out)) == -1
    assert b"closed" in api.last_error(api.handle)
    del capsule


def test_errors_come_back_as_minus_one_with_the_reason():
    env = envhive.make("envhive/Counter-v0", num_envs=2, executor=NativeExecutor(1))
    engine = env._pool.executor._engine
    capsule = engine.c_api()  # the struct lives as long as the capsule
    api = api_of(capsule)
    b = env._pool.buffers
    env.reset(seed=0)
    bad = np.array([0, 5], np.int64)
    out = np.zeros(2, np.int64)
    assert api.run(api.handle, ptr(bad), 2, ptr(out)) == -1
    assert b"out of range" in api.last_error(api.handle)
    b.ops[:], b.actions[:] = STEP_RESET, [1, 9]  # env 1: an action the game refuses
    assert api.run(api.handle, ptr(np.arange(2, dtype=np.int64)), 2, ptr(out)) == 2
    assert b"outside Discrete(3)" in api.env_error(api.handle, 1) and api.env_error(api.handle, 0) == b""
    env.close()
    del capsule
