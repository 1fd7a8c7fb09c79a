"""The native Atari engine's own paths: bad actions, refused reset options and calls, an env's
error inside a queued op. The engine's threads, fork and fallback are in test_atari_threads.py."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

import envhive  # noqa: E402
from envhive.errors import ActionError, ConfigError, EnvWorkerError  # noqa: E402

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


def test_an_env_error_in_a_queued_command_is_that_envs_error_and_the_rest_go_on():
    # The pool refuses bad actions before they reach the engine; write one past it, so the
    # game's own check refuses it inside a queued op.
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
