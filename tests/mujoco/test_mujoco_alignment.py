"""envhive's MuJoCo envs against gymnasium's own v5 envs: bit-identical, step for step.

Every comparison is exact: observations with ``np.array_equal``, and rewards, flags and every
info value with ``==`` *and* the same Python/numpy type (so vectorised infos get the same
dtypes too). No tolerance is used anywhere.

There is deliberately no ``__init__.py`` in this directory: it would make ``tests/mujoco`` a
package named ``mujoco`` that shadows the real one whenever ``tests/`` is on ``sys.path``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
if not hasattr(mujoco, "MjModel"):  # tests/mujoco itself, seen as a namespace package
    pytest.skip("mujoco is not installed", allow_module_level=True)

import gymnasium as gym  # noqa: E402

from envhive.envs.mujoco import ENV_CLASSES, MAX_EPISODE_STEPS  # noqa: E402
from envhive.envs.mujoco._base import assets_dir, clip_scalar  # noqa: E402

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

ENV_IDS = sorted(ENV_CLASSES)


# ----------------------------------------------------------------------------- helpers


def assert_same(ours: Any, theirs: Any, where: str = "") -> None:
    """Exact equality, including types, dtypes, shapes and dict key order."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), where
        assert list(ours) == list(theirs), f"{where}: keys {list(ours)} != {list(theirs)}"
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
        return
    if isinstance(theirs, tuple):  # (obs, info) or (obs, reward, terminated, truncated, info)
        assert isinstance(ours, tuple) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
        return
    assert type(ours) is type(theirs), f"{where}: type {type(ours)} != {type(theirs)}"
    if isinstance(theirs, np.ndarray):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        assert np.array_equal(ours, theirs, equal_nan=True), f"{where}: {ours} != {theirs}"
    else:
        assert ours == theirs or (ours != ours and theirs != theirs), f"{where}: {ours!r} != {theirs!r}"


def make_pair(env_id: str, max_episode_steps: int | None = None, **kwargs: Any) -> tuple[gym.Env, gym.Env]:
    """gymnasium's registered env (all wrappers) and ours, with the same kwargs."""
    limit = MAX_EPISODE_STEPS[env_id] if max_episode_steps is None else max_episode_steps
    theirs = gym.make(env_id, max_episode_steps=limit, **kwargs)
    ours = ENV_CLASSES[env_id](max_episode_steps=limit, **kwargs)
    return ours, theirs


def compare_rollout(
    ours: gym.Env, theirs: gym.Env, steps: int, seed: int, *, perturb: bool = True
) -> int:
    """Reset both with the same seeds, set the same perturbed state, step the same actions.

    Both must end episodes at the same steps; both are then reset with the same seed. Returns
    the number of episode ends.
    """
    rng = np.random.default_rng(seed)
    space = theirs.action_space
    assert space == ours.action_space

    def reset(s: int) -> None:
        assert_same(ours.reset(seed=s), theirs.reset(seed=s), f"reset(seed={s})")
        if perturb:  # also exercises set_state: the same arbitrary state in both
            u = theirs.unwrapped
            qpos = u.data.qpos + rng.normal(0, 0.02, u.model.nq)
            qvel = u.data.qvel + rng.normal(0, 0.1, u.model.nv)
            u.set_state(qpos, qvel)
            ours.set_state(qpos, qvel)

    reset(seed)
    ends = 0
    for t in range(steps):
        action = rng.uniform(space.low, space.high).astype(np.float32)
        got, want = ours.step(action), theirs.step(action)
        assert_same(got, want, f"step {t}")
        assert np.array_equal(ours.data.qpos, theirs.unwrapped.data.qpos), t
        assert np.array_equal(ours.data.qvel, theirs.unwrapped.data.qvel), t
        if want[2] or want[3]:
            ends += 1
            reset(int(rng.integers(2**31)))
    return ends


# ------------------------------------------------------------------- 1. same seed, same reset


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_same_seed_same_obs_and_info(env_id):
    ours, theirs = make_pair(env_id)
    for seed in (0, 1, 12345, 2**31 - 1):
        assert_same(ours.reset(seed=seed), theirs.reset(seed=seed), f"seed {seed}")
        assert np.array_equal(ours.data.qpos, theirs.unwrapped.data.qpos)
        assert np.array_equal(ours.data.qvel, theirs.unwrapped.data.qvel)
    # Unseeded resets continue the same np_random stream.
    for _ in range(3):
        assert_same(ours.reset(), theirs.reset(), "unseeded reset")
    assert ours.np_random_seed == theirs.unwrapped.np_random_seed


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_spaces_and_attributes_match(env_id):
    ours, theirs = make_pair(env_id)
    u = theirs.unwrapped
    assert ours.observation_space == theirs.observation_space
    assert ours.action_space == theirs.action_space
    assert ours.action_space.dtype == np.float32 and ours.observation_space.dtype == np.float64
    assert ours.dt == u.dt and ours.frame_skip == u.frame_skip
    assert ours.metadata["render_fps"] == u.metadata["render_fps"]
    assert ours.fullpath == u.fullpath
    assert np.array_equal(ours.init_qpos, u.init_qpos) and np.array_equal(ours.init_qvel, u.init_qvel)
    if hasattr(u, "observation_structure"):
        assert ours.observation_structure == u.observation_structure
    default_limit = ENV_CLASSES[env_id]().max_episode_steps  # the class default, not passed
    assert default_limit == gym.spec(env_id).max_episode_steps == MAX_EPISODE_STEPS[env_id]
    ours.reset(seed=3)
    theirs.reset(seed=3)
    assert np.array_equal(ours.state_vector(), u.state_vector())
    ctrl = np.full(ours.action_space.shape, 0.25)
    ours.do_simulation(ctrl, 3)
    u.do_simulation(ctrl, 3)
    assert np.array_equal(ours.state_vector(), u.state_vector())
    body = [n for n in (u.model.body(i).name for i in range(u.model.nbody)) if n][-1]
    assert np.array_equal(ours.get_body_com(body), u.get_body_com(body))


# ----------------------------------------------- 2. same state + same actions, many episodes

# (max_episode_steps, steps): short limits so every env ends several episodes.
ROLLOUTS = {
    "Ant-v5": (300, 1200),
    "HalfCheetah-v5": (250, 1000),
    "Hopper-v5": (1000, 1200),
    "Humanoid-v5": (1000, 1000),
    "InvertedDoublePendulum-v5": (1000, 1500),
    "InvertedPendulum-v5": (1000, 1500),
    "Reacher-v5": (50, 1000),
    "Swimmer-v5": (250, 1000),
    "Walker2d-v5": (1000, 1200),
}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_rollouts_are_bit_identical(env_id):
    limit, steps = ROLLOUTS[env_id]
    ours, theirs = make_pair(env_id, max_episode_steps=limit)
    ends = compare_rollout(ours, theirs, steps, seed=7)
    assert ends >= 3, f"only {ends} episode ends: the test does not cover resets well"


@pytest.mark.parametrize("env_id", ["Ant-v5", "HalfCheetah-v5", "Reacher-v5"])
def test_actions_that_are_not_float32_arrays(env_id):
    """A float64 array or a list goes through the same numpy ops as in gymnasium."""
    ours = ENV_CLASSES[env_id]()
    theirs = gym.make(env_id).unwrapped  # the env checker would warn about non-float32
    rng = np.random.default_rng(0)
    assert_same(ours.reset(seed=5), theirs.reset(seed=5))
    for t in range(40):
        action = rng.uniform(theirs.action_space.low, theirs.action_space.high)
        action = action.tolist() if t % 2 else action
        assert_same(ours.step(action), theirs.step(action), f"step {t}")


@pytest.mark.parametrize("env_id", ["Ant-v5", "Hopper-v5"])
def test_wrong_action_shape_raises_like_gymnasium(env_id):
    ours = ENV_CLASSES[env_id]()
    theirs = gym.make(env_id).unwrapped
    ours.reset(seed=0)
    theirs.reset(seed=0)
    bad = np.zeros(ours.action_space.shape[0] + 1, np.float32)
    with pytest.raises(ValueError, match="Action dimension mismatch"):
        theirs.step(bad)
    with pytest.raises(ValueError, match="Action dimension mismatch"):
        ours.step(bad)
    with pytest.raises(ValueError, match="Action dimension mismatch"):
        ours.step(0.5)


def test_observations_are_fresh_arrays():
    env = ENV_CLASSES["Ant-v5"]()
    obs0, _ = env.reset(seed=0)
    keep = obs0.copy()
    obs1 = env.step(env.action_space.sample())[0]
    obs2 = env.step(env.action_space.sample())[0]
    assert not np.shares_memory(obs1, obs2) and not np.shares_memory(obs0, obs1)
    assert np.array_equal(obs0, keep)
    obs2[:] = 0.0  # a caller scribbling on an obs must not affect the env
    assert not np.array_equal(env.step(env.action_space.sample())[0], obs2)


# ------------------------------------------------------------------- 3. non-default kwargs

KWARGS = {
    "Ant-v5": dict(
        frame_skip=4,
        forward_reward_weight=2.0,
        ctrl_cost_weight=0.2,
        contact_cost_weight=1e-3,
        healthy_reward=0.5,
        main_body="torso",
        healthy_z_range=(0.3, 0.9),
        contact_force_range=(-0.5, 2.0),
        reset_noise_scale=0.2,
        exclude_current_positions_from_observation=False,
        include_cfrc_ext_in_observation=False,
    ),
    "HalfCheetah-v5": dict(
        frame_skip=3,
        forward_reward_weight=0.7,
        ctrl_cost_weight=0.3,
        reset_noise_scale=0.3,
        exclude_current_positions_from_observation=False,
    ),
    "Hopper-v5": dict(
        forward_reward_weight=1.5,
        ctrl_cost_weight=0.01,
        healthy_reward=2.0,
        healthy_state_range=(-50.0, 50.0),
        healthy_z_range=(0.6, 2.0),
        healthy_angle_range=(-0.3, 0.3),
        reset_noise_scale=0.02,
        exclude_current_positions_from_observation=False,
    ),
    "Humanoid-v5": dict(
        forward_reward_weight=1.0,
        ctrl_cost_weight=0.05,
        contact_cost_weight=5e-7,
        contact_cost_range=(1e-3, 0.1),  # clips on both sides in this rollout
        healthy_reward=4.0,
        healthy_z_range=(0.9, 2.1),
        reset_noise_scale=0.05,
        exclude_current_positions_from_observation=False,
        include_cinert_in_observation=False,
        include_cvel_in_observation=False,
        include_qfrc_actuator_in_observation=False,
    ),
    "InvertedDoublePendulum-v5": dict(frame_skip=3, healthy_reward=5.0, reset_noise_scale=0.2),
    "InvertedPendulum-v5": dict(frame_skip=1, reset_noise_scale=0.05),
    "Reacher-v5": dict(frame_skip=3, reward_dist_weight=0.5, reward_control_weight=2.0),
    "Swimmer-v5": dict(
        forward_reward_weight=2.0,
        ctrl_cost_weight=0.01,
        reset_noise_scale=0.2,
        exclude_current_positions_from_observation=False,
    ),
    "Walker2d-v5": dict(
        xml_file="walker2d.xml",  # the v4 model, by name from gymnasium's assets
        forward_reward_weight=0.5,
        ctrl_cost_weight=0.01,
        healthy_reward=2.0,
        healthy_z_range=(0.7, 2.5),
        healthy_angle_range=(-1.2, 1.2),
        reset_noise_scale=0.05,
        exclude_current_positions_from_observation=False,
    ),
}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_non_default_kwargs_match(env_id):
    ours, theirs = make_pair(env_id, max_episode_steps=100, **KWARGS[env_id])
    assert ours.observation_space == theirs.observation_space
    compare_rollout(ours, theirs, 300, seed=11)


@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("Ant-v5", dict(terminate_when_unhealthy=False, healthy_z_range=(0.5, 0.6))),
        ("Hopper-v5", dict(terminate_when_unhealthy=False, healthy_reward=-1.0)),
        ("Walker2d-v5", dict(terminate_when_unhealthy=False, healthy_reward=3)),
        ("Humanoid-v5", dict(terminate_when_unhealthy=False, healthy_reward=2)),
    ],
)
def test_unhealthy_without_termination(env_id, kwargs):
    """Unhealthy steps (zero or negative survive reward) with int and negative weights."""
    ours, theirs = make_pair(env_id, max_episode_steps=150, **kwargs)
    compare_rollout(ours, theirs, 150, seed=3, perturb=False)


def test_absolute_xml_path():
    path = f"{assets_dir()}/half_cheetah.xml"
    ours, theirs = make_pair("HalfCheetah-v5", max_episode_steps=100, xml_file=path)
    assert ours.fullpath == path
    compare_rollout(ours, theirs, 100, seed=0)
    with pytest.raises(OSError, match="does not exist"):
        ENV_CLASSES["HalfCheetah-v5"](xml_file="no_such_model.xml")


@pytest.mark.parametrize("env_id", ["HalfCheetah-v5", "Reacher-v5"])
def test_rne_post_constraint_true_matches_all_of_mjdata(env_id):
    """Forced on, env.data's cacc/cfrc_int/cfrc_ext match gymnasium's; off, nothing else changes."""
    ours = ENV_CLASSES[env_id](rne_post_constraint=True)
    theirs = gym.make(env_id).unwrapped
    assert ENV_CLASSES[env_id]().rne_post_constraint is False
    assert ENV_CLASSES["Ant-v5"]().rne_post_constraint is True
    rng = np.random.default_rng(1)
    assert_same(ours.reset(seed=2), theirs.reset(seed=2))
    for t in range(30):
        action = rng.uniform(theirs.action_space.low, theirs.action_space.high).astype(np.float32)
        assert_same(ours.step(action), theirs.step(action), f"step {t}")
        for field in ("cacc", "cfrc_int", "cfrc_ext", "qacc", "qfrc_constraint"):
            assert np.array_equal(getattr(ours.data, field), getattr(theirs.data, field)), field


def test_clip_scalar_is_np_clip():
    values = [0.0, -0.0, 1.0, -1.0, 5.0, -5.0, np.inf, -np.inf, np.nan, 1e-300, 3.0]
    bounds = [(-1.0, 1.0), (0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-np.inf, 10.0), (2.0, 1.0),
              (np.nan, 1.0), (-1.0, np.nan), (-np.inf, np.inf)]
    for lo, hi in bounds:
        for v in values:
            want = np.clip(np.float64(v), lo, hi)
            got = clip_scalar(np.float64(v), np.float64(lo), np.float64(hi))
            assert type(got) is type(want)
            assert np.array_equal(got, want, equal_nan=True), (v, lo, hi)
            assert np.signbit(got) == np.signbit(want), (v, lo, hi)


# ------------------------------------------------------------------------- 4. time limit


def test_default_time_limit_truncates_like_gymnasium():
    ours, theirs = make_pair("HalfCheetah-v5")  # never terminates: only the limit ends it
    assert ours.max_episode_steps == 1000
    rng = np.random.default_rng(0)
    assert_same(ours.reset(seed=0), theirs.reset(seed=0))
    for t in range(1, 1001):
        action = rng.uniform(-1, 1, 6).astype(np.float32)
        got, want = ours.step(action), theirs.step(action)
        assert_same(got, want, f"step {t}")
        assert got[3] is (t == 1000)
        assert ours.elapsed_steps == t


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_small_time_limit_and_reset(env_id):
    kwargs: dict[str, Any] = {"max_episode_steps": 3}
    if env_id in ("Ant-v5", "Hopper-v5", "Humanoid-v5", "Walker2d-v5"):
        kwargs["terminate_when_unhealthy"] = False
    env = ENV_CLASSES[env_id](**kwargs)
    for seed in (0, 1):
        env.reset(seed=seed)
        flags = [env.step(np.zeros(env.action_space.shape, np.float32))[3] for _ in range(4)]
        assert flags == [False, False, True, True]  # keeps saying so until reset, as TimeLimit


def test_no_time_limit():
    env = ENV_CLASSES["Swimmer-v5"](max_episode_steps=None)
    env.reset(seed=0)
    action = np.zeros(2, np.float32)
    assert not any(env.step(action)[3] for _ in range(1100))


def test_terminated_and_truncated_on_the_same_step():
    env_id = "InvertedPendulum-v5"
    rng = np.random.default_rng(4)
    actions = [rng.uniform(-3, 3, 1).astype(np.float32) for _ in range(200)]
    env = ENV_CLASSES[env_id](max_episode_steps=None)
    env.reset(seed=9)
    end = next(t for t, a in enumerate(actions, 1) if env.step(a)[2])
    ours, theirs = make_pair(env_id, max_episode_steps=end)
    assert_same(ours.reset(seed=9), theirs.reset(seed=9))
    for t, action in enumerate(actions[:end], 1):
        got, want = ours.step(action), theirs.step(action)
        assert_same(got, want, f"step {t}")
    assert got[2] is True and got[3] is True


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_bad_time_limit(bad):
    with pytest.raises(ValueError, match="max_episode_steps"):
        ENV_CLASSES["Reacher-v5"](max_episode_steps=bad)


def test_unsupported_render_modes():
    for mode in ("human", "depth_array", "rgbd_tuple"):
        with pytest.raises(ValueError, match="not supported"):
            ENV_CLASSES["Hopper-v5"](render_mode=mode)
    env = ENV_CLASSES["Hopper-v5"]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert env.render() is None
    env.close()


def test_randomised_body_masses_are_honoured():
    """Domain randomisation of model.body_mass after construction (Humanoid's centre of mass)."""
    ours, theirs = make_pair("Humanoid-v5", max_episode_steps=100)
    for env in (ours, theirs.unwrapped):
        env.model.body_mass[3] *= 1.7
        env.model.body_mass[7] *= 0.6
    compare_rollout(ours, theirs, 100, seed=5)
