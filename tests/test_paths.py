"""Which fast paths a pool takes (``_paths.FastPaths``), decided once from its executor and
buffer layout. That each path gives what the general path gives is tested where each is:
tests/kernels/test_native.py and tests/test_batch.py (inline), tests/test_fused_step.py
(fused), tests/atari/test_atari_lean.py (lean send and recv)."""

from __future__ import annotations

import numpy as np
import pytest

import envhive
from envhive._paths import FastPaths
from envhive.testing import SPACE_ZOO, ZooEnv


def paths_of(env) -> FastPaths:
    return env.pool._paths


@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
def test_general_executors_with_array_actions_take_the_fused_step_and_the_lean_send(executor):
    with envhive.make("CartPole-v1", 3, executor=executor) as env:
        paths = paths_of(env)
        assert paths.step_all is None and paths.take_finished is None
        assert paths.run_all is not None and paths.fused and paths.lean_send
        assert paths.batch_shape == (3,) and "q" in paths.chars and "d" not in paths.chars


def test_a_native_engine_takes_the_inline_step():
    with envhive.make("envhive/Pendulum-v1", 3) as env:
        paths = paths_of(env)
        assert paths.step_all is not None and paths.run_all is None and not paths.fused
        assert paths.lean_send and paths.batch_shape == (3, 1) and "f" in paths.chars


def test_actions_that_are_not_one_array_take_only_run_all():
    with envhive.make(lambda: ZooEnv(SPACE_ZOO["discrete"], SPACE_ZOO["dict"]), 2,
                      executor="serial") as env:
        paths = paths_of(env)
        assert paths.run_all is not None
        assert not (paths.fused or paths.lean_send) and paths.step_all is None


def test_send_ids_takes_only_what_the_general_path_would_take_unchecked():
    with envhive.make("CartPole-v1", 4, executor="serial", batch_size=2) as env:
        env.reset(seed=0)
        paths, status = paths_of(env), env.pool._books.status
        assert paths.send_ids(np.array([1, 0]), np.array([3, 1]), status).tolist() == [3, 1]
        for acts, ids in [(np.array([1, 0]), np.array([1, 1])), (np.array([1, 2]), np.array([0, 1])),
                          (np.array([1, 0]), np.array([0, 4])), (np.array([1.0, 0.0]), np.array([0, 1])),
                          (np.array([1, 0]), [0, 1])]:
            assert paths.send_ids(acts, ids, status) is None, (acts, ids)


def test_without_turns_off_only_what_it_names(monkeypatch):
    with envhive.make("CartPole-v1", 2, executor="serial") as env:
        paths = paths_of(env)
        off = paths.without("fused", "lean_send")
        assert not off.fused and not off.lean_send and off.run_all is paths.run_all
        assert paths.without("inline").step_all is None and paths.without("lean_recv").take_finished is None
        monkeypatch.setattr(env.pool, "_paths", off)
        env.reset(seed=0)
        env.send(np.zeros(2, np.int64), np.array([0, 1]))
        assert env.recv()[4]["env_id"].tolist() == [0, 1]
        assert env.step(np.zeros(2, np.int64))[0].shape == (2, 4)
