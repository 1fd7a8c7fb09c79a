"""The Atari engine (``envs/atari/_engine.py`` over ``_alethreads``: ``_ale_game.h`` on the
threaded batch core): option for option the frames, rewards, flags and infos of ``AtariEnv`` on
the serial executor; the no-op counts drawn ahead across restocks; its threads gone after
``close`` (or garbage collection); a forked child; and where it cannot run, ``AtariEnv`` on the
process executor with the reason (``executor="native"``: a ``ConfigError``).
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

import envhive  # noqa: E402
from envhive.envs.atari import _ale  # noqa: E402
from envhive.envs.atari._engine import STOCK, AtariThreadEngine  # noqa: E402
from envhive.envs.atari._factory import AtariFactory  # noqa: E402
from envhive.errors import ConfigError  # noqa: E402
from envhive.executors import NativeExecutor  # noqa: E402
from envhive.testing import assert_same_transcript, transcript  # noqa: E402
from tests.forks import exit_code_of  # noqa: E402

pytestmark = pytest.mark.timeout(300)

GAME = "envhive/Breakout-v5"  # FIRE, five lives: fire resets and episodic life do something


def engine_of(env):
    return env._pool.executor._engine


def acts(n: int, actions: int):
    return lambda t: np.array([(t * 5 + 3 * i + t // 7) % actions for i in range(n)], np.int64)


def run(executor, kwargs: dict, mode: str, steps: int, n: int = 3, game: str = GAME):
    env = envhive.make(game, num_envs=n, executor=executor, autoreset=mode, env_kwargs=kwargs,
                       max_episode_steps=kwargs.pop("_limit", 30))
    try:
        rec = transcript(env, steps, acts(n, env.single_action_space.n), seed=[4, 5, 6][:n])
        return rec, env.single_observation_space, type(engine_of(env)) if executor != "serial" else None
    finally:
        env.close()


OPTION_SETS = [
    {},
    {"gray_scale": False, "stack_num": 2},  # RGB, channels first
    {"img_height": 210, "img_width": 160, "stack_num": 2},  # the screen itself, no resize
    {"img_height": 64, "img_width": 48, "full_action_space": True},
    {"frame_skip": 1},  # nothing to max-pool
    {"maxpool": False, "noop_max": 0},
    {"frame_skip": 3, "stack_num": 1, "use_fire_reset": False},
    {"episodic_life": True, "stack_padding": "zeros", "reset_order": "fire_noop", "life_loss_reset": "full"},
    {"episodic_life": True, "reward_clip": True, "repeat_action_probability": 0.25, "noop_max": 3},
    {"mode": 4, "difficulty": 1, "_limit": 45},
    {"use_inter_area_resize": False},  # OpenCV's INTER_LINEAR (where it rounds as the engine)
    {"use_inter_area_resize": False, "gray_scale": False, "stack_num": 2, "img_height": 64, "img_width": 48},
]


@pytest.mark.parametrize("kwargs", OPTION_SETS, ids=lambda kw: ",".join(kw) or "defaults")
@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_every_option_gives_atari_envs_transcript(kwargs, mode):
    if not kwargs.get("use_inter_area_resize", True):
        from envhive.envs.atari._frames import linear_matches_opencv

        size, channels = (kwargs.get("img_height", 84), kwargs.get("img_width", 84)), 1 + 2 * ("gray_scale" in kwargs)
        if not linear_matches_opencv((210, 160), size, channels):
            pytest.skip("this OpenCV's INTER_LINEAR rounds otherwise: the engine leaves it to AtariEnv")
    ref, space, _ = run("serial", dict(kwargs), mode, 70)
    got, got_space, kind = run(NativeExecutor(3), dict(kwargs), mode, 70)
    assert kind is AtariThreadEngine
    assert got_space == space
    assert_same_transcript(ref, got)
    ended = sum(int((r[2] | r[3]).sum()) for r in ref[1:])
    assert ended >= 3  # episodes ended (time limits, life losses): resets were compared


def test_the_noops_drawn_ahead_run_out_and_are_drawn_again_in_order():
    # Two agent steps per episode: every env resets 50 times here, past its stock of
    # STOCK no-op counts, which is drawn again from the same generator.
    kwargs = {"noop_max": 30, "_limit": 2}
    ref, _, _ = run("serial", dict(kwargs), "next_step", 150, n=2)
    env = envhive.make(GAME, num_envs=2, executor=NativeExecutor(2), env_kwargs={"noop_max": 30},
                       max_episode_steps=2)
    got = transcript(env, 150, acts(2, env.single_action_space.n), seed=[4, 5])
    restocked = engine_of(env)._stock_used.tolist()
    env.close()
    assert_same_transcript(ref, got)
    assert 150 // 3 > STOCK  # a reset every third call (next_step): more resets than one stock
    assert all(0 < used < STOCK for used in restocked)  # the stock was drawn again


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_close_and_garbage_collection_stop_the_threads():
    gc.collect()
    before = _threads()
    env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor=NativeExecutor(3))
    assert _threads() == before + 2  # three runners: the caller and two C++ threads
    env.reset()
    env.step(np.zeros(4, np.int64))
    env.close()
    assert _threads() == before
    env.close()  # idempotent
    env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor=NativeExecutor(3), batch_size=2)
    env.async_reset()
    env.recv()  # two envs still in flight
    del env
    gc.collect()
    assert _threads() == before


def test_one_env_runs_in_the_caller_and_more_runners_than_envs_are_not_started():
    gc.collect()
    before = _threads()
    one = envhive.make("envhive/Pong-v5", num_envs=1, seed=0)
    two = envhive.make("envhive/Pong-v5", num_envs=2, seed=0, executor=NativeExecutor(8))
    assert engine_of(one).num_threads == 1 and engine_of(one)._games.num_threads == 0
    assert engine_of(two).num_threads == 2 and engine_of(two)._games.num_threads == 1
    assert _threads() == before + 1
    one.close()
    two.close()


def test_async_recv_after_an_interrupted_send_and_discard_starts_afresh():
    """A discard drops the ops in flight (queued ones never run; running ones finish and are
    dropped): the pool's next seeded reset and steps are a fresh pool's."""
    env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor=NativeExecutor(2), batch_size=2)
    ref = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor="serial")
    try:
        env.async_reset()
        env.recv()
        env.send(np.zeros(2, np.int64), np.array([0, 1]))
        env._pool.raised_around(KeyboardInterrupt())  # what a Ctrl-C in a call does
        obs, _ = env.reset(seed=3)
        np.testing.assert_array_equal(obs, ref.reset(seed=3)[0])
        for t in range(5):
            a = np.full(4, t % 6, np.int64)
            got, want = env.step(a), ref.step(a)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
    finally:
        env.close()
        ref.close()


@pytest.mark.parametrize("kwargs, reason", [
    ({"use_inter_area_resize": False, "img_height": 300, "img_width": 200}, "INTER_LINEAR"),  # upscaling
    ({"img_height": 105, "img_width": 80}, "105x80"),
])
def test_options_the_engine_cannot_run_go_to_the_process_executor_with_the_reason(kwargs, reason):
    problem = AtariFactory({"game": "pong", **kwargs}).native_problem()
    assert problem is not None and problem.executor == "process" and reason in problem.reason
    env = envhive.make("envhive/Pong-v5", num_envs=2, seed=0, env_kwargs=kwargs)
    assert env.executor == "process" and reason in env.executor.why and reason in repr(env)
    env.close()
    with pytest.raises(ConfigError, match=reason):
        envhive.make("envhive/Pong-v5", num_envs=2, seed=0, env_kwargs=kwargs, executor="native")
    one = envhive.make("envhive/Pong-v5", num_envs=1, seed=0, env_kwargs=kwargs)
    assert one.executor == "serial" and reason in one.executor.why  # one env: in the caller
    one.close()


def test_a_failed_binding_check_falls_back_to_the_process_executor(monkeypatch):
    monkeypatch.setattr(_ale, "binding_problem", lambda: "the engine crashed (SIGSEGV) in its self-check")
    env = envhive.make("envhive/Pong-v5", num_envs=2, seed=0)
    assert env.executor == "process" and "SIGSEGV" in repr(env)
    ref = envhive.make("envhive/Pong-v5", num_envs=2, seed=0, executor="serial")
    np.testing.assert_array_equal(env.reset()[0], ref.reset()[0])  # the same frames
    env.close()
    ref.close()
    with pytest.raises(ConfigError, match="SIGSEGV"):
        envhive.make("envhive/Pong-v5", num_envs=2, executor="native")


def test_the_engine_choice_is_the_executor_keyword():
    """``executor=`` chooses where the games run (AtariEnv on the general executors)."""
    for executor in ("serial", "thread", "process"):
        env = envhive.make("envhive/Pong-v5", num_envs=2, seed=0, executor=executor)
        assert env.executor == executor
        env.close()


def test_the_self_check_passes_here():
    assert _ale.binding_problem() is None


def test_the_batch_refuses_what_would_crash():
    games = AtariThreadEngine(2, {"game": "pong"}, 1)._games
    with pytest.raises(ValueError, match="bind"):
        games.start(np.zeros(1, np.int64))
    frame = np.zeros((210, 160, 3), np.uint8)
    assert games.render_bytes == frame.nbytes
    with pytest.raises(ValueError, match="holds"):
        games.render(0, frame[:100])
    with pytest.raises(IndexError):
        games.render(2, frame)
    games.render(1, frame)  # env 1 not reset yet: its ROM is loaded first
    assert frame.any()
    games.close()
    with pytest.raises(ValueError, match="closed"):
        games.start(np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="closed"):
        games.render(0, frame)


def test_a_forked_child_steps_and_closes_the_pool_alone():
    """A child forked from a process with a pool has none of its threads: the child's caller
    runs every op itself, and its close joins nothing (neither hangs)."""
    env = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor=NativeExecutor(3), batch_size=2)
    env.reset(seed=1)
    ref = envhive.make("envhive/Pong-v5", num_envs=4, seed=0, executor="serial")
    ref.reset(seed=1)
    want = ref.step(np.ones(4, np.int64))[0]
    ref.close()
    pid = os.fork()
    if pid == 0:  # the child: a sync step, an async round trip with resets, a close
        code = 1
        try:
            got = env.step(np.ones(4, np.int64))[0]
            env.async_reset()  # four resets, of which recv waits for two: the threads'
            env.recv()  # share in the parent (async recv leaves resets to them), the caller's here
            env.close()
            code = 0 if np.array_equal(got, want) else 2
        finally:
            os._exit(code)
    assert exit_code_of(pid) == 0
    np.testing.assert_array_equal(env.step(np.ones(4, np.int64))[0], want)  # the parent goes on
    env.close()
