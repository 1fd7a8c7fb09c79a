"""The op sequence, once per language: every compiled or batched form equals the Python one.

``envhive._ops`` holds the rules (``resets_in_op`` and its array form ``resets_in_ops``),
``envhive._perform.perform`` the Python definition of an op on one env, which every Python
runner uses (``EnvRunner``'s loop, the multi-agent loop). The engines perform the same ops on
a whole batch: the kernels' numba driver (built from ``_ops``' own compiled functions), and the
array form ``engines._batched.BatchedOps`` (MuJoCo, torch). Here each engine runs random op
plans (STEP, RESET with and without seeds, STEP_RESET with episode ends from a short time
limit) on random sets of envs, both through its general path (``run``) and its inline step
(``step_all``), and must write exactly what ``EnvRunner`` writes running the same plans on
the single envs the same factory builds (stepped by the same compiled code, so only the op
sequence can differ): observations, final observations, rewards, flags, and the completions'
envs, infos and final infos. The C runner loop is held to ``perform`` in
tests/test_runloop.py.
"""

from __future__ import annotations

import zlib

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envhive import _ops
from envhive._buffers import Buffers, BufferSpec
from envhive._ops import RESET, STEP, STEP_RESET
from envhive._report import Completion
from envhive._runner import EnvRunner
from envhive.engines import compiled_env, native_factory

pytestmark = pytest.mark.timeout(600)

N = 5
LIMIT = 4  # a short time limit: STEP_RESET resets often


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([STEP, RESET, STEP_RESET]), st.booleans(), st.booleans()),
                min_size=1, max_size=30))
def test_resets_in_ops_is_resets_in_op_row_by_row(rows):
    ops, term, trunc = (np.array(col) for col in zip(*rows))
    want = [_ops.resets_in_op(int(o), bool(t), bool(u)) for o, t, u in rows]
    assert _ops.resets_in_ops(ops.astype(np.int8), term, trunc).tolist() == want
    torch = pytest.importorskip("torch")
    got = _ops.resets_in_ops(torch.from_numpy(ops), torch.from_numpy(term), torch.from_numpy(trunc))
    assert got.tolist() == want


def test_the_compiled_rule_is_the_python_function():
    from envhive.engines import _compiled

    assert _compiled.resets_in_op.py_func is _ops.resets_in_op


def _pair(env_id: str):
    """``(engine, its buffers, runner of single envs, their buffers)`` for one factory."""
    factory = native_factory(compiled_env(env_id), None, LIMIT)
    engine = factory.native_engine(N, 1)
    envs = [factory() for _ in range(N)]
    runner = EnvRunner(envs, 0)

    def buffers():
        spec = BufferSpec(N, engine.props.observation_space, engine.props.action_space, with_final_obs=True)
        return Buffers.allocate(spec)

    eb, rb = buffers(), buffers()
    engine.bind(eb)
    runner.bind(rb)
    return engine, eb, runner, rb


def _actions(space: gym.Space, rng: np.random.Generator) -> np.ndarray:
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, size=N).astype(np.int64)
    return rng.uniform(space.low, space.high, size=(N, *space.shape)).astype(space.dtype)


def _same(a: Completion, b: Completion, ea: Buffers, eb: Buffers, step: int) -> None:
    where = f"call {step}"
    assert a.env_ids == b.env_ids, where
    assert not a.errors and not b.errors, (where, a.errors, b.errors)
    assert a.final_infos.keys() == b.final_infos.keys(), where
    for infos_a, infos_b in ((a.infos, b.infos), (a.final_infos, b.final_infos)):
        for i in infos_b:
            assert infos_a.get(i, {}).keys() == infos_b[i].keys(), (where, i)
            for key, value in infos_b[i].items():
                np.testing.assert_array_equal(infos_a[i][key], value, err_msg=f"{where} env {i} {key}")
    for name in ("obs", "reward", "terminated", "truncated"):
        np.testing.assert_array_equal(getattr(ea, name), getattr(eb, name), err_msg=f"{where} {name}")
    ended = a.final_infos.keys()  # final observations exist (and are compared) for those rows only
    for i in ended:
        np.testing.assert_array_equal(ea.final_obs[i], eb.final_obs[i], err_msg=f"{where} final_obs {i}")


def _engine_ids() -> list[str]:
    ids = ["envhive/CartPole-v1", "envhive/Pendulum-v1", "envhive/Acrobot-v1",
           "envhive/MountainCarContinuous-v0"]
    try:
        import mujoco  # noqa: F401
    except ImportError:
        pass
    else:
        ids += ["envhive/HalfCheetah-v5", "envhive/Hopper-v5", "envhive/Reacher-v5"]
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        ids += ["envhive/TorchCartPole-v1"]
    return ids


@pytest.mark.parametrize("env_id", _engine_ids())
def test_engines_perform_the_ops_as_the_python_runner_does(env_id):
    engine, eb, runner, rb = _pair(env_id)
    rng = np.random.default_rng(zlib.crc32(env_id.encode()))
    space = engine.props.action_space
    try:
        for step in range(60):
            if step == 0:  # every env starts with a seeded reset
                ids = np.arange(N, dtype=np.int64)
                ops = np.full(N, RESET, np.int8)
            else:
                ids = np.sort(rng.choice(N, size=rng.integers(1, N + 1), replace=False)).astype(np.int64)
                if rng.random() < 0.5:
                    ids = rng.permutation(ids)  # any order
                ops = rng.choice([STEP, STEP_RESET, STEP_RESET, RESET], size=ids.size).astype(np.int8)
            inline = step > 0 and ids.size == N and rng.random() < 0.4
            # The first reset is seeded (an unseeded first reset draws fresh entropy), later
            # ones half the time (else they continue each env's generator).
            seeded = (ops == RESET) & ((rng.random(ids.size) < 0.5) | (step == 0)) & (not inline)
            seeds = rng.integers(0, 1000, size=ids.size)
            actions = _actions(space, rng)
            for b in (eb, rb):
                b.ops[ids] = ops
                b.has_seed[:] = False
                b.has_seed[ids[seeded]] = True
                b.seeds[ids[seeded]] = seeds[seeded]
                b.actions[:] = actions
            a, r = Completion(), Completion()
            if inline:  # the inline step: every env, in order, its RESETs unseeded autoresets
                ids = np.arange(N, dtype=np.int64)
                result = engine.step_all(actions)
                assert result.bad == -1
                a.env_ids = ids.tolist()
                for i in ids.tolist():
                    if eb.ops[i] == STEP_RESET and (eb.terminated[i] or eb.truncated[i]):
                        a.final_infos[i] = {k: v[i] for k, v in (result.step_infos or {}).items()}
                    elif eb.ops[i] != RESET and result.step_infos:
                        info = {k: v[i] for k, v in result.step_infos.items()}
                        if info:
                            a.infos[i] = info
                a.infos.update(result.reset_infos or {})
                done = int(np.count_nonzero((eb.terminated | eb.truncated)[eb.ops != RESET]))
                assert result.done == done
            else:
                engine.run(ids, None, a)
            runner.run(ids.tolist(), None, r)
            _same(a, r, eb, rb, step)
    finally:
        engine.close()
        runner.close()
