"""The process executor's plain sync call (``ProcessExecutor._plain_call``): a sync step whose
commands need none of ``_dispatch``'s checks goes out without them, and gives exactly what the
general path gives (checked against the serial executor, step by step)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import envhive
from envhive.executors._process import ProcessExecutor
from envhive.testing import CountingEnv

pytestmark = pytest.mark.timeout(300)


def _fns(n: int, with_info: bool = True) -> list:
    return [functools.partial(CountingEnv, pattern=[(2 + i % 3, "term"), (3, "trunc")], tag=i,
                              with_info=with_info) for i in range(n)]


def _equal(x, y) -> None:
    if isinstance(x, dict):
        assert x.keys() == y.keys()
        for key in x:
            _equal(x[key], y[key])
    elif isinstance(x, np.ndarray) and x.dtype == object:
        assert isinstance(y, np.ndarray) and x.shape == y.shape
        for a, b in zip(x.tolist(), y.tolist()):
            _equal(a, b)
    else:
        np.testing.assert_array_equal(x, y)


def _same(a, b) -> None:
    """Two results (``step``'s 5-tuples or ``reset``'s pairs) are equal, infos included."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        _equal(x, y)


def _counting_dispatch(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = ProcessExecutor._dispatch

    def dispatch(self, wk, ids, options):
        calls.append(wk.w)
        return original(self, wk, ids, options)

    monkeypatch.setattr(ProcessExecutor, "_dispatch", dispatch)
    return calls


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
@pytest.mark.parametrize("with_info", [True, False])
def test_sync_steps_take_the_plain_call_and_match_serial(monkeypatch, autoreset, with_info):
    calls = _counting_dispatch(monkeypatch)
    rng = np.random.default_rng(0)
    with envhive.make(_fns(5, with_info), executor=ProcessExecutor(2), autoreset=autoreset) as env, \
            envhive.make(_fns(5, with_info), executor="serial", autoreset=autoreset) as ref:
        _same(env.reset(seed=3), ref.reset(seed=3))
        assert sorted(calls) == [0, 1]  # the first call writes each worker's ids
        for _ in range(12):
            actions = rng.integers(0, 3, 5)
            _same(env.step(actions), ref.step(actions))
        assert sorted(calls) == [0, 1]  # every later sync call went out without _dispatch


def test_an_async_call_between_sync_steps_sends_the_next_one_through_dispatch(monkeypatch):
    calls = _counting_dispatch(monkeypatch)
    with envhive.make(_fns(4), executor=ProcessExecutor(2), batch_size=1) as env, \
            envhive.make(_fns(4), executor="serial", batch_size=1) as ref:
        env.reset(seed=1)
        ref.reset(seed=1)
        env.step(np.zeros(4, np.int64))
        ref.step(np.zeros(4, np.int64))
        calls.clear()
        env.send(np.ones(1, np.int64), np.array([3]))  # worker 1 now holds [3] in the block
        env.recv()
        ref.send(np.ones(1, np.int64), np.array([3]))
        ref.recv()
        assert calls == [1]
        _same(env.step(np.full(4, 2)), ref.step(np.full(4, 2)))
        assert calls == [1, 0, 1]  # that sync call goes through _dispatch (once per worker)
        _same(env.step(np.zeros(4, np.int64)), ref.step(np.zeros(4, np.int64)))
        assert calls == [1, 0, 1]


@pytest.mark.parametrize("what", ["parent_slice", "options"])
def test_calls_the_plain_path_cannot_carry_take_dispatch(monkeypatch, what):
    calls = _counting_dispatch(monkeypatch)
    ex = ProcessExecutor(2, parent_slice=what == "parent_slice")
    with envhive.make(_fns(4), executor=ex) as env, envhive.make(_fns(4), executor="serial") as ref:
        env.reset(seed=0)
        ref.reset(seed=0)
        for t in range(3):
            before = len(calls)
            if what == "options":  # a reset with options carries a pipe message
                _same(env.reset(options={"k": t}), ref.reset(options={"k": t}))
            else:
                _same(env.step(np.ones(4, np.int64)), ref.step(np.ones(4, np.int64)))
            assert len(calls) > before
