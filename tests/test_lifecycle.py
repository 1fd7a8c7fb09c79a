"""The pool's env life cycle (``_lifecycle.Lifecycle``) against a model that recomputes every
flag from scratch after each call.

``Lifecycle.finish`` keeps ``ended``, ``blocked`` and their counts up to date incrementally, with
shortcuts for the common step (nothing reset, nothing ended now or before) and for calls over
every env; the model below has none. Sequences are random but respect what the pool guarantees
before it calls ``finish``: a stepped env is started and unbroken (and, with autoreset disabled,
has not ended), and in same_step mode a step that ends resets in the same op.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st

from envhive._buffers import Buffers, BufferSpec
from envhive._lifecycle import Lifecycle
from envhive.errors import ResetNeededError

N = 5


class Model:
    def __init__(self, mode: AutoresetMode) -> None:
        self.mode = mode
        self.started = np.zeros(N, bool)
        self.ended = np.zeros(N, bool)
        self.broken = np.zeros(N, bool)
        self.steps = 0

    def finish(self, ids, resets, stepped_ended, failed):
        for i in ids:
            if i in resets:
                self.started[i], self.broken[i], self.ended[i] = True, False, False
            else:
                self.steps += 1
                if self.mode is not AutoresetMode.SAME_STEP:
                    self.ended[i] = i in stepped_ended
        for i in failed:
            self.broken[i] = True

    @property
    def blocked(self):
        out = ~self.started | self.broken
        if self.mode is AutoresetMode.DISABLED:
            out |= self.ended
        return out


@st.composite
def calls(draw):
    """A call: its env ids (``every``: all of them, in order), which of them reset, which of the
    stepped ones ended, whether ``done`` is passed, and which envs of it failed."""
    every = draw(st.booleans())
    ids = list(range(N)) if every else sorted(draw(st.sets(st.integers(0, N - 1), min_size=1)))
    resets = draw(st.sets(st.sampled_from(ids)))
    ended = draw(st.sets(st.sampled_from(ids)))
    failed = draw(st.sets(st.sampled_from(ids), max_size=1))
    return every, ids, resets, ended, draw(st.booleans()), failed


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.value)
@settings(max_examples=150, deadline=None)
@given(script=st.lists(calls(), min_size=1, max_size=12))
def test_finish_keeps_every_flag_as_the_model_recomputes_it(mode, script):
    b = Buffers.allocate(BufferSpec(N, gym.spaces.Discrete(2), gym.spaces.Discrete(2)))
    life, model = Lifecycle(b, mode, [7] * N), Model(mode)
    for every, ids, resets, ended, pass_done, failed in script:
        blocked = model.blocked
        # What the pool guarantees: a blocked env is only ever reset.
        resets = set(resets) | {i for i in ids if blocked[i]}
        stepped_ended = {i for i in ended if i not in resets}
        if mode is AutoresetMode.SAME_STEP:
            stepped_ended = set()  # the op resets it: its flags are the step's, it is not "ended"
        b.terminated[:] = False
        b.truncated[:] = False
        for i in stepped_ended:
            b.terminated[i] = True
        done = len(stepped_ended) if pass_done else None
        # Failed envs come back as errors: not among the finished ids (the books mark them).
        done_ids = [i for i in ids if i not in failed]
        if failed:
            life.broken[list(failed)] = True
        model.finish(done_ids, resets, stepped_ended, failed)
        where = slice(None) if every and not failed else done_ids
        count = len(done_ids)
        if count:
            life.finish(where, count, len(resets & set(done_ids)),
                        None if failed else done, failed=bool(failed))
        elif failed:
            life.refresh()
        assert life.steps == model.steps
        assert life.started.tolist() == model.started.tolist()
        assert life.broken.tolist() == model.broken.tolist()
        if mode is not AutoresetMode.SAME_STEP:
            assert life.ended.tolist() == model.ended.tolist()
            assert life.num_ended == int(model.ended.sum()) and life.any_ended == bool(model.ended.any())
        assert life.blocked.tolist() == model.blocked.tolist()
        assert life.any_blocked == bool(model.blocked.any())
        assert life.first_seeds.tolist() == [None if s else 7 for s in model.started]


def test_check_steppable_names_the_first_blocked_env_and_why():
    b = Buffers.allocate(BufferSpec(3, gym.spaces.Discrete(2), gym.spaces.Discrete(2)))
    life = Lifecycle(b, AutoresetMode.DISABLED, [None] * 3)
    ids = np.arange(3)
    with pytest.raises(ResetNeededError, match="env 0 has not been reset yet"):
        life.check_steppable(ids, slice(None))
    life.finish(slice(None), 3, 3, 0)
    life.check_steppable(ids, slice(None))  # every env started: nothing raised
    b.truncated[2] = True
    life.finish(slice(None), 3, 0, 1)
    with pytest.raises(ResetNeededError, match="env 2 ended its episode \\(truncated\\)"):
        life.check_steppable(ids, slice(None))
    life.check_steppable(ids[:2], ids[:2])
    life.break_envs(np.array([False, True, False]))
    with pytest.raises(ResetNeededError, match="env 1 raised during its last call"):
        life.check_steppable(ids[:2], ids[:2])
