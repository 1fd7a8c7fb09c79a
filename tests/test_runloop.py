"""The compiled runner loop (``envhive._runloop.step_rows``) against the same loop in Python.

``EnvRunner``'s one loop finishes the common case in C and hands every other env to
``envhive._perform.perform``, the Python definition of an op; without a C compiler
(``step_rows_py``) every env goes to ``perform``. The two must write the same buffers and
report the same completions for every kind of env result, every kind of call (the whole slice,
a run, any list of envs; slice-local buffers; results computed beforehand by ``step_many``):
these tests drive one runner each way over envs that return every odd form a step can return,
and compare.
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from contextlib import contextmanager, nullcontext
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envhive
from envhive import _runner as _base
from envhive._buffers import Buffers, BufferSpec
from envhive._ops import Op
from envhive._report import Completion
from envhive._runner import EnvRunner, compiled_runner

needs_compiled = pytest.mark.skipif(not compiled_runner(), reason="built without the C runner loop")

# What a step returns, one form per step (the env cycles through its schedule).
FORMS = [
    "plain", "plain", "list_result", "np_bool_flags", "f32_reward", "int_reward", "bool_reward",
    "np_f64_reward", "f64_obs", "list_obs", "bad_shape_obs", "info", "dict_subclass_info",
    "none_info", "list_info", "raise", "terminate", "truncate", "bad_reward", "short_tuple", "np_bool_false", "f32_copy",
]


class QuirkyEnv(gym.Env):
    """Steps through ``schedule``: each step returns its result in the scheduled form."""

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, schedule: list[str], action_space: spaces.Space | None = None) -> None:
        self.observation_space = spaces.Box(-1e6, 1e6, (3,), np.float32)
        self.action_space = action_space or spaces.Discrete(3)
        self.schedule, self.k, self.t = schedule, 0, 0

    def _act(self, action) -> float:
        if isinstance(action, dict):
            return float(action["a"]) + 10 * float(np.sum(action["b"]))
        return float(action)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0 if seed is None else seed % 7
        info = {"seeded": seed} if seed is not None else {}
        return np.array([self.t, -1, self.k], np.float32), info

    def step(self, action):
        form = self.schedule[self.k % len(self.schedule)]
        self.k += 1
        self.t += 1
        obs = np.array([self.t, self._act(action), self.k], np.float32)
        reward, term, trunc, info = 0.5 * self.t, False, False, {}
        if form == "raise":
            raise ValueError(f"boom at step {self.k}")
        if form == "list_result":
            return [obs, reward, term, trunc, info]
        if form == "short_tuple":
            return obs, reward, term, trunc
        if form == "np_bool_flags":
            term, trunc = np.bool_(self.k % 2 == 0), np.bool_(False)
        if form == "np_bool_false":
            term, trunc = np.bool_(False), np.bool_(False)
        if form == "f32_reward":
            reward = np.float32(reward)
        if form == "int_reward":
            reward = self.t
        if form == "bool_reward":
            reward = True
        if form == "np_f64_reward":
            reward = np.float64(reward)
        if form == "bad_reward":
            reward = "lots"
        if form == "f64_obs":
            obs = obs.astype(np.float64)
        if form == "list_obs":
            obs = obs.tolist()
        if form == "bad_shape_obs":
            obs = np.zeros(4, np.float32)
        if form == "f32_copy":
            obs = np.asfortranarray(obs[::-1])[::-1]  # a non-owning view: still C-contiguous rows
        if form == "info":
            info = {"k": self.k}
        if form == "dict_subclass_info":
            info = OrderedDict(k=self.k)
        if form == "none_info":
            info = None
        if form == "list_info":
            info = [self.k]
        if form == "terminate":
            term = True
        if form == "truncate":
            trunc = True
        return obs, reward, term, trunc, info


class QuirkyManyEnv(QuirkyEnv):
    """A QuirkyEnv whose class steps several at once (``step_many``, as envhive's MuJoCo envs):
    one result, or the exception a step raised, per env."""

    @classmethod
    def step_many(cls, envs, actions):
        results = []
        for env, action in zip(envs, actions):
            try:
                results.append(env.step(action))
            except Exception as err:
                results.append(err)
        return results


@contextmanager
def python_loop():
    """Run EnvRunner as if envhive had been built without its C loop."""
    with pytest.MonkeyPatch.context() as m:
        for name in ("_step_rows", "_write_obs_rows"):
            m.setattr(_base, name, None)  # raises if the name is gone: no silent C loop
        yield


FIRST_ID = 3  # the runner's slice starts here: slice-local buffers index rows from 0


def _runner(schedules, compiled: bool, action_space=None, many: bool = False, local: bool = False):
    envs = [(QuirkyManyEnv if many else QuirkyEnv)(s, action_space) for s in schedules]
    first = FIRST_ID if local else 0
    runner = EnvRunner(envs, first)
    n = len(envs)
    buffers = Buffers.allocate(
        BufferSpec(n, envs[0].observation_space, envs[0].action_space, with_final_obs=True)
    )
    with nullcontext() if compiled else python_loop():
        runner.bind(buffers, local=local)
    assert (runner._loop is _base.step_rows_py) is not compiled
    return runner, buffers


def _run(runner, buffers, ids, ops, actions, seeds, compiled: bool, whole: bool = False) -> Completion:
    """Run ``ids`` (slice positions 0..n-1; their pool-wide ids are ``first_id`` on)."""
    first = runner.first_id
    rows = list(ids)  # pool-size buffers: the runner's slice starts at 0; slice-local: rows
    buffers.ops[rows] = ops
    buffers.has_seed[:] = False
    for r, seed in zip(rows, seeds):
        if seed is not None:
            buffers.seeds[r], buffers.has_seed[r] = seed, True
    act_codec = runner.buffers.act_codec
    for r, a in zip(rows, actions):
        act_codec.write(buffers.actions, r, a)
    out = Completion()
    env_ids = [first + i for i in ids]
    with nullcontext() if compiled else python_loop():
        if whole:
            runner.run_whole(env_ids, None, out)
        else:
            runner.run(env_ids, None, out)
    return out


def _same(a: Completion, b: Completion, ba: Buffers, bb: Buffers) -> None:
    assert a.env_ids == b.env_ids
    assert a.infos == b.infos
    assert a.final_infos == b.final_infos
    assert sorted(a.errors) == sorted(b.errors)
    for i, err in a.errors.items():
        other = b.errors[i]
        assert (type(err), err.env_id, err.message, err.cause_type) == (
            type(other), other.env_id, other.message, other.cause_type)
    for name in ("obs", "final_obs", "reward", "terminated", "truncated"):
        np.testing.assert_array_equal(getattr(ba, name), getattr(bb, name), err_msg=name)


@needs_compiled
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=st.integers(1, 9), many=st.booleans(), local=st.booleans())
def test_compiled_loop_matches_the_python_loop(data, n, many, local):
    """Random ops over random id sets (the whole slice through ``run_whole`` too), envs
    cycling through every result form, stepped by the loop or beforehand by ``step_many``,
    with pool-size or slice-local buffers: the compiled and the Python loop write identical
    buffers and report identical completions."""
    schedules = [data.draw(st.lists(st.sampled_from(FORMS), min_size=1, max_size=8)) for _ in range(n)]
    fast, fast_buf = _runner(schedules, compiled=True, many=many, local=local)
    slow, slow_buf = _runner(schedules, compiled=False, many=many, local=local)
    for _ in range(data.draw(st.integers(1, 8))):
        how = data.draw(st.sampled_from(["whole", "all", "run", "any"]))
        if how in ("all", "whole"):
            ids = list(range(n))
        elif how == "run":
            lo = data.draw(st.integers(0, n - 1))
            ids = list(range(lo, data.draw(st.integers(lo + 1, n))))
        else:
            ids = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
        ops = [data.draw(st.sampled_from([Op.STEP, Op.STEP, Op.STEP_RESET, Op.RESET])) for _ in ids]
        actions = [data.draw(st.integers(0, 2)) for _ in ids]
        seeds = [data.draw(st.one_of(st.none(), st.integers(0, 99))) for _ in ids]
        a = _run(fast, fast_buf, ids, ops, actions, seeds, compiled=True, whole=how == "whole")
        b = _run(slow, slow_buf, ids, ops, actions, seeds, compiled=False, whole=how == "whole")
        _same(a, b, fast_buf, slow_buf)
        assert a.ended == b.ended


@needs_compiled
def test_dict_actions_are_read_through_the_codec_in_both_loops():
    space = spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(0, 1, (2,), np.float32)})
    schedules = [["plain", "info", "terminate"]] * 3
    fast, fast_buf = _runner(schedules, True, space)
    slow, slow_buf = _runner(schedules, False, space)
    for step in range(4):
        actions = [{"a": (step + i) % 3, "b": np.full(2, 0.25 * i, np.float32)} for i in range(3)]
        ops = [Op.STEP_RESET] * 3
        a = _run(fast, fast_buf, [0, 1, 2], ops, actions, [None] * 3, True)
        b = _run(slow, slow_buf, [0, 1, 2], ops, actions, [None] * 3, False)
        _same(a, b, fast_buf, slow_buf)
        row = fast_buf.final_obs if step % 3 == 2 else fast_buf.obs  # "terminate" resets
        assert row[2, 1] == (step + 2) % 3 + 10 * 2 * 0.5  # the action reached the env


@pytest.mark.parametrize("compiled", [True, False])
def test_an_env_error_carries_the_envs_traceback(compiled):
    if compiled and not compiled_runner():
        pytest.skip("built without the C runner loop")
    runner, buffers = _runner([["plain"], ["raise"], ["plain"]], compiled)
    out = _run(runner, buffers, [0, 1, 2], [Op.STEP] * 3, [0, 1, 2], [None] * 3, compiled)
    assert out.env_ids == [0, 2]
    err = out.errors[1]
    assert err.env_id == 1 and err.cause_type == "ValueError"
    assert "boom at step 1" in err.message
    assert "in step" in err.worker_traceback and "QuirkyEnv" not in err.message


class Interrupting(QuirkyEnv):
    def step(self, action):
        raise KeyboardInterrupt


@pytest.mark.parametrize("compiled", [True, False])
def test_keyboard_interrupt_in_an_env_propagates(compiled):
    if compiled and not compiled_runner():
        pytest.skip("built without the C runner loop")
    envs = [QuirkyEnv(["plain"]), Interrupting(["plain"])]
    runner = EnvRunner(envs, 0)
    buffers = Buffers.allocate(BufferSpec(2, envs[0].observation_space, envs[0].action_space, with_final_obs=True))
    with nullcontext() if compiled else python_loop():
        runner.bind(buffers)
        buffers.ops[:] = Op.STEP
        with pytest.raises(KeyboardInterrupt):
            runner.run([0, 1], None, Completion())


@pytest.mark.parametrize("executor", ["serial", "thread"])
def test_pools_agree_with_gymnasium_whichever_loop_runs(executor):
    """A pool over CartPole gives SyncVectorEnv's transitions with the C loop and without."""
    def rollout():
        with envhive.make("CartPole-v1", 5, executor=executor, seed=3) as env:
            out = [env.reset(seed=3)[0]]
            for t in range(60):
                obs, rew, term, trunc, _ = env.step(np.arange(5) % 2 ^ (t % 3 == 0))
                out += [obs, rew, term, trunc]
        return out

    ref = gym.make_vec("CartPole-v1", 5, vectorization_mode="sync")
    want = [ref.reset(seed=3)[0]]
    for t in range(60):
        obs, rew, term, trunc, _ = ref.step(np.arange(5) % 2 ^ (t % 3 == 0))
        want += [obs, rew, term, trunc]
    ref.close()
    with python_loop():
        slow = rollout()
    for got in (rollout(), slow):
        for x, y in zip(got, want):
            np.testing.assert_array_equal(x, y)


def test_ci_builds_the_compiled_loop():
    """CI installs with a C compiler, so it must run (and test) the compiled loop."""
    if not os.environ.get("CI"):
        pytest.skip("only checked in CI, where a compiler is guaranteed")
    assert compiled_runner(), "envhive._runloop was not built"


SHARED_OBS = np.zeros(3, np.float32)
SHARED_INFO = {"k": 1}
SHARED_REWARD = 0.25 + 1e-9  # a float object only these envs hold


class SharedResultEnv(QuirkyEnv):
    """Returns the same objects every step, so their reference counts expose a leak."""

    def reset(self, *, seed=None, options=None):
        return SHARED_OBS, {}

    def step(self, action):
        self.k += 1
        form = self.schedule[self.k % len(self.schedule)]
        if form == "raise":
            raise ValueError("boom")
        info = SHARED_INFO if form == "info" else {}
        return SHARED_OBS, SHARED_REWARD, form == "terminate", False, info


@needs_compiled
def test_the_compiled_loop_keeps_no_references():
    """Every path through the C loop (finished in C, handed back after a step, after a raise,
    before a reset) releases what it took: reference counts are unchanged after many calls."""
    schedules = [["plain"], ["info", "plain"], ["plain", "terminate"], ["plain", "raise"]]
    envs = [SharedResultEnv(s) for s in schedules]
    runner = EnvRunner(envs, 0)
    buffers = Buffers.allocate(BufferSpec(4, envs[0].observation_space, envs[0].action_space, with_final_obs=True))
    runner.bind(buffers)
    ids = [0, 1, 2, 3]

    def run(calls):
        for j in range(calls):
            buffers.ops[:] = [Op.STEP, Op.STEP_RESET, Op.STEP_RESET, Op.RESET if j % 3 else Op.STEP]
            runner.run(ids, None, Completion())

    counted = (SHARED_OBS, SHARED_INFO, SHARED_REWARD, envs[0], envs[3])
    run(50)
    before = [sys.getrefcount(x) for x in counted]
    run(500)
    assert [sys.getrefcount(x) for x in counted] == before


_WITHIN_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"]


@needs_compiled
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from(_WITHIN_DTYPES), data=st.data())
def test_within_is_numpys_bounds_check(dtype, data):
    """``_runloop.within`` (the compiled check of ``ArrayCodec.in_bounds``) answers as numpy's
    ``((a >= lo) & (a <= hi)).all()`` whenever it answers, and answers for every contiguous
    numeric array with number bounds of its kind."""
    from envhive._runloop import within

    dt = np.dtype(dtype)
    if dt.kind == "f":
        values = st.floats(allow_nan=True, allow_infinity=True, width=8 * dt.itemsize)
        bounds = st.floats(-1e6, 1e6)
    else:
        info = np.iinfo(dt)
        values = st.integers(int(info.min), int(info.max))
        bounds = st.integers(-(2**70), 2**70)
    arr = np.array(data.draw(st.lists(values, min_size=1, max_size=40)), dtype=dt)
    lo, hi = sorted(data.draw(st.lists(bounds, min_size=2, max_size=2)))
    if data.draw(st.booleans()):  # bounds that are the array's own values
        lo, hi = sorted((arr.flat[0].item(), arr.flat[-1].item()))
    want = all(lo <= v <= hi for v in arr.tolist())  # exact: Python ints, doubles (NaN: False)
    got = within(arr, lo, hi)
    fits = -(2**63) <= lo < 2**63 and -(2**63) <= hi < 2**63
    if dt.kind == "f" or fits or (dt.kind == "u" and lo < 2**63 and hi >= -(2**63)):
        assert got is want
        assert within(arr.reshape(1, -1), lo, hi) is want  # any shape, the same values
    else:
        assert got is None  # bounds beyond 64 bits: numpy's check


@needs_compiled
def test_within_declines_what_it_does_not_read():
    from envhive._runloop import within

    assert within(np.arange(10)[::2], 0, 9) is None  # not contiguous
    assert within(np.array([1, 2], ">i8"), 0, 5) is None  # another byte order
    assert within(np.zeros(2, bool), 0, 1) is None
    assert within(np.zeros(2, np.float16), 0.0, 1.0) is None
    assert within(np.zeros(0, np.int64), 0, 1) is None  # the caller's rule for an empty batch
    assert within(np.zeros(2, np.int64), 0.0, 1.0) is None  # float bounds, integer values
    assert within(np.array([1.0, np.nan]), 0.0, 2.0) is False
    assert within(np.array([3], np.uint8), -5, 2**70) is True
    assert within(np.array([3], np.uint8), -5, -1) is False


@needs_compiled
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_step_kinds_is_the_batch_definition(data):
    """``_runloop.step_kinds`` (the compiled ``Batch.step_type`` and dm_env discount) gives
    what ``Batch``'s numpy definition gives, for any flags, ops and final-observation rows."""
    from envhive import _batch
    from envhive._batch import NO_OP, Batch

    n = data.draw(st.integers(1, 12))
    flags = st.lists(st.booleans(), min_size=n, max_size=n)
    term, trunc = np.array(data.draw(flags)), np.array(data.draw(flags))
    op = np.array(data.draw(st.lists(st.sampled_from([int(Op.STEP), int(Op.RESET), int(Op.STEP_RESET), NO_OP]),
                                     min_size=n, max_size=n)), np.int8)
    has_final = np.array(data.draw(flags)) if data.draw(st.booleans()) else None
    batch = Batch(np.arange(n), None, None, term, trunc, op, None, has_final, {}, {})
    compiled = batch.step_types_and_discounts()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_batch, "_step_kinds", None)
        python = batch.step_types_and_discounts()
    for got, want in zip(compiled, python):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(batch.step_type, python[0])


@needs_compiled
def test_step_kinds_declines_columns_it_does_not_read():
    from envhive._runloop import step_kinds

    term = np.zeros(3, bool)
    kinds = np.zeros(3, np.int8)
    assert step_kinds(term, term, np.zeros(3, np.int8), None, kinds, None) is True
    assert step_kinds(term, term, np.zeros(3, np.int64), None, kinds, None) is None  # op not int8
    assert step_kinds(term, term[:2], np.zeros(3, np.int8), None, kinds, None) is None  # lengths
    assert step_kinds(term, term, np.zeros(3, np.int8), None, np.zeros(6, np.int8)[::2], None) is None
    readonly = np.zeros(3, np.int8)
    readonly.flags.writeable = False
    assert step_kinds(term, term, np.zeros(3, np.int8), None, readonly, None) is None
