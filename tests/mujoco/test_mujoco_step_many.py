"""``MujocoEnv.step_many`` against ``env.step`` on twin envs: bitwise, types included.

``step_many`` runs the physics of all its envs in one GIL-free call; every result must still
be exactly what each env's own ``step`` returns, and each env's state afterwards exactly what
``step`` leaves, with per-env exceptions for rejected actions.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
if not hasattr(mujoco, "MjModel"):  # tests/mujoco itself, seen as a namespace package
    pytest.skip("mujoco is not installed", allow_module_level=True)

from envhive.envs.mujoco import ENV_CLASSES as _ENV_CLASSES  # noqa: E402
from envhive.envs.mujoco import HalfCheetahEnv, HopperEnv, MujocoEnv  # noqa: E402
from envhive.envs.mujoco._batch import batched_physics_available  # noqa: E402

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

ENV_CLASSES: dict[str, Any] = dict(_ENV_CLASSES)  # classes called with their own kwargs
ENV_IDS = sorted(ENV_CLASSES)
N_ENVS = 5


def assert_same(ours: Any, theirs: Any, where: str = "") -> None:
    """Equal bit for bit (NaNs and signed zeros included), with the same types."""
    assert type(ours) is type(theirs), f"{where}: {type(ours)} vs {type(theirs)}"
    if isinstance(ours, dict):
        assert list(ours) == list(theirs), f"{where}: keys {list(ours)} vs {list(theirs)}"
        for key in ours:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(ours, (tuple, list)):
        assert len(ours) == len(theirs), where
        for k, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{k}]")
    elif isinstance(ours, (np.ndarray, np.generic)):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        assert ours.tobytes() == theirs.tobytes(), f"{where}: {ours!r} vs {theirs!r}"
    elif isinstance(ours, float):
        assert np.float64(ours).tobytes() == np.float64(theirs).tobytes(), (
            f"{where}: {ours} vs {theirs}"
        )
    else:
        assert ours == theirs, f"{where}: {ours!r} vs {theirs!r}"


def assert_same_state(ours: MujocoEnv, theirs: MujocoEnv, where: str = "") -> None:
    """The simulator state and the time-limit count are identical."""
    for name in ("qpos", "qvel", "act", "ctrl", "qacc_warmstart", "cfrc_ext", "cacc", "xpos"):
        assert_same(getattr(ours.data, name), getattr(theirs.data, name), f"{where} data.{name}")
    assert_same(ours.data.time, theirs.data.time, f"{where} data.time")
    assert ours.elapsed_steps == theirs.elapsed_steps, where


def sample_actions(envs: Sequence[MujocoEnv], rng: np.random.Generator) -> list[Any]:
    """Random float32 actions, a little beyond the bounds (MuJoCo clamps controls)."""
    out = []
    for env in envs:
        space: Any = env.action_space
        low, high = space.low, space.high
        out.append((rng.uniform(1.2 * low, 1.2 * high)).astype(np.float32))
    return out


def run_twins(
    ours: Sequence[MujocoEnv], theirs: Sequence[MujocoEnv], n_steps: int, seed: int
) -> int:
    """Step both lists with the same actions (``step_many`` vs ``step``); return #episode ends."""
    rng = np.random.default_rng(seed)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert_same(a.reset(seed=seed + k), b.reset(seed=seed + k), f"reset {k}")
    ends = 0
    for t in range(n_steps):
        actions = sample_actions(ours, rng)
        results = MujocoEnv.step_many(ours, actions)
        assert len(results) == len(ours)
        for k, (a, b) in enumerate(zip(ours, theirs)):
            expected = b.step(actions[k])
            assert_same(results[k], expected, f"step {t} env {k}")
            assert_same_state(a, b, f"step {t} env {k}")
            if expected[2] or expected[3]:
                ends += 1
                new_seed = int(rng.integers(1 << 30))
                assert_same(a.reset(seed=new_seed), b.reset(seed=new_seed), f"reset {t} {k}")
    return ends


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the batched path is checked on Linux"
)
def test_batched_physics_is_used() -> None:
    assert batched_physics_available()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_many_matches_step(env_id: str) -> None:
    cls = ENV_CLASSES[env_id]
    ours = [cls() for _ in range(N_ENVS)]
    theirs = [cls() for _ in range(N_ENVS)]
    n_steps = 60 if env_id == "Humanoid-v5" else 300
    run_twins(ours, theirs, n_steps, seed=17)


def test_time_limit_and_resets() -> None:
    """Short time limits: truncation is counted exactly as ``step`` counts it."""
    ours = [HalfCheetahEnv(max_episode_steps=7 + k) for k in range(N_ENVS)]
    theirs = [HalfCheetahEnv(max_episode_steps=7 + k) for k in range(N_ENVS)]
    assert run_twins(ours, theirs, 50, seed=3) >= 5 * N_ENVS


def test_mixed_classes_and_options() -> None:
    """One call over every class (different frame_skip, rne flags), plus odd options."""

    def make() -> list[MujocoEnv]:
        envs: list[MujocoEnv] = [ENV_CLASSES[env_id]() for env_id in ENV_IDS]
        envs.append(HalfCheetahEnv(frame_skip=3, rne_post_constraint=True))
        envs.append(HopperEnv(frame_skip=1))
        envs.append(
            ENV_CLASSES["Ant-v5"](rne_post_constraint=False, include_cfrc_ext_in_observation=False)
        )
        return envs

    ours, theirs = make(), make()
    assert len({(type(e), e.frame_skip, e.rne_post_constraint) for e in ours}) == len(ours)
    run_twins(ours, theirs, 80, seed=5)


def test_invalid_action_is_that_envs_exception() -> None:
    ours: list[MujocoEnv] = [HalfCheetahEnv() for _ in range(3)] + [HopperEnv()]
    theirs: list[MujocoEnv] = [HalfCheetahEnv() for _ in range(3)] + [HopperEnv()]
    for k, (a, b) in enumerate(zip(ours, theirs)):
        a.reset(seed=k)
        b.reset(seed=k)
    rng = np.random.default_rng(0)
    for t in range(5):  # a few steps first, so the state is not the reset state
        actions = sample_actions(ours, rng)
        for a, b, result in zip(ours, theirs, MujocoEnv.step_many(ours, actions)):
            assert_same(result, b.step(actions[ours.index(a)]), f"step {t}")

    actions = sample_actions(ours, rng)
    actions[1] = np.zeros(5, dtype=np.float32)  # wrong shape
    actions[3] = [0.1, 0.2, 0.3]  # a list: valid, goes through the slow check
    before = [
        (a.data.qpos.copy(), a.data.qvel.copy(), a.data.ctrl.copy(), a.data.time) for a in ours
    ]
    results = MujocoEnv.step_many(ours, actions)

    with pytest.raises(ValueError) as expected:
        theirs[1].step(actions[1])
    err = results[1]
    assert isinstance(err, ValueError) and str(err) == str(expected.value)
    qpos, qvel, ctrl, time = before[1]
    assert_same(ours[1].data.qpos, qpos)
    assert_same(ours[1].data.qvel, qvel)
    assert_same(ours[1].data.ctrl, ctrl)
    assert ours[1].data.time == time and ours[1].elapsed_steps == 5
    for k in (0, 2, 3):
        assert ours[k].data.time != before[k][3]
        assert_same(results[k], theirs[k].step(actions[k]), f"env {k}")
    for k in range(4):
        assert_same_state(ours[k], theirs[k], f"env {k}")

    # Every action rejected: nothing is stepped, nothing raised.
    results = MujocoEnv.step_many(ours, [np.zeros(1)] * 4)
    assert all(isinstance(r, ValueError) for r in results)
    for k in range(4):
        assert_same_state(ours[k], theirs[k], f"env {k}")


def test_duplicates_overrides_and_edge_cases() -> None:
    # The same env twice: two sequential steps, as two step() calls would do.
    a, b = HalfCheetahEnv(), HalfCheetahEnv()
    a.reset(seed=1)
    b.reset(seed=1)
    act = [np.full(6, 0.3, np.float32), np.full(6, -0.2, np.float32)]
    results = MujocoEnv.step_many([a, a], act)
    assert_same(results, [b.step(act[0]), b.step(act[1])])
    assert_same_state(a, b)

    # A subclass overriding step() is stepped with its own step().
    class Custom(HopperEnv):
        def step(self, action: Any) -> Any:
            obs, reward, term, trunc, info = super().step(action)
            return obs, 123.0, term, trunc, info

    c, h = Custom(), HopperEnv()
    c.reset(seed=2)
    h.reset(seed=2)
    results = MujocoEnv.step_many([c, h], [np.zeros(3, np.float32)] * 2)
    assert results[0][1] == 123.0  # type: ignore[index]
    assert_same(results[0][0], results[1][0])  # type: ignore[index]

    assert MujocoEnv.step_many([], []) == []
    with pytest.raises(ValueError):
        MujocoEnv.step_many([a], [])
    # One env: same as step().
    assert_same(MujocoEnv.step_many([a], [act[0]])[0], b.step(act[0]))
