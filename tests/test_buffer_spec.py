"""Buffers come from a layout spec: reward shape (agent axis), namespace, device, final obs."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from gymnasium import spaces

import envhive
from envhive._buffers import Buffers, BufferSpec
from envhive._spaces import tree_leaves

OBS = spaces.Dict({"pos": spaces.Box(-1, 1, (3,), np.float32), "tag": spaces.Text(4)})
ACT = spaces.Discrete(3)


def recorder(log):
    def alloc(shape, dtype):
        log.append((tuple(shape), np.dtype(dtype)))
        return np.zeros(shape, dtype)

    return alloc


def test_reward_shape_gives_every_env_an_agent_axis():
    b = Buffers.allocate(BufferSpec(5, OBS, ACT, reward_shape=(3,)))
    assert b.reward.shape == (5, 3) and b.reward.dtype == np.float64
    assert b.terminated.shape == (5,) and b.final_obs is None
    assert Buffers.allocate(BufferSpec(5, OBS, ACT)).reward.shape == (5,)


def test_final_obs_rows_only_when_asked():
    b = Buffers.allocate(BufferSpec(2, OBS, ACT, with_final_obs=True))
    assert b.final_obs["pos"].shape == (2, 3)


def test_a_pickled_spec_rebuilds_the_same_layout():
    # A process worker rebuilds the parent's buffers from the pickled spec, mapping the
    # parent's segments in allocation order: the order and the arrays must match exactly.
    spec = BufferSpec(4, OBS, ACT, with_final_obs=True, reward_shape=(2,))
    spec.obs_codec  # noqa: B018 - builds the codecs, which must not travel
    copy = pickle.loads(pickle.dumps(spec))
    assert copy == spec and copy._codecs == []
    mine, theirs = [], []
    Buffers.allocate(spec, recorder(mine))
    Buffers.allocate(copy, recorder(theirs))
    assert mine == theirs and len(mine) == 9  # object leaves are not allocated by alloc


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"namespace": "jax"}, "namespace"),
        ({"device": "cuda:0"}, "namespace 'torch'"),
        ({"reward_shape": (0,)}, "reward_shape"),
        ({"reward_shape": (2.5,)}, "reward_shape"),
    ],
)
def test_bad_specs_are_refused(kwargs, match):
    with pytest.raises(envhive.ConfigError, match=match):
        BufferSpec(2, OBS, ACT, **kwargs)


def test_numpy_views_are_the_buffers():
    b = Buffers.allocate(BufferSpec(2, OBS, ACT))
    assert b.views(b.obs) is b.obs


def test_torch_views_share_the_buffers_memory():
    torch = pytest.importorskip("torch")
    b = Buffers.allocate(BufferSpec(3, OBS, ACT, reward_shape=(2,), namespace="torch"))
    obs = b.views(b.obs)
    assert isinstance(obs["pos"], torch.Tensor)
    assert obs["pos"].data_ptr() == b.obs["pos"].ctypes.data  # zero-copy
    assert isinstance(obs["tag"], np.ndarray)  # object leaves stay numpy
    b.obs["pos"][1, 2] = 0.5
    assert float(obs["pos"][1, 2]) == 0.5
    reward = b.views(b.reward)
    assert tuple(reward.shape) == (3, 2) and reward.data_ptr() == b.reward.ctypes.data


def test_shared_memory_buffers_from_a_spec():
    # The process executor's arena allocates every array of a spec in shared memory.
    from envhive.executors._shm import SharedArena

    arena = SharedArena()
    try:
        b = Buffers.allocate(BufferSpec(2, OBS, ACT, reward_shape=(4,)), arena.allocate)
        assert b.reward.shape == (2, 4)
        assert len(arena.specs) == len([a for a in tree_leaves(b.obs) if a.dtype != object]) + 7
    finally:
        arena.close()
