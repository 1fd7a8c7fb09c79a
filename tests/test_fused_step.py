"""The fused sync step (``Pool._step_fused``) against the general one, and what it relies on.

A batch of actions that is one numpy array takes the fused path on executors with
``run_all``; anything else (here: the same actions as a Python list) takes the general path.
Both must give the same transitions, infos and errors, in every autoreset mode, and the
runner's count of ended envs (``Completion.ended``) must match the flags it wrote.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import envhive
from envhive._pool import Pool
from envhive._report import Completion
from envhive._runner import EnvRunner, build_envs, compiled_runner
from envhive.errors import EnvWorkerError
from envhive.executors import ProcessExecutor, SerialExecutor, ThreadExecutor
from envhive.testing import CountingEnv

EXECUTORS = {
    "serial": SerialExecutor,
    "thread1": lambda: ThreadExecutor(1),
    "thread2": lambda: ThreadExecutor(2),
    "process": lambda: ProcessExecutor(2),
}
PATTERNS = [[(2, "term"), (3, "trunc")], [(1, "trunc")], [(4, "term")], [(3, "term"), (1, "term")]]


class FailingEnv(CountingEnv):
    """A CountingEnv whose ``step`` raises at its ``fail_at``-th call."""

    def __init__(self, tag: int, fail_at: int) -> None:
        super().__init__(pattern=PATTERNS[tag % len(PATTERNS)], tag=tag)
        self.calls, self.fail_at = 0, fail_at

    def step(self, action):
        self.calls += 1
        if self.calls == self.fail_at:
            raise ValueError(f"boom at call {self.calls}")
        return super().step(action)


def _make(executor: str, mode: AutoresetMode, fail_at: int = 0) -> envhive.VectorEnv:
    fns = [functools.partial(FailingEnv, i, fail_at) for i in range(5)]
    return envhive.make(fns, executor=EXECUTORS[executor](), autoreset=mode, seed=1)


def _rollout(env: envhive.VectorEnv, as_list: bool, steps: int = 14) -> list:
    out: list = [env.reset(seed=3)]
    for t in range(steps):
        actions = (np.arange(5) + t) % 3
        try:
            out.append(env.step(actions.tolist() if as_list else actions))
            ended = out[-1][2] | out[-1][3]
            if env.pool.autoreset is AutoresetMode.DISABLED and ended.any():
                out.append(env.reset(options={"reset_mask": ended}))  # disabled: partial reset
        except EnvWorkerError as err:
            out.append(("error", err.env_id, err.cause_type))
            out.append(env.reset(seed=t))
    return out


def _same(a, b) -> None:
    if isinstance(a, dict):
        assert sorted(a) == sorted(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, np.ndarray) and a.dtype == object:
        assert b.dtype == object and a.shape == b.shape
        for x, y in zip(a.tolist(), b.tolist()):
            _same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.value)
@pytest.mark.parametrize("executor", list(EXECUTORS))
@pytest.mark.parametrize("fail_at", [0, 6], ids=["clean", "env-raises"])
def test_the_fused_step_equals_the_general_one(monkeypatch, executor, mode, fail_at):
    calls = []
    fused = Pool._step_fused
    monkeypatch.setattr(Pool, "_step_fused", lambda self, a: calls.append(1) or fused(self, a))
    with _make(executor, mode, fail_at) as env:
        general = _rollout(env, as_list=True)
    assert not calls  # lists take the general path
    with _make(executor, mode, fail_at) as env:
        got = _rollout(env, as_list=False)
    assert len(calls) == 14  # arrays take the fused path, every step
    _same(got, general)
    if fail_at:
        errors = [x for x in got if isinstance(x[0], str)]
        assert errors and all(cause == "ValueError" for _, _, cause in errors)


def test_out_of_bounds_actions_take_the_general_path_and_its_error():
    with _make("serial", AutoresetMode.NEXT_STEP) as env:
        env.reset(seed=0)
        with pytest.raises(envhive.ActionError, match=r"env 3"):
            env.step(np.array([0, 1, 2, 3, 0]))
        env.step(np.zeros(5, np.int64))  # nothing was stepped: the pool is usable


@pytest.mark.skipif(not compiled_runner(), reason="built without the C runner loop")
@pytest.mark.parametrize("op", [0, 2], ids=["STEP", "STEP_RESET"])
def test_the_runner_counts_the_envs_that_ended(op):
    """``Completion.ended`` (the C loop's count, resets by Python included) equals the flags
    it wrote, and is left unknown (None) when the completion already held other results."""
    from envhive._buffers import Buffers, BufferSpec

    envs = build_envs([functools.partial(CountingEnv, PATTERNS[i % 4], i) for i in range(7)], 0)
    runner = EnvRunner(envs, 0)
    b = Buffers.allocate(BufferSpec(7, envs[0].observation_space, envs[0].action_space,
                                    with_final_obs=True))
    runner.bind(b)
    ids = list(range(7))
    b.ops[:] = 1  # RESET
    runner.run_whole(ids, None, Completion())
    counts = []
    for _ in range(8):
        # next_step's plan (ended envs reset), or same_step's STEP_RESET everywhere.
        ended = (b.terminated | b.truncated) if op == 0 else np.zeros(7, bool)
        b.ops[:] = np.where(ended, 1, op)
        out = Completion()
        runner.run_whole(ids, None, out)
        assert out.env_ids == ids and not out.errors
        assert out.ended == int(np.count_nonzero(b.terminated | b.truncated))
        counts.append(out.ended)
    assert max(counts) > 0 and min(counts) < 7  # episodes did end, not all at once
    b.ops[:] = 1
    out = Completion(env_ids=[99])  # a completion that already holds another result
    runner.run_whole(ids, None, out)
    assert out.ended is None
