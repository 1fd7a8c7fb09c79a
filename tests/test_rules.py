"""The pool's rules in a few seconds: what each autoreset mode, op and row says, on the serial
executor against gymnasium's ``SyncVectorEnv``, through the public API.

These are the fast tests ``tools/mutation.py`` runs for every mutant of the rule modules
(``_autoreset``, ``_ops``, ``_batch``, ``_infos``, ``_books``, the gymnasium front end); the
slower suites (differential, conformance, properties) say the same at length.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envhive
from envhive._autoreset import AutoresetMode, plan_ops, plan_ops_into
from envhive._batch import FIRST, LAST, MID, NO_OP
from envhive._ops import (
    RESET,
    RESET_REWARD,
    STEP,
    STEP_RESET,
    resets_in_op,
    resets_in_ops,
    restart_outcome,
)
from envhive.testing import CountingEnv, assert_same_transcript

PATTERNS = [[(2, "term"), (3, "trunc")], [(3, "trunc")], [(1, "term"), (2, "term")]]
MODES = {"next_step": gym.vector.AutoresetMode.NEXT_STEP, "same_step": gym.vector.AutoresetMode.SAME_STEP,
         "disabled": gym.vector.AutoresetMode.DISABLED}


def _fns() -> list[Any]:
    return [functools.partial(CountingEnv, pattern=p, tag=i) for i, p in enumerate(PATTERNS)]


def _run(env: Any, disabled: bool, steps: int = 10) -> list[Any]:
    """Seeded reset, steps with varying actions; ended envs reset by mask when disabled."""
    out: list[Any] = [env.reset(seed=3)]
    for t in range(steps):
        step = env.step(np.array([t % 3, (t + 1) % 3, 2]))
        out.append(step)
        ended = np.asarray(step[2]) | np.asarray(step[3])
        if disabled and ended.any():
            out.append(env.reset(options={"reset_mask": ended}))
    return out


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_equals_sync_vector_env(mode: str) -> None:
    ref = gym.vector.SyncVectorEnv(_fns(), autoreset_mode=MODES[mode])
    want = _run(ref, mode == "disabled")
    ref.close()
    with envhive.make(_fns(), executor="serial", autoreset=mode) as env:
        assert env.metadata["autoreset_mode"] is MODES[mode]
        assert_same_transcript(_run(env, mode == "disabled"), want)
    with envhive.make(_fns(), executor="serial", autoreset=mode) as env:  # the general path
        class Split:
            def reset(self, seed: Any = None, options: Any = None) -> Any:
                return env.reset(seed=seed, options=options)

            def step(self, actions: Any) -> Any:
                env.step_async(actions)
                return env.step_wait()

        assert_same_transcript(_run(Split(), mode == "disabled"), want)


def test_disabled_refuses_a_step_of_an_ended_env() -> None:
    with envhive.make(_fns(), executor="serial", autoreset="disabled") as env:
        env.reset(seed=0)
        env.step(np.zeros(3, np.int64))  # env 2 (episode of 1 step) ended
        steps = env.env_steps
        with pytest.raises(envhive.ResetNeededError, match="env 2"):
            env.step(np.zeros(3, np.int64))
        assert env.env_steps == steps  # nothing stepped
        env.reset(options={"reset_mask": np.array([False, False, True])})
        assert env.step(np.zeros(3, np.int64))[0][:, 2].tolist() == [2, 2, 1]


@pytest.mark.parametrize("given, mode", [
    ("next_step", "NEXT_STEP"), ("NextStep", "NEXT_STEP"), ("same_step", "SAME_STEP"),
    ("SameStep", "SAME_STEP"), ("disabled", "DISABLED"), ("Disabled", "DISABLED"),
    (gym.vector.AutoresetMode.SAME_STEP, "SAME_STEP"),
])
def test_autoreset_names(given: Any, mode: str) -> None:
    with envhive.make(CountingEnv, 1, executor="serial", autoreset=given) as env:
        assert env.metadata["autoreset_mode"] is gym.vector.AutoresetMode[mode]


@pytest.mark.parametrize("bad", ["sometimes", "NEXT_STEP ", 1, None.__class__])
def test_autoreset_unknown(bad: Any) -> None:
    with pytest.raises(envhive.ConfigError, match="next_step"):
        envhive.make(CountingEnv, 1, executor="serial", autoreset=bad)


def _rows(mode: str) -> list[Any]:
    """The pool's Batches of one env ending after 2 steps, each mode (the semantics table)."""
    pool = envhive.make(lambda: CountingEnv(pattern=[(2, "term"), (2, "trunc")], tag=0), 1,
                        executor="serial", autoreset=mode, api="pool")
    out = [pool.reset(seed=0)]
    for _ in range(4):
        b = pool.step(np.ones(1, np.int64))
        out.append(b)
        if mode == "disabled" and (b.terminated | b.truncated).any():
            out.append(pool.reset(options={"reset_mask": np.array([True])}))
    pool.close()
    return out


def _row(b: Any) -> tuple[Any, ...]:
    final = None if b.has_final is None or not b.has_final[0] else b.final_obs[0].tolist()
    return (int(b.op[0]), bool(b.is_reset[0]), int(b.step_type[0]), float(b.reward[0]),
            bool(b.terminated[0]), bool(b.truncated[0]), b.obs[0, 1:3].tolist(), final)


def test_what_each_row_says() -> None:
    """docs/semantics.md's table, row by row: op, is_reset, step type, reward, flags, obs
    (episode, step) and final obs."""
    assert [_row(b) for b in _rows("next_step")] == [
        (RESET, True, FIRST, 0.0, False, False, [0, 0], None),
        (STEP, False, MID, 1.0, False, False, [0, 1], None),
        (STEP, False, LAST, 2.0, True, False, [0, 2], None),
        (RESET, True, FIRST, RESET_REWARD, False, False, [1, 0], None),
        (STEP, False, MID, 1001.0, False, False, [1, 1], None),
    ]
    assert [_row(b) for b in _rows("same_step")] == [
        (RESET, True, FIRST, 0.0, False, False, [0, 0], None),
        (STEP_RESET, False, MID, 1.0, False, False, [0, 1], None),
        (STEP_RESET, True, FIRST, 2.0, True, False, [1, 0], [0, 0, 2, 1]),
        (STEP_RESET, False, MID, 1001.0, False, False, [1, 1], None),
        (STEP_RESET, True, FIRST, 1002.0, False, True, [2, 0], [0, 1, 2, 1]),
    ]
    disabled = [_row(b) for b in _rows("disabled")]
    assert disabled[2] == (STEP, False, LAST, 2.0, True, False, [0, 2], None)
    assert disabled[3][:3] == (RESET, True, FIRST) and disabled[3][6] == [1, 0]


def test_untouched_rows_of_a_masked_reset() -> None:
    pool = envhive.make(_fns(), executor="serial", autoreset="disabled", api="pool")
    pool.reset(seed=0)
    pool.step(np.ones(3, np.int64))
    b = pool.reset(options={"reset_mask": np.array([False, True, False])})
    assert b.op.tolist() == [NO_OP, RESET, NO_OP]
    assert b.is_reset.tolist() == [False, True, False]
    assert b.obs[:, 2].tolist() == [1, 0, 1]  # the untouched rows keep their observation
    assert b.step_type.tolist() == [MID, FIRST, LAST]  # env 2 ended at that step
    pool.close()


def test_dm_env_discounts() -> None:
    pytest.importorskip("dm_env")
    env = envhive.make(lambda: CountingEnv(pattern=[(2, "term"), (2, "trunc")], tag=0), 1,
                       executor="serial", api="dm_env")
    kinds = [(int(ts.step_type[0]), float(ts.discount[0]), float(ts.reward[0]))
             for ts in [env.reset()] + [env.step(np.ones(1, np.int64)) for _ in range(5)]]
    assert kinds == [(0, 1.0, 0.0), (1, 1.0, 1.0), (2, 0.0, 2.0), (0, 1.0, 0.0), (1, 1.0, 1001.0),
                     (2, 1.0, 1002.0)]
    env.close()


@pytest.mark.parametrize("op, term, trunc, resets", [
    (STEP, True, False, False), (RESET, False, False, False), (STEP_RESET, False, False, False),
    (STEP_RESET, True, False, True), (STEP_RESET, False, True, True), (STEP_RESET, True, True, True),
])
def test_resets_in_op(op: int, term: bool, trunc: bool, resets: bool) -> None:
    assert resets_in_op(op, term, trunc) is resets
    got = resets_in_ops(np.array([op, STEP]), np.array([term, True]), np.array([trunc, True]))
    assert got.tolist() == [resets, False]


def test_restart_outcome() -> None:
    """What a rebuilt env's row reports: the episode in progress ended truncated, reward 0;
    a RESET is just a reset; a STEP_RESET's reset obs is also its final obs."""
    assert restart_outcome(RESET) is None
    step = restart_outcome(STEP)
    assert step is not None and step.truncated and not step.terminated and step.reward == 0.0
    assert not step.final_obs_is_reset_obs
    both = restart_outcome(STEP_RESET)
    assert both is not None and both.truncated and both.final_obs_is_reset_obs


def test_infos_layout_equals_sync_vector_env_with_mixed_keys() -> None:
    class Mixed(CountingEnv):
        def step(self, action: Any) -> Any:
            obs, r, te, tr, info = super().step(action)
            if self.tag == 1:
                info["only_one"] = np.array([self.t, -self.t])
            if self.t == 2:
                info["sometimes"] = "text"
            return obs, r, te, tr, info

    fns = [functools.partial(Mixed, pattern=p, tag=i) for i, p in enumerate(PATTERNS)]
    for mode in ("next_step", "same_step"):
        ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=MODES[mode])
        want = _run(ref, False)
        ref.close()
        with envhive.make(fns, executor="serial", autoreset=mode) as env:
            assert_same_transcript(_run(env, False), want)


def test_unknown_mode_message() -> None:
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make(CountingEnv, 1, executor="serial", autoreset="sometimes")
    assert str(info.value) == ("unknown autoreset mode 'sometimes': expected one of ['disabled', "
                               "'next_step', 'same_step'] or a gymnasium.vector.AutoresetMode")


@pytest.mark.parametrize("mode", list(MODES))
def test_env_steps_count_real_steps(mode: str) -> None:
    """``env_steps`` counts the envs' real ``step`` calls: next_step's reset steps are not
    steps, same_step's steps that reset are; on the inline and the general path."""
    with envhive.make(_fns(), executor="serial", autoreset=mode) as env, \
            envhive.make([functools.partial(CountingEnv, pattern=p, tag=i) for i, p in enumerate(PATTERNS)],
                         executor="serial", autoreset=mode) as split:
        env.reset(seed=0)
        split.reset(seed=0)
        real = 0
        for t in range(7):
            actions = np.full(3, t % 3)
            out = env.step(actions)
            split.step_async(actions)
            split.step_wait()
            if mode == "next_step":
                real += int(np.count_nonzero(out[0][:, 2] > 0))  # reset rows show step 0
            else:
                real += 3
            assert env.env_steps == split.env_steps == real, (t, env.env_steps, real)
            ended = out[2] | out[3]
            if mode == "disabled" and ended.any():
                env.reset(options={"reset_mask": ended})
                split.reset(options={"reset_mask": ended})


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("ended", [None, [0, 0, 0], [0, 1, 0], [1, 1, 1]])
def test_the_plan_of_each_mode(mode: AutoresetMode, ended: list[int] | None) -> None:
    """The op each env gets: same_step always STEP_RESET; next_step RESET for an ended env and
    STEP otherwise; disabled always STEP (it never plans a reset: the pool refuses to step an
    ended env before planning, see test_disabled_refuses_a_step_of_an_ended_env). The
    in-place planner writes the same ops and returns how many resets it planned."""
    mask = None if ended is None else np.array(ended, bool)
    if mode is AutoresetMode.SAME_STEP:
        want = [STEP_RESET] * 3
    elif mode is AutoresetMode.NEXT_STEP and ended is not None:
        want = [RESET if e else STEP for e in ended]
    else:
        want = [STEP] * 3
    got = np.broadcast_to(np.asarray(plan_ops(mode, mask)), (3,))
    assert got.tolist() == want
    out = np.full(3, 99, np.int8)
    flags = np.zeros(3, np.int8) if ended is None else np.array(ended, np.int8)
    assert plan_ops_into(mode, flags, int(flags.sum()), out) == want.count(RESET)
    assert out.tolist() == want
