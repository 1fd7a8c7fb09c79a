"""The native MuJoCo engine (``envhive/HalfCheetah-v5``, ``envhive/Ant-v5`` on executor="native").

Its compiled step re-implements each family's observation, reward and info arithmetic, so
everything here is compared bit for bit (values and dtypes): with gymnasium's SyncVectorEnv
over gymnasium's own envs, and with the same ids on the serial executor (the env objects'
Python ``step``), through autoresets, terminations, async batches and odd keyword types.
"""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mujoco")

import envhive  # noqa: E402
from envhive.engines._compiled import clip as _clip  # noqa: E402
from envhive.engines._compiled import first_bad_action, pairwise_sum  # noqa: E402
from envhive.testing import assert_same_transcript, transcript  # noqa: E402
from tests.general_path import GeneralPath  # noqa: E402

NATIVE = ["HalfCheetah-v5", "Ant-v5"]  # most tests
ALL_NATIVE = [*NATIVE, "Hopper-v5", "Walker2d-v5", "Swimmer-v5", "InvertedPendulum-v5",
              "InvertedDoublePendulum-v5", "Reacher-v5"]  # the gymnasium differential
MODES = {
    "next_step": gym.vector.AutoresetMode.NEXT_STEP,
    "same_step": gym.vector.AutoresetMode.SAME_STEP,
}
# Ant with a narrow healthy range ends episodes every few dozen steps: many autoresets.
OFTEN_ENDS: dict[str, dict] = {"Ant-v5": {"healthy_z_range": (0.45, 0.8)}, "HalfCheetah-v5": {},
                               "Hopper-v5": {}, "Walker2d-v5": {}, "Swimmer-v5": {},
                               "InvertedPendulum-v5": {}, "InvertedDoublePendulum-v5": {},
                               "Reacher-v5": {}}


def _actions(space: gym.Space, steps: int, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(space.low, space.high, (n, *space.shape)).astype(np.float32) for _ in range(steps)]


# ---------------------------------------------------------------- the compiled helpers
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=0, max_size=300),
    st.sampled_from([np.float32, np.float64]),
)
def test_pairwise_sum_is_numpys_sum(values: list[float], dtype: type) -> None:
    a = np.array(values, dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        want = np.add.reduce(a)
    got = pairwise_sum(a, 0, a.size, dtype(0.0))
    # numba returns a Python float; a float32 sum is exactly representable, so compare as is
    # (a float64 accumulation would differ from numpy's float32 one in the last bits).
    assert got == float(want) or (np.isnan(got) and np.isnan(want))


def test_pairwise_sum_on_wide_ranges_of_lengths() -> None:
    rng = np.random.default_rng(0)
    for n in range(0, 700, 7):
        for dtype in (np.float32, np.float64):
            a = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e3], n)).astype(dtype)
            assert pairwise_sum(a, 0, n, dtype(0.0)) == np.add.reduce(a)
            # ... and a running sum does differ somewhere, so the test can fail
    a = (rng.standard_normal(300) * 1e3).astype(np.float32)
    assert any(
        pairwise_sum(b, 0, b.size, np.float32(0)) != np.float32(sum(b.tolist()))
        for b in (a[: k * 10] for k in range(1, 30))
    )


@given(st.floats(allow_nan=True), st.floats(allow_nan=True), st.floats(allow_nan=True))
def test_clip_is_numpys_clip(x: float, lo: float, hi: float) -> None:
    want = np.clip(np.float64(x), np.float64(lo), np.float64(hi))
    got = _clip(x, lo, hi)
    np.testing.assert_array_equal(np.float64(got), want)
    assert np.signbit(got) == np.signbit(want)


def test_clip_keeps_numpys_signed_zeros() -> None:
    # Hypothesis found these only now and then: ties must keep the first operand's sign.
    special = [0.0, -0.0, 1.0, -1.0, float("nan"), float("inf"), -float("inf")]
    for x, lo, hi in itertools.product(special, repeat=3):
        want = np.clip(np.float64(x), np.float64(lo), np.float64(hi))
        got = _clip(x, lo, hi)
        assert got == want or (np.isnan(got) and np.isnan(want)), (x, lo, hi)
        assert np.signbit(got) == np.signbit(want), (x, lo, hi)


def test_first_bad_action_finds_nan_and_out_of_bounds_rows() -> None:
    lo, hi = np.full(3, -1.0), np.full(3, 1.0)
    ok = np.zeros((4, 3), np.float32)
    assert first_bad_action(ok, lo, hi) == -1
    for row, value in ((2, np.nan), (1, 1.5), (3, -np.inf)):
        bad = ok.copy()
        bad[row, 1] = value
        assert first_bad_action(bad, lo, hi) == row


# ---------------------------------------------------------------- against gymnasium
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("env_id", ALL_NATIVE)
def test_native_matches_gymnasium_sync_vector_env(env_id: str, mode: str) -> None:
    n, steps = 5, 150
    kwargs = OFTEN_ENDS[env_id]
    ref = gym.make_vec(
        env_id, n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": MODES[mode]}, **kwargs
    )
    acts = _actions(ref.single_action_space, steps, n)
    try:
        want = transcript(ref, steps, acts.__getitem__, seed=[7, 8, 9, 10, 11])
    finally:
        ref.close()
    with envhive.make(f"envhive/{env_id}", n, executor="native", autoreset=mode, env_kwargs=kwargs) as env:
        got = transcript(env, steps, acts.__getitem__, seed=[7, 8, 9, 10, 11])
    assert_same_transcript(got, want)
    if env_id in ("Ant-v5", "Hopper-v5", "Walker2d-v5", "InvertedPendulum-v5", "InvertedDoublePendulum-v5"):
        ends = sum(int((t[2] | t[3]).sum()) for t in want[1:])
        assert ends >= 5, ends  # the run did cross episode ends


def test_seeds_beyond_int64_match_gymnasium() -> None:
    seeds = [2**63, 2**64 + 5, 2**128 + 1]
    ref = gym.make_vec("Ant-v5", 3, vectorization_mode="sync", **OFTEN_ENDS["Ant-v5"])
    acts = _actions(ref.single_action_space, 60, 3)
    try:
        want = transcript(ref, 60, acts.__getitem__, seed=seeds)
    finally:
        ref.close()
    with envhive.make("envhive/Ant-v5", 3, executor="native", env_kwargs=OFTEN_ENDS["Ant-v5"]) as env:
        got = transcript(env, 60, acts.__getitem__, seed=seeds)
    assert_same_transcript(got, want)


@pytest.mark.parametrize("mode", list(MODES))
def test_native_matches_gymnasium_with_the_time_limit(mode: str) -> None:
    """Truncation at the time limit, all envs at once (the HalfCheetah case): the step-only
    info keys must vanish from the reset step's infos, as in gymnasium."""
    n, steps = 3, 40
    ref = gym.make_vec("HalfCheetah-v5", n, vectorization_mode="sync", max_episode_steps=12,
                       vector_kwargs={"autoreset_mode": MODES[mode]})
    acts = _actions(ref.single_action_space, steps, n)
    try:
        want = transcript(ref, steps, acts.__getitem__, seed=1)
    finally:
        ref.close()
    with envhive.make("envhive/HalfCheetah-v5", n, executor="native", autoreset=mode,
                      max_episode_steps=12) as env:
        got = transcript(env, steps, acts.__getitem__, seed=1)
    assert_same_transcript(got, want)
    assert sum(int(t[3].sum()) for t in got[1:]) == 3 * n
    assert "x_velocity" not in got[13 if mode == "next_step" else 12][4]


def test_patched_infos_equal_per_env_infos() -> None:
    """The inline step's infos (the engine's step-info columns, with the rows of envs reset in
    that step patched: ``_infos.patch_reset_rows``) == the general path's per-env infos
    (``step_async`` + ``step_wait``: the engine's ``run``, one info dict per env). Episodes end
    often, so many steps have reset rows."""
    n, steps = 6, 80
    kw = {"env_kwargs": OFTEN_ENDS["Ant-v5"]}
    for mode in ("next_step", "same_step"):
        with envhive.make("envhive/Ant-v5", n, executor="native", autoreset=mode, **kw) as a, \
                envhive.make("envhive/Ant-v5", n, executor="native", autoreset=mode, **kw) as b:
            acts = _actions(a.single_action_space, steps, n)
            inline = transcript(a, steps, acts.__getitem__, seed=2)
            general = transcript(GeneralPath(b), steps, acts.__getitem__, seed=2)
            assert_same_transcript(inline, general)
            reset_rows = sum(int(np.sum(t[2] | t[3])) for t in inline[1:])
            assert reset_rows >= 2 * n  # the patched rows were exercised


# ---------------------------------------------------------------- against the serial executor
def _pair(env_id: str, n: int, **kw: object) -> tuple[envhive.VectorEnv, envhive.VectorEnv]:
    return (
        envhive.make(f"envhive/{env_id}", n, executor="native", **kw),  # type: ignore[arg-type]
        envhive.make(f"envhive/{env_id}", n, executor="serial", **kw),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("env_id", NATIVE)
def test_disabled_mode_with_partial_resets_matches_serial(env_id: str) -> None:
    n = 4
    kw = {"autoreset": "disabled", "env_kwargs": {**OFTEN_ENDS[env_id], "max_episode_steps": 15}}
    native, serial = _pair(env_id, n, **kw)
    with native, serial:
        acts = _actions(native.single_action_space, 90, n)
        a, b = native.reset(seed=3), serial.reset(seed=3)
        assert_same_transcript([a], [b])
        ended = np.zeros(n, bool)
        for t in range(90):
            if ended.any():
                opts = {"reset_mask": ended.copy()}
                assert_same_transcript([native.reset(seed=t, options=opts)], [serial.reset(seed=t, options=opts)])
            x, y = native.step(acts[t]), serial.step(acts[t])
            assert_same_transcript([x], [y])
            ended = x[2] | x[3]


@pytest.mark.parametrize("env_id", [*NATIVE, "Reacher-v5"])
def test_async_batches_match_serial(env_id: str) -> None:
    """send/recv with batch_size < num_envs takes the engine's general path (run)."""
    n, k = 6, 2
    kw = {"batch_size": k, "env_kwargs": OFTEN_ENDS[env_id], "autoreset": "same_step"}
    native, serial = _pair(env_id, n, **kw)
    with native, serial:
        acts = _actions(native.single_action_space, 1, n)[0]
        for env in (native, serial):
            env.async_reset(seed=list(range(n)))
        for _ in range(120):
            x, y = native.recv(), serial.recv()
            # Same envs in the same order: both executors finish ops in submission order.
            assert_same_transcript([x], [y])
            ids = x[4]["env_id"]
            native.send(acts[ids], ids)
            serial.send(acts[ids], ids)


def test_thread_count_does_not_change_results() -> None:
    steps, n = 60, 7
    runs = []
    for threads in (1, 2, 3):
        with envhive.make("envhive/Ant-v5", n, executor=envhive.executors.NativeExecutor(threads),
                          env_kwargs=OFTEN_ENDS["Ant-v5"]) as env:
            acts = _actions(env.single_action_space, steps, n)
            runs.append(transcript(env, steps, acts.__getitem__, seed=0))
    assert_same_transcript(runs[0], runs[1])
    assert_same_transcript(runs[0], runs[2])


@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("HalfCheetah-v5", {"ctrl_cost_weight": np.float64(0.3), "forward_reward_weight": 2}),
        ("HalfCheetah-v5", {"exclude_current_positions_from_observation": False, "frame_skip": 2}),
        ("Ant-v5", {"ctrl_cost_weight": np.float64(0.7), "healthy_reward": 2, "main_body": "torso"}),
        ("Ant-v5", {"include_cfrc_ext_in_observation": False, "contact_force_range": (-0.5, 0.2),
                    "terminate_when_unhealthy": False, "healthy_z_range": (0.5, 0.7)}),
        ("Ant-v5", {"exclude_current_positions_from_observation": False, "rne_post_constraint": False}),
        ("Hopper-v5", {"healthy_state_range": (-2.0, 2.0), "healthy_reward": 3,
                       "exclude_current_positions_from_observation": False}),
        # No termination: long falls, fast joints (the velocity clip), and a state range that
        # the positions alone leave (reward_survive flips).
        ("Hopper-v5", {"terminate_when_unhealthy": False, "healthy_state_range": (-0.25, 15.0),
                       "healthy_z_range": (-1.0, 5.0), "healthy_angle_range": (-9.0, 9.0)}),
        ("Walker2d-v5", {"terminate_when_unhealthy": False, "ctrl_cost_weight": np.float64(0.01)}),
        ("Swimmer-v5", {"exclude_current_positions_from_observation": False, "ctrl_cost_weight": 0.5}),
        ("InvertedDoublePendulum-v5", {"healthy_reward": 3}),
        ("Reacher-v5", {"reward_dist_weight": 0.5, "reward_control_weight": np.float64(2.0)}),
    ],
)
def test_keywords_and_weight_types_match_serial(env_id: str, kwargs: dict) -> None:
    """numpy's result dtypes follow the weights' types (float64 weight: float64 ctrl cost; int
    healthy reward: int info); the compiled step follows them too."""
    n, steps = 3, 50
    native, serial = _pair(env_id, n, env_kwargs=kwargs, autoreset="same_step")
    with native, serial:
        acts = _actions(native.single_action_space, steps, n)
        assert_same_transcript(
            transcript(native, steps, acts.__getitem__, seed=5),
            transcript(serial, steps, acts.__getitem__, seed=5),
        )


# ---------------------------------------------------------------- errors and env access
def test_bad_actions_raise_and_step_nothing() -> None:
    with envhive.make("envhive/HalfCheetah-v5", 3, executor="native", seed=0) as env:
        env.reset()
        before = env._pool.executor._engine._elapsed.copy()
        acts = np.zeros((3, 6), np.float32)
        for value in (np.nan, 1.01, -7.0):
            bad = acts.copy()
            bad[1, 4] = value
            with pytest.raises(envhive.ActionError, match="env 1"):
                env.step(bad)
        with pytest.raises(envhive.ActionError, match="shape"):
            env.step(np.zeros((3, 5), np.float32))
        np.testing.assert_array_equal(env._pool.executor._engine._elapsed, before)
        assert env.env_steps == 0
        env.step(acts.astype(np.float64))  # other float dtypes are cast, as on other executors
        assert env.env_steps == 3


def test_call_and_set_attr_reach_the_env_objects() -> None:
    with envhive.make("envhive/HalfCheetah-v5", 2, executor="native", seed=0) as env:
        env.reset()
        acts = np.full((2, 6), 0.5, np.float32)
        env.step(acts)
        assert env.call("elapsed_steps") == (1, 1)
        assert env.get_attr("frame_skip") == (5, 5)
        env.set_attr("_ctrl_cost_weight", 0.0)
        _, reward, _, _, info = env.step(acts)
        assert (info["reward_ctrl"] == 0).all() and (reward == info["reward_forward"]).all()
        masses = env.call("get_body_com", "torso")
        assert len(masses) == 2 and masses[0].shape == (3,)
        # A float64 weight makes numpy's control cost float64: the info dtype follows.
        env.set_attr("_ctrl_cost_weight", np.float64(0.25))
        info = env.step(acts)[4]
        assert info["reward_ctrl"].dtype == np.float64 and (info["reward_ctrl"] < 0).all()
        with pytest.raises(envhive.ConfigError, match="env 1: the native MuJoCo engine needs"):
            env.set_attr("_ctrl_cost_weight", [0.1, np.float64(0.1)])


def test_native_refuses_mujoco_envs_without_a_compiled_step() -> None:
    with pytest.raises(envhive.ConfigError, match="native executor runs envhive's compiled envs"):
        envhive.make("envhive/Humanoid-v5", 2, executor="native")


@pytest.mark.parametrize("env_id", ["Hopper-v5", "Walker2d-v5"])
def test_velocity_clip_matches_serial(env_id: str) -> None:
    """Fast joints (set through call("set_state")): the observation's clipped velocities."""
    native, serial = _pair(env_id, 2, seed=0)
    with native, serial:
        for env in (native, serial):
            env.reset()
            qpos = env.call("init_qpos")[0]
            qvel = np.linspace(-60.0, 60.0, env.call("init_qvel")[0].size)
            env.call("set_state", qpos, qvel)
        acts = np.zeros((2, *native.single_action_space.shape), np.float32)
        x, y = native.step(acts), serial.step(acts)
        assert_same_transcript([x], [y])
        assert (np.abs(x[0][:, -qvel.size:]) == 10.0).any()
