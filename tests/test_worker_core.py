"""The worker core knows no transport: typed commands in, typed replies out.

Driven here through a loopback transport that pickles every command and reply (as a process
pipe or a Ray actor would), with no process, semaphore or shared memory; the results must be
exactly those of the serial executor.
"""

from __future__ import annotations

import functools
import pickle
import threading

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import envhive
from envhive._buffers import Buffers, BufferSpec
from envhive._ops import RESET, STEP, STEP_RESET
from envhive._runner import EnvRunner, build_envs
from envhive.executors._core import (
    Call,
    CallReply,
    Close,
    ErrorReply,
    Run,
    RunReply,
    SetAttr,
    WorkerCore,
)
from envhive.testing import CountingEnv


class Loopback:
    """A transport with nothing in between: commands and replies are pickled both ways."""

    def __init__(self, core: WorkerCore) -> None:
        self.core = core

    def send(self, command):
        command = pickle.loads(cloudpickle.dumps(command))
        return pickle.loads(cloudpickle.dumps(self.core.handle(command)))


class Raising(CountingEnv):
    def step(self, action):
        if action == 2:
            raise RuntimeError("bad action two")
        return super().step(action)


def slice_core(first_id, count, n, env_cls=CountingEnv, with_final=True):
    fns = [functools.partial(env_cls, pattern=[(2, "term")], tag=first_id + k) for k in range(count)]
    envs = build_envs(fns, first_id)
    spec = BufferSpec(n, envs[0].observation_space, envs[0].action_space, with_final_obs=with_final)
    buffers = Buffers.allocate(spec)
    return Loopback(WorkerCore(EnvRunner(envs, first_id), buffers)), buffers


def test_run_commands_match_the_serial_executor():
    link, b = slice_core(2, 3, n=5)  # envs 2, 3, 4 of a pool of 5
    ids = [2, 3, 4]
    with envhive.make([functools.partial(CountingEnv, pattern=[(2, "term")], tag=i) for i in range(5)],
                      executor="serial", autoreset="same_step") as ref:
        ref.reset()
        b.ops[ids] = RESET
        reply = link.send(Run(ids))
        assert isinstance(reply, RunReply) and reply.empty is False  # reset infos
        np.testing.assert_array_equal(b.obs[ids], ref.pool.buffers.obs[ids])
        for t in range(5):
            b.ops[ids] = STEP_RESET
            b.actions[ids] = t % 2
            reply = link.send(Run(ids))
            ref.step(np.full(5, t % 2))
            rb = ref.pool.buffers
            for name in ("obs", "reward", "terminated", "truncated", "final_obs"):
                np.testing.assert_array_equal(getattr(b, name)[ids], getattr(rb, name)[ids], err_msg=name)
            if t % 2 == 1:  # episodes of 2 steps end on odd steps: final infos come back
                assert sorted(reply.final_infos) == ids


def test_env_errors_come_back_in_the_reply_and_name_the_env():
    link, b = slice_core(0, 2, n=2, env_cls=Raising)
    b.ops[:] = RESET
    link.send(Run([0, 1]))
    b.ops[:] = STEP
    b.actions[:] = [0, 2]
    reply = link.send(Run([0, 1]))
    assert list(reply.errors) == [1]
    assert reply.errors[1].env_id == 1 and "bad action two" in str(reply.errors[1])


def test_call_and_set_attr_on_chosen_envs():
    link, _ = slice_core(3, 3, n=6)
    assert link.send(Call("tag", (), {}, None)) == CallReply([3, 4, 5])
    assert link.send(Call("tag", (), {}, [5, 3])) == CallReply([5, 3])
    assert link.send(SetAttr("tag", [50], [5])) == CallReply(None)
    assert link.send(Call("tag", (), {})).values == [3, 4, 50]
    err = link.send(Call("no_such_attribute", (), {}, [4]))
    assert isinstance(err, ErrorReply) and isinstance(err.error, envhive.EnvWorkerError)
    assert "no_such_attribute" in str(err.error)


def test_object_actions_travel_with_the_command():
    class TextActionEnv(gym.Env):
        observation_space = spaces.Box(-1, 1, (1,))
        action_space = spaces.Text(5)

        def reset(self, *, seed=None, options=None):
            return np.zeros(1, np.float32), {}

        def step(self, action):
            return np.full(1, len(action) / 10, np.float32), 0.0, False, False, {"got": action}

    envs = build_envs([TextActionEnv, TextActionEnv], 0)
    b = Buffers.allocate(BufferSpec(2, envs[0].observation_space, envs[0].action_space))
    core = WorkerCore(EnvRunner(envs, 0), b)
    assert core.has_object_actions
    link = Loopback(core)
    b.ops[:] = STEP
    reply = link.send(Run([0, 1], None, [["ab", "abcd"]]))
    assert reply.infos == {0: {"got": "ab"}, 1: {"got": "abcd"}}
    np.testing.assert_allclose(b.obs[:, 0], [0.2, 0.4])


def test_a_reply_keeps_its_infos_while_the_core_runs_the_next_commands():
    # The core reuses its completion from one RUN to the next only while no reply holds its
    # dicts: a reply read after later commands (no pickling in between) still says what it said.
    link, b = slice_core(0, 3, n=3)
    core = link.core
    b.ops[:] = RESET
    first = core.handle(Run([0, 1, 2]))
    assert sorted(first.infos) == [0, 1, 2]
    kept = {i: dict(info) for i, info in first.infos.items()}
    for t in range(4):
        b.ops[:] = STEP_RESET
        b.actions[:] = t % 3
        later = core.handle(Run([0, 1, 2] if t % 2 else [1]))  # whole slice and a subset
        assert later is not first and later.infos is not first.infos
    assert first.infos == kept


def test_whole_slice_and_subset_commands_step_the_same_envs_alike():
    # A RUN of the whole slice in order takes the runner's whole-slice path; the same ops sent
    # one env at a time take the general one: same rows either way.
    whole, wb = slice_core(4, 3, n=7)
    single, sb = slice_core(4, 3, n=7)
    ids = [4, 5, 6]
    for t in range(7):
        for b in (wb, sb):
            b.ops[ids] = RESET if t == 0 else STEP_RESET
            b.actions[ids] = [t % 3, (t + 1) % 3, (t + 2) % 3]
        whole.send(Run(ids))
        for i in ids:
            single.send(Run([i]))
        for name in ("obs", "reward", "terminated", "truncated", "final_obs"):
            np.testing.assert_array_equal(getattr(wb, name)[ids], getattr(sb, name)[ids], err_msg=name)


def test_close_closes_the_envs():
    link, _ = slice_core(0, 2, n=2)
    assert link.send(Close()) is None
    assert link.core.runner.envs == []


def test_commands_are_frozen():
    with pytest.raises(AttributeError):
        Run([0]).ids = [1]  # type: ignore[misc]


class SeedRecorder(CountingEnv):
    def reset(self, *, seed=None, options=None):
        self.last_seed = seed
        return super().reset(seed=seed, options=options)


def test_big_seeds_travel_with_the_run_command_to_slice_local_buffers():
    # Seeds beyond int64 do not fit the shared seeds column: the transport carries them in the
    # command, keyed by pool-wide env id; a slice-local core files them under its own rows.
    fns = [functools.partial(SeedRecorder, tag=k) for k in range(2)]
    envs = build_envs(fns, 3)  # envs 3 and 4 of a pool
    pool = Buffers.allocate(BufferSpec(5, envs[0].observation_space, envs[0].action_space))
    local = Buffers.allocate(pool.slice_spec(2))
    link = Loopback(WorkerCore(EnvRunner(envs, 3), local, local=True))
    pool.ops[3:5] = RESET
    pool.put_seed(3, 2**64 + 9)
    pool.put_seed(4, 11)
    pool.copy_rows(local, slice(3, 5), slice(0, 2), ("ops", "seeds", "has_seed"))
    local.big_seeds.clear()  # only the command carries them across a process boundary
    link.send(Run([3, 4], big_seeds=pool.big_seeds_of([3, 4])))
    assert [e.last_seed for e in link.core.runner.envs] == [2**64 + 9, 11]


def test_copy_rows_carries_big_seeds():
    spec = BufferSpec(4, spaces.Box(0, 1, (1,)), spaces.Discrete(2))
    pool, local = Buffers.allocate(spec), Buffers.allocate(BufferSpec(2, spec.observation_space, spec.action_space))
    pool.put_seed(2, 2**70)
    pool.put_seed(3, 2**80)
    pool.copy_rows(local, np.array([3, 2]), slice(0, 2), ("seeds", "has_seed"))
    assert [local.seed_of(0), local.seed_of(1)] == [2**80, 2**70]
    pool.put_seed(2, 5)  # a small seed replaces a big one
    assert pool.seed_of(2) == 5 and 2 not in pool.big_seeds
    assert pool.big_seeds_of([2, 3]) == {3: 2**80}
    assert pool.big_seeds_of([3], ids=[13]) == {13: 2**80}


def test_the_process_wire_carries_the_cores_typed_commands_and_replies():
    # The pipe holds the core's own objects, each kind with its own code in the control block
    # (a SetAttr is not a Call with values): a worker never guesses what a message is.
    from envhive.executors._core import CommandKind
    from envhive.executors._wire import decode_command, encode_call_reply, encode_run_reply
    from envhive.executors._worker import CMD_CALL, CMD_RUN, CMD_SET_ATTR

    set_attr = SetAttr("t", [None, None], [0, 1])  # None values: still a SetAttr
    assert CommandKind.of(set_attr) == CMD_SET_ATTR != CMD_CALL
    assert decode_command(CMD_SET_ATTR, cloudpickle.dumps(set_attr)) == set_attr
    assert decode_command(CMD_RUN, cloudpickle.dumps(Run([], {"a": 1}))) == Run([], {"a": 1})
    with pytest.raises(RuntimeError, match="kind 2 but message SetAttr"):
        decode_command(CMD_CALL, cloudpickle.dumps(set_attr))
    assert pickle.loads(encode_call_reply(CallReply([1]), 0)) == CallReply([1])
    unpicklable = pickle.loads(encode_call_reply(CallReply([1, threading.Lock()]), 3))
    assert isinstance(unpicklable, ErrorReply) and unpicklable.error.env_id == 3
    reply = pickle.loads(encode_run_reply(RunReply(infos={2: {"k": 1}}), [2]))
    assert isinstance(reply, RunReply) and reply.infos == {2: {"k": 1}}
