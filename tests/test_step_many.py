"""EnvRunner steps a slice through ``Cls.step_many`` when the env class offers it.

The results must be those of per-env ``step`` calls on every executor, in every autoreset mode,
and an exception in one env's entry is that env's error (the others' transitions stand).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import envhive
from envhive.executors import available_executors
from envhive.testing import CountingEnv, assert_same_transcript, transcript

CALLS: list[int] = []


def envhive_space(n: int) -> Any:
    import gymnasium as gym

    return gym.spaces.Discrete(n)


class BatchedCountingEnv(CountingEnv):
    """CountingEnv with a ``step_many`` that just loops (records its batch sizes)."""

    @classmethod
    def step_many(cls, envs: list[Any], actions: list[Any]) -> list[Any]:
        CALLS.append(len(envs))
        out: list[Any] = []
        for env, a in zip(envs, actions):
            try:
                out.append(env.step(a))
            except Exception as err:
                out.append(err)
        return out


def factory(batched: bool):
    cls = BatchedCountingEnv if batched else CountingEnv
    return lambda: cls(pattern=[(3, "term"), (5, "trunc")])


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
@pytest.mark.parametrize("executor", available_executors())
def test_step_many_matches_per_env_steps(executor: str, mode: str) -> None:
    rng = np.random.default_rng(0)
    acts = [rng.integers(0, 3, 6) for _ in range(30)]
    CALLS.clear()
    with envhive.make(factory(True), 6, executor=executor, autoreset=mode) as env:
        got = transcript(env, 30, lambda t: acts[t], seed=1)
    with envhive.make(factory(False), 6, executor="serial", autoreset=mode) as ref:
        want = transcript(ref, 30, lambda t: acts[t], seed=1)
    assert_same_transcript(got, want)
    if executor == "serial":
        assert CALLS and max(CALLS) == 6  # the whole slice went through step_many


def test_an_error_entry_is_that_envs_error() -> None:
    with envhive.make(factory(True), 4, executor="serial") as env:
        env.reset(seed=0)
        env.set_attr("action_space", [envhive_space(3), envhive_space(3), envhive_space(1), envhive_space(3)])  # env 2 now refuses action 2
        with pytest.raises(envhive.EnvWorkerError, match="ValueError") as err:
            env.step(np.array([2, 2, 2, 2]))
        assert err.value.env_id == 2
        obs, *_ = env.reset()
        assert obs.shape[0] == 4
