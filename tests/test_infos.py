"""``batch_infos`` equals ``add_info`` applied env by env, for any mix of info values."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from envhive._infos import add_info, batch_infos
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
infos = st.dictionaries(st.sampled_from(["x", "y", "z", "final_obs", "w"]), values, max_size=4)


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
    assert_same_transcript([(got,)], [(want,)])
