"""envhive/<Game>-v5 in a pool: the same seed gives the same frames on every executor, in every
autoreset mode, in async use whatever the batch size, and after a seeded partial reset; the
``ram`` info (``ram_info``) and the rendered screens are the same on every executor too."""

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


def make(executor: str, mode: str = "next_step", n: int = 3, options: dict | None = None, **kw):
    ex = {"native-1": NativeExecutor(num_threads=1), "native-3": NativeExecutor(num_threads=3)}.get(executor, executor)
    return envhive.make(ID, num_envs=n, executor=ex, autoreset=mode, env_kwargs={**KW, **(options or {})},
                        max_episode_steps=40, **kw)


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


SHOW = {"ram_info": True, "render_mode": "rgb_array"}


def screens(env) -> np.ndarray:
    return np.stack(env.render())


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_ram_info_and_rendered_screens_are_the_same_on_every_executor(mode):
    """The ``ram`` info of steps, resets and (same_step) final infos, and ``render()`` after
    the run, equal serial's on every executor (the native engine reads ALE's RAM and screen
    through ale-py's exported C++ API; the others call ale-py's Python binding)."""
    runs = []
    for executor in EXECUTORS:
        env = make(executor, mode, options=SHOW)
        try:
            before = screens(env)  # before any reset: a loaded ROM's screen
            rec = transcript(env, 60, acts, seed=3)
            runs.append((rec, before, screens(env)))
        finally:
            env.close()
    rec, before, after = runs[0]
    assert rec[0][1]["ram"].shape == (3, 128) and rec[0][1]["ram"].dtype == np.uint8
    assert before.shape == after.shape == (3, 210, 160, 3)
    assert sum(int((r[2] | r[3]).sum()) for r in rec[1:]) >= 2  # episodes ended: resets compared
    assert len({bytes(r[-1]["ram"]) for r in rec}) > 10  # the RAM changes as the game runs
    for executor, (other, other_before, other_after) in zip(EXECUTORS[1:], runs[1:]):
        assert_same_transcript(rec, other)
        np.testing.assert_array_equal(other_after, after, err_msg=executor)
        np.testing.assert_array_equal(other_before, before, err_msg=executor)


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_async_ram_per_env_is_serials_on_the_native_engine(mode):
    """The async path (the engine's info table, rows taken per batch; same_step: the final
    infos too) hands out each env's RAM as serial's."""
    ref = per_env_async("serial", 4, rows=30, mode=mode, ram=True)
    if mode == "same_step":  # life losses ended episodes: final infos' RAM compared
        assert sum(row[-1] is not None for i in ref for row in ref[i][:30]) >= 2
    for executor, batch in [("native", 2), ("native-1", 1)]:
        got = per_env_async(executor, batch, rows=30, mode=mode, ram=True)
        for i in range(4):
            assert got[i][:30] == ref[i][:30], (executor, batch, i)


@pytest.mark.parametrize("executor", ["serial", "native"])
def test_without_ram_info_there_is_no_ram_and_without_render_mode_render_is_none(executor):
    env = envhive.make(ID, num_envs=2, executor=executor, env_kwargs=KW)
    try:
        _, info = env.reset(seed=0)
        assert "ram" not in info and "ram" not in env.step(acts(0, 2))[-1]
        assert env.render() == (None, None)
    finally:
        env.close()


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


def per_env_async(executor: str, batch_size: int, rows: int = 10, mode: str = "next_step",
                  ram: bool = False) -> dict[int, list]:
    """Each env's own sequence of (obs sum, reward, flags, infos, terminal frame sum), with
    actions a function of the env and its own step count, received batch by batch until
    every env has at least ``rows`` rows (which envs finish first depends on the machine's
    load: a busy machine can hold one worker back for dozens of batches)."""
    env = make(executor, mode, n=4, batch_size=batch_size, seed=5, options={"ram_info": ram})
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
            if ram:
                infos += (bytes(info["ram"][k]),)
                final = final and (*final, bytes(info["final_info"]["ram"][k]))
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


@pytest.mark.parametrize("crop, rows", [(False, 220), (True, 210)])
def test_a_tall_screen_renders_whole_or_cropped_as_envpool_the_same_on_every_executor(crop, rows):
    """Pooyan's screen has 220 lines: rendered whole, or with ``envpool_crop`` its top 210
    (EnvPool's render), on serial and the native engine alike."""
    shown = []
    for executor in ("serial", "native"):
        env = envhive.make("envhive/Pooyan-v5", num_envs=2, executor=executor, seed=1,
                           env_kwargs={"envpool_crop": crop, "render_mode": "rgb_array", "noop_max": 3})
        try:
            env.reset()
            for t in range(5):
                env.step(acts(t, 2) % 3)
            shown.append(screens(env))
        finally:
            env.close()
    assert shown[0].shape == (2, rows, 160, 3)
    np.testing.assert_array_equal(shown[1], shown[0])
