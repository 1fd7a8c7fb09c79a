"""The front-end registry: each front end's needs are checked before anything is built."""

from __future__ import annotations

import pytest

import envhive
from envhive._autoreset import parse_autoreset
from envhive.errors import ConfigError
from envhive.frontends._registry import FRONT_ENDS, front_end

REFUSALS = [
    ("dm_env", {"device": "cpu"}, "device: dm_env"),
    ("sb3", {"device": "cpu"}, "device: SB3"),
    ("pettingzoo", {"device": "cpu"}, "device: api='pettingzoo'"),
    ("sb3", {"copy": False}, "copy=False: SB3"),
    ("torchrl", {"copy": False}, "copy=False: TorchRL"),
    ("torchrl", {"autoreset": "next_step"}, "autoreset: the TorchRL front end"),
    ("sb3", {"autoreset": "same_step"}, "autoreset: the SB3 front end"),
    ("pettingzoo", {"autoreset": "disabled"}, "autoreset: api='pettingzoo'"),
    ("pettingzoo", {"agent_layout": "flat"}, "agent_layout: api='pettingzoo'"),
    ("dm_env", {"observation_mode": "different"}, "observation_mode: only api='gymnasium'"),
    ("jax", {"copy": False}, "copy=False: jax arrays are immutable"),
]


@pytest.mark.parametrize(("api", "kw", "words"), REFUSALS, ids=[f"{a}-{next(iter(k))}" for a, k, _ in REFUSALS])
def test_a_front_end_refuses_what_it_cannot_take_before_building(monkeypatch, api, kw, words):
    built = []
    monkeypatch.setattr(envhive._make.Pool, "__init__", lambda *a, **k: built.append(1))
    with pytest.raises(ConfigError, match=words):
        envhive.make("CartPole-v1", 2, api=api, **kw)
    assert not built


def test_an_unknown_api_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"api: expected one of \['dm_env', 'envpool', 'envpool_dm', 'gymnasium', 'jax'"):
        front_end("mxnet")


@pytest.mark.parametrize("api", sorted(FRONT_ENDS))
def test_every_front_end_builds_and_its_pool_runs_its_autoreset(api):
    env_fn: object = "CartPole-v1"
    if api == "jax":
        pytest.importorskip("jax", reason="the jax extra is not installed")
    if api == "pettingzoo":
        from pettingzoo.classic import rps_v2

        env_fn = lambda: rps_v2.parallel_env()  # noqa: E731
    front = envhive.make(env_fn, 2, api=api, seed=0)
    try:
        pool = front if api == "pool" else getattr(front, "pool", None) or front._pool
        assert pool.autoreset is parse_autoreset(FRONT_ENDS[api].autoreset or "next_step")
    finally:
        front.close()
