"""The pool's neutral result: a Batch says what happened, in no front end's layout.

Driven through ``Pool`` directly (``env.pool``) on every executor and autoreset mode with
``CountingEnv`` (obs = [tag, episode, step, last_action]), so each row's meaning can be checked
against the env's own counters: reset rows are exactly the rows whose obs is step 0, final
observations are the terminal ones, infos are columns (no ``_key`` masks, no object arrays of
observations), and the gymnasium front end's infos are exactly what ``gym_infos`` makes of it.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import envhive
from envhive._batch import FIRST, LAST, MID, NO_OP, Batch
from envhive._infos import Column
from envhive._ops import RESET, STEP, STEP_RESET
from envhive.executors import available_executors
from envhive.frontends._gymnasium import gym_infos
from envhive.testing import CountingEnv

N = 5
PATTERN = [(2, "term"), (3, "trunc"), (1, "term")]


def factories():
    return [functools.partial(CountingEnv, pattern=PATTERN[i % 3:] + PATTERN[: i % 3], tag=i) for i in range(N)]


def assert_columns(cols):
    for key, col in cols.items():
        assert isinstance(col, Column)
        assert not key.startswith("_"), key
        assert col.mask.dtype == np.bool_
        if isinstance(col.values, dict):
            assert_columns(col.values)


def check_batch(b: Batch, mode: str) -> None:
    assert b.env_ids.dtype == np.int64
    assert b.op.dtype == np.int8
    assert_columns(b.infos)
    assert_columns(b.final_infos)
    obs = np.asarray(b.obs)
    ended = b.terminated | b.truncated
    final_rows = (b.op == STEP_RESET) & ended
    if b.has_final is None:
        assert not final_rows.any() and b.final_obs is None
    else:
        np.testing.assert_array_equal(b.has_final, final_rows)
        final = np.asarray(b.final_obs)
        assert final.dtype == np.int64  # typed, not an object array
        for r in np.flatnonzero(b.has_final):
            assert final[r][0] == obs[r][0] and final[r][1] == obs[r][1] - 1  # same env, last episode
            assert obs[r][2] == 0 and final[r][2] >= 1  # reset obs now, terminal obs kept
            assert b.final_infos["step"].mask[r] and b.final_infos["step"].values[r] == final[r][2]
    # Reset rows are exactly the rows whose observation is the first of an episode.
    np.testing.assert_array_equal(b.is_reset, obs[:, 2] == 0)
    np.testing.assert_array_equal(obs[:, 0], b.env_ids)  # each row is its env
    kind = b.step_type
    assert set(kind.tolist()) <= {FIRST, MID, LAST}
    np.testing.assert_array_equal(kind == FIRST, b.is_reset)
    np.testing.assert_array_equal(kind == LAST, ended & ~b.is_reset)
    if mode == "next_step":
        assert set(b.op.tolist()) <= {STEP, RESET}
        assert not (b.reward[b.op == RESET]).any()


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
@pytest.mark.parametrize("executor", available_executors())
def test_pool_results_say_what_happened(executor: str, mode: str) -> None:
    with envhive.make(factories(), executor=executor, autoreset=mode) as env:
        pool = env.pool
        b = pool.reset(seed=0)
        assert (b.op == RESET).all() and b.is_reset.all()
        check_batch(b, mode)
        seen = set()
        for t in range(25):
            if mode == "disabled":
                ended = b.terminated | b.truncated
                if ended.any():
                    b = pool.reset(options={"reset_mask": ended})
                    assert (b.op[ended] == RESET).all() and (b.op[~ended] == NO_OP).all()
                    continue
            b = pool.step(np.full(N, t % 3))
            check_batch(b, mode)
            seen.update(b.step_type.tolist())
            if b.has_final is not None:
                seen.add("final")
        assert seen >= ({FIRST, MID, "final"} if mode == "same_step" else {FIRST, MID, LAST} - (
            {FIRST} if mode == "disabled" else set()))


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
@pytest.mark.parametrize("copy", [True, False])
def test_recv_rows_follow_env_ids(mode: str, copy: bool) -> None:
    with envhive.make(factories(), executor="thread", num_workers=2, batch_size=2,
                      autoreset=mode, copy=copy) as env:
        pool = env.pool
        pool.async_reset()
        for t in range(40):
            b = pool.recv()
            assert b.env_ids.shape == (2,)
            check_batch(b, mode)
            pool.send(np.full(2, t % 3), b.env_ids)


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_gymnasium_infos_are_built_from_the_batch(mode: str) -> None:
    # The front end's infos are exactly gym_infos(batch): nothing else feeds them.
    with envhive.make(factories(), autoreset=mode, copy=False) as env:
        env.reset(seed=1)
        codec = env._obs_codec
        for t in range(12):
            captured = []
            real = env.pool.step

            def spy(actions, real=real, captured=captured):
                b = real(actions)
                captured.append(b)
                return b

            env.pool.step = spy  # type: ignore[method-assign]
            try:
                *_, info = env.step(np.full(N, t % 3))
            finally:
                del env.pool.step
            want = gym_infos(captured[0], codec)
            assert set(info) == set(want)
            if "final_obs" in info:
                for r in np.flatnonzero(info["_final_obs"]):
                    np.testing.assert_array_equal(info["final_obs"][r], captured[0].final_obs[r])
                    assert info["final_obs"][r] is not captured[0].final_obs[r]  # single() copies


def test_native_inline_step_returns_the_same_batch_as_the_general_path() -> None:
    for mode in ("next_step", "same_step"):
        fast = envhive.make("envhive/CartPole-v1", 6, seed=3, autoreset=mode, max_episode_steps=9)
        slow = envhive.make("envhive/CartPole-v1", 6, seed=3, autoreset=mode, max_episode_steps=9)
        with fast, slow:
            fast.pool.reset()
            slow.pool.reset()
            rng = np.random.default_rng(0)
            for _ in range(60):
                a = rng.integers(0, 2, 6)
                x = fast.pool.step(a)
                slow.pool.send(a)  # the general send/recv path: every env sent, then waited for
                y = slow.pool.wait()
                for field in ("env_ids", "reward", "terminated", "truncated", "op"):
                    np.testing.assert_array_equal(getattr(x, field), getattr(y, field), err_msg=field)
                np.testing.assert_array_equal(x.obs, y.obs)
                assert (x.has_final is None) == (y.has_final is None)
                if x.has_final is not None:
                    np.testing.assert_array_equal(x.has_final, y.has_final)
                    np.testing.assert_array_equal(x.final_obs[x.has_final], y.final_obs[y.has_final])


# ------------------------------------------------------------------ random done patterns
patterns = st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["term", "trunc"])), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(patterns, min_size=1, max_size=4),
    st.sampled_from(["next_step", "same_step"]),
    st.integers(1, 3),
    st.booleans(),
)
def test_batches_say_what_happened_for_any_done_pattern(per_env, mode, batch_size, copy):
    n = len(per_env)
    k = min(batch_size, n)
    fns = [functools.partial(CountingEnv, pattern=p, tag=i) for i, p in enumerate(per_env)]
    with envhive.make(fns, autoreset=mode, batch_size=k, copy=copy) as env:
        pool = env.pool
        check_batch(pool.reset(seed=0), mode)
        for t in range(8):
            check_batch(pool.step(np.full(n, t % 3)), mode)
        pool.async_reset()
        for t in range(8):
            b = pool.recv()
            check_batch(b, mode)
            pool.send(np.full(k, t % 3), b.env_ids)


# ------------------------------------------------------------------ the definition, row by row
#: (op, terminated, truncated, has_final) -> (is_reset, step_type, discount), as the Batch and
#: dm_env docs define them: FIRST for a reset row (RESET, or a STEP_RESET that ended and was
#: reset: has_final), else LAST if the episode ended, else MID; discount 0.0 on LAST rows that
#: terminated, 1.0 on every other row (truncated ones and reset rows included).
ROWS = [
    (RESET, False, False, False, True, FIRST, 1.0),
    (STEP, False, False, False, False, MID, 1.0),
    (STEP, True, False, False, False, LAST, 0.0),
    (STEP, False, True, False, False, LAST, 1.0),
    (STEP, True, True, False, False, LAST, 0.0),
    (STEP_RESET, False, False, False, False, MID, 1.0),
    (STEP_RESET, True, False, True, True, FIRST, 1.0),  # same_step: ended and reset in one op
    (STEP_RESET, False, True, True, True, FIRST, 1.0),
    (STEP_RESET, True, False, False, False, LAST, 0.0),  # has_final not set: not a reset row
    (NO_OP, False, False, False, False, MID, 1.0),
    (NO_OP, True, False, False, False, LAST, 0.0),  # a masked reset's untouched row repeats its flags
    (NO_OP, False, True, False, False, LAST, 1.0),
]


def _table_batch(rows, with_final: bool) -> Batch:
    op, term, trunc, fin = (np.array([r[i] for r in rows]) for i in range(4))
    return Batch(np.arange(len(rows)), None, None, term.astype(bool), trunc.astype(bool), op.astype(np.int8),
                 None, fin.astype(bool) if with_final else None, {}, {})


@pytest.mark.parametrize("compiled", [True, False])
def test_step_type_and_discount_of_every_kind_of_row(compiled: bool, monkeypatch) -> None:
    """Each kind of row's ``is_reset``, ``step_type`` and discount, on the compiled pass
    (``_runloop.step_kinds``) and on the numpy definition it stands in for; without
    ``has_final`` (no row can have a final obs) a STEP_RESET row is never a reset row."""
    from envhive import _batch

    if not compiled:
        monkeypatch.setattr(_batch, "_step_kinds", None)
    elif _batch._step_kinds is None:
        pytest.skip("built without the C loop")
    b = _table_batch(ROWS, with_final=True)
    assert b.agents is None  # a batch of single-agent envs
    assert b.is_reset.tolist() == [r[4] for r in ROWS]
    assert b.step_type.tolist() == [r[5] for r in ROWS]
    kinds, discounts = b.step_types_and_discounts()
    assert kinds.dtype == np.int8 and discounts.dtype == np.float64
    assert kinds.tolist() == [r[5] for r in ROWS] and discounts.tolist() == [r[6] for r in ROWS]
    assert b.step_types_and_discounts(False)[1] is None
    plain = [r for r in ROWS if not r[3]]  # the same rows, has_final None
    b = _table_batch(plain, with_final=False)
    assert b.is_reset.tolist() == [r[4] for r in plain]
    assert b.step_types_and_discounts()[0].tolist() == [r[5] for r in plain]
    b = _table_batch([(STEP_RESET, True, False, True, True, FIRST, 1.0)], with_final=False)
    assert b.is_reset.tolist() == [False] and b.step_type.tolist() == [LAST]


def test_step_types_are_dm_envs() -> None:
    """FIRST, MID, LAST are dm_env's (and EnvPool's) step type numbers."""
    dm_env = pytest.importorskip("dm_env")
    assert (FIRST, MID, LAST) == (dm_env.StepType.FIRST, dm_env.StepType.MID, dm_env.StepType.LAST)


def test_batch_without_the_compiled_loop(monkeypatch) -> None:
    """Built without a compiler (no ``envhive._runloop``), ``_batch`` imports and its step
    types and discounts are the numpy definition's. A fresh copy of the module, so the pool's
    own ``Batch`` class is left alone."""
    import importlib.util
    import sys

    from envhive import _batch

    monkeypatch.setitem(sys.modules, "envhive._runloop", None)  # its import raises ImportError
    spec = importlib.util.spec_from_file_location("envhive_batch_plain", _batch.__file__)
    plain = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plain)
    op, term, trunc, fin = (np.array([r[i] for r in ROWS]) for i in range(4))
    b = plain.Batch(np.arange(len(ROWS)), None, None, term.astype(bool), trunc.astype(bool),
                    op.astype(np.int8), None, fin.astype(bool), {}, {})
    kinds, discounts = b.step_types_and_discounts()
    assert kinds.tolist() == [r[5] for r in ROWS] and discounts.tolist() == [r[6] for r in ROWS]
