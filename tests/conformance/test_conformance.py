"""Conformance suite: every executor must give exactly the serial executor's outputs.

Parametrized over ``envhive.executors.available_executors()`` (new executors join by
existing) x autoreset modes x the space zoo. For each combination a transcript of
``reset``/``step`` (and, in disabled mode, ``reset(options={"reset_mask": ...})``) driven by
seeded random valid actions is compared, exactly, with the serial executor's transcript;
invariants of the outputs are checked on every call. The serial executor itself is checked
against ``gymnasium.vector.SyncVectorEnv``, so the reference is not just compared to itself.
"""

from __future__ import annotations

import copy as copylib
import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

import envhive
from envhive.executors import available_executors
from envhive.testing import SPACE_ZOO, ZooEnv, assert_same_transcript

EXECUTORS = available_executors()
MODES = ["next_step", "same_step", "disabled"]
GYM_MODES = {
    "next_step": gym.vector.AutoresetMode.NEXT_STEP,
    "same_step": gym.vector.AutoresetMode.SAME_STEP,
    "disabled": gym.vector.AutoresetMode.DISABLED,
}
NUM_ENVS = 4
STEPS = 60
SEED = 1234
ACTION_SEED = 99

ACTION_ZOO: dict[str, gym.Space] = {
    "discrete": spaces.Discrete(3),
    "box": spaces.Box(-1.0, 1.0, (2,), np.float32),
    "multidiscrete": spaces.MultiDiscrete([2, 3]),
    "dict": spaces.Dict(
        {"move": spaces.Discrete(4, start=1), "force": spaces.Box(-1.0, 1.0, (1,), np.float64)}
    ),
}

# Every observation space of the zoo with a discrete action, plus the other action spaces.
SPACE_COMBOS = [(obs, "discrete") for obs in SPACE_ZOO] + [
    ("box", "box"),
    ("image", "multidiscrete"),
    ("dict", "dict"),
]
COMBO_IDS = [f"obs={o}-act={a}" for o, a in SPACE_COMBOS]


# ----------------------------------------------------------------------------- helpers
def zoo_factories(obs_key: str, act_key: str, n: int = NUM_ENVS) -> list[Any]:
    # One private copy of the spaces per env: ZooEnv seeds and samples its observation space,
    # which must not be shared between envs that may run concurrently. partial(ZooEnv, ...)
    # pickles by value, so process executors can ship it.
    return [
        functools.partial(
            ZooEnv, copylib.deepcopy(SPACE_ZOO[obs_key]), copylib.deepcopy(ACTION_ZOO[act_key]), 6
        )
        for _ in range(n)
    ]


def snap(value: Any) -> Any:
    return copylib.deepcopy(value)


def single_obs(space: gym.Space, batched: Any, i: int) -> Any:
    """Env ``i``'s observation from a batch, for envhive's and gymnasium's layouts alike."""
    if isinstance(space, spaces.Dict):
        return {k: single_obs(s, batched[k], i) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(single_obs(s, batched[j], i) for j, s in enumerate(space.spaces))
    return batched[i]


def normalize_obs(space: gym.Space, batched: Any) -> Any:
    """Object leaves (Text, ...) as object arrays: gymnasium batches them as tuples."""
    if isinstance(space, spaces.Dict):
        return {k: normalize_obs(s, batched[k]) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(normalize_obs(s, batched[j]) for j, s in enumerate(space.spaces))
    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        return batched
    out = np.empty(len(batched), dtype=object)
    for j, v in enumerate(batched):
        out[j] = v
    return out


def single_info(info: dict[str, Any], pos: int) -> dict[str, Any]:
    """The info of batch position ``pos`` from gymnasium's vector-info layout."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if key == "env_id" or (key.startswith("_") and key[1:] in info):
            continue
        mask = info.get(f"_{key}")
        assert mask is not None, f"info key {key!r} has no mask _{key}"
        if not mask[pos]:
            continue
        out[key] = single_info(value, pos) if isinstance(value, dict) else value[pos]
    return out


def check_info_layout(info: dict[str, Any], n: int) -> None:
    for key, value in info.items():
        if key == "env_id" or (key.startswith("_") and key[1:] in info):
            continue
        mask = info[f"_{key}"]
        assert isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == (n,), key
        if isinstance(value, dict):
            check_info_layout(value, n)
        else:
            assert isinstance(value, np.ndarray) and value.shape[0] == n, key


class Invariants:
    """Checks every output of a sync run as it comes (before the next call)."""

    def __init__(self, env: envhive.VectorEnv, mode: str) -> None:
        self.env = env
        self.mode = mode
        self.n = env.num_envs
        self.prev_done = np.zeros(self.n, np.bool_)
        self.expected_steps = 0  # env.step calls so far (autoresets and resets excluded)
        self.kept: list[tuple[Any, Any]] = []  # (returned object, its snapshot) for copy=True

    def obs(self, obs: Any) -> None:
        assert self.env.observation_space.contains(obs), f"obs not in {self.env.observation_space}"

    def after_reset(self, out: Any, mask: np.ndarray | None = None) -> None:
        obs, info = out
        self.obs(obs)
        check_info_layout(info, self.n)
        if mask is not None:
            # A partial reset reports infos only in the slots of the envs it reset.
            for key, value in info.items():
                if key.startswith("_") and key[1:] in info:
                    assert not (value & ~mask).any(), f"{key}={value} outside reset_mask={mask}"
            self.prev_done[mask] = False
        else:
            self.prev_done[:] = False
        assert self.env.env_steps == self.expected_steps
        self._keep(out)

    def after_step(self, out: Any) -> None:
        obs, rew, term, trunc, info = out
        n = self.n
        self.obs(obs)
        assert isinstance(rew, np.ndarray) and rew.dtype == np.float64 and rew.shape == (n,)
        for flags in (term, trunc):
            assert isinstance(flags, np.ndarray) and flags.dtype == np.bool_ and flags.shape == (n,)
        check_info_layout(info, n)
        done = term | trunc
        stepped = ~self.prev_done if self.mode == "next_step" else np.ones(n, np.bool_)
        self.expected_steps += int(stepped.sum())
        assert self.env.env_steps == self.expected_steps, (self.env.env_steps, self.expected_steps)
        if self.mode == "next_step":
            # The step after an episode end returns the reset: reward 0, both flags False.
            assert not rew[self.prev_done].any(), rew
            assert not done[self.prev_done].any(), (term, trunc)
        if self.mode == "same_step":
            for key in ("final_obs", "final_info"):
                mask = info.get(f"_{key}", np.zeros(n, np.bool_))
                assert np.array_equal(mask, done), f"_{key} {mask} != term|trunc {done}"
            if done.any():
                final = info["final_obs"]
                assert final.dtype == object and final.shape == (n,)
                for i in np.flatnonzero(done):
                    assert self.env.single_observation_space.contains(final[i]), final[i]
        else:
            assert "final_obs" not in info and "final_info" not in info, sorted(info)
        self.prev_done = done.copy()
        self._keep(out)

    def _keep(self, out: Any) -> None:
        # copy=True: what a call returned must not change when later calls are made.
        if not self.env.copy:
            return
        for returned, snapshot in self.kept:
            assert_same_transcript([returned], [snapshot])
        self.kept = [(out, snap(out))]


def run_envhive(
    executor: str, mode: str, obs_key: str, act_key: str, *, copy: bool = True
) -> list[tuple[Any, ...]]:
    """A transcript with seeded random actions; disabled mode resets ended envs by mask."""
    env = envhive.make(
        zoo_factories(obs_key, act_key), executor=executor, autoreset=mode, seed=SEED, copy=copy
    )
    try:
        assert env.executor == executor
        assert env.copy is copy
        checks = Invariants(env, mode)
        actions = batch_space(ACTION_ZOO[act_key], NUM_ENVS)
        actions.seed(ACTION_SEED)
        out = env.reset()
        checks.after_reset(out)
        record: list[tuple[Any, ...]] = [("reset", snap(out))]
        for _ in range(STEPS):
            out = env.step(actions.sample())
            checks.after_step(out)
            record.append(("step", snap(out)))
            ended = out[2] | out[3]
            if mode == "disabled" and ended.any():
                mask = ended.copy()
                out = env.reset(options={"reset_mask": mask})
                checks.after_reset(out, mask)
                record.append(("reset_mask", snap(out)))
        return record
    finally:
        env.close()


def run_gymnasium(mode: str, obs_key: str, act_key: str) -> list[tuple[Any, ...]]:
    """The same run on gymnasium's SyncVectorEnv, with object leaves as object arrays."""
    obs_space = SPACE_ZOO[obs_key]
    env = gym.vector.SyncVectorEnv(zoo_factories(obs_key, act_key), autoreset_mode=GYM_MODES[mode])
    try:
        actions = batch_space(ACTION_ZOO[act_key], NUM_ENVS)
        actions.seed(ACTION_SEED)
        obs, info = env.reset(seed=SEED)
        record: list[tuple[Any, ...]] = [("reset", snap((normalize_obs(obs_space, obs), info)))]
        for _ in range(STEPS):
            obs, rew, term, trunc, info = env.step(actions.sample())
            record.append(("step", snap((normalize_obs(obs_space, obs), rew, term, trunc, info))))
            if mode == "disabled" and (term | trunc).any():
                obs, info = env.reset(options={"reset_mask": term | trunc})
                record.append(("reset_mask", snap((normalize_obs(obs_space, obs), info))))
        return record
    finally:
        env.close()


def normalize_record(record: list[tuple[Any, ...]], obs_key: str) -> list[tuple[Any, ...]]:
    space = SPACE_ZOO[obs_key]
    return [(kind, (normalize_obs(space, out[0]), *out[1:])) for kind, out in record]


@functools.cache
def serial_reference(mode: str, obs_key: str, act_key: str) -> list[tuple[Any, ...]]:
    return run_envhive("serial", mode, obs_key, act_key)


# ----------------------------------------------------------------------------- sync tests
@pytest.mark.parametrize(("obs_key", "act_key"), SPACE_COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_transcript_matches_serial(executor: str, mode: str, obs_key: str, act_key: str) -> None:
    got = run_envhive(executor, mode, obs_key, act_key)
    assert_same_transcript(got, serial_reference(mode, obs_key, act_key))
    # copy=False hands out the pool's buffers; snapshotted at once, the values are identical.
    views = run_envhive(executor, mode, obs_key, act_key, copy=False)
    assert_same_transcript(views, got)


@pytest.mark.parametrize(("obs_key", "act_key"), SPACE_COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("mode", MODES)
def test_serial_reference_matches_gymnasium(mode: str, obs_key: str, act_key: str) -> None:
    ours = normalize_record(serial_reference(mode, obs_key, act_key), obs_key)
    theirs = run_gymnasium(mode, obs_key, act_key)
    assert_same_transcript(ours, theirs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_copy_false_returns_views(executor: str, mode: str) -> None:
    """copy=False: every call hands out the pool's own buffers (overwritten by the next call)."""
    env = envhive.make(
        zoo_factories("dict", "discrete"), executor=executor, autoreset=mode, seed=SEED, copy=False
    )
    with env:
        outs = [env.reset()]
        for _ in range(8):
            out = env.step(np.zeros(NUM_ENVS, np.int64))
            outs.append(out)
            if mode == "disabled" and (out[2] | out[3]).any():
                outs.append(env.reset(options={"reset_mask": out[2] | out[3]}))
        first_obs = outs[0][0]
        steps = [o for o in outs if len(o) == 5]
        for out in outs:
            assert np.shares_memory(out[0]["pos"], first_obs["pos"])
            assert np.shares_memory(out[0]["nested"][0], first_obs["nested"][0])
        for out in steps:
            for j in (1, 2, 3):
                assert np.shares_memory(out[j], steps[0][j])
        # ... so values seen earlier are what the pool holds now.
        assert np.array_equal(first_obs["pos"], outs[-1][0]["pos"])


# ----------------------------------------------------------------------------- async API
ASYNC_CASES = [("dict", "dict", 2), ("text", "discrete", 3), ("box", "multidiscrete", 1)]


def per_env_actions(act_key: str, n: int) -> list[gym.Space]:
    # Each env draws its actions from its own seeded stream, so an env's action sequence does
    # not depend on the order in which envs are stepped.
    streams = []
    for i in range(n):
        space = copylib.deepcopy(ACTION_ZOO[act_key])
        space.seed(ACTION_SEED + i)
        streams.append(space)
    return streams


def stack(space: gym.Space, values: list[Any]) -> Any:
    return concatenate(space, values, create_empty_array(space, len(values)))


def sync_per_env(mode: str, obs_key: str, act_key: str, steps: int) -> list[list[Any]]:
    """Per-env records of a sync serial run: ("reset", obs, info) / ("step", obs, r, te, tr, info)."""
    space = SPACE_ZOO[obs_key]
    streams = per_env_actions(act_key, NUM_ENVS)
    records: list[list[Any]] = [[] for _ in range(NUM_ENVS)]
    env = envhive.make(
        zoo_factories(obs_key, act_key), executor="serial", autoreset=mode, seed=SEED
    )
    with env:
        obs, info = env.reset()
        for i in range(NUM_ENVS):
            records[i].append(("reset", single_obs(space, obs, i), single_info(info, i)))
        for _ in range(steps):
            acts = stack(ACTION_ZOO[act_key], [s.sample() for s in streams])
            obs, rew, term, trunc, info = env.step(acts)
            for i in range(NUM_ENVS):
                records[i].append(
                    (
                        "step",
                        single_obs(space, obs, i),
                        rew[i],
                        term[i],
                        trunc[i],
                        single_info(info, i),
                    )
                )
            ended = term | trunc
            if mode == "disabled" and ended.any():
                obs, info = env.reset(options={"reset_mask": ended})
                for i in np.flatnonzero(ended):
                    records[i].append(("reset", single_obs(space, obs, i), single_info(info, i)))
    return snap(records)


@pytest.mark.parametrize(
    ("obs_key", "act_key", "batch_size"),
    ASYNC_CASES,
    ids=[f"obs={o}-act={a}-batch={b}" for o, a, b in ASYNC_CASES],
)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_async_matches_serial(
    executor: str, mode: str, obs_key: str, act_key: str, batch_size: int
) -> None:
    """send/recv with batch_size < num_envs: each env's sequence is the sync serial one."""
    want = 40  # records per env to compare
    space = SPACE_ZOO[obs_key]
    single_act = ACTION_ZOO[act_key]
    streams = per_env_actions(act_key, NUM_ENVS)
    records: list[list[Any]] = [[] for _ in range(NUM_ENVS)]
    sent = ["reset"] * NUM_ENVS
    env = envhive.make(
        zoo_factories(obs_key, act_key),
        executor=executor,
        autoreset=mode,
        seed=SEED,
        batch_size=batch_size,
    )
    with env:
        assert env.batch_size == batch_size
        env.async_reset()
        for _ in range(20 * want * NUM_ENVS // batch_size):
            if min(len(r) for r in records) >= want:
                break
            obs, rew, term, trunc, info = env.recv()
            ids = info["env_id"]
            assert ids.dtype == np.int32 and ids.shape == (batch_size,)
            assert len(set(ids.tolist())) == batch_size
            assert rew.dtype == np.float64 and rew.shape == (batch_size,)
            assert term.shape == trunc.shape == (batch_size,)
            assert batch_space(space, batch_size).contains(obs)
            for pos, i in enumerate(ids.tolist()):
                one = snap(single_obs(space, obs, pos))
                if sent[i] == "reset":
                    assert rew[pos] == 0.0 and not term[pos] and not trunc[pos]
                    records[i].append(("reset", one, snap(single_info(info, pos))))
                else:
                    records[i].append(
                        ("step", one, rew[pos], term[pos], trunc[pos], snap(single_info(info, pos)))
                    )
            ended = (term | trunc) & np.array([sent[i] == "step" for i in ids.tolist()])
            step_ids = ids
            if mode == "disabled" and ended.any():
                env.async_reset(ids[ended])
                for i in ids[ended].tolist():
                    sent[i] = "reset"
                step_ids = ids[~ended]
            if step_ids.size:
                env.send(
                    stack(single_act, [streams[i].sample() for i in step_ids.tolist()]), step_ids
                )
                for i in step_ids.tolist():
                    sent[i] = "step"
        assert min(len(r) for r in records) >= want, [len(r) for r in records]
    reference = sync_per_env(mode, obs_key, act_key, want)
    for i in range(NUM_ENVS):
        assert_same_transcript(records[i][:want], reference[i][:want])
