"""The compiled per-env generators (kernels/_rng.py) are numpy's, bit for bit: the state of
``PCG64(SeedSequence(seed))``, every family's stock of draws, the generator handed out by
``call("np_random")``, and whole episodes against gymnasium across many stock refills."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envhive
from envhive.kernels import _kernel as kernel_module
from envhive.kernels import _rng
from envhive.kernels._kernel import STOCK
from envhive.kernels.classic._acrobot import AcrobotKernel
from envhive.kernels.classic._cartpole import CartPoleKernel
from envhive.kernels.classic._mountain_car import MountainCarContinuousKernel, MountainCarKernel
from envhive.kernels.classic._pendulum import PendulumKernel

pytestmark = pytest.mark.timeout(300)

SEEDS = [0, 1, 7, 2**31, 2**32 - 1, 2**32, 2**32 + 5, 2**63 - 1, 2**63, 2**64 - 1,
         *np.random.default_rng(0).integers(0, 2**63, 40).tolist()]


def _state(words: np.ndarray) -> tuple[int, int]:
    return int(words[0]) << 64 | int(words[1]), int(words[2]) << 64 | int(words[3])


def test_seeding_is_numpys_pcg64_of_a_seed_sequence():
    words = np.zeros((len(SEEDS), 4), np.uint64)
    _rng.seed_words(np.array(SEEDS, np.uint64), words)
    for k, seed in enumerate(SEEDS):
        want = np.random.PCG64(np.random.SeedSequence(seed)).state["state"]
        assert _state(words[k]) == (want["state"], want["inc"]), f"seed {seed}"


def test_entropy_of_any_length_is_mixed_as_seed_sequence_mixes_it():
    """Unseeded envs take 128 bits of OS entropy; numpy drops leading zero 32-bit words."""
    values = [0, 5, 2**40 + 3, 2**96 - 1, 2**127 + 11, 2**128 - 1, 3 << 64]
    entropy = np.array([[(v >> (32 * k)) & 0xFFFFFFFF for k in range(4)] for v in values], np.uint64)
    lengths = np.array([max(1, (v.bit_length() + 31) // 32) for v in values], np.int64)
    words = np.zeros((len(values), 4), np.uint64)
    _rng._seed_rows(entropy, lengths, words)
    for k, v in enumerate(values):
        want = np.random.PCG64(np.random.SeedSequence(v)).state["state"]
        assert _state(words[k]) == (want["state"], want["inc"]), f"entropy {v}"


@pytest.mark.parametrize("kernel", [CartPoleKernel, AcrobotKernel, MountainCarKernel,
                                    MountainCarContinuousKernel, PendulumKernel],
                         ids=lambda k: k.__name__)
def test_each_familys_stock_is_its_own_draw(kernel):
    k = kernel(len(SEEDS))
    assert k.uniform_bounds is not None
    low, high, to_f32 = k.uniform_bounds
    words = np.zeros((len(SEEDS), 4), np.uint64)
    _rng.seed_words(np.array(SEEDS, np.uint64), words)
    noise = np.zeros((len(SEEDS), 2 * STOCK, k.noise_dim))
    ids = np.arange(len(SEEDS))
    _rng.fill_uniform(words, ids, ids, np.array(low), np.array(high), to_f32, noise, 2 * STOCK)
    for j, seed in enumerate(SEEDS):
        rng = gym.utils.seeding.np_random(seed)[0]
        want = k.draw(rng, 2 * STOCK)
        np.testing.assert_array_equal(noise[j], want, err_msg=f"seed {seed}")
        # The generator made from the words continues exactly where the draws left it.
        assert _rng.generator_of(words[j]).uniform(size=3).tolist() == rng.uniform(size=3).tolist()


@pytest.mark.parametrize("large", [False, True], ids=["stock-32", "large-pool-stock-8"])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Acrobot-v1"])
def test_episodes_match_gymnasium_across_stock_refills_and_a_generator_handed_out(env_id, large, monkeypatch):
    """Short random episodes (many more than STOCK resets per env), seeded at the start and
    reseeded midway; halfway, the envs' generators are asked for (made from their words), and
    the episodes still match gymnasium's vector env, whose envs draw from numpy generators.
    ``large``: as a pool of 2**16 envs or more is made (a stock of 8 resets per env)."""
    if large:
        monkeypatch.setattr(kernel_module, "_LARGE_POOL", 1)
    n, steps = 3, 2000 if env_id == "CartPole-v1" else 600
    ours = envhive.make(f"envhive/{env_id}", n, executor="native")
    assert ours.pool.executor._engine.kernel.stock == (8 if large else STOCK)
    ref = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * n)
    actions = np.random.default_rng(1).integers(0, ref.single_action_space.n, (steps, n))
    for seed in (5, 2**40):
        obs, _ = ours.reset(seed=seed)
        want, _ = ref.reset(seed=seed)
        np.testing.assert_array_equal(obs, want)
        for t in range(steps // 2):
            if t == steps // 4:
                ours.call("np_random")  # made from the words; the env draws in Python from now on
            got, want = ours.step(actions[t]), ref.step(actions[t])
            for a, b in zip(got[:4], want[:4]):
                np.testing.assert_array_equal(a, b)
    ours.close()
    ref.close()


def test_seeds_of_any_size_and_none_in_one_reset_match_gymnasium():
    """One reset with a seed beyond 2**64 (numpy's path), small ones (compiled) and none (the
    env continues its generator): every env's episode is gymnasium's."""
    seeds = [2**70 + 3, 5, None, 2**64 - 1]
    ours = envhive.make("envhive/CartPole-v1", 4, executor="native")
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4)
    ours.reset(seed=[1, 2, 3, 4])
    ref.reset(seed=[1, 2, 3, 4])
    obs, _ = ours.reset(seed=seeds)
    want, _ = ref.reset(seed=seeds)
    np.testing.assert_array_equal(obs, want)
    actions = np.random.default_rng(2).integers(0, 2, (300, 4))
    for a in actions:
        for x, y in zip(ours.step(a)[:4], ref.step(a)[:4]):
            np.testing.assert_array_equal(x, y)
    ours.close()
    ref.close()


def test_the_op_loop_draws_a_new_stock_itself_for_compiled_generators(monkeypatch):
    """An env whose stock of reset draws runs out gets the next stock inside the compiled loop
    (no call back to Python's ``restock``) when its generator lives in words; an env whose
    generator was handed out as an object (``call("np_random")``) is restocked from Python.
    The episodes themselves are checked against gymnasium by the test above."""
    calls = []
    original = CartPoleKernel.restock

    def counting(self, ids=None):
        calls.append(ids)
        return original(self, ids)

    monkeypatch.setattr(CartPoleKernel, "restock", counting)
    env = envhive.make("envhive/CartPole-v1", 4, executor="native")
    env.reset(seed=3)
    kernel = env.pool.executor._engine.kernel
    actions = np.random.default_rng(0).integers(0, 2, (1000, 4))  # ~45 episodes per env
    for a in actions:
        env.step(a)
    assert kernel._in_words.all()
    assert [ids for ids in calls if ids is None] == []  # every refill was compiled
    env.call("np_random", env_ids=[0])  # env 0 now draws in Python
    for _ in range(800):  # always pushing right: episodes of ~10 steps, past env 0's stock
        env.step(np.ones(4, np.int64))
    assert [ids for ids in calls if ids is None]  # env 0's stock ran out: Python restocked it
    assert not kernel._in_words[0] and kernel._in_words[1:].all()
    env.close()
