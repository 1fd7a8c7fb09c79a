"""envhive's Atari preprocessing checked step by step against references, on fixed seeds.

References (see docs/semantics.md, "Atari"):

* gymnasium's ``ALE/<Game>-v5`` (``frameskip=1``) wrapped in ``AtariPreprocessing`` and
  ``FrameStackObservation(padding_type="reset")``: frame skip, max-pool of the last two
  frames, INTER_AREA resize, stacking, noop starts (same seed, same draws), sticky actions
  (same ALE seed), episodic life's end flag. Its options coincide with EnvPool's when there is
  no fire reset.
* ``ale_py.vector_env.AtariVectorEnv``: the fire reset (ale-py presses FIRE before its
  no-ops, so envhive's ``reset_order="fire_noop"`` with ``noop_max=1``, i.e. no no-ops, is
  the same reset), zero stack padding, reward clipping.
"""

from __future__ import annotations

import numpy as np
import pytest

ale_py = pytest.importorskip("ale_py")
pytest.importorskip("cv2")

import gymnasium as gym  # noqa: E402

from envhive.envs.atari import AtariEnv  # noqa: E402

gym.register_envs(ale_py)
STEPS = 300


def gym_reference(game: str, *, noop_max: int, sticky: float = 0.0, life: bool = False) -> gym.Env:
    env = gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=sticky,
                   max_episode_steps=None)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=noop_max, frame_skip=4, screen_size=84,
                                          terminal_on_life_loss=life, grayscale_obs=True)
    return gym.wrappers.FrameStackObservation(env, 4, padding_type="reset")


def actions(n: int, k: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(0, n, size=k).tolist()


@pytest.mark.parametrize(
    ("game", "noop_max", "sticky", "seed"),
    [("Pong", 0, 0.0, 0), ("Pong", 30, 0.0, 3), ("Breakout", 30, 0.25, 7)],
)
def test_matches_gymnasium_atari_preprocessing(game, noop_max, sticky, seed):
    rom = {"Pong": "pong", "Breakout": "breakout"}[game]
    ours = AtariEnv(rom, noop_max=noop_max, use_fire_reset=False, repeat_action_probability=sticky)
    ref = gym_reference(game, noop_max=noop_max, sticky=sticky)
    obs, _ = ours.reset(seed=seed)
    robs, _ = ref.reset(seed=seed)
    np.testing.assert_array_equal(obs, robs)
    ended = 0
    for t, a in enumerate(actions(ours.action_space.n, STEPS, seed)):
        obs, rew, term, trunc, info = ours.step(a)
        robs, rrew, rterm, rtrunc, _ = ref.step(a)
        np.testing.assert_array_equal(obs, robs, err_msg=f"step {t}")
        assert (rew, term, trunc) == (float(rrew), rterm, rtrunc), t
        assert info["reward"] == rew
        if term or trunc:
            ended += 1
            break
    assert ended == 0 or t > 10


def test_episodic_life_ends_on_a_life_loss_as_atari_preprocessing_does():
    # Breakout: 5 lives; FIRE launches the ball. Rewards and end flags match gymnasium's
    # terminal_on_life_loss up to the first life loss (gymnasium stops the frame skip there,
    # EnvPool does not: the frames of that one step differ, the flags do not).
    ours = AtariEnv("breakout", noop_max=0, use_fire_reset=False, episodic_life=True)
    ref = gym_reference("Breakout", noop_max=0, life=True)
    ours.reset(seed=1)
    ref.reset(seed=1)
    lives0 = None
    for t in range(2000):
        a = 1 if t % 4 == 0 else 3
        obs, rew, term, trunc, info = ours.step(a)
        robs, rrew, rterm, _, _ = ref.step(a)
        lives0 = lives0 or int(info["lives"])
        assert rew == rrew and term == rterm, t
        if term:
            break
        np.testing.assert_array_equal(obs, robs, err_msg=f"step {t}")
    assert term and int(info["lives"]) == lives0 - 1 and not info["terminated"]
    # EnvPool's autoreset after a life loss goes on with the same game: lives and the step
    # count carry over, and the stack keeps its frames (one new frame pushed).
    elapsed = int(info["elapsed_step"])
    obs2, info2 = ours.reset()
    assert int(info2["lives"]) == lives0 - 1 and int(info2["elapsed_step"]) == elapsed
    np.testing.assert_array_equal(obs2[:-1], obs[1:])
    # life_loss_reset="full" (ale-py's) restarts the game instead.
    full = AtariEnv("breakout", noop_max=0, use_fire_reset=False, episodic_life=True,
                    life_loss_reset="full")
    full.reset(seed=1)
    for t in range(2000):
        *_, term, _, info = full.step(1 if t % 4 == 0 else 3)
        if term:
            break
    assert int(full.reset()[1]["lives"]) == lives0


def ale_vector(game: str, **kwargs):
    AtariVectorEnv = pytest.importorskip("ale_py.vector_env", reason="ale-py < 0.11 has no AtariVectorEnv").AtariVectorEnv

    return AtariVectorEnv(game, num_envs=1, num_threads=1, **kwargs)


@pytest.mark.parametrize("clip", [False, True])
def test_fire_reset_zero_padding_and_clipping_match_ale_vector_env(clip):
    # ale-py: FIRE then no-ops (noop_max=1: none), zero-padded stack, clipping by sign.
    # Space Invaders: FIRE is in its action set, and its rewards (5..30) need clipping.
    ours = AtariEnv("space_invaders", noop_max=1, reset_order="fire_noop", stack_padding="zeros",
                    reward_clip=clip)
    ref = ale_vector("space_invaders", noop_max=1, reward_clipping=clip, use_fire_reset=True,
                     max_num_frames_per_episode=108000)
    obs, _ = ours.reset(seed=5)
    robs, _ = ref.reset(seed=5)
    np.testing.assert_array_equal(obs, robs[0])
    assert not obs[:-1].any()  # zeros before the first frame
    rewards = 0.0
    for t, a in enumerate(actions(ours.action_space.n, STEPS, 5)):
        obs, rew, term, trunc, info = ours.step(a)
        robs, rrew, rterm, rtrunc, _ = ref.step(np.array([a], np.int32))
        if term or trunc:
            break
        np.testing.assert_array_equal(obs, robs[0], err_msg=f"step {t}")
        assert rew == float(rrew[0]), t
        assert abs(rew) <= 1 or not clip
        rewards += float(info["reward"])
    assert rewards > 1  # scored more than 1: the clipping was exercised
    ref.close()


def test_fire_reset_presses_fire_after_the_noops_by_default():
    # EnvPool: no-ops, then FIRE. With noop_max=1 there are no no-ops either way, so both
    # orders give the same reset; with more no-ops the frame differs.
    a = AtariEnv("breakout", noop_max=1)
    b = AtariEnv("breakout", noop_max=1, reset_order="fire_noop")
    np.testing.assert_array_equal(a.reset(seed=2)[0], b.reset(seed=2)[0])
    assert a._fire
    a = AtariEnv("breakout", noop_max=30)
    b = AtariEnv("breakout", noop_max=30, reset_order="fire_noop")
    # Same seed: same no-op count; only the order differs.
    obs_a, obs_b = a.reset(seed=4)[0], b.reset(seed=4)[0]
    assert obs_a.shape == obs_b.shape
    assert not AtariEnv("pong", use_fire_reset=False)._fire


def test_stack_repeats_the_first_frame_and_frame_skip_one_never_pools():
    env = AtariEnv("pong", frame_skip=1, noop_max=0, use_fire_reset=False, stack_num=3)
    obs, _ = env.reset(seed=0)
    assert (obs == obs[-1]).all()
    ref = gym.wrappers.FrameStackObservation(gym.wrappers.AtariPreprocessing(
        gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0), noop_max=0,
        frame_skip=1), 3, padding_type="reset")
    np.testing.assert_array_equal(obs, ref.reset(seed=0)[0])
    for t in range(100):
        np.testing.assert_array_equal(env.step(t % 6)[0], ref.step(t % 6)[0])


def test_truncation_after_max_episode_steps_agent_steps():
    env = AtariEnv("pong", max_episode_steps=20)
    env.reset(seed=0)
    for t in range(20):
        _, _, term, trunc, info = env.step(0)
    assert trunc and not term and int(info["elapsed_step"]) == 20
