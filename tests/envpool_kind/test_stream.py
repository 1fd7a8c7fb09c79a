"""EnvPool's engine in EnvPool's async mode (``envs/envpool/_stream.py``): pools with
``batch_size < num_envs``.

What is proved here: every env's transitions through EnvPool's async mode equal the sync
engine's for the same seeds and per-env actions (three families, next_step and same_step,
with and without the lean ``recv``); sync calls on such a pool (``step``, partial resets,
seeded resets) equal the sync engine's in every autoreset mode, including counts of envs that
are no multiple of the batch (spare envs fill EnvPool's batch); partial sends; and a discard
(Ctrl-C) leaves a pool that ``reset`` takes.
"""

from __future__ import annotations

import numpy as np
import pytest

import envhive
from envhive.errors import NothingPendingError
from envhive.testing import assert_same_transcript, transcript

envpool = pytest.importorskip("envpool")

from envhive.envs.envpool import _stream  # noqa: E402  (needs EnvPool)

CASES = [
    ("CartPole-v1", {"max_episode_steps": 5}),
    ("MiniGrid-Empty-5x5-v0", {"max_episode_steps": 4}),
    ("CheetahRun-v1", {"max_episode_steps": 3}),
]


def _action_table(space, n, steps, seed=0):
    """``table[t, i]``: env ``i``'s action at its ``t``-th step."""
    rng = np.random.default_rng(seed)
    if hasattr(space, "n"):
        return rng.integers(0, int(space.n), (steps, n))
    return rng.uniform(space.low, space.high, (steps, n, *space.shape)).astype(space.dtype)


def _row(obs, j):
    return {k: np.array(v[j]) for k, v in obs.items()} if isinstance(obs, dict) else np.array(obs[j])


def _info_row(info, j):
    row = {"elapsed_step": int(info["elapsed_step"][j])}
    if "_final_obs" in info and info["_final_obs"][j]:
        row["final_obs"] = info["final_obs"][j]
        row["final_elapsed"] = int(info["final_info"]["elapsed_step"][j])
    return row


def _sync_per_env(task, kwargs, n, steps, mode, table):
    """Every env's (obs, reward, terminated, truncated, info row) per step, sync engine."""
    env = envhive.make(f"envpool/{task}", n, env_kwargs=kwargs, seed=7, autoreset=mode)
    assert type(env.pool.executor._engine) is not _stream.StreamEngine
    try:
        obs, info = env.reset()
        out = {i: [(_row(obs, i), 0.0, False, False, _info_row(info, i))] for i in range(n)}
        for t in range(steps):
            obs, rew, term, trunc, info = env.step(table[t])
            for i in range(n):
                out[i].append((_row(obs, i), float(rew[i]), bool(term[i]), bool(trunc[i]), _info_row(info, i)))
        return out
    finally:
        env.close()


def _stream_per_env(task, kwargs, n, k, steps, mode, table, general=None):
    """The same through EnvPool's async mode: EnvPool's send/recv loop, each env sent its
    next action from ``table`` as it comes back. ``general``: a ``monkeypatch`` with which the
    pool's lean send/recv paths are turned off (the general path)."""
    env = envhive.make(f"envpool/{task}", n, env_kwargs=kwargs, seed=7, autoreset=mode, batch_size=k)
    assert type(env.pool.executor._engine) is _stream.StreamEngine
    if general is not None:
        general.setattr(env.pool, "_paths", env.pool._paths.without("lean_recv", "lean_send"))
    out = {i: [] for i in range(n)}
    try:
        env.async_reset()
        while min(len(v) for v in out.values()) < steps + 1:
            obs, rew, term, trunc, info = env.recv()
            ids = info["env_id"]
            assert len(ids) == k
            for j, i in enumerate(ids.tolist()):
                first = not out[i]
                out[i].append((_row(obs, j), 0.0 if first else float(rew[j]), bool(term[j]), bool(trunc[j]),
                               _info_row(info, j)))
            # Every env received goes again (those past ``steps`` keep the batch full).
            env.send(np.stack([table[min(len(out[i]) - 1, steps), i] for i in ids.tolist()]), ids)
        return out
    finally:
        env.close()


def _assert_same_per_env(a, b, steps):
    for i in a:
        for t in range(steps + 1):
            x, y = a[i][t], b[i][t]
            where = f"env {i} step {t}"
            if isinstance(x[0], dict):
                for key in x[0]:
                    np.testing.assert_array_equal(x[0][key], y[0][key], err_msg=where)
            else:
                np.testing.assert_array_equal(x[0], y[0], err_msg=where)
            assert x[1:4] == y[1:4], where
            assert x[4].keys() == y[4].keys() and x[4]["elapsed_step"] == y[4]["elapsed_step"], where
            if "final_obs" in x[4]:
                assert x[4]["final_elapsed"] == y[4]["final_elapsed"], where


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
@pytest.mark.parametrize("task,kwargs", CASES, ids=[c[0] for c in CASES])
def test_async_mode_equals_the_sync_engine_per_env(task, kwargs, mode):
    n, k, steps = 6, 3, 9
    space = envhive.make(f"envpool/{task}", 1, env_kwargs=kwargs)
    table = _action_table(space.single_action_space, n, steps + 1)
    space.close()
    ref = _sync_per_env(task, kwargs, n, steps, mode, table)
    assert any(row[3] for rows in ref.values() for row in rows), "no time limit hit"
    _assert_same_per_env(_stream_per_env(task, kwargs, n, k, steps, mode, table), ref, steps)


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_the_lean_recv_equals_the_general_recv(mode, monkeypatch):
    task, kwargs = CASES[0]
    n, k, steps = 4, 2, 8
    table = _action_table(envhive.make(f"envpool/{task}", 1).single_action_space, n, steps + 1)
    lean = _stream_per_env(task, kwargs, n, k, steps, mode, table)
    _assert_same_per_env(_stream_per_env(task, kwargs, n, k, steps, mode, table, general=monkeypatch), lean, steps)


@pytest.mark.parametrize("spares_reset", [False, True], ids=["spares-step", "spares-reset"])
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_sync_calls_on_an_async_pool_equal_the_sync_engine(mode, spares_reset, monkeypatch):
    """5 envs in batches of 2 (and 3): sync steps, partial and seeded resets need spares."""
    if spares_reset:  # an action space without a spare action: the spares are reset instead
        monkeypatch.setattr(_stream, "spare_action", lambda space, dtype: None)
    n, kwargs = 5, {"max_episode_steps": 4}

    def run(batch_size):
        env = envhive.make("envpool/CartPole-v1", n, env_kwargs=kwargs, autoreset=mode, batch_size=batch_size)
        rng = np.random.default_rng(1)
        try:
            steps = 3 if mode == "disabled" else 6  # disabled: no env ends before the partial reset
            rec = transcript(env, steps, lambda t: rng.integers(0, 2, n), seed=[3, 4, 5, 6, 7])
            rec.append(env.reset(options={"reset_mask": np.array([True, False, True, False, False])}))
            rec += transcript(env, 3, lambda t: rng.integers(0, 2, n), seed=9)[1:]
            return rec
        finally:
            env.close()

    ref = run(None)
    for k in (2, 3):
        assert_same_transcript(run(k), ref)


def test_partial_sends_fill_the_batch_as_they_come():
    n, k = 4, 2
    env = envhive.make("envpool/CartPole-v1", n, batch_size=k, seed=0)
    ref = envhive.make("envpool/CartPole-v1", n, seed=0)
    try:
        env.async_reset()
        first = env.recv()[-1]["env_id"].tolist() + env.recv()[-1]["env_id"].tolist()
        assert sorted(first) == [0, 1, 2, 3]
        env.send(np.array([1]), np.array([2]))
        with pytest.raises(NothingPendingError):
            env.recv()  # one env pending, batches of two
        env.send(np.array([0, 1]), np.array([0, 3]))
        got = {}
        for send in (np.array([1]), None):
            obs, rew, term, trunc, info = env.recv()
            got.update({int(i): obs[j] for j, i in enumerate(info["env_id"])})
            if send is not None:
                env.send(np.array([0]), send)
        assert sorted(got) == [0, 1, 2, 3] and env.pool.pending == 0
        ref.reset()
        want = ref.step(np.array([0, 0, 1, 1]))[0]
        for i, o in got.items():
            np.testing.assert_array_equal(o, want[i])
    finally:
        env.close(), ref.close()


@pytest.mark.parametrize("seed", [3, None])
def test_a_discard_leaves_a_pool_that_reset_takes(seed):
    n, k = 6, 2
    env = envhive.make("envpool/CartPole-v1", n, batch_size=k, seed=0)
    ref = envhive.make("envpool/CartPole-v1", n)
    try:
        env.async_reset()
        env.recv()
        ids = env.recv()[-1]["env_id"]
        env.send(np.ones(k, np.int64), ids)
        env.pool.cut_short(KeyboardInterrupt())  # what a Ctrl-C in a recv's layout does
        assert env.pool.pending == 0
        obs, info = env.reset(seed=seed)
        np.testing.assert_array_equal(info["elapsed_step"], np.zeros(n))
        engine = env.pool.executor._engine
        assert engine._dropped == 0 and engine._out == 0
        if seed is not None:  # every env reset with a seed: EnvPool's pool built again
            np.testing.assert_array_equal(obs, ref.reset(seed=seed)[0])
            for _ in range(3):
                a = np.ones(n, np.int64)
                np.testing.assert_array_equal(env.step(a)[0], ref.step(a)[0])
        else:
            np.testing.assert_array_equal(env.step(np.ones(n, np.int64))[-1]["elapsed_step"], np.ones(n))
    finally:
        env.close(), ref.close()


@pytest.mark.parametrize("batch_size", [2, None], ids=["async-mode", "sync-mode"])
def test_a_ctrl_c_as_envpools_recv_returns_loses_nothing_but_that_batch(batch_size, monkeypatch):
    """The interrupt strikes as EnvPool's ``_recv`` returns (its results lost): the call
    raises, and ``reset`` then gives a pool equal to a fresh one (no hang, nothing stale)."""
    n = 6
    env = envhive.make("envpool/CartPole-v1", n, batch_size=batch_size, seed=0)
    ref = envhive.make("envpool/CartPole-v1", n)
    try:
        env.reset()
        engine = env.pool.executor._engine
        real = engine._pool._recv

        def lost():
            real()
            raise KeyboardInterrupt

        monkeypatch.setattr(engine._pool, "_recv", lost)
        with pytest.raises(KeyboardInterrupt):
            if batch_size is None:
                env.step(np.ones(n, np.int64))
            else:
                env.send(np.ones(n, np.int64))
                env.recv()
        monkeypatch.undo()
        np.testing.assert_array_equal(env.reset(seed=4)[0], ref.reset(seed=4)[0])
        for _ in range(4):
            a = np.ones(n, np.int64)
            np.testing.assert_array_equal(env.step(a)[0], ref.step(a)[0])
    finally:
        env.close(), ref.close()
