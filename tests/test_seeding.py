"""Seeding: make(seed=...) seeds each env's first reset (s + i, or one per env) and the action space.

Only an env's *first* reset uses make's seed; later resets (explicit or autoreset) continue the
env's own RNG. The same seed gives the same run, on every executor.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import envhive
from envhive.executors import available_executors
from envhive.testing import SPACE_ZOO, CountingEnv, ZooEnv, assert_same_transcript, transcript

pytestmark = pytest.mark.timeout(300)


class SeedLog(CountingEnv):
    """A CountingEnv that records the seed of every reset it receives (autoresets included)."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.seeds: list[int | None] = []

    def reset(self, *, seed=None, options=None):
        self.seeds.append(seed)
        return super().reset(seed=seed, options=options)


def zoo_factory():
    return ZooEnv(SPACE_ZOO["dict"], SPACE_ZOO["multidiscrete"], max_len=4)


def zoo_actions(t: int, n: int = 3) -> np.ndarray:
    return np.array([[(t + i) % 3, (2 * t + i) % 4] for i in range(n)], np.int64)


def cartpole_actions(t: int, n: int = 3) -> np.ndarray:
    return np.array([(t * 7 + i) % 2 for i in range(n)], np.int64)


@pytest.mark.parametrize(
    "env_fn, actions",
    [("CartPole-v1", cartpole_actions), (zoo_factory, zoo_actions)],
    ids=["cartpole", "zoo"],
)
def test_make_seed_equals_reset_seed(env_fn, actions):
    with envhive.make(env_fn, 3, seed=123) as a, envhive.make(env_fn, 3) as b:
        run_a = transcript(a, 40, actions, seed=None)
        run_b = transcript(b, 40, actions, seed=123)
    assert_same_transcript(run_a, run_b)
    with envhive.make(env_fn, 3, seed=123) as c:
        assert_same_transcript(run_a, transcript(c, 40, actions, seed=None))
    with envhive.make(env_fn, 3, seed=124) as d:
        other = transcript(d, 40, actions, seed=None)
    with pytest.raises(AssertionError):
        assert_same_transcript(run_a, other)  # a different seed gives a different run


def test_int_seed_gives_env_i_seed_plus_i():
    with envhive.make(SeedLog, 4, seed=10) as env:
        obs, _ = env.reset()
        assert obs[:, 0].tolist() == [10, 11, 12, 13]  # CountingEnv's tag is its first seed
        assert env.get_attr("seeds") == ([10], [11], [12], [13])


def test_reset_int_seed_gives_env_i_seed_plus_i():
    with envhive.make(SeedLog, 3) as env:
        obs, _ = env.reset(seed=np.int64(5))
        assert obs[:, 0].tolist() == [5, 6, 7]
        assert env.get_attr("seeds") == ([5], [6], [7])


def test_list_seeds():
    with envhive.make(SeedLog, 3, seed=[5, None, 7]) as env:
        obs, _ = env.reset()
        assert obs[:, 0].tolist() == [5, -1, 7]
        assert env.get_attr("seeds") == ([5], [None], [7])
        env.reset(seed=[0, 1, None])
        assert env.get_attr("seeds") == ([5, 0], [None, 1], [7, None])


def test_only_first_reset_uses_make_seed():
    fn = lambda: SeedLog(pattern=[(2, "term")])
    with envhive.make(fn, 2, seed=10) as env:
        env.reset()
        env.reset()
        for _ in range(3):  # ends at step 2, autoresets on step 3 (next_step)
            env.step(np.zeros(2, np.int64))
        env.reset()
        assert env.get_attr("seeds") == ([10, None, None, None], [11, None, None, None])


def test_explicit_first_reset_seed_overrides_make_seed():
    with envhive.make(SeedLog, 2, seed=10) as env:
        env.reset(seed=3)
        env.reset()
        assert env.get_attr("seeds") == ([3, None], [4, None])


def test_first_reset_of_each_env_uses_make_seed_with_async_reset():
    # Each env's FIRST reset gets make's seed, even when envs are first reset one at a time.
    with envhive.make(SeedLog, 3, seed=10, batch_size=1) as env:
        for i in (2, 0, 1):
            env.async_reset(np.array([i]))
            obs, _, _, _, info = env.recv()
            assert info["env_id"].tolist() == [i]
            assert obs[0, 0] == 10 + i, f"env {i}'s first reset did not get seed {10 + i}"
        env.async_reset(np.array([0]))
        env.recv()
        assert env.get_attr("seeds") == ([10, None], [11], [12])


def test_first_reset_of_each_env_uses_make_seed_with_reset_mask():
    with envhive.make(SeedLog, 3, seed=10) as env:
        env.reset(options={"reset_mask": np.array([False, True, False])})
        env.reset(options={"reset_mask": np.array([True, False, True])})
        assert env.get_attr("seeds") == ([10], [11], [12])


def test_action_space_sampling_seeded_by_make():
    def samples(seed):
        with envhive.make(zoo_factory, 4, seed=seed) as env:
            return np.stack([env.action_space.sample() for _ in range(20)])

    a, b, c = samples(3), samples(3), samples(4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.shape == (20, 4, 2)


def run_with_resets(env, steps: int) -> list:
    """Like ``transcript`` with seed=None, but resets ended envs by mask in disabled mode."""
    disabled = env.metadata["autoreset_mode"] is envhive.AutoresetMode.DISABLED
    out = [copy.deepcopy(env.reset())]
    for t in range(steps):
        step = env.step(zoo_actions(t, env.num_envs))
        out.append(copy.deepcopy(step))
        ended = step[2] | step[3]
        if disabled and ended.any():
            out.append(copy.deepcopy(env.reset(options={"reset_mask": ended.copy()})))
    return out


@pytest.mark.parametrize("executor", available_executors())
@pytest.mark.parametrize("autoreset", ["next_step", "same_step", "disabled"])
def test_reproducible_on_every_executor(executor, autoreset):
    def run(name):
        with envhive.make(zoo_factory, 4, seed=7, executor=name, autoreset=autoreset) as env:
            out = run_with_resets(env, 30)
            samples = [env.action_space.sample() for _ in range(5)]
        return out, samples

    ref, ref_samples = run("serial")
    got, got_samples = run(executor)
    assert len(ref) > 31 or autoreset != "disabled"  # some envs were reset by mask
    assert_same_transcript(ref, got)
    np.testing.assert_array_equal(np.stack(ref_samples), np.stack(got_samples))
    assert_same_transcript(got, run(executor)[0])  # and run to run


# ---------------------------------------------------------------- seeds of any size
BIG = [2**63, 2**64 + 1, 2**128 + 7, 3]  # np.random.SeedSequence().entropy is 128 bits


def executors_and_slices():
    return [*available_executors(), "process-parent-slice"]


def make_on(executor: str, fn, n: int, **kw):
    if executor == "process-parent-slice":
        from envhive.executors import ProcessExecutor

        return envhive.make(fn, n, executor=ProcessExecutor(num_workers=2, parent_slice=True), **kw)
    return envhive.make(fn, n, executor=executor, **kw)


@pytest.mark.parametrize("executor", executors_and_slices())
def test_seeds_beyond_int64_reach_every_env_exactly(executor):
    fn = lambda: SeedLog(tag=0)
    with make_on(executor, fn, 4, seed=BIG, batch_size=1) as env:
        env.reset()
        env.reset(seed=2**100)
        env.async_reset(np.array([2]), seed=[None, None, 2**70, None])
        env.recv()
        env.reset(seed=[2**64, None, 5, 2**65])
        assert env.get_attr("seeds") == (
            [BIG[0], 2**100, 2**64],
            [BIG[1], 2**100 + 1, None],
            [BIG[2], 2**100 + 2, 2**70, 5],
            [BIG[3], 2**100 + 3, 2**65],
        )
        # An autoreset after a big-seeded reset is unseeded (no stale big seed is reused).
        for _ in range(6):
            env.step(np.zeros(4, np.int64))
        assert [s[-1] for s in env.get_attr("seeds")] == [None] * 4


@pytest.mark.parametrize("executor", executors_and_slices())
def test_big_seeds_match_gymnasium(executor):
    import gymnasium as gym

    seeds = [2**63, 2**64 - 1, 2**200 + 1]
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3)
    want, _ = ref.reset(seed=seeds)
    with make_on(executor, "CartPole-v1", 3, seed=seeds) as env:
        np.testing.assert_array_equal(env.reset()[0], want)
        np.testing.assert_array_equal(env.reset(seed=seeds)[0], want)
    ref.close()


def test_big_seeds_match_gymnasium_on_native_kernels():
    import gymnasium as gym

    seeds = [2**63 + 11, 2**90, 1]
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3)
    want, _ = ref.reset(seed=seeds)
    with envhive.make("envhive/CartPole-v1", 3, seed=seeds) as env:
        np.testing.assert_array_equal(env.reset()[0], want)
    ref.close()


class FlakyReset(SeedLog):
    """A SeedLog whose first reset raises ``error`` (once)."""

    def __init__(self, error: type[BaseException] | None = None) -> None:
        super().__init__(tag=0)
        self.error = error

    def reset(self, *, seed=None, options=None):
        if self.error is not None:
            error, self.error = self.error, None
            self.seeds.append(("raised", seed))
            raise error("first reset fails")
        return super().reset(seed=seed, options=options)


@pytest.mark.parametrize("executor", available_executors())
def test_make_seed_survives_a_failed_first_reset(executor):
    fns = [FlakyReset, lambda: FlakyReset(RuntimeError), FlakyReset]
    with envhive.make(fns, seed=2**64, executor=executor) as env:
        with pytest.raises(envhive.EnvWorkerError):
            env.reset()
        env.reset()  # env 1 retries with its make seed; envs 0 and 2 were reset already
        assert env.get_attr("seeds") == (
            [2**64, None],
            [("raised", 2**64 + 1), 2**64 + 1],
            [2**64 + 2, None],
        )


def test_make_seed_survives_an_interrupted_first_reset():
    fns = [FlakyReset, lambda: FlakyReset(KeyboardInterrupt), FlakyReset]
    with envhive.make(fns, seed=7, executor="serial") as env:
        with pytest.raises(KeyboardInterrupt):
            env.reset()
        env.reset()  # nothing was confirmed started: every env gets its make seed again
        assert env.get_attr("seeds") == ([7, 7], [("raised", 8), 8], [9])
