"""A pool that cannot fit in memory is refused up front with a ResourceError that says how
much it needs, at each point where the need becomes known: ``make`` (envhive's own records,
before anything is built), a compiled kernel (state, stocks, generators), the pool's buffers
(from the spec) and Python envs (measured on the first ones built). The available memory is
patched where a test needs it small, so nothing here takes much memory."""

from __future__ import annotations

import errno

import gymnasium as gym
import numpy as np
import pytest

import envhive
import envhive._memory as memory
import envhive._runner as runner_module
from envhive.executors import available_executors
from envhive.testing import CountingEnv

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("executor, env_id", [(ex, "CartPole-v1") for ex in available_executors()]
                         + [("native", "envhive/CartPole-v1")])
def test_a_trillion_envs_is_a_resource_error_not_a_bare_memory_error(executor, env_id):
    with pytest.raises(envhive.ResourceError) as info:
        envhive.make(env_id, 10**12, executor=executor)
    err = info.value
    assert err.errno == errno.ENOMEM
    for words in ("num_envs=1,000,000,000,000", "needs about 48000.0 GB", "is available", "envs fit"):
        assert words in str(err), f"{words!r} missing from {str(err)!r}"


def _available(monkeypatch, nbytes):
    monkeypatch.setattr(memory, "available_bytes", lambda: nbytes)


def test_a_kernel_too_large_is_refused_before_its_arrays(monkeypatch):
    _available(monkeypatch, 20_000_000)  # 10**5 CartPoles need ~39 MB
    with pytest.raises(envhive.ResourceError) as info:
        envhive.make("envhive/CartPole-v1", 10**5, executor="native")
    assert "envhive/CartPole-v1 x 100,000" in str(info.value) and "per env" in str(info.value)
    envhive.make("envhive/CartPole-v1", 1000, executor="native").close()  # what fits is made


class BigObs(CountingEnv):
    """A CountingEnv with a 10,000-float observation space (80 KB of buffer per env)."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (10_000,), np.float64)


@pytest.mark.parametrize("executor", available_executors())
def test_buffers_too_large_are_refused_before_allocation(monkeypatch, executor):
    _available(monkeypatch, 1_000_000)
    with pytest.raises(envhive.ResourceError) as info:
        envhive.make(BigObs, 20, executor=executor)
    assert "the pool's buffers for 20 envs (80.0 KB per env)" in str(info.value)
    assert "needs about 1.6 MB" in str(info.value)


def test_python_envs_that_will_not_fit_stop_being_built(monkeypatch):
    """Measured on the first ones built (here: 10 KB of resident memory per env, faked), the
    rest of 10,000 envs would need ~90 MB of the 50 MB available: refused mid-build."""
    _available(monkeypatch, 50_000_000)
    reads = iter([0, 10_240 * runner_module._PROBE_ENVS])
    monkeypatch.setattr(runner_module, "resident_bytes", lambda: next(reads))
    built: list[int] = []

    def factory():
        built.append(1)
        return CountingEnv()

    with pytest.raises(envhive.ResourceError) as info:
        envhive.make(factory, 10_000, executor="serial")
    assert "building envs 0..9999 (about 10.2 KB per env" in str(info.value)
    assert len(built) == runner_module._PROBE_START + runner_module._PROBE_ENVS
