"""An env that returns something wrong (a flag that is an array, a reward that is None, an
info that is not a dict, an observation of the wrong dtype, a step result that is not a
5-tuple, a reset that returns only the observation) gets an ``EnvWorkerError`` naming it and
the field, on every executor; the pool stays usable and a process worker stays alive (with
``on_worker_failure="restart"`` it is not silently rebuilt). What counts as valid is in
docs/semantics.md ("What an env may return") and ``envhive._results``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import envhive
import envhive._runner as runner_module
from envhive.executors import ProcessExecutor
from envhive.testing import CountingEnv

pytestmark = pytest.mark.timeout(300)

N = 2


class WrongReturn(CountingEnv):
    """Returns ``value`` as ``field`` from its second step of episode 0 (``field="reset"``:
    its second reset returns ``value``)."""

    def __init__(self, field: str, value, pattern=((100, "term"),)) -> None:
        super().__init__(pattern=pattern)
        self.field, self.value = field, value
        self.pid = os.getpid()

    def step(self, action):
        obs, reward, term, trunc, info = super().step(action)
        if self.episode == 0 and self.t == 2:
            if self.field == "result":
                return self.value
            parts = {"obs": obs, "reward": reward, "terminated": term, "truncated": trunc, "info": info}
            if self.field in parts:
                parts[self.field] = self.value
            return tuple(parts.values())
        return obs, reward, term, trunc, info

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        if self.episode == 1 and self.field == "reset":
            return self.value
        if self.episode == 1 and self.field == "reset info":
            return obs, self.value
        return obs, info


# (field, value, words the error must contain)
BAD_STEPS = [
    ("terminated", np.array([True, False]), ["terminated=", "shape (2,)", "expected a bool"]),
    ("truncated", np.array([1, 2]), ["truncated=", "shape (2,)", "expected a bool"]),
    ("terminated", np.array([True]), ["terminated=", "shape (1,)"]),
    ("terminated", None, ["terminated=None", "expected a bool"]),
    ("truncated", "yes", ["truncated='yes'", "expected a bool"]),
    ("terminated", 2, ["terminated=2", "expected a bool"]),
    ("truncated", 0.5, ["truncated=0.5"]),
    ("reward", None, ["reward=None", "expected a real number"]),
    ("reward", "1.5", ["reward='1.5'", "expected a real number"]),
    ("reward", np.array([1.0, 2.0]), ["reward=", "shape (2,)", "expected a real number"]),
    ("reward", 1 + 2j, ["reward=(1+2j)"]),
    ("info", [1, 2], ["info=[1, 2]", "expected a dict"]),
    ("info", None, ["info=None", "expected a dict"]),
    ("obs", np.zeros(4, np.float32), ["observation", "expected dtype int64", "got float32"]),
    ("result", (1, 2, 3), ["step() returned (1, 2, 3)", "expected a tuple (obs, reward"]),
    ("result", None, ["step() returned None", "expected a tuple (obs, reward"]),
]
# One case per field for the executors that cost more to start.
SOME_BAD_STEPS = [BAD_STEPS[k] for k in (0, 1, 7, 11, 13, 14)]


def _pool(executor, field, value, mode="next_step", pattern=((100, "term"),)):
    fns = [lambda: WrongReturn("nothing", None), lambda: WrongReturn(field, value, pattern=pattern)]
    return envhive.make(fns, executor=executor, seed=0, autoreset=mode)


def _check_refused_then_usable(env, field, words):
    env.reset()
    env.step(np.ones(N, np.int64))
    with pytest.raises(envhive.EnvWorkerError) as info:
        env.step(np.ones(N, np.int64))
    err = info.value
    assert type(err) is envhive.EnvWorkerError, f"expected the env's error, got {type(err).__name__}"
    assert err.env_id == 1
    for word in ["env 1", *words]:
        assert word in str(err), f"{word!r} missing from {str(err)!r}"
    # The pool is still usable: env 1 needs a reset, env 0 went on stepping.
    with pytest.raises(envhive.ResetNeededError):
        env.step(np.ones(N, np.int64))
    obs, _ = env.reset(options={"reset_mask": np.array([False, True])})
    obs = env.step(np.ones(N, np.int64))[0]
    assert obs[:, 2].tolist() == [3, 1]


@pytest.mark.parametrize("field, value, words", BAD_STEPS, ids=lambda x: repr(x)[:30])
def test_bad_step_result_is_the_envs_error_serial(field, value, words):
    with _pool("serial", field, value) as env:
        _check_refused_then_usable(env, field, words)


@pytest.mark.parametrize("field, value, words", BAD_STEPS, ids=lambda x: repr(x)[:30])
def test_bad_step_result_without_the_compiled_loop(monkeypatch, field, value, words):
    """The Python loop and numpy writes (no C extension) check the same things."""
    monkeypatch.setattr(runner_module, "_step_rows", None)
    monkeypatch.setattr(runner_module, "_write_obs_rows", None)
    with _pool("serial", field, value) as env:
        _check_refused_then_usable(env, field, words)


@pytest.mark.parametrize("executor", ["thread", "process"])
@pytest.mark.parametrize("field, value, words", SOME_BAD_STEPS, ids=lambda x: repr(x)[:30])
def test_bad_step_result_is_the_envs_error(executor, field, value, words):
    with _pool(executor, field, value) as env:
        _check_refused_then_usable(env, field, words)


@pytest.mark.parametrize("field, value, words", SOME_BAD_STEPS, ids=lambda x: repr(x)[:30])
def test_bad_step_result_does_not_restart_the_worker(field, value, words):
    """With on_worker_failure="restart" a bad return used to kill the worker, which was then
    silently rebuilt (the env's bug showing only as truncated episodes)."""
    with _pool(ProcessExecutor(2, on_worker_failure="restart"), field, value) as env:
        pids = env.get_attr("pid")
        _check_refused_then_usable(env, field, words)
        assert env.get_attr("pid") == pids


@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_bad_flag_at_an_episode_end(executor, mode):
    """The flag is read to decide a same_step reset: an array there is the env's error too."""
    with _pool(executor, "terminated", np.array([True]), mode, pattern=((2, "term"),)) as env:
        _check_refused_then_usable(env, "terminated", ["terminated=", "shape (1,)"])


@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
@pytest.mark.parametrize("field, value, words", [
    ("reset", np.zeros(4, np.int64), ["reset() returned ndarray", "expected a tuple (obs, info)"]),
    ("reset", np.zeros((2, 4), np.int64), ["reset() returned ndarray", "shape (2, 4)"]),
    ("reset info", [], ["reset() returned info=[]", "expected a dict"]),
], ids=lambda x: repr(x)[:30])
def test_bad_reset_result_is_the_envs_error(executor, field, value, words):
    """A reset that returns only the observation (the old gym API) is refused, even when the
    observation has two rows and would unpack into (obs, info)."""
    with _pool(executor, field, value) as env:
        env.reset()
        with pytest.raises(envhive.EnvWorkerError) as info:
            env.reset(options={"reset_mask": np.array([False, True])})
        assert info.value.env_id == 1 and type(info.value) is envhive.EnvWorkerError
        for word in ["env 1", *words]:
            assert word in str(info.value), f"{word!r} missing from {str(info.value)!r}"
        with pytest.raises(envhive.ResetNeededError):
            env.step(np.ones(N, np.int64))
        env.reset(options={"reset_mask": np.array([False, True])})  # its next reset is fine
        assert env.step(np.ones(N, np.int64))[0][:, 2].tolist() == [1, 1]


class Flags(CountingEnv):
    """Ends its episode at t == 2 with flags (and reward) of the types gymnasium accepts."""

    def __init__(self, flag, reward) -> None:
        super().__init__(pattern=[(100, "term")])
        self.flag, self.reward = flag, reward

    def step(self, action):
        obs, _, _, trunc, info = super().step(action)
        ended = self.t == 2
        return obs, self.reward, self.flag(ended), trunc, info


@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
@pytest.mark.parametrize("flag, reward", [
    (np.bool_, np.float32(0.5)),
    (int, 1),
    (lambda ended: np.array(ended), np.array(0.5)),
    (lambda ended: np.int8(ended), True),
], ids=["numpy-bool", "int-0-1", "0-d-arrays", "numpy-int-bool-reward"])
def test_valid_flags_and_rewards_are_accepted(executor, flag, reward):
    with envhive.make([lambda: Flags(flag, reward)] * N, executor=executor, seed=0) as env:
        env.reset()
        _, rew, term, _, _ = env.step(np.ones(N, np.int64))
        assert term.tolist() == [False, False] and rew.tolist() == [float(reward)] * N
        _, rew, term, _, _ = env.step(np.ones(N, np.int64))
        assert term.tolist() == [True, True] and rew.tolist() == [float(reward)] * N
