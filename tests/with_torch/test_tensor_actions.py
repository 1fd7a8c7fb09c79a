"""Tensor actions as policies hand them over: bfloat16 (converted: numpy has no bfloat16),
sparse (made dense), on the ``meta`` device (refused: it holds no values), with or without
``device=``, on every executor; the same numbers as the float32 / dense actions."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import envhive  # noqa: E402
from envhive.executors import available_executors  # noqa: E402

pytestmark = pytest.mark.timeout(300)

CASES = [(ex, "Pendulum-v1") for ex in available_executors()] + [
    ("native", "envhive/Pendulum-v1"), ("native", "envhive/TorchPendulum-v1"),
]
# Every bfloat16 here is exact, so bfloat16 and float32 actions must step identically.
ACTIONS = torch.tensor([[0.5], [-1.25], [2.0]])


def _host(a):
    return a.cpu().numpy().copy() if isinstance(a, torch.Tensor) else np.array(a)


def _steps(env_id, executor, device, actions):
    with envhive.make(env_id, 3, executor=executor, seed=0, device=device) as env:
        env.reset(seed=0)
        out = []
        for _ in range(3):
            obs, reward, *_ = env.step(actions)
            out.append((_host(obs), _host(reward)))
        return out


@pytest.mark.parametrize("device", [None, "cpu"])
@pytest.mark.parametrize("executor, env_id", CASES)
@pytest.mark.parametrize("convert", [lambda a: a.to(torch.bfloat16), lambda a: a.to_sparse()],
                         ids=["bfloat16", "sparse"])
def test_bfloat16_and_sparse_actions_step_as_dense_float32(executor, env_id, device, convert):
    if env_id.startswith("envhive/Torch") and device is None:
        pytest.skip("a torch engine's pool takes numpy or tensors: covered with device='cpu'")
    got = _steps(env_id, executor, device, convert(ACTIONS))
    want = _steps(env_id, executor, device, ACTIONS)
    for (obs, rew), (obs_w, rew_w) in zip(got, want):
        np.testing.assert_array_equal(obs, obs_w)
        np.testing.assert_array_equal(rew, rew_w)


@pytest.mark.parametrize("device", [None, "cpu"])
@pytest.mark.parametrize("executor, env_id", CASES)
def test_meta_actions_are_refused_and_step_nothing(executor, env_id, device):
    with envhive.make(env_id, 3, executor=executor, seed=0, device=device) as env:
        env.reset(seed=0)
        with pytest.raises(envhive.ActionError, match="'meta' device"):
            env.step(ACTIONS.to("meta"))
        assert env.env_steps == 0
        env.step(ACTIONS)  # nothing broken: the pool steps on
