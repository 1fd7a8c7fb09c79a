"""The lean async paths (``Executor.take_finished`` in ``Pool.recv``, ``FastPaths.send_ids`` in
``Pool.send``; see ``envhive._paths``) against the general one, on the native Atari engine.

Which envs a ``recv`` returns depends on which finished first, so each run here waits, before
every ``recv``, until the workers have finished everything sent: the engine then takes every
env in flight at once, in the same order on both paths, and the two runs must agree batch for
batch (ids, frames, rewards, flags, ops, infos, terminal frames and final infos) and leave the
same books. The general run is the same pool with the lean routes switched off.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

import envhive  # noqa: E402
from envhive._books import IDLE  # noqa: E402
from envhive._ops import STEP  # noqa: E402
from envhive.errors import EnvWorkerError  # noqa: E402
from envhive.executors import NativeExecutor  # noqa: E402
from tests.bounded import wait_until  # noqa: E402

ID = "envhive/Breakout-v5"
KW = {"episodic_life": True, "noop_max": 5}  # episodes end within a few dozen steps


def _make(mode: str, n: int, batch_size: int):
    # Two runners: one C++ thread and the caller, which finds every env finished here and runs
    # none, so envs finish in the order queued.
    return envhive.make(ID, num_envs=n, executor=NativeExecutor(2), autoreset=mode, env_kwargs=KW,
                        max_episode_steps=12, batch_size=batch_size, seed=3)


def _settle(env) -> None:
    """Wait (boundedly) until the threads ran every job queued."""
    games = env._pool.executor._engine._games
    assert wait_until(lambda: bool(games.idle()), poll=1e-3), "the threads did not finish"


def _row(batch, info, k: int) -> tuple:
    """Everything a recv says about its k-th env, as plain values."""
    obs, rew, term, trunc = batch[:4]
    keys = sorted(key for key in info if not key.startswith("_") and key not in ("final_obs", "final_info"))
    infos = tuple((key, info[key][k].item() if hasattr(info[key][k], "item") else info[key][k],
                   bool(info["_" + key][k]) if "_" + key in info else True) for key in keys)
    final = None
    if "_final_obs" in info and info["_final_obs"][k]:
        fi = info["final_info"]
        final = (int(info["final_obs"][k].astype(np.int64).sum()),
                 tuple((key, fi[key][k].item()) for key in sorted(fi) if not key.startswith("_")))
    return (int(info["env_id"][k]), int(obs[k].astype(np.int64).sum()), float(rew[k]),
            bool(term[k]), bool(trunc[k]), infos, final)


def _run(mode: str, n: int, batch_size: int, lean: bool, script_seed: int, calls: int = 40):
    with pytest.MonkeyPatch.context() as m:
        return _patched_run(m, mode, n, batch_size, lean, script_seed, calls)


def _patched_run(m: pytest.MonkeyPatch, mode: str, n: int, batch_size: int, lean: bool,
                 script_seed: int, calls: int):
    env = _make(mode, n, batch_size)
    pool = env._pool
    taken = []
    if lean:
        take = pool._paths.take_finished
        assert take is not None  # the native Atari engine offers it

        def counted(k):
            got = take(k)
            taken.append(got is not None)
            return got

        m.setattr(pool, "_paths", dataclasses.replace(pool._paths, take_finished=counted))
    else:
        m.setattr(pool, "_paths", pool._paths.without("lean_recv", "lean_send"))
    rng = np.random.default_rng(script_seed)
    out = []
    env.async_reset(seed=list(range(10, 10 + n)))
    for _ in range(calls):
        _settle(env)
        batch = env.recv()
        info = batch[4]
        ids = info["env_id"]
        out.append([_row(batch, info, k) for k in range(len(ids))])
        ended = batch[2] | batch[3]
        if mode == "disabled" and ended.any():  # ended envs must be reset before a step
            done = ids[ended]
            env.async_reset(done, seed=[int(s) for s in rng.integers(0, 99, n)])  # one per env of the pool
            ids = ids[~ended]
            if not ids.size:
                continue
        # Now and then a partial reset with a seed, or actions as a list (the general send).
        if rng.random() < 0.1 and ids.size > 1:
            env.async_reset(ids[:1], seed=int(rng.integers(0, 99)))
            ids = ids[1:]
        acts = rng.integers(0, 4, ids.size)
        env.send(acts.tolist() if rng.random() < 0.2 else acts, ids)
    books = pool._books
    state = (books.status.tolist(), books.in_flight, books.resets_in_flight, list(books.ready),
             pool.env_steps, pool._life.ended.tolist(), pool._life.num_ended, pool._life.broken.tolist())
    env.close()
    return out, state, taken


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
# (4, 2): after the first recv, each takes exactly the envs in flight; (6, 3): half of the
# recvs find 6 finished and leave 3 ready, which the next recv (general) hands out.
@pytest.mark.parametrize(("n", "batch_size"), [(4, 2), (6, 3)])
def test_lean_recv_and_send_give_what_the_general_path_gives(mode, n, batch_size):
    lean_out, lean_state, taken = _run(mode, n, batch_size, True, script_seed=n)
    general_out, general_state, _ = _run(mode, n, batch_size, False, script_seed=n)
    assert lean_out == general_out
    assert lean_state == general_state
    assert sum(taken) >= 10  # the lean recv served many calls (the rest had envs ready)
    ended = [row for batch in lean_out for row in batch if row[3] or row[4]]
    assert len(ended) >= 3  # episodes ended (resets and final infos were compared)


def test_take_finished_leaves_an_env_error_to_the_general_collect():
    """An env that raised among the finished: nothing is handed over lean; ``collect`` hands
    over the finished envs and the error, as it does without the lean path."""
    env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor="native", batch_size=4)
    env.reset(seed=0)
    engine = env._pool.executor._engine
    b = engine._ob
    b.ops[:] = STEP
    b.actions[:] = [0, 99, 0, 0]  # past the pool's check: the game's own check refuses env 1's
    engine.start(np.arange(4, dtype=np.int64), None)
    assert engine.take_finished(4) is None
    out = engine.collect(0)
    assert sorted(out.env_ids) == [0, 2, 3] and list(out.errors) == [1]
    env.close()


def test_recv_raises_an_env_error_met_on_the_lean_path_and_the_pool_goes_on():
    env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor="native", batch_size=2)
    env.reset(seed=0)
    pool = env._pool
    engine = pool.executor._engine
    real_start = engine.start

    def bad_start(ids, options):  # env 1's action, corrupted after the pool checked it
        pool.buffers.actions[1] = 99
        real_start(ids, options)

    engine.start = bad_start
    env.send(np.zeros(4, np.int64), np.arange(4))
    engine.start = real_start
    with pytest.raises(EnvWorkerError, match="99"):
        while True:
            env.recv()
    # The error came once every env it arrived with was booked: env 1 is broken, and a reset
    # brings the pool back.
    assert pool._life.broken[1] and pool._books.status[1] == IDLE
    if pool.pending:
        pool.wait(timeout=30)  # the others' rows
    env.reset(seed=1)
    env.step(np.zeros(4, np.int64))
    env.close()


def test_send_ids_accepts_only_what_the_general_path_accepts():
    env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor="native", batch_size=2)
    env.reset(seed=0)
    pool = env._pool
    ok = pool._paths.send_ids(np.zeros(2, np.int64), np.array([3, 1]), pool._books.status)
    assert ok is not None and ok.tolist() == [3, 1] and ok.dtype == np.int64
    for acts, ids in [
        (np.zeros(2, np.int64), np.array([1, 1])),  # an env twice
        (np.zeros(2, np.int64), np.array([1, 4])),  # out of range
        (np.zeros(2, np.int64), np.array([-1, 0])),
        (np.zeros(2, np.int64), np.array([0.0, 1.0])),  # not ints
        (np.zeros(2, np.int64), np.array([[0, 1]])),  # not 1-d
        (np.zeros(3, np.int64), np.array([0, 1])),  # one action too many
        (np.array([0, 6]), np.array([0, 1])),  # outside the action space
        (np.zeros(2, np.float64), np.array([0, 1])),  # floats for a Discrete space
        (np.zeros(2, np.int64), [0, 1]),  # not an array: the general path converts it
        (np.zeros(0, np.int64), np.zeros(0, np.int64)),
    ]:
        assert pool._paths.send_ids(acts, ids, pool._books.status) is None, (acts, ids)
    env.send(np.zeros(2, np.int64), np.array([0, 1]))
    assert pool._paths.send_ids(np.zeros(2, np.int64), np.array([1, 2]), pool._books.status) is None  # env 1 is pending
    env.close()
