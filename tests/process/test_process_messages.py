"""Process executor: messages of any size, both ways, and values that cannot travel.

Commands and replies whose side data exceed a pipe's buffer (a few hundred KB) used to
deadlock: both sides wrote the pipe before posting the semaphore the other waited on. Here
every kind of message (step and reset infos, reset options, call results, set_attr values,
exception messages) goes from 1 byte to 16 MB.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import envhive
from envhive.executors import ProcessExecutor

pytestmark = pytest.mark.timeout(300)

SIZES = [1, 70_000, 1 << 20, 16 << 20]


class BigEnv(gym.Env):
    """Step infos carry ``payload_size`` bytes; reset echoes the size of ``options["blob"]``."""

    observation_space = spaces.Box(-1, 1, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self.payload_size = 0
        self.fail_size = 0
        self.lock = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        blob = (options or {}).get("blob", b"")
        return np.zeros(1, np.float32), {"blob_len": len(blob)}

    def step(self, action):
        if self.fail_size:
            raise ValueError("x" * self.fail_size)
        info = {"payload": b"p" * self.payload_size} if self.payload_size else {}
        if self.lock is not None:
            info["lock"] = self.lock
        return np.zeros(1, np.float32), 0.0, False, False, info

    def blob(self, size):
        return b"b" * size

    def hold_lock(self):
        self.lock = threading.Lock()


@pytest.fixture(scope="module")
def env():
    e = envhive.make(BigEnv, 4, executor=ProcessExecutor(2), autoreset="disabled")
    e.reset(seed=0)
    yield e
    e.close()


@pytest.mark.parametrize("size", SIZES)
def test_large_step_infos_come_back(env, size):
    env.set_attr("payload_size", size)
    _, _, _, _, info = env.step(np.zeros(4, np.int64))
    assert [len(p) for p in info["payload"]] == [size] * 4
    env.set_attr("payload_size", 0)


@pytest.mark.parametrize("size", SIZES)
def test_large_reset_options_reach_the_workers(env, size):
    _, info = env.reset(options={"blob": b"o" * size})
    assert info["blob_len"].tolist() == [size] * 4


@pytest.mark.parametrize("size", SIZES)
def test_large_call_results_and_set_attr_values(env, size):
    assert [len(b) for b in env.call("blob", size)] == [size] * 4
    env.set_attr("payload_size", [size, 0, 0, size])  # values travel in the CALL message
    env.set_attr("big", b"v" * size)
    assert [len(v) for v in env.get_attr("big")] == [size] * 4
    env.set_attr("payload_size", 0)


@pytest.mark.parametrize("size", [70_000, 16 << 20])
def test_large_exception_messages(env, size):
    env.set_attr("fail_size", [0, 0, size, 0])
    with pytest.raises(envhive.EnvWorkerError) as info:
        env.step(np.zeros(4, np.int64))
    assert info.value.env_id == 2 and len(str(info.value)) > size
    env.set_attr("fail_size", 0)
    env.reset()  # env 2 failed mid-step: it is reset, the pool goes on


def test_unpicklable_info_is_an_env_error_naming_the_key():
    with envhive.make(BigEnv, 4, executor=ProcessExecutor(2), autoreset="disabled") as env:
        env.reset(seed=0)
        env.pool.call("hold_lock", env_ids=[1])
        with pytest.raises(envhive.EnvWorkerError) as info:
            env.step(np.zeros(4, np.int64))
        assert info.value.env_id == 1
        assert "'lock'" in str(info.value) and "lock" in str(info.value).lower()
        env.pool.set_attr("lock", [None], env_ids=[1])
        env.reset()
        _, _, _, _, info2 = env.step(np.zeros(4, np.int64))  # usable again
        assert "lock" not in info2


def test_unpicklable_call_result_is_an_error_not_a_dead_worker():
    with envhive.make(BigEnv, 2, executor=ProcessExecutor(2)) as env:
        env.reset(seed=0)
        env.pool.call("hold_lock")
        with pytest.raises(envhive.EnvWorkerError, match="cannot be sent"):
            env.get_attr("lock")
        assert env.get_attr("payload_size") == (0, 0)  # the workers are alive


def test_unpicklable_reset_options_are_a_config_error():
    with envhive.make(BigEnv, 2, executor=ProcessExecutor(2)) as env:
        env.reset(seed=0)
        with pytest.raises(envhive.ConfigError, match="cannot be sent to a worker"):
            env.reset(options={"lock": threading.Lock()})


class SlowCallEnv(BigEnv):
    def slow(self, seconds):
        time.sleep(seconds)
        return seconds


@pytest.mark.parametrize("how", ["kill", "timeout"])
def test_call_whose_worker_fails_raises_and_the_pool_goes_on(how):
    ex = ProcessExecutor(2, on_worker_failure="restart", step_timeout=5.0 if how == "timeout" else None)
    with envhive.make(SlowCallEnv, 4, executor=ex) as env:
        env.reset(seed=0)
        victim = ex.worker_pids()[1]
        if how == "kill":
            killer = threading.Timer(0.3, os.kill, (victim, signal.SIGKILL))
            killer.start()
            expected = envhive.WorkerDiedError
        else:
            killer = None
            expected = envhive.StepTimeoutError
        # A call that finished instead (after 30 s) would raise nothing.
        with pytest.raises(expected, match="call/get_attr/set_attr"):
            env.pool.call("slow", (30.0,), env_ids=[2, 3])
        if killer is not None:
            killer.join()
        assert victim not in ex.worker_pids()
        assert env.call("slow", 0.0) == (0.0,) * 4  # the rebuilt worker answers
        _, _, _, trunc, info = env.step(np.zeros(4, np.int64))
        assert info["_worker_restarted"].tolist() == [False, False, True, True]
