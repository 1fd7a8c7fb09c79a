"""The kernels' C entry (``kernels/_centry.py``): an ``envhive_batch_api`` whose ``run`` is the
family's compiled op loop, driven through ctypes (which releases the GIL around each call)
against the same pool stepped eagerly."""

from __future__ import annotations

import numpy as np
import pytest

import envhive
from envhive._ops import STEP, STEP_RESET
from tests.capi import api_of, ptr

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("env_id", ["envhive/CartPole-v1", "envhive/Pendulum-v1"])
def test_run_through_the_c_entry_equals_eager_steps(env_id):
    n = 4
    env = envhive.make(env_id, num_envs=n, autoreset="same_step", seed=0, max_episode_steps=20)
    ref = envhive.make(env_id, num_envs=n, autoreset="same_step", seed=0, max_episode_steps=20)
    env.reset(), ref.reset()
    entry = env.pool.executor._engine.c_entry()
    api = api_of(entry.capsule)
    assert api.num_envs == n and not (api.start or api.collect)  # run only: ops finish inside it
    b = env.pool.buffers
    ids, out = np.arange(n, dtype=np.int64), np.zeros(n, np.int64)
    rng = np.random.default_rng(0)
    for t in range(60):
        a = rng.integers(0, 2, n) if "CartPole" in env_id else rng.uniform(-2, 2, (n, 1)).astype(np.float32)
        obs, reward, term, trunc, _ = ref.step(a)
        b.ops[:], b.actions[...] = STEP_RESET, a
        assert api.run(api.handle, ptr(ids), n, ptr(out)) == n
        np.testing.assert_array_equal(out, ids)
        np.testing.assert_array_equal(b.obs, obs, err_msg=f"step {t}")
        np.testing.assert_array_equal(b.reward, reward)
        np.testing.assert_array_equal(b.terminated | b.truncated, term | trunc)
    assert ref.env_steps == 60 * n
    env.close()
    ref.close()


def test_run_asks_for_python_before_a_reset_without_draws():
    env = envhive.make("envhive/CartPole-v1", num_envs=2, seed=0)
    env.reset()
    engine = env.pool.executor._engine
    entry = engine.c_entry()
    api = api_of(entry.capsule)
    engine.kernel.noise_pos[1] = engine.kernel.stock  # env 1's stock used up
    b = env.pool.buffers
    ids, out = np.arange(2, dtype=np.int64), np.zeros(2, np.int64)
    b.ops[:] = [STEP, STEP_RESET]  # env 1 may reset: nothing runs
    before = b.obs.copy()
    assert api.run(api.handle, ptr(ids), 2, ptr(out)) == -2
    np.testing.assert_array_equal(b.obs, before)
    entry.prepare(ids)  # what the caller does then: Python draws
    assert api.run(api.handle, ptr(ids), 2, ptr(out)) == 2
    env.close()
