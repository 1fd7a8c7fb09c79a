"""envhive's MuJoCo ids as pools: identical to gymnasium's SyncVectorEnv over gymnasium's own v5
envs (observations, rewards, flags and every batched info, in all autoreset modes), on every
general executor (the thread executor steps each slice's physics in one GIL-free call)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("mujoco")

import envhive  # noqa: E402
from envhive.executors import available_executors  # noqa: E402
from envhive.testing import assert_same_transcript, transcript  # noqa: E402

IDS = ["Hopper-v5", "Ant-v5", "InvertedDoublePendulum-v5", "Reacher-v5"]
MODES = {
    "next_step": gym.vector.AutoresetMode.NEXT_STEP,
    "same_step": gym.vector.AutoresetMode.SAME_STEP,
}


def _actions(space: gym.Space, steps: int, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.uniform(space.low, space.high, (n, *space.shape)).astype(np.float32) for _ in range(steps)]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("env_id", IDS)
def test_pool_matches_gymnasium_sync_vector_env(env_id: str, mode: str) -> None:
    n, steps = 4, 120
    ref = gym.make_vec(env_id, n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": MODES[mode]})
    acts = _actions(ref.single_action_space, steps, n)
    try:
        want = transcript(ref, steps, acts.__getitem__, seed=3)
    finally:
        ref.close()
    for executor in available_executors():
        if executor == "process" and env_id != IDS[0]:
            continue  # worker start-up: one id is enough
        # max_episode_steps=40 on both sides would differ (gymnasium's TimeLimit vs the env's
        # own limit are the same rule), so keep gymnasium's defaults and let Hopper/Ant fall.
        with envhive.make(f"envhive/{env_id}", n, executor=executor, autoreset=mode) as env:
            got = transcript(env, steps, acts.__getitem__, seed=3)
        assert_same_transcript(got, want)


def test_time_limit_override_reaches_the_env() -> None:
    with envhive.make("envhive/Reacher-v5", 2, max_episode_steps=7, executor="thread") as env:
        env.reset(seed=0)
        truncs = [env.step(np.zeros((2, 2), np.float32))[3].tolist() for _ in range(7)]
    assert truncs[-1] == [True, True] and not any(any(t) for t in truncs[:-1])
