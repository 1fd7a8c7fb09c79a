"""Buffers: copy=False hands out the pool's own preallocated arrays (no per-step allocation);
copy=True hands out fresh arrays that later calls never touch."""

from __future__ import annotations

import tracemalloc
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import envhive
from envhive.executors import available_executors
from envhive.testing import SPACE_ZOO, CountingEnv, ZooEnv

pytestmark = pytest.mark.timeout(300)

OBS_DIM = 2048  # float32: 8 KiB per env, so any obs-sized allocation stands out
N = 4
STEPS = 200


class PreallocEnv(gym.Env):
    """A numpy-only env that allocates nothing per step: it returns one preallocated obs."""

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
        self.action_space = spaces.Discrete(2)
        self._obs = np.zeros(OBS_DIM, np.float32)
        self._info: dict = {}

    def reset(self, *, seed=None, options=None):
        self._obs[0] = 0.0
        return self._obs, self._info

    def step(self, action):
        self._obs[0] += 1.0
        return self._obs, 1.0, False, False, self._info


@pytest.fixture(params=available_executors())
def executor(request):
    return request.param


def _traced(fn, steps: int, keep: bool) -> tuple[int, int]:
    kept = []
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(steps):
            out = fn()
            if keep:
                kept.append(out)
        end, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return end - start, peak - start


def traced_growth(fn, steps: int) -> tuple[int, int]:
    """Run ``fn`` ``steps`` times; return (retained, transient) traced bytes.

    ``retained``: growth while every result is kept alive, so per-step allocations of
    returned arrays accumulate. ``transient``: peak growth while results are dropped, which
    catches temporaries allocated and freed inside each call.
    """
    fn()  # warm up: lazily created state is not per-step cost
    retained, _ = _traced(fn, steps, keep=True)
    _, transient = _traced(fn, steps, keep=False)
    return retained, transient


def _step_fn(env):
    actions = np.zeros(N, np.int64)
    return lambda: env.step(actions)


def test_copy_false_step_returns_same_arrays(executor):
    with envhive.make(PreallocEnv, N, executor=executor, copy=False) as env:
        assert env.copy is False
        obs0, _ = env.reset()
        first = env.step(np.zeros(N, np.int64))
        assert first[0] is obs0  # reset and step share the obs buffer
        for t in range(5):
            out = env.step(np.ones(N, np.int64))
            for a, b in zip(out[:4], first[:4]):
                assert a is b
            assert obs0[:, 0].tolist() == [t + 2.0] * N  # the buffer holds the latest step


def test_copy_false_tree_obs_leaves_are_the_buffers(executor):
    fn = lambda: ZooEnv(SPACE_ZOO["dict"], spaces.Discrete(2))
    with envhive.make(fn, N, executor=executor, seed=0, copy=False) as env:
        first = env.reset()[0]
        leaves = [first["pos"], first["nested"][0], first["nested"][1]]
        for _ in range(4):
            obs = env.step(np.zeros(N, np.int64))[0]
            for a, b in zip([obs["pos"], obs["nested"][0], obs["nested"][1]], leaves):
                assert a is b


def _ray_transport_allocates(request, executor):
    """Ray actors' results arrive as new arrays from Ray's object store (one batch per actor
    per call) and are copied into the pool's buffers: the pool hands out no new arrays, but
    the transport makes them every step. Checked to stay that way (strict)."""
    if executor == "ray":
        request.applymarker(pytest.mark.xfail(
            strict=True, reason="deliberate difference: the Ray transport deserializes each "
            "actor's result batch into new arrays before copying them into the buffers"))


def test_copy_false_step_allocates_no_arrays(executor, request):
    _ray_transport_allocates(request, executor)
    # 200 steps with copy=False must not allocate anything obs-sized, neither kept nor
    # temporary; with copy=True every step allocates a fresh obs batch (the control).
    batch_bytes = N * OBS_DIM * 4
    with envhive.make(PreallocEnv, N, executor=executor, copy=False) as env:
        env.reset()
        retained, peak = traced_growth(_step_fn(env), STEPS)
    with envhive.make(PreallocEnv, N, executor=executor, copy=True) as env:
        env.reset()
        retained_copy, _ = traced_growth(_step_fn(env), STEPS)
    # copy=True keeps STEPS fresh obs batches alive; copy=False only small per-call objects
    # (the result tuple and info dict, well under 1 KiB a step).
    assert retained_copy >= STEPS * batch_bytes
    assert retained < STEPS * 1024, f"copy=False retained {retained} bytes over {STEPS} steps"
    assert retained * 50 < retained_copy
    assert peak < batch_bytes // 2, f"copy=False step made an obs-sized temporary (+{peak} B)"


def test_copy_true_returns_fresh_unaliased_arrays(executor):
    fn = lambda: CountingEnv(pattern=[(3, "term")])
    with envhive.make(fn, N, executor=executor, seed=0, copy=True) as env:
        assert env.copy is True
        reset_obs, _ = env.reset()
        saved_reset = reset_obs.copy()
        a = env.step(np.ones(N, np.int64))
        saved = [x.copy() for x in a[:4]]
        b = env.step(np.full(N, 2, np.int64))
        for x, y in zip(a[:4], b[:4]):
            assert x is not y and not np.shares_memory(x, y)
            assert not np.shares_memory(x, reset_obs)
        env.step(np.zeros(N, np.int64))  # ends the episodes: term flips to True
        env.step(np.zeros(N, np.int64))  # autoreset rewrites obs
        for x, s in zip(a[:4], saved):
            np.testing.assert_array_equal(x, s)  # later calls did not write into old results
        np.testing.assert_array_equal(reset_obs, saved_reset)
        b[0][:] = -5  # writing into a returned array does not reach the pool
        c = env.step(np.ones(N, np.int64))
        assert (c[0] >= 0).all() and c[0][:, 2].tolist() == [1] * N


def test_copy_true_dict_obs_leaves_are_fresh(executor):
    fn = lambda: ZooEnv(SPACE_ZOO["dict"], spaces.Discrete(2))
    with envhive.make(fn, N, executor=executor, seed=0, copy=True) as env:
        env.reset()
        a = env.step(np.zeros(N, np.int64))[0]
        pos = a["pos"].copy()
        b = env.step(np.zeros(N, np.int64))[0]
        assert not np.shares_memory(a["pos"], b["pos"])
        assert not np.shares_memory(a["nested"][0], b["nested"][0])
        np.testing.assert_array_equal(a["pos"], pos)


def test_recv_copy_false_returns_same_preallocated_arrays(executor):
    with envhive.make(PreallocEnv, N, executor=executor, batch_size=2, copy=False) as env:
        env.async_reset()
        first = env.recv()
        assert first[0].shape == (2, OBS_DIM)
        seen = set(first[4]["env_id"].tolist())
        steps = np.zeros(N)  # PreallocEnv's obs[0] counts its steps since reset
        assert first[0][:, 0].tolist() == [0.0, 0.0]
        env.send(np.zeros(2, np.int64), first[4]["env_id"])
        steps[first[4]["env_id"]] += 1
        # First-finished batches: under load the same envs may win several rounds, so go on
        # until every env came back (bounded: a starving env still fails the test).
        rounds = 0
        while seen != set(range(N)) and rounds < 500 or rounds < 6:
            rounds += 1
            out = env.recv()
            for x, y in zip(out[:4], first[:4]):
                assert x is y
            ids = out[4]["env_id"]
            assert out[0][:, 0].tolist() == steps[ids].tolist()  # these envs' current rows
            assert out[1].tolist() == [1.0 if steps[i] else 0.0 for i in ids]
            seen.update(ids.tolist())
            env.send(np.zeros(2, np.int64), ids)
            steps[ids] += 1
        assert seen == set(range(N))
        env.recv()


def test_recv_copy_false_allocates_no_arrays(executor, request):
    _ray_transport_allocates(request, executor)
    batch_bytes = 2 * OBS_DIM * 4
    with envhive.make(PreallocEnv, N, executor=executor, batch_size=2, copy=False) as env:
        env.async_reset()
        actions = np.zeros(2, np.int64)

        def cycle():
            out = env.recv()
            env.send(actions, out[4]["env_id"])
            return out

        retained, peak = traced_growth(cycle, STEPS)
    # per call: the result tuple, the info dict and its small info["env_id"] array
    assert retained < STEPS * 2048, f"copy=False recv retained {retained} bytes"
    assert peak < batch_bytes // 2, f"copy=False recv made an obs-sized temporary (+{peak} B)"


def test_recv_copy_true_returns_fresh_rows(executor):
    fn = lambda: CountingEnv(pattern=[(100, "term")])
    with envhive.make(fn, N, executor=executor, batch_size=2, seed=0, copy=True) as env:
        env.async_reset()
        a = env.recv()
        saved = a[0].copy()
        env.send(np.ones(2, np.int64), a[4]["env_id"])
        b = env.recv()
        assert not np.shares_memory(a[0], b[0])
        env.send(np.ones(2, np.int64), b[4]["env_id"])
        env.recv()
        np.testing.assert_array_equal(a[0], saved)


@pytest.mark.parametrize("copy", [True, False])
def test_text_observations(executor, copy):
    text = SPACE_ZOO["text"]
    fn = lambda: ZooEnv(text, spaces.Discrete(2), max_len=3)
    with envhive.make(fn, N, executor=executor, seed=3, copy=copy) as env:
        assert env.single_observation_space == text
        obs, _ = env.reset()
        singles = [ZooEnv(text, spaces.Discrete(2), max_len=3) for _ in range(N)]
        expect = [s.reset(seed=3 + i)[0] for i, s in enumerate(singles)]
        assert obs.dtype == object and obs.shape == (N,)
        assert obs.tolist() == expect
        first = obs
        for _ in range(8):
            obs = env.step(np.zeros(N, np.int64))[0]
            assert obs.dtype == object and obs.shape == (N,)
            assert all(isinstance(o, str) and text.contains(o) for o in obs)
            assert obs in env.observation_space
            assert (obs is first) is (not copy)
        if copy:
            assert first.tolist() == expect  # the first result was not overwritten
        else:
            assert first.tolist() != expect  # it is the live buffer
    with envhive.make(fn, N, executor=executor, seed=3, copy=copy, batch_size=2) as env:
        env.async_reset()
        obs, _, _, _, info = env.recv()
        assert obs.dtype == object and obs.shape == (2,)
        assert obs.tolist() == [expect[i] for i in info["env_id"].tolist()]


class LooseObsEnv(gym.Env):
    """Returns a float32 Box observation in another form: float64, list, int64 or shared."""

    metadata: ClassVar[dict] = {"render_modes": []}
    SHARED = np.zeros(3, np.float32)  # one array for every "shared" env, rewritten per step

    def __init__(self, form: str) -> None:
        self.observation_space = spaces.Box(-1e6, 1e6, (3,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.form, self.t = form, 0

    def _obs(self):
        values = [self.t + 0.1, -3.0 * self.t, 1 / 3]
        if self.form == "f64":
            return np.array(values, np.float64), {}
        if self.form == "list":
            return values, {}
        if self.form == "i64":
            return np.array(values, np.int64), {}
        if self.form == "shared":
            LooseObsEnv.SHARED[:] = values
            return LooseObsEnv.SHARED, {}
        return np.array(values, np.float32), {}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs()

    def step(self, action):
        self.t += 1 + int(action)
        obs, info = self._obs()
        return obs, 0.0, False, False, info


@pytest.mark.parametrize("forms", [
    ["f32"] * 4, ["f64"] * 4, ["list"] * 4, ["f32", "f64", "list", "i64"], ["f32", "f32", "i64", "f32"],
])
def test_observations_in_other_forms_are_stored_as_their_own_cast(executor, forms):
    """Slices write their observations as one batch when they stack exactly; otherwise row by
    row. Either way each env's row is its own observation cast to the space's dtype."""
    envs = [LooseObsEnv(f) for f in forms]
    fns = [lambda f=f: LooseObsEnv(f) for f in forms]
    with envhive.make(fns, executor=executor, seed=0) as env:
        obs, _ = env.reset()
        want = np.stack([np.asarray(e.reset()[0]).astype(np.float32) for e in envs])
        np.testing.assert_array_equal(obs, want)
        for step in range(3):
            actions = np.array([(step + i) % 2 for i in range(len(forms))])
            obs = env.step(actions)[0]
            want = np.stack([np.asarray(e.step(a)[0]).astype(np.float32) for e, a in zip(envs, actions)])
            assert obs.dtype == np.float32
            np.testing.assert_array_equal(obs, want)


def test_envs_sharing_one_obs_array_see_the_last_write_as_gymnasium_does():
    """An env that returns an array it later rewrites (here: one array shared by all envs) is
    copied after the whole slice stepped, as gymnasium's SyncVectorEnv copies after all envs."""
    fns = [lambda: LooseObsEnv("shared") for _ in range(3)]
    with envhive.make(fns, executor="serial", seed=0) as env:
        env.reset()
        obs = env.step(np.array([0, 1, 0]))[0]
    ref = gym.vector.SyncVectorEnv(fns)
    ref.reset(seed=0)
    want = ref.step(np.array([0, 1, 0]))[0]
    ref.close()
    np.testing.assert_array_equal(obs, want)
