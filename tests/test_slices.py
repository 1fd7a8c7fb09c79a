"""Slice ownership, per-slice queues and restart books, shared by the thread and process
executors (``envhive.executors._slices``)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given
from hypothesis import strategies as st

from envhive._buffers import Buffers, BufferSpec
from envhive._ops import RESET, RESTART_INFO_KEY, STEP, STEP_RESET, restart_outcome
from envhive.executors._slices import RestartBook, SendQueue, SliceMap, slice_bounds


@given(n=st.integers(1, 300), k=st.integers(1, 64))
def test_slice_bounds_cover_every_env_once_evenly(n, k):
    bounds = slice_bounds(n, k)
    assert len(bounds) == min(n, k)
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [hi - lo for lo, hi in bounds]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


@given(n=st.integers(1, 40), k=st.integers(1, 8), data=st.data())
def test_split_partitions_ids_by_owner_keeping_send_order(n, k, data):
    m = SliceMap(n, k)
    ids = data.draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True))
    groups = m.split(np.asarray(ids))
    assert sorted(i for _, g in groups for i in g) == sorted(ids)
    for w, g in groups:
        lo, hi = m.bounds[w]
        assert all(lo <= i < hi for i in g)
        assert g == [i for i in ids if lo <= i < hi]  # the order they were sent in
    assert [w for w, _ in groups] == sorted({w for w, _ in groups})


def test_split_recognizes_the_read_only_all_ids_array_by_identity():
    m = SliceMap(5, 2)
    every = np.arange(5)
    every.flags.writeable = False
    first = m.split(every)
    assert first is m.all_groups and m.split(every) is m.all_groups
    # A writable array is never cached: it could hold other ids next time.
    writable = np.arange(5)
    assert m.split(writable) is m.all_groups
    writable[:] = [4, 3, 2, 1, 0]
    assert m.split(writable) == [(0, [2, 1, 0]), (1, [4, 3])]


def test_group_and_ordered_round_trip_call_results():
    m = SliceMap(6, 3)
    groups = m.group([5, 0, 3])
    assert groups == {2: [5], 0: [0], 1: [3]}
    results = {w: [f"env{i}" for i in ids] for w, ids in groups.items()}
    assert m.ordered([5, 0, 3], groups, results) == ["env5", "env0", "env3"]
    every = m.group(None)
    assert m.ordered(None, every, {w: ids for w, ids in every.items()}) == list(range(6))


def test_send_queue_merges_only_option_less_runs_when_asked():
    q = SendQueue()
    q.push([0], None)
    q.push([1], None)
    q.push([2], {"a": 1})
    q.push([3], None)
    assert len(q) == 4
    assert q.pop() == ([0], None)  # no merge: one share at a time
    assert q.pop(merge=True) == ([1], None)  # stops at a job with options
    assert q.pop(merge=True) == ([2], {"a": 1})  # a job with options is never merged
    assert q.pop(merge=True) == ([3], None)
    assert not q


def _buffers(n=4):
    return Buffers.allocate(BufferSpec(n, spaces.Box(-9, 9, (2,)), spaces.Discrete(2), with_final_obs=True))


@pytest.mark.parametrize("op", [STEP, STEP_RESET, RESET])
def test_restart_book_reports_each_op_as_restart_outcome_says(op):
    b = _buffers()
    book = RestartBook()
    b.ops[:] = op
    b.has_seed[:] = True
    book.rebuilt([0, 1], pending=[1], buffers=b)
    seeded = op == RESET  # a reset keeps the seed it was sent with; a substituted step has none
    assert b.ops.tolist() == [op, RESET, op, op] and b.has_seed.tolist() == [True, seeded, True, True]
    assert book.lost == {0}
    book.substitute_lost([0, 2, 3], b)  # env 0 is sent again: substituted now
    assert b.ops.tolist() == [RESET, RESET, op, op] and not book.lost
    # The worker ran the resets: fresh observations in the rows.
    b.obs[:2] = [[1, 1], [2, 2]]
    infos, finals = {0: {"x": 1}}, {}
    book.mark([0, 1, 2], infos, finals, b)
    assert b.ops.tolist() == [op] * 4  # the pool accounts by the op it sent
    assert infos[0] == {"x": 1, RESTART_INFO_KEY: True} and infos[1] == {RESTART_INFO_KEY: True}
    assert 2 not in infos and not book.restarted
    outcome = restart_outcome(op)
    if outcome is None:
        assert finals == {}
        return
    assert b.reward[:2].tolist() == [outcome.reward] * 2
    assert b.truncated[:2].tolist() == [outcome.truncated] * 2
    assert b.terminated[:2].tolist() == [outcome.terminated] * 2
    if outcome.final_obs_is_reset_obs:
        assert b.final_obs[:2].tolist() == [[1, 1], [2, 2]]
        assert finals == {0: {RESTART_INFO_KEY: True}, 1: {RESTART_INFO_KEY: True}}


def test_restart_book_is_free_when_nothing_restarted():
    b = _buffers()
    book = RestartBook()
    b.ops[:] = STEP
    book.substitute_lost([0, 1, 2, 3], b)
    infos: dict = {}
    book.mark([0, 1, 2, 3], infos, {}, b)
    assert b.ops.tolist() == [STEP] * 4 and infos == {}
