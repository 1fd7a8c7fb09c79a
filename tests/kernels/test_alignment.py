"""The classic-control kernels reproduce gymnasium's reference envs bit for bit.

* trajectories: ``envhive.make("envhive/X", 3, seed=s)`` against ``gymnasium.make_vec("X", 3)``
  reset with ``seed=s``, compared exactly at every step, across many episode ends;
* single steps from identical (random, also boundary) states and actions, keywords included;
* resets: first observations, reseeding mid-run, and the time limit;
* the ``same_step`` and ``disabled`` autoreset modes against gymnasium's ``SyncVectorEnv``.

Every comparison is exact (``assert_array_equal``), not to a tolerance: the kernels repeat
gymnasium's float64/float32 arithmetic operation by operation, call the same libm functions
(``sin``, ``cos``, and numpy's scalar ``x**2``, which is libm's ``pow``, not ``x * x``), and so
even chaotic Acrobot stays identical over thousands of steps.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envhive
from envhive.kernels import (
    AcrobotKernel,
    CartPoleKernel,
    Kernel,
    KernelEnv,
    MountainCarContinuousKernel,
    MountainCarKernel,
    PendulumKernel,
)
from envhive.kernels.classic._pendulum import HAVE_LIBM_POW

pytestmark = pytest.mark.timeout(300)

KERNELS: dict[str, type[Kernel]] = {
    "CartPole-v1": CartPoleKernel,
    "Pendulum-v1": PendulumKernel,
    "MountainCar-v0": MountainCarKernel,
    "MountainCarContinuous-v0": MountainCarContinuousKernel,
    "Acrobot-v1": AcrobotKernel,
}
GYM_IDS = list(KERNELS)
N = 3

needs_libm_pow = pytest.mark.skipif(
    not HAVE_LIBM_POW, reason="no C library pow(): x**2 is x*x, off by one ulp at times"
)


# ---------------------------------------------------------------- helpers
def _policy(gym_id: str, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Actions for a batch: random, or (for the hard-to-end envs) mostly goal-seeking, so that
    episodes end by termination as well as by the time limit."""
    n = obs.shape[0]
    explore = rng.random(n) < 0.25
    if gym_id == "CartPole-v1":
        return rng.integers(0, 2, size=n)
    if gym_id == "Pendulum-v1":
        return rng.uniform(-2.0, 2.0, size=(n, 1)).astype(np.float32)
    if gym_id == "MountainCar-v0":  # push along the velocity: reaches the flag
        return np.where(explore, rng.integers(0, 3, size=n), np.where(obs[:, 1] > 0, 2, 0))
    if gym_id == "MountainCarContinuous-v0":
        push = np.sign(obs[:, 1]) * rng.uniform(0.5, 1.0, size=n)
        a = np.where(explore, rng.uniform(-1.0, 1.0, size=n), push)
        a[rng.random(n) < 0.05] = 1.0  # the bounds are valid actions
        return a.astype(np.float32).reshape(n, 1)
    if gym_id == "Acrobot-v1":  # torque along the second joint's velocity: swings up
        return np.where(explore, rng.integers(0, 3, size=n), np.where(obs[:, 5] > 0, 2, 0))
    raise AssertionError(gym_id)


def _gym_vec(gym_id: str, mode: Any = None) -> gym.vector.VectorEnv:
    kwargs = {} if mode is None else {"vector_kwargs": {"autoreset_mode": mode}}
    return gym.make_vec(gym_id, num_envs=N, vectorization_mode="sync", **kwargs)


def _assert_same(ours: tuple[Any, ...], theirs: tuple[Any, ...], where: str) -> None:
    for name, a, b in zip(("obs", "reward", "terminated", "truncated"), ours, theirs):
        np.testing.assert_array_equal(a, b, err_msg=f"{name} differs {where}")
        assert np.asarray(a).dtype == np.asarray(b).dtype, f"{name} dtype differs {where}"


# ---------------------------------------------------------------- (a) trajectories
TRAJECTORY_STEPS = 2000
# Episode ends each run must see at least (a loose floor: the point is many autoresets).
MIN_ENDS = {"CartPole-v1": 150, "Pendulum-v1": 27, "MountainCar-v0": 25,
            "MountainCarContinuous-v0": 25, "Acrobot-v1": 30}


@needs_libm_pow
@pytest.mark.parametrize("gym_id", GYM_IDS)
def test_trajectories_are_bit_identical(gym_id: str) -> None:
    seed = 1000 + GYM_IDS.index(gym_id)
    rng = np.random.default_rng(seed)
    ends = terminations = 0
    with envhive.make(f"envhive/{gym_id}", num_envs=N, seed=seed) as env:
        ref = _gym_vec(gym_id)
        assert env.single_observation_space == ref.single_observation_space
        assert env.single_action_space == ref.single_action_space
        obs, _ = env.reset()
        ref_obs, _ = ref.reset(seed=seed)
        np.testing.assert_array_equal(obs, ref_obs)
        for t in range(TRAJECTORY_STEPS):
            actions = _policy(gym_id, ref_obs, rng)
            out = env.step(actions)
            ref_out = ref.step(actions)
            _assert_same(out, ref_out, f"at step {t}")
            ref_obs = ref_out[0]
            ends += int(np.count_nonzero(ref_out[2] | ref_out[3]))
            terminations += int(np.count_nonzero(ref_out[2]))
        ref.close()
    assert ends >= MIN_ENDS[gym_id]
    if gym_id != "Pendulum-v1":  # Pendulum never terminates
        assert terminations > 0


# ---------------------------------------------------------------- (b) single steps
STATES = 2500


def _cartpole_states(rng: np.random.Generator, n: int) -> np.ndarray:
    s = np.column_stack([
        rng.uniform(-2.6, 2.6, n), rng.uniform(-3, 3, n),
        rng.uniform(-0.25, 0.25, n), rng.uniform(-3.5, 3.5, n),
    ])
    near = rng.random(n) < 0.3  # at the termination thresholds
    s[near, 0] = rng.choice([-2.4, 2.4], near.sum()) + rng.normal(0, 1e-3, near.sum())
    near = rng.random(n) < 0.3
    theta = 12 * 2 * math.pi / 360
    s[near, 2] = rng.choice([-theta, theta], near.sum()) + rng.normal(0, 1e-3, near.sum())
    return s


def _pendulum_states(rng: np.random.Generator, n: int) -> np.ndarray:
    s = np.column_stack([rng.uniform(-3 * np.pi, 3 * np.pi, n), rng.uniform(-8, 8, n)])
    near = rng.random(n) < 0.3  # at the speed clip
    s[near, 1] = rng.choice([-8.0, 8.0], near.sum()) + rng.normal(0, 0.3, near.sum())
    near = rng.random(n) < 0.2  # angles at the normalization's wrap points
    s[near, 0] = rng.choice([-np.pi, np.pi, 3 * np.pi], near.sum()) + rng.normal(0, 1e-6, near.sum())
    return s


def _mountain_car_states(rng: np.random.Generator, n: int, goal: float) -> np.ndarray:
    s = np.column_stack([rng.uniform(-1.2, 0.6, n), rng.uniform(-0.07, 0.07, n)])
    k = n // 5  # at the left wall, the right edge, the goal, and the speed limits
    s[:k, 0] = -1.2 + rng.uniform(0, 0.01, k)
    s[:k, 1] = -rng.uniform(0, 0.07, k)
    s[k:2 * k, 0] = 0.6 - rng.uniform(0, 0.01, k)
    s[2 * k:3 * k, 0] = goal + rng.normal(0, 0.003, k)
    s[3 * k:4 * k, 1] = rng.choice([-0.07, 0.07], k) + rng.normal(0, 0.002, k)
    s[4 * k:4 * k + k // 4, 0] = -1.2  # exactly at the wall
    return s


def _goal_edges(states: np.ndarray, actions: list[Any], goal_velocity: float,
                rng: np.random.Generator) -> None:
    """MountainCarContinuous mid-episode (float32) states whose step ends a few float32 ulps
    around the goal (``position >= 0.45``, ``velocity >= goal_velocity``): there gymnasium
    compares in float32 (numpy casts the Python bound), so ``float32(0.45) >= 0.45``."""
    for k in range(1, len(states), 8):  # odd rows: the float32 states
        u = float(actions[k][0])
        ulps = int(rng.integers(-2, 3))
        if k % 16 == 1:  # the position stays on float32(0.45) + ulps; velocity ends ~ +1e-9
            p = np.float32(0.45)
            for _ in range(abs(ulps)):
                p = np.nextafter(p, np.float32(np.sign(ulps)))
            push = u * 0.0015 - 0.0025 * math.cos(3 * float(p))
            states[k] = (p, np.float32(1e-9 - push))
        else:  # past the flag; the velocity ends within ulps of goal_velocity
            push = u * 0.0015 - 0.0025 * math.cos(3 * 0.5)
            v = np.float32(goal_velocity - push)
            for _ in range(abs(ulps)):
                v = np.nextafter(v, np.float32(np.sign(ulps)))
            states[k] = (0.5, v)


def _acrobot_states(rng: np.random.Generator, n: int) -> np.ndarray:
    s = np.column_stack([
        rng.uniform(-np.pi, np.pi, n), rng.uniform(-np.pi, np.pi, n),
        rng.uniform(-4 * np.pi, 4 * np.pi, n), rng.uniform(-9 * np.pi, 9 * np.pi, n),
    ])
    near = rng.random(n) < 0.3  # near the height threshold: -cos(t1) - cos(t1 + t2) = 1
    t1 = rng.uniform(2.0, np.pi, near.sum()) * rng.choice([-1, 1], near.sum())
    s[near, 0] = t1
    s[near, 1] = np.arccos(np.clip(-1.0 - np.cos(t1), -1, 1)) - t1 + rng.normal(0, 1e-2, near.sum())
    s[near, 2:] *= 0.05
    near = rng.random(n) < 0.2  # at the velocity bounds
    s[near, 2] = rng.choice([-4 * np.pi, 4 * np.pi], near.sum()) * rng.uniform(0.95, 1.05, near.sum())
    return s


# (gym id, gym/kernel keywords, gym unwrapped attributes to set)
STEP_CASES = [
    ("CartPole-v1", {}, {}),
    ("CartPole-v1", {"sutton_barto_reward": True}, {}),
    ("Pendulum-v1", {}, {}),
    ("Pendulum-v1", {"g": 9.81}, {}),
    ("MountainCar-v0", {}, {}),
    ("MountainCar-v0", {"goal_velocity": 0.01}, {}),
    ("MountainCarContinuous-v0", {}, {}),
    ("MountainCarContinuous-v0", {"goal_velocity": 0.02}, {}),
    ("Acrobot-v1", {}, {}),
    ("Acrobot-v1", {"book_or_nips": "nips"}, {"book_or_nips": "nips"}),
]


def _actions(space: gym.Space, rng: np.random.Generator, n: int) -> list[Any]:
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, size=n).tolist()
    a = rng.uniform(space.low[0], space.high[0], size=n).astype(np.float32)
    a[rng.random(n) < 0.1] = space.high[0]
    a[rng.random(n) < 0.1] = space.low[0]
    a[rng.random(n) < 0.05] = 0.0
    return [np.array([v], np.float32) for v in a]


@needs_libm_pow
@pytest.mark.parametrize(("gym_id", "kwargs", "attrs"), STEP_CASES)
def test_single_steps_from_identical_states(gym_id: str, kwargs: dict, attrs: dict,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    cls = KERNELS[gym_id]
    ours = KernelEnv(cls, max_episode_steps=0, **kwargs)
    gym_kwargs = {k: v for k, v in kwargs.items() if k not in attrs}
    ref = gym.make(gym_id, **gym_kwargs).unwrapped
    for name, value in attrs.items():  # each must exist on the reference (else: no match)
        monkeypatch.setattr(ref, name, value)
    ours.reset(seed=0)
    ref.reset(seed=0)
    row = ours.kernel.state[0]
    if gym_id == "CartPole-v1":
        states = _cartpole_states(rng, STATES)
    elif gym_id == "Pendulum-v1":
        states = _pendulum_states(rng, STATES)
    elif gym_id == "Acrobot-v1":
        states = _acrobot_states(rng, STATES)
    else:
        goal = 0.5 if gym_id == "MountainCar-v0" else 0.45
        states = _mountain_car_states(rng, STATES, goal)
    actions = _actions(ours.action_space, rng, STATES)
    if gym_id == "MountainCarContinuous-v0":
        _goal_edges(states, actions, kwargs.get("goal_velocity", 0.0), rng)
    seen_terminated = 0
    for k, (state, action) in enumerate(zip(states, actions)):
        if gym_id == "MountainCarContinuous-v0":
            if k % 2:  # mid-episode: gymnasium holds a float32 state
                state = state.astype(np.float32)
                row[:] = (*state, 0.0)
            else:  # the first step after a reset: a float64 state
                row[:] = (*state, 1.0)
            ref.state = state.copy()
        else:
            row[:] = state
            ref.state = state.copy()
        if gym_id == "CartPole-v1":
            ref.steps_beyond_terminated = None
        obs, reward, terminated, truncated, _ = ours.step(action)
        ref_obs, ref_reward, ref_terminated, _, _ = ref.step(action)
        where = f"from state {state.tolist()} with action {action}"
        np.testing.assert_array_equal(obs, ref_obs, err_msg=where)
        assert obs.dtype == np.float32
        assert reward == ref_reward and terminated == ref_terminated and not truncated, where
        np.testing.assert_array_equal(
            row[:len(state)], np.asarray(ref.state, np.float64), err_msg=where
        )
        seen_terminated += terminated
    if gym_id != "Pendulum-v1":
        assert seen_terminated > 0  # the sampled states reach the termination boundary


def test_kernel_spaces_and_limits_are_gymnasiums() -> None:
    for gym_id, cls in KERNELS.items():
        ref = gym.make(gym_id)
        k = cls(1)
        assert k.observation_space == ref.observation_space, gym_id
        assert k.action_space == ref.action_space, gym_id
        assert k.max_episode_steps == ref.spec.max_episode_steps, gym_id
        ref.close()


# ---------------------------------------------------------------- (c) resets and time limits
@needs_libm_pow
@pytest.mark.parametrize("gym_id", GYM_IDS)
def test_resets_and_reseeding_match(gym_id: str) -> None:
    rng = np.random.default_rng(3)
    with envhive.make(f"envhive/{gym_id}", num_envs=N) as env:
        ref = _gym_vec(gym_id)
        for seed in (0, 1, 12345, 2**31 - 1):
            obs, _ = env.reset(seed=seed)
            ref_obs, _ = ref.reset(seed=seed)
            np.testing.assert_array_equal(obs, ref_obs, err_msg=f"seed {seed}")
        for t in range(120):
            if t in (40, 90):  # reseed mid-run, a list of seeds then an int
                seed: Any = [5, 8, 6] if t == 40 else 77
                obs, _ = env.reset(seed=seed)
                ref_obs, _ = ref.reset(seed=seed)
                np.testing.assert_array_equal(obs, ref_obs, err_msg=f"reseed at {t}")
            actions = _policy(gym_id, ref_obs, rng)
            out, ref_out = env.step(actions), ref.step(actions)
            _assert_same(out, ref_out, f"at step {t}")
            ref_obs = ref_out[0]
        ref.close()


def _survive(gym_id: str, obs: np.ndarray) -> np.ndarray:
    """A policy that never ends an episode before the time limit."""
    n = obs.shape[0]
    if gym_id == "CartPole-v1":  # a PD balancer
        return (obs[:, 2] + 0.5 * obs[:, 3] + 0.05 * obs[:, 1] > 0).astype(np.int64)
    if gym_id == "MountainCar-v0":
        return np.ones(n, np.int64)  # no push: the car never reaches the flag
    if gym_id == "Acrobot-v1":
        return np.ones(n, np.int64)  # no torque: the links hang
    return np.zeros((n, 1), np.float32)  # Pendulum, MountainCarContinuous


@needs_libm_pow
@pytest.mark.parametrize("gym_id", GYM_IDS)
def test_truncation_at_gymnasiums_time_limit(gym_id: str) -> None:
    limit = gym.spec(gym_id).max_episode_steps
    assert limit == KERNELS[gym_id].default_max_episode_steps
    with envhive.make(f"envhive/{gym_id}", num_envs=N, seed=4) as env:
        ref = _gym_vec(gym_id)
        env.reset()
        ref_obs, _ = ref.reset(seed=4)
        for t in range(1, limit + 2):
            actions = _survive(gym_id, ref_obs)
            out, ref_out = env.step(actions), ref.step(actions)
            _assert_same(out, ref_out, f"at step {t}")
            ref_obs = ref_out[0]
            assert not out[2].any(), f"terminated at step {t}"
            if t < limit:
                assert not out[3].any(), f"truncated early, at step {t}"
            elif t == limit:
                assert out[3].all(), "not truncated at the time limit"
            else:  # the autoreset step
                assert not out[3].any() and (out[1] == 0).all()
        ref.close()


# ---------------------------------------------------------------- (d) autoreset modes
@needs_libm_pow
@pytest.mark.parametrize("gym_id", ["CartPole-v1", "Pendulum-v1"])
def test_same_step_autoreset_matches_gymnasium(gym_id: str) -> None:
    rng = np.random.default_rng(11)
    mode = gym.vector.AutoresetMode.SAME_STEP
    finals = 0
    with envhive.make(f"envhive/{gym_id}", num_envs=N, seed=9, autoreset="same_step") as env:
        ref = _gym_vec(gym_id, mode)
        env.reset()
        ref_obs, _ = ref.reset(seed=9)
        for t in range(700):
            actions = _policy(gym_id, ref_obs, rng)
            out, ref_out = env.step(actions), ref.step(actions)
            _assert_same(out, ref_out, f"at step {t}")
            ref_obs = ref_out[0]
            info, ref_info = out[4], ref_out[4]
            assert ("final_obs" in info) == ("final_obs" in ref_info), f"at step {t}"
            if "final_obs" in ref_info:
                np.testing.assert_array_equal(info["_final_obs"], ref_info["_final_obs"])
                for i in np.flatnonzero(ref_info["_final_obs"]):
                    np.testing.assert_array_equal(info["final_obs"][i], ref_info["final_obs"][i])
                    finals += 1
        ref.close()
    assert finals >= 9


@needs_libm_pow
def test_disabled_autoreset_matches_gymnasium() -> None:
    gym_id = "CartPole-v1"
    rng = np.random.default_rng(12)
    mode = gym.vector.AutoresetMode.DISABLED
    resets = 0
    with envhive.make(f"envhive/{gym_id}", num_envs=N, seed=10, autoreset="disabled") as env:
        ref = _gym_vec(gym_id, mode)
        env.reset()
        ref_obs, _ = ref.reset(seed=10)
        for t in range(600):
            actions = _policy(gym_id, ref_obs, rng)
            out, ref_out = env.step(actions), ref.step(actions)
            _assert_same(out, ref_out, f"at step {t}")
            ref_obs = ref_out[0]
            ended = ref_out[2] | ref_out[3]
            if ended.any():
                obs, _ = env.reset(options={"reset_mask": ended})
                ref_obs, _ = ref.reset(options={"reset_mask": ended})
                np.testing.assert_array_equal(obs, ref_obs, err_msg=f"masked reset at {t}")
                resets += 1
        ref.close()
    assert resets >= 20
