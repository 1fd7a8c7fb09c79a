"""A worker may hold only its own slice's rows: slice-local buffers give exactly the results of
pool-size ones.

Two identical slices of envs (pool ids ``lo..hi-1``) run the same random commands: one core
writes into pool-size buffers, the other into buffers of ``hi - lo`` rows, moved in and out by
a loopback transport with :meth:`Buffers.copy_rows` (as a Ray actor's transport would). Every
output row, info, final info and error (with its env id) must match, on every path the runner
has: the compiled loop, the Python loop, ``step_many`` envs, object-typed spaces, errors.
"""

from __future__ import annotations

import functools
import pickle

import cloudpickle
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from envhive._buffers import INPUT_FIELDS, OUTPUT_FIELDS, Buffers, BufferSpec
from envhive._ops import RESET, STEP, STEP_RESET
from envhive._runner import EnvRunner, build_envs
from envhive._spaces import tree_leaves
from envhive.executors._core import Run, RunReply, WorkerCore
from envhive.testing import SPACE_ZOO, ZooEnv

N, LO, HI = 7, 2, 6  # a pool of 7 envs; the slice holds envs 2..5


class StepManyZoo(ZooEnv):
    """A ZooEnv whose class steps several instances in one call (as envhive's MuJoCo envs do)."""

    @staticmethod
    def step_many(envs, actions):
        out = []
        for env, action in zip(envs, actions):
            try:
                out.append(env.step(action))
            except Exception as err:  # noqa: BLE001 - step_many reports per-env exceptions
                out.append(err)
        return out


def _slice(env_cls, obs_space):
    # Actions are drawn from Discrete(3) but the envs accept Discrete(2): action 2 raises.
    fns = [functools.partial(env_cls, obs_space, spaces.Discrete(2)) for _ in range(LO, HI)]
    return EnvRunner(build_envs(fns, LO), LO)


class LocalLink:
    """A loopback transport to a core with slice-local buffers: inputs in, outputs out."""

    def __init__(self, core: WorkerCore, pool: Buffers) -> None:
        self.core, self.pool = core, pool

    def send(self, ids: list[int]) -> RunReply:
        pool, local = self.pool, self.core.buffers
        pool.copy_rows(local, slice(LO, HI), slice(0, HI - LO), INPUT_FIELDS)
        reply = pickle.loads(cloudpickle.dumps(self.core.handle(pickle.loads(pickle.dumps(Run(ids))))))
        rows = np.asarray(ids)
        local.copy_rows(pool, rows - LO, rows, tuple(f for f in OUTPUT_FIELDS if getattr(pool, f) is not None))
        return reply


def _pair(env_cls, obs_space):
    full_runner, local_runner = _slice(env_cls, obs_space), _slice(env_cls, obs_space)
    spec = BufferSpec(N, full_runner.envs[0].observation_space, spaces.Discrete(3), with_final_obs=True)
    full_b, pool_b = Buffers.allocate(spec), Buffers.allocate(spec)
    full = WorkerCore(full_runner, full_b)
    local = WorkerCore(local_runner, Buffers.allocate(pool_b.slice_spec(HI - LO)), local=True)
    return full, LocalLink(local, pool_b)


def _same_outputs(a: Buffers, b: Buffers, ids: list[int]) -> None:
    for name in OUTPUT_FIELDS:
        if getattr(a, name) is None:  # e.g. the agent axis's arrays of a single-agent layout
            assert getattr(b, name) is None, name
            continue
        for x, y in zip(tree_leaves(getattr(a, name)), tree_leaves(getattr(b, name))):
            np.testing.assert_array_equal(x[ids], y[ids], err_msg=name)


def _same_reply(a: RunReply, b: RunReply) -> None:
    assert a.infos == b.infos
    assert a.final_infos == b.final_infos
    assert sorted(a.errors) == sorted(b.errors)
    for i, err in a.errors.items():
        assert b.errors[i].env_id == err.env_id == i
        assert str(b.errors[i]) == str(err)
    assert len(a.object_obs) == len(b.object_obs)
    for x, y in zip(a.object_obs, b.object_obs):
        assert x == y


commands = st.lists(
    st.tuples(
        st.lists(st.sampled_from(range(LO, HI)), min_size=1, max_size=HI - LO, unique=True),
        st.lists(st.sampled_from([STEP, STEP_RESET, RESET]), min_size=HI - LO, max_size=HI - LO),
        st.lists(st.integers(0, 2), min_size=HI - LO, max_size=HI - LO),
        st.lists(st.one_of(st.none(), st.integers(0, 2**31)), min_size=HI - LO, max_size=HI - LO),
    ),
    min_size=1,
    max_size=12,
)


@pytest.mark.parametrize("env_cls", [ZooEnv, StepManyZoo])
@pytest.mark.parametrize("space", ["box", "image", "dict", "text"])
@settings(max_examples=25, deadline=None)
@given(script=commands)
def test_slice_local_buffers_give_the_pool_size_results(env_cls, space, script):
    full, link = _pair(env_cls, SPACE_ZOO[space])
    fb, pb = full.buffers, link.pool
    try:
        ids0 = list(range(LO, HI))
        for b in (fb, pb):
            b.ops[LO:HI] = RESET
            b.seeds[LO:HI] = np.arange(LO, HI)
            b.has_seed[LO:HI] = True
        _same_reply(full.handle(Run(ids0)), link.send(ids0))
        _same_outputs(fb, pb, ids0)
        for ids, ops, acts, seeds in script:
            for b in (fb, pb):
                for k, i in enumerate(range(LO, HI)):
                    b.ops[i], b.actions[i] = ops[k], acts[k]
                    b.has_seed[i] = seeds[k] is not None
                    b.seeds[i] = seeds[k] or 0
            _same_reply(full.handle(Run(ids)), link.send(ids))
            _same_outputs(fb, pb, ids)
    finally:
        full.runner.close()
        link.core.runner.close()


def test_local_buffers_must_have_the_slice_rows():
    runner = _slice(ZooEnv, SPACE_ZOO["box"])
    spec = BufferSpec(N, runner.envs[0].observation_space, spaces.Discrete(3))
    with pytest.raises(ValueError, match="expected 4 rows, got 7"):
        runner.bind(Buffers.allocate(spec), local=True)
    runner.close()


def test_copy_rows_refuses_a_field_missing_on_one_side():
    spec = BufferSpec(2, spaces.Box(0, 1, (1,)), spaces.Discrete(2), with_final_obs=True)
    a = Buffers.allocate(spec)
    b = Buffers.allocate(BufferSpec(2, spec.observation_space, spec.action_space))
    with pytest.raises(ValueError, match="final_obs"):
        a.copy_rows(b, slice(0, 2), slice(0, 2), ("final_obs",))
