"""envhive/Pong-v5 behind the other front ends: torch tensors (zero-copy uint8 views on the CPU),
dm_env, TorchRL (``check_env_specs``) and Stable-Baselines3 (a PPO smoke run), on the serial
executor and on the native one (its threaded Atari engine writes the pool's buffers in place)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

import envhive  # noqa: E402

ID = "envhive/Pong-v5"
SMALL = {"img_height": 42, "img_width": 42, "stack_num": 2}


@pytest.mark.parametrize("executor", ["serial", "native"])
def test_cpu_tensors_are_uint8_views_of_the_pool_buffers(executor):
    torch = pytest.importorskip("torch")
    env = envhive.make(ID, num_envs=2, seed=0, device="cpu", copy=False, executor=executor)
    obs, _ = env.reset()
    assert isinstance(obs, torch.Tensor) and obs.dtype == torch.uint8 and obs.shape == (2, 4, 84, 84)
    obs2, *_ = env.step(torch.zeros(2, dtype=torch.int64))
    # One buffer, no copy: the tensor of the next step is the same memory.
    assert obs2.data_ptr() == obs.data_ptr()
    ref = envhive.make(ID, num_envs=2, seed=0, executor="serial")
    ref.reset()
    np.testing.assert_array_equal(obs2.numpy(), ref.step(np.zeros(2, np.int64))[0])
    env.close()
    ref.close()


def test_dm_env_discount_is_zero_at_the_end():
    env = envhive.make(ID, num_envs=2, seed=0, api="dm_env", max_episode_steps=5, env_kwargs=SMALL,
                       executor="serial")
    ts = env.reset()
    for _ in range(5):
        ts = env.step(np.zeros(2, np.int64))
    assert ts.last().all() and ts.observation.shape == (2, 2, 42, 42)
    env.close()


@pytest.mark.parametrize("executor", ["serial", "native"])
def test_torchrl_check_env_specs(executor):
    pytest.importorskip("torchrl")
    from torchrl.envs.utils import check_env_specs

    env = envhive.make(ID, num_envs=2, seed=0, api="torchrl", env_kwargs=SMALL, executor=executor)
    check_env_specs(env)
    td = env.rollout(5)
    assert td["observation"].shape == (2, 5, 2, 42, 42) and str(td["observation"].dtype) == "torch.uint8"
    env.close()


@pytest.mark.parametrize("executor", ["serial", "native"])
def test_sb3_ppo_smoke_on_pong(executor):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    env = envhive.make(ID, num_envs=2, seed=0, api="sb3", env_kwargs=SMALL, executor=executor)
    model = PPO("CnnPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu",
                policy_kwargs={"normalize_images": True}, verbose=0)
    model.learn(total_timesteps=64)
    assert model.num_timesteps >= 64
    env.close()
