"""envhive/<Game>-v5 in a pool: the same seed gives the same frames on every executor, in every
autoreset mode, in async use whatever the batch size, and after a seeded partial reset."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

import envhive  # noqa: E402
from envhive.executors import NativeExecutor  # noqa: E402
from envhive.testing import assert_same_transcript, transcript  # noqa: E402

# Breakout with episodic life and a short time limit: episodes end (both ways) within a few
# dozen steps, so autoresets happen in a short test.
ID = "envhive/Breakout-v5"
KW = {"episodic_life": True, "noop_max": 5}
# "native": the threaded engine (two runners here); "native-3": three (more than the cores);
# "native-1": the caller alone.
EXECUTORS = ["serial", "thread", "process", "native", "native-3", "native-1"]


def acts(t: int, n: int = 3) -> np.ndarray:
    return np.array([(t * 7 + 3 * i) % 4 for i in range(n)], dtype=np.int64)


def make(executor: str, mode: str = "next_step", n: int = 3, **kw):
    ex = {"native-1": NativeExecutor(num_threads=1), "native-3": NativeExecutor(num_threads=3)}.get(executor, executor)
    return envhive.make(ID, num_envs=n, executor=ex, autoreset=mode, env_kwargs=KW, max_episode_steps=40, **kw)


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_same_transcript_on_every_executor(mode):
    runs = []
    for executor in EXECUTORS:
        env = make(executor, mode)
        if mode == "disabled":
            rec = [env.reset(seed=3)]
            for t in range(90):
                out = env.step(acts(t))
                rec.append(tuple(x.copy() if isinstance(x, np.ndarray) else x for x in out))
                ended = out[2] | out[3]
                if ended.any():
                    env.reset(options={"reset_mask": ended})
        else:
            rec = transcript(env, 90, acts, seed=3)
        env.close()
        runs.append(rec)
    ended = sum(int((r[2] | r[3]).sum()) for r in runs[0][1:])
    assert ended >= 3  # the run crossed episode ends (life losses and time limits)
    for other in runs[1:]:
        assert_same_transcript(runs[0], other)


def test_same_step_final_obs_is_the_terminal_frame_of_disabled_mode():
    a = make("serial", "same_step")
    b = make("serial", "disabled")
    a.reset(seed=1)
    b.reset(seed=1)
    seen = 0
    for t in range(60):
        _, ra, ta, tra, info = a.step(acts(t))
        ob, rb, tb, trb, _ = b.step(acts(t))
        np.testing.assert_array_equal(ra, rb)
        ended = tb | trb
        np.testing.assert_array_equal(ta | tra, ended)
        for i in np.flatnonzero(ended):
            np.testing.assert_array_equal(info["final_obs"][i], ob[i])
            seen += 1
        if ended.any():
            b.reset(options={"reset_mask": ended})
            b.reset(options={"reset_mask": ended})  # stay in step: same_step reset them once
            break
    assert seen >= 1
    a.close()
    b.close()


def per_env_async(executor: str, batch_size: int, rows: int = 10, mode: str = "next_step") -> dict[int, list]:
    """Each env's own sequence of (obs sum, reward, flags, infos, terminal frame sum), with
    actions a function of the env and its own step count, received batch by batch until
    every env has at least ``rows`` rows (which envs finish first depends on the machine's
    load: a busy machine can hold one worker back for dozens of batches)."""
    env = make(executor, mode, n=4, batch_size=batch_size, seed=5)
    seqs: dict[int, list] = {i: [] for i in range(4)}
    env.async_reset()
    for _ in range(200 * rows):
        if min(len(s) for s in seqs.values()) >= rows:
            break
        obs, rew, term, trunc, info = env.recv()
        ids = info["env_id"]
        for k, i in enumerate(ids.tolist()):
            infos = tuple(int(info[key][k]) for key in ("lives", "elapsed_step", "terminated"))
            final = (int(info["final_obs"][k].sum()),
                     *(float(info["final_info"][key][k]) for key in ("lives", "elapsed_step", "reward"))) \
                if info.get("_final_obs", np.zeros(len(ids), bool))[k] else None
            seqs[i].append((int(obs[k].sum()), float(rew[k]), bool(term[k]), bool(trunc[k]), infos, final))
        env.send(np.array([(len(seqs[i]) * 5 + i) % 4 for i in ids.tolist()]), ids)
    env.close()
    return seqs


def test_async_sequences_per_env_do_not_depend_on_batch_size_or_executor():
    ref = per_env_async("serial", 4)
    for executor, batch in [("serial", 1), ("thread", 1), ("process", 2), ("native", 2), ("native", 1),
                            ("native-3", 3), ("native-1", 2), ("native-1", 1)]:
        got = per_env_async(executor, batch)
        for i in range(4):
            assert got[i][:10] == ref[i][:10], (executor, batch, i)


@pytest.mark.parametrize("executor", ["native", "native-1"])
def test_async_same_step_keeps_terminal_frames_and_final_infos_on_the_native_engine(executor):
    """The async path runs each env's whole op in a thread (the reset after an ended step
    included): the terminal frame, the final info and the reset's infos equal serial's."""
    ref = per_env_async("serial", 4, rows=45, mode="same_step")
    got = per_env_async(executor, 2, rows=45, mode="same_step")
    finals = truncated = 0
    for i in range(4):
        assert got[i][:45] == ref[i][:45], i
        finals += sum(row[-1] is not None for row in got[i][:45])
        truncated += sum(row[3] for row in got[i][:45])
    assert finals >= 2 and truncated >= 1  # life losses and the time limit, compared


@pytest.mark.parametrize("executor", ["process", "native", "native-1"])
def test_partial_reset_with_a_seed_reproduces_a_fresh_env(executor):
    env = make(executor, n=2, seed=0)
    env.reset()
    for t in range(7):
        env.step(acts(t, 2))
    obs, _ = env.reset(seed=[None, 11], options={"reset_mask": np.array([False, True])})
    fresh = make("serial", n=1)
    fobs, _ = fresh.reset(seed=11)
    np.testing.assert_array_equal(obs[1], fobs[0])
    for t in range(30):
        a = acts(t, 2)
        o, r, *_ = env.step(a)
        fo, fr, *_ = fresh.step(a[1:])
        np.testing.assert_array_equal(o[1], fo[0])
        assert r[1] == fr[0]
    env.close()
    fresh.close()


@pytest.mark.parametrize("executor", ["process", "native", "native-1"])
def test_first_env_is_seeded_like_the_others_and_recv_without_send_raises(executor):
    a = make(executor, n=2, seed=9)
    b = make("serial", n=2, seed=9)
    np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
    with pytest.raises(envhive.errors.InvalidStateError):
        a.recv()
    a.close()
    b.close()


def test_default_executor_is_native_with_the_threaded_engine():
    from envhive.envs.atari._engine import AtariThreadEngine

    one = envhive.make(ID, num_envs=1)
    two = envhive.make(ID, num_envs=2)
    # One game runs in the caller (no thread to wait for); two on two runners: the caller
    # and one C++ thread.
    assert "native (auto)" in repr(one) and "threads" not in repr(one)
    assert "native, 2 threads" in repr(two)
    assert isinstance(two._pool.executor._engine, AtariThreadEngine)
    assert two._pool.executor._engine._games.num_threads == 1
    assert one._pool.executor._engine._games.num_threads == 0
    one.close()
    two.close()
