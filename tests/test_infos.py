"""``batch_infos`` equals ``add_info`` applied env by env, for any mix of info values."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envhive._infos import Column, add_info, batch_infos
from envhive.frontends._gymnasium import _layout
from envhive.testing import assert_same_transcript

values = st.one_of(
    st.integers(-5, 5),
    st.floats(-1e3, 1e3, allow_nan=False),
    st.booleans(),
    st.sampled_from([np.float64(1.25), np.float32(-2.5), np.int32(7), np.bool_(True)]),
    st.text(max_size=2),
    st.just(np.arange(3.0)),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 3), max_size=2),
)
infos = st.dictionaries(st.sampled_from(["x", "y", "z", "v", "w"]), values, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(infos, min_size=1, max_size=6), st.data())
def test_batch_infos_equals_sequential_add_info(per_env, data):
    n = len(per_env) + data.draw(st.integers(0, 2))
    slots = sorted(data.draw(st.lists(st.integers(0, n - 1), min_size=len(per_env), max_size=len(per_env), unique=True)))
    items = list(zip(slots, per_env))
    try:
        want = {}
        for slot, info in items:
            add_info(want, info, slot, n)
    except Exception as err:  # incompatible mixes (a dict after a number): both must fail
        try:
            batch_infos(items, n)
        except Exception:
            return
        raise AssertionError(f"add_info raised {err!r}, batch_infos did not") from None
    got = batch_infos(items, n)
    assert list(got) == list(want)
    assert_same_transcript([(_layout(got),)], [(_layout(want),)])
    # Both against gymnasium's own batching (nested dicts included), the layout's definition.
    ref = _GymInfos(n)
    gym_infos: dict = {}
    for slot, info in items:
        gym_infos = ref._add_info(gym_infos, info, slot)
    assert_same_transcript([(_layout(want),)], [(gym_infos,)])


class _GymInfos(gym.vector.VectorEnv):
    """Just enough of a gymnasium vector env to call its ``_add_info``."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs


# ---------------------------------------------------------------- inline steps that reset envs
# Engines batch numbers (gymnasium's typed slot arrays); a bool array makes patching decline.
step_dtypes = st.sampled_from([np.float64, np.float32, np.int64, np.bool_])
reset_values = st.one_of(
    st.floats(-5, 5, allow_nan=False),
    st.integers(-3, 3),
    st.sampled_from([np.float64(0.5), np.float32(1.5), np.int64(2), np.bool_(False)]),
    st.just(np.arange(2.0)),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 3), max_size=1),
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_patched_inline_infos_equal_per_env_infos(data):
    """``Books.patch_inline`` (patch the engine's batched step infos at reset slots) gives
    exactly what the per-env way gives (``Books.keep_inline`` + ``take_infos``), or declines
    (``None``)."""
    import copy

    import envhive

    n = data.draw(st.integers(1, 5))
    mode = data.draw(st.sampled_from(["next_step", "same_step"]))
    special = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    keys = data.draw(st.lists(st.sampled_from(["x", "y", "z"]), unique=True, max_size=3))
    step_infos: dict = {}
    for key in keys:
        dtype = data.draw(step_dtypes)
        values = np.array(data.draw(st.lists(st.integers(-9, 9), min_size=n, max_size=n))).astype(dtype)
        step_infos[key] = Column(values, np.ones(n, bool))
    reset_infos = {
        i: data.draw(st.dictionaries(st.sampled_from(["x", "y", "w"]), reset_values, max_size=3))
        for i in np.flatnonzero(special).tolist()
    }
    with envhive.make("envhive/CartPole-v1", n, autoreset=mode) as env:
        pool = env.pool
        b = pool.buffers
        b.obs[:] = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
        if mode == "same_step":
            b.ops[:] = 2  # STEP_RESET
            b.final_obs[:] = -b.obs
            b.terminated[:] = special
            b.truncated[:] = False
        else:
            b.ops[:] = np.where(special, 1, 0)  # RESET where special, else STEP
        same = mode == "same_step"
        try:
            pool._books.keep_inline(copy.deepcopy(step_infos), copy.deepcopy(reset_infos), same)
            want = pool._books.take_infos(range(n), n)
        except (TypeError, ValueError, AttributeError):
            return  # an incompatible mix (a dict after a number) fails the gymnasium way too
        got = pool._books.patch_inline(copy.deepcopy(step_infos), copy.deepcopy(reset_infos), same)
        if any(step_infos[k].values.dtype == np.bool_ for k in keys):
            assert got is None
        if got is not None:
            # Compared in gymnasium's layout: columns, final columns and the final mask.
            lay = lambda t: (_layout(t[0]), _layout(t[1]), t[2])  # noqa: E731
            assert_same_transcript([lay(got)], [lay(want)])


# ---------------------------------------------------------------- an engine's table of infos
def _same(got, want) -> None:
    assert list(got) == list(want)
    for key in want:
        g, w = got[key], want[key]
        assert g.values.dtype == w.values.dtype and g.values.shape == w.values.shape, key
        np.testing.assert_array_equal(g.values, w.values, err_msg=key)
        np.testing.assert_array_equal(g.mask, w.mask, err_msg=key)


def test_batch_infos_rows_in_completion_order():
    """Rows given out of order (an async recv's envs by env id, in completion order) land at
    their rows, also when they cover every row from 0 to n-1."""
    from envhive._infos import batch_infos, take_infos

    out = batch_infos([(0, {"x": 0}), (1, {"x": 1}), (3, {"x": 3}), (2, {"x": 2}), (4, {"x": 4})], 5)
    assert out["x"].values.tolist() == [0, 1, 2, 3, 4] and out["x"].mask.all()
    kept = {i: {"lives": i * 10} for i in range(4)}
    infos, _, _ = take_infos(kept, {}, [3, 1, 0, 2], 4, by_env=True)
    assert infos["lives"].values.tolist() == [0, 10, 20, 30]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_info_table_rows_are_the_per_env_dicts(data):
    """``InfoTable.take`` gives exactly the columns ``take_infos`` makes of the per-env dicts
    ``InfoTable.as_dicts`` gives (a typed column, an array column, ended envs' final infos):
    every env in order of ``ids`` (a slice of rows), rows by position, rows by env id."""
    from envhive._infos import InfoTable, take_infos

    n = data.draw(st.integers(1, 5))
    ints = np.array(data.draw(st.lists(st.integers(-9, 9), min_size=2 * n, max_size=2 * n)), np.int32)
    pos = np.array(data.draw(st.lists(st.floats(-5, 5, width=32), min_size=2 * n, max_size=2 * n)),
                   np.float32).reshape(n, 2)
    ended = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    table = InfoTable({"lives": ints[:n], "pos": pos}, {"lives": ints[n:], "pos": pos[::-1].copy()}, ended)
    how = data.draw(st.sampled_from(["every", "positions", "by_env"]))
    if how == "every":
        ids = np.array(data.draw(st.permutations(range(n))), np.int64)
    else:
        ids = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)), np.int64)
    infos, finals = table.as_dicts(ids.tolist())
    assert sorted(finals) == sorted(i for i in ids.tolist() if ended[i])
    if how == "by_env":
        want = take_infos(infos, finals, ids.tolist(), n, by_env=True)
    else:  # row = position in ids, the default
        want = take_infos(infos, finals, ids.tolist(), n if how == "every" else len(ids))
    if how == "every":
        got = table.take(ids, slice(None), n)
    elif how == "positions":
        got = table.take(ids, np.arange(len(ids)), len(ids))
    else:
        got = table.take(ids, ids, n)
    _same(got[0], want[0])
    _same(got[1], want[1])
    assert (got[2] is None) == (want[2] is None) == (not ended[ids].any())
    if want[2] is not None:
        np.testing.assert_array_equal(got[2], want[2])


def test_info_table_rows_are_owned():
    """A dict row of an array column is a copy: the engine rewrites the column at the env's
    next op, after the row was handed out."""
    from envhive._infos import InfoTable, row_of

    column = np.arange(6.0).reshape(3, 2)
    table = InfoTable({"pos": column}, {"pos": column.copy()}, np.array([False, True, False]))
    infos, finals = table.as_dicts([1])
    row = row_of(column, 2)
    column[:] = -1
    assert infos[1]["pos"].tolist() == [2.0, 3.0] and row.tolist() == [4.0, 5.0]
    assert finals[1]["pos"].tolist() == [2.0, 3.0]


def test_batch_infos_raises_where_add_info_raises():
    """A value its key's column cannot hold (the first row decided a float column) raises in
    ``batch_infos`` as in ``add_info`` (and gymnasium): nothing is silently written instead."""
    items = [(0, {"x": 1.5}), (1, {"x": 2**2000})]
    cols: dict = {}
    add_info(cols, items[0][1], 0, 2)
    with pytest.raises(OverflowError):
        add_info(cols, items[1][1], 1, 2)
    with pytest.raises(OverflowError):
        batch_infos(items, 2)
