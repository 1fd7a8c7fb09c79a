"""Misuse and failure: every bad input raises a clear envhive error and steps nothing.

Each error must say what was expected, what was got and (where it applies) which env. After a
refused call, no env may have moved (``env_steps``, each env's own step counter and the pool's
observation buffer are unchanged) and the pool must still work with a correct call. Misuse must
never hang, whatever the executor: every test runs under a timeout.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import envhive
from envhive.executors import available_executors
from envhive.testing import SPACE_ZOO, CountingEnv, ZooEnv

pytestmark = pytest.mark.timeout(300)

N = 3


@pytest.fixture(params=available_executors())
def executor(request):
    return request.param


def check_msg(err: BaseException, *parts: str) -> str:
    """Assert the error text contains every part (expected value, got value, env index...)."""
    text = str(err)
    for part in parts:
        assert part in text, f"{part!r} missing from error message: {text!r}"
    return text


class Snapshot:
    """What must not change when a call is refused: counters, per-env step counts, obs buffer."""

    def __init__(self, env: envhive.VectorEnv, buf: np.ndarray, attr: str = "t") -> None:
        self.env, self.buf, self.attr = env, buf, attr
        self.env_steps = env.env_steps
        self.per_env = tuple(env.get_attr(attr))
        self.obs = buf.copy()

    def assert_untouched(self) -> None:
        assert self.env.env_steps == self.env_steps, "a refused call stepped an env"
        assert tuple(self.env.get_attr(self.attr)) == self.per_env, "a refused call moved an env"
        np.testing.assert_array_equal(self.buf, self.obs, err_msg="a refused call wrote obs")


def counting_pool(executor: str, **kw) -> tuple[envhive.VectorEnv, np.ndarray]:
    """3 CountingEnvs (long episodes), reset and stepped once, copy=False (obs = the buffer)."""
    kw.setdefault("copy", False)
    env = envhive.make(
        lambda: CountingEnv(pattern=[(100, "term")]), N, executor=executor, seed=0, **kw
    )
    env.reset()
    obs = env.step(np.ones(N, np.int64))[0]
    return env, obs


def assert_usable(env: envhive.VectorEnv, buf: np.ndarray, t_before: tuple[int, ...]) -> None:
    """A correct step works and moves every env by exactly one step, with the right action."""
    steps = env.env_steps
    obs = env.step(np.full(N, 2, np.int64))[0]
    assert obs is buf or env.copy
    assert obs[:, 2].tolist() == [t + 1 for t in t_before]
    assert obs[:, 3].tolist() == [2] * N
    assert env.env_steps == steps + N


# ---------------------------------------------------------------- bad actions


@pytest.mark.parametrize(
    "actions, parts",
    [
        (np.array([1, 1]), ["expected shape (3,)", "got (2,)"]),
        (np.array([[1], [1], [1]]), ["expected shape (3,)", "got (3, 1)"]),
        (np.int64(1), ["expected shape (3,)", "got ()"]),
        (np.array([1.0, 1.0, 1.0]), ["integer", "Discrete(3)", "float64"]),
        (np.array([1.0, 1.0, 1.0], np.float32), ["integer", "float32"]),
        (np.array([True, False, True]), ["integer", "bool"]),
        (np.array(["a", "b", "c"]), ["integer"]),
    ],
    ids=["short", "extra-axis", "scalar", "float64", "float32", "bool", "str"],
)
def test_bad_action_shape_or_dtype_steps_nothing(executor, actions, parts):
    env, buf = counting_pool(executor)
    snap = Snapshot(env, buf)
    with pytest.raises(envhive.ActionError) as info:
        env.step(actions)
    assert isinstance(info.value, ValueError)
    check_msg(info.value, *parts, "nothing was stepped")
    snap.assert_untouched()
    assert_usable(env, buf, snap.per_env)
    env.close()


@pytest.mark.parametrize("bad_env, bad_value", [(0, -1), (1, 3), (2, 1000)])
def test_discrete_out_of_range_names_env(executor, bad_env, bad_value):
    env, buf = counting_pool(executor)
    snap = Snapshot(env, buf)
    actions = np.zeros(N, np.int64)
    actions[bad_env] = bad_value
    with pytest.raises(envhive.ActionError) as info:
        env.step(actions)
    check_msg(info.value, f"env {bad_env}", str(bad_value), "Discrete(3)")
    snap.assert_untouched()
    assert_usable(env, buf, snap.per_env)
    env.close()


def test_send_out_of_range_names_pool_env_not_batch_position(executor):
    env, buf = counting_pool(executor)
    snap = Snapshot(env, buf)
    with pytest.raises(envhive.ActionError) as info:
        env.send(np.array([0, 7]), env_id=np.array([2, 0]))  # position 1 is env 0
    check_msg(info.value, "env 0", "7", "Discrete(3)")
    assert "env 1" not in str(info.value)
    snap.assert_untouched()
    with pytest.raises(envhive.NothingPendingError):
        env.recv()  # the refused send left nothing in flight
    assert_usable(env, buf, snap.per_env)
    env.close()


def box_pool(executor: str, space: spaces.Box):
    env = envhive.make(lambda: ZooEnv(SPACE_ZOO["box"], space, max_len=100), N,
                       executor=executor, seed=0, copy=False)
    env.reset()
    buf = env.step(np.zeros((N, *space.shape), space.dtype))[0]
    return env, buf


@pytest.mark.parametrize(
    "space",
    [spaces.Box(-2.0, 2.0, (3,), np.float32), spaces.Box(-np.inf, np.inf, (3,), np.float32),
     spaces.Box(-np.inf, 1.0, (3,), np.float64)],
    ids=["bounded", "unbounded", "half-bounded"],
)
@pytest.mark.parametrize("bad_env", [0, 2])
def test_box_nan_names_env(executor, space, bad_env):
    env, buf = box_pool(executor, space)
    snap = Snapshot(env, buf, attr="_t")
    actions = np.zeros((N, 3), space.dtype)
    actions[bad_env, 1] = np.nan
    with pytest.raises(envhive.ActionError) as info:
        env.step(actions)
    check_msg(info.value, f"env {bad_env}", "nan", "Box(")
    snap.assert_untouched()
    env.step(np.zeros((N, 3), space.dtype))
    assert env.env_steps == snap.env_steps + N
    env.close()


@pytest.mark.parametrize("bad", [2.5, -2.0001, np.inf])
def test_box_out_of_bounds_names_env(executor, bad):
    space = spaces.Box(-2.0, 2.0, (3,), np.float32)
    env, buf = box_pool(executor, space)
    snap = Snapshot(env, buf, attr="_t")
    actions = np.zeros((N, 3), np.float64)
    actions[1, 2] = bad
    with pytest.raises(envhive.ActionError) as info:
        env.step(actions)
    check_msg(info.value, "env 1", "Box(-2.0, 2.0, (3,), float32)")
    snap.assert_untouched()
    env.step(np.full((N, 3), 2.0, np.float32))  # the bounds themselves are fine
    assert env.env_steps == snap.env_steps + N
    env.close()


def test_dict_action_bad_leaf_steps_nothing(executor):
    act = spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Box(0.0, 1.0, (2,), np.float32)})
    env = envhive.make(lambda: ZooEnv(SPACE_ZOO["box"], act), N, executor=executor, seed=0,
                       copy=False)
    buf = env.reset()[0]
    snap = Snapshot(env, buf, attr="_t")
    good = {"a": np.zeros(N, np.int64), "b": np.zeros((N, 2), np.float32)}
    with pytest.raises(envhive.ActionError) as info:
        env.step({"a": np.array([0, 1, 2]), "b": good["b"]})
    check_msg(info.value, "env 2", "'a'", "Discrete(2)")
    with pytest.raises(envhive.ActionError) as info:
        env.step({"a": good["a"]})
    check_msg(info.value, "expected a dict with keys ['a', 'b']", "got ['a']")
    snap.assert_untouched()
    env.step(good)
    assert env.env_steps == N
    env.close()


# ---------------------------------------------------------------- make() arguments


def test_unknown_env_id_suggests_close_matches():
    with pytest.raises(envhive.UnknownEnvError) as info:
        envhive.make("CartPol-v1", num_envs=2)
    err = info.value
    assert isinstance(err, envhive.ConfigError) and isinstance(err, ValueError)
    assert err.env_id == "CartPol-v1"
    assert err.suggestions[0] == "CartPole-v1"
    check_msg(err, "'CartPol-v1'", "Did you mean", "'CartPole-v1'", "list_envs()")


def test_unknown_env_id_without_close_match():
    with pytest.raises(envhive.UnknownEnvError) as info:
        envhive.make("Qqqqqqqqqqqqqq-v0")
    assert info.value.suggestions == []
    check_msg(info.value, "'Qqqqqqqqqqqqqq-v0'", "list_envs()")
    assert "Did you mean" not in str(info.value)


def test_action_space_mismatch_names_env(executor):
    fns = [lambda: CountingEnv(n_actions=3), lambda: CountingEnv(n_actions=3),
           lambda: CountingEnv(n_actions=4)]
    with pytest.raises(envhive.SpaceMismatchError) as info:
        envhive.make(fns, executor=executor)
    assert isinstance(info.value, envhive.ConfigError)
    check_msg(info.value, "env 2", "action_space", "Discrete(4)", "Discrete(3)", "env 0")


def test_observation_space_mismatch_names_env(executor):
    fns = [lambda: ZooEnv(SPACE_ZOO["box"], spaces.Discrete(2)),
           lambda: ZooEnv(SPACE_ZOO["image"], spaces.Discrete(2))]
    with pytest.raises(envhive.SpaceMismatchError) as info:
        envhive.make(fns, executor=executor)
    check_msg(info.value, "env 1", "observation_space", "(4, 4, 3)", "(3,)")


@pytest.mark.parametrize("mode", ["sometimes", "NEXT_STEP", "", 1])
def test_unknown_autoreset_mode(mode):
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make(lambda: CountingEnv(), 2, autoreset=mode)
    check_msg(info.value, repr(mode), "expected one of", "'next_step'", "'same_step'", "'disabled'")


def test_autoreset_none_is_the_default_next_step():
    with envhive.make(lambda: CountingEnv(), 2, autoreset=None) as env:
        assert env.autoreset_mode is envhive.AutoresetMode.NEXT_STEP


@pytest.mark.parametrize("batch_size", [4, 0, -1, 1.0, "2", True])
def test_bad_batch_size(executor, batch_size):
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make(lambda: CountingEnv(), N, executor=executor, batch_size=batch_size)
    check_msg(info.value, "batch_size", "[1, num_envs=3]", f"got {batch_size!r}")


@pytest.mark.parametrize("kw, parts", [
    ({"num_envs": 0}, ["num_envs", "positive int", "got 0"]),
    ({"num_envs": True}, ["num_envs", "got True"]),
    ({"num_workers": 0}, ["num_workers", "got 0"]),
    ({"max_episode_steps": -3}, ["max_episode_steps", "got -3"]),
    ({"env_kwargs": [1]}, ["env_kwargs", "dict", "got list"]),
    ({"executor": "warp-drive"}, ["'warp-drive'", "expected one of", "'serial'"]),
    ({"executor": 3}, ["executor", "got int"]),
])
def test_bad_make_arguments(kw, parts):
    kw = {"num_envs": 2, **kw}
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make(lambda: CountingEnv(), **kw)
    check_msg(info.value, *parts)


def test_env_instance_instead_of_factory_suggests_lambda():
    inst = CountingEnv()
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make(inst, num_envs=2)
    check_msg(info.value, "CountingEnv", "factory", "lambda")
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make([lambda: CountingEnv(), inst])
    check_msg(info.value, "env 1", "CountingEnv", "lambda")
    wrapped = gym.make("CartPole-v1")
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make(wrapped, num_envs=2)
    check_msg(info.value, "CartPoleEnv", "lambda")


def test_factory_returning_shared_instance_is_refused(executor):
    # ``lambda: inst`` hands every slot the SAME env object, so "env 0" and "env 1" would step
    # one env twice per batch (and behave differently on executors that pickle factories).
    inst = CountingEnv()
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make(lambda: inst, num_envs=2, executor=executor)
    check_msg(info.value, "env 1", "same", "factory")


@pytest.mark.parametrize("bad", [None, 42, "CartPole-v1", object()])
def test_factory_returning_non_env(executor, bad):
    fns = [lambda: CountingEnv(), lambda: bad]
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make(fns, executor=executor)
    check_msg(info.value, "env 1", "gymnasium.Env", f"got {type(bad).__name__}")


def test_factory_that_raises_names_env(executor):
    def broken_factory():
        raise OSError("no display for factory")

    with pytest.raises(envhive.EnvWorkerError) as info:
        envhive.make([lambda: CountingEnv(), lambda: CountingEnv(), broken_factory],
                     executor=executor)
    err = info.value
    assert err.env_id == 2 and err.cause_type == "OSError"
    check_msg(err, "env 2", "no display for factory")
    assert "broken_factory" in err.worker_traceback


def test_non_callable_in_factory_list():
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make([lambda: CountingEnv(), 5])
    check_msg(info.value, "env 1", "factory", "got int")
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make([lambda: CountingEnv()] * 2, num_envs=3)
    check_msg(info.value, "num_envs=3", "2 factories")
    with pytest.raises(envhive.ConfigError):
        envhive.make([])


@pytest.mark.parametrize("seed, parts", [
    ([1, 2], ["expected 3 seeds", "got 2"]),
    ([1, 2, 3, 4], ["expected 3 seeds", "got 4"]),
    ([1, -2, 3], ["env 1", "non-negative", "got -2"]),
    (-1, ["env 0", "non-negative", "got -1"]),
    ([1, 2.5, 3], ["env 1", "got 2.5"]),
    (1.5, ["got float"]),
    ("7", ["got str"]),
    (True, ["got bool"]),
])
def test_bad_seeds_at_make(executor, seed, parts):
    with pytest.raises(envhive.ConfigError) as info:
        envhive.make(lambda: CountingEnv(), N, executor=executor, seed=seed)
    check_msg(info.value, *parts)


@pytest.mark.parametrize("seed", [[1, 2], [0, -1, 0], -5, "x"])
def test_bad_seeds_at_reset_reset_nothing(executor, seed):
    env, buf = counting_pool(executor)
    snap = Snapshot(env, buf, attr="episode")
    with pytest.raises(envhive.ConfigError):
        env.reset(seed=seed)
    snap.assert_untouched()
    with pytest.raises(envhive.ConfigError):
        env.async_reset(seed=seed)
    snap.assert_untouched()
    with pytest.raises(envhive.NothingPendingError):
        env.recv()
    assert_usable(env, buf, tuple(env.get_attr("t")))
    env.close()


@pytest.mark.parametrize("mask, parts", [
    (np.array([1, 0, 1]), ["bool array of shape (3,)", "int64"]),
    (np.array([True, False]), ["bool array of shape (3,)", "(2,)"]),
    (np.ones((3, 1), bool), ["bool array of shape (3,)", "(3, 1)"]),
    ([True, False, True], ["bool array of shape (3,)", "got list"]),
    (np.zeros(3, bool), ["at least one True"]),
])
def test_bad_reset_mask_resets_nothing(executor, mask, parts):
    env, buf = counting_pool(executor)
    snap = Snapshot(env, buf, attr="episode")
    with pytest.raises(envhive.ConfigError) as info:
        env.reset(options={"reset_mask": mask})
    check_msg(info.value, "reset_mask", *parts)
    snap.assert_untouched()
    assert_usable(env, buf, tuple(env.get_attr("t")))
    env.close()


@pytest.mark.parametrize("env_id, parts", [
    (np.array([0, 3]), ["[0, 3)", "got [0, 3]"]),
    (np.array([-1]), ["got [-1]"]),
    (np.array([1, 1]), ["once", "got [1, 1]"]),
    (np.array([0.0, 1.0]), ["int env ids"]),
    (np.array([[0, 1]]), ["1-d"]),
])
def test_bad_env_ids(executor, env_id, parts):
    env, buf = counting_pool(executor)
    snap = Snapshot(env, buf)
    with pytest.raises(envhive.ConfigError) as info:
        env.send(np.zeros(2, np.int64), env_id)
    check_msg(info.value, "env_id", *parts)
    with pytest.raises(envhive.ConfigError):
        env.async_reset(env_id)
    snap.assert_untouched()
    assert_usable(env, buf, snap.per_env)
    env.close()


# ---------------------------------------------------------------- state machine


def test_recv_with_nothing_pending(executor):
    env = envhive.make(lambda: CountingEnv(), N, executor=executor, batch_size=2)
    with pytest.raises(envhive.NothingPendingError) as info:
        env.recv()
    assert isinstance(info.value, envhive.InvalidStateError)
    check_msg(info.value, "batches of 2", "0 are pending", "send()", "async_reset()")
    env.async_reset(np.array([0]))
    with pytest.raises(envhive.NothingPendingError):
        env.recv()  # one in flight, batches of two
    env.async_reset(np.array([2]))
    assert sorted(env.recv()[4]["env_id"].tolist()) == [0, 2]
    env.reset()
    with pytest.raises(envhive.NothingPendingError):
        env.recv()  # sync calls leave nothing to receive
    env.close()


@pytest.mark.parametrize("call", ["step", "reset", "call", "set_attr", "get_attr", "render"])
def test_sync_call_while_sends_pending(executor, call):
    env, buf = counting_pool(executor)
    t_before = tuple(env.get_attr("t"))
    env.send(np.ones(N, np.int64))
    sync = {
        "step": lambda: env.step(np.ones(N, np.int64)),
        "reset": lambda: env.reset(),
        "call": lambda: env.call("t"),
        "set_attr": lambda: env.set_attr("tag", 5),
        "get_attr": lambda: env.get_attr("t"),
        "render": lambda: env.render(),
    }[call]
    with pytest.raises(envhive.PendingCallError) as info:
        sync()
    check_msg(info.value, "pending", "recv()")
    obs = env.recv()[0]
    assert obs[:, 2].tolist() == [t + 1 for t in t_before]  # the send ran exactly once
    assert env.get_attr("tag") == (0, 1, 2)  # set_attr did not go through
    assert_usable(env, buf, tuple(env.get_attr("t")))
    env.close()


def test_sync_call_while_results_wait_for_recv(executor):
    env = envhive.make(lambda: CountingEnv(pattern=[(100, "term")]), N, executor=executor,
                       batch_size=1, seed=0)
    env.async_reset()
    env.recv()  # two envs are ready but not received
    with pytest.raises(envhive.PendingCallError) as info:
        env.step(np.ones(N, np.int64))
    check_msg(info.value, "ready but not received", "recv()")
    with pytest.raises(envhive.PendingCallError):
        env.reset()
    env.recv()
    env.recv()
    obs = env.step(np.ones(N, np.int64))[0]
    assert obs[:, 2].tolist() == [1, 1, 1]
    env.close()


def test_send_to_pending_env(executor):
    env = envhive.make(lambda: CountingEnv(pattern=[(100, "term")]), N, executor=executor,
                       batch_size=1, seed=0)
    env.reset()
    env.send(np.array([1]), np.array([1]))
    with pytest.raises(envhive.PendingCallError) as info:
        env.send(np.array([1, 1]), np.array([0, 1]))
    check_msg(info.value, "env 1", "pending", "recv()")
    with pytest.raises(envhive.PendingCallError):
        env.async_reset(np.array([1]))
    obs, _, _, _, info = env.recv()
    assert info["env_id"].tolist() == [1] and obs[0, 2] == 1  # stepped once, not twice
    with pytest.raises(envhive.NothingPendingError):
        env.recv()  # env 0 was not sent by the refused call
    assert env.env_steps == 1
    env.send(np.array([2, 2]), np.array([0, 1]))  # both idle again
    got = {}
    for _ in range(2):
        obs, _, _, _, info = env.recv()
        got[int(info["env_id"][0])] = int(obs[0, 2])
    assert got == {0: 1, 1: 2}
    env.close()


def test_send_to_ready_but_unreceived_env(executor):
    env = envhive.make(lambda: CountingEnv(pattern=[(100, "term")]), N, executor=executor,
                       batch_size=1, seed=0)
    env.async_reset()
    first = int(env.recv()[4]["env_id"][0])
    others = [i for i in range(N) if i != first]
    with pytest.raises(envhive.PendingCallError) as info:
        env.send(np.array([1]), np.array([others[0]]))
    check_msg(info.value, f"env {others[0]}", "recv()")
    env.send(np.array([1]), np.array([first]))  # the received env may be sent
    seen = sorted(int(env.recv()[4]["env_id"][0]) for _ in range(N))
    assert seen == list(range(N))
    env.close()


def test_step_before_reset(executor):
    env = envhive.make(lambda: CountingEnv(), N, executor=executor, batch_size=1)
    with pytest.raises(envhive.ResetNeededError) as info:
        env.step(np.ones(N, np.int64))
    assert isinstance(info.value, envhive.InvalidStateError)
    check_msg(info.value, "env 0", "reset", "nothing was stepped")
    with pytest.raises(envhive.ResetNeededError):
        env.send(np.ones(1, np.int64), np.array([2]))
    assert env.env_steps == 0 and env.get_attr("t") == (0, 0, 0)
    assert env.get_attr("episode") == (-1, -1, -1)
    # only env 1 is reset: env 0 and 2 still refuse
    env.async_reset(np.array([1]))
    env.recv()
    with pytest.raises(envhive.ResetNeededError) as info:
        env.send(np.ones(2, np.int64), np.array([1, 2]))
    check_msg(info.value, "env 2")
    env.send(np.ones(1, np.int64), np.array([1]))
    assert env.recv()[0][0, 2] == 1
    env.close()


def test_disabled_mode_ended_env_needs_reset(executor):
    env = envhive.make(lambda: CountingEnv(pattern=[(1, "trunc"), (100, "term")]), N,
                       executor=executor, autoreset="disabled", seed=0)
    env.reset()
    _, _, _, trunc, _ = env.step(np.ones(N, np.int64))
    assert trunc.all()
    with pytest.raises(envhive.ResetNeededError) as info:
        env.step(np.ones(N, np.int64))
    check_msg(info.value, "env 0", "truncated", "disabled", "reset_mask")
    assert env.env_steps == N
    env.reset(options={"reset_mask": np.array([True, True, True])})
    obs = env.step(np.ones(N, np.int64))[0]
    assert obs[:, 1:3].tolist() == [[1, 1]] * N
    env.close()


_CLOSED_CALLS = {
    "step": lambda e: e.step(np.ones(N, np.int64)),
    "reset": lambda e: e.reset(),
    "send": lambda e: e.send(np.ones(N, np.int64)),
    "recv": lambda e: e.recv(),
    "async_reset": lambda e: e.async_reset(),
    "call": lambda e: e.call("t"),
    "get_attr": lambda e: e.get_attr("t"),
    "set_attr": lambda e: e.set_attr("tag", 1),
    "render": lambda e: e.render(),
}


@pytest.mark.parametrize("call", sorted(_CLOSED_CALLS))
def test_any_call_after_close(executor, call):
    env, _ = counting_pool(executor)
    env.close()
    with pytest.raises(envhive.ClosedError) as info:
        _CLOSED_CALLS[call](env)
    assert isinstance(info.value, envhive.InvalidStateError)
    check_msg(info.value, "closed", "envhive.make()")
    env.close()  # closing twice is fine
    assert env.closed and "closed" in repr(env)


def test_close_twice_and_close_with_pending_sends(executor):
    env, _ = counting_pool(executor)
    env.send(np.ones(N, np.int64))
    env.close()  # must not hang or raise with sends in flight
    env.close()
    with pytest.raises(envhive.ClosedError):
        env.recv()
    with envhive.make(lambda: CountingEnv(), 2, executor=executor) as ctx:
        ctx.reset()
    with pytest.raises(envhive.ClosedError):
        ctx.step(np.zeros(2, np.int64))
    ctx.close()


# ---------------------------------------------------------------- env failures


class ExplodingEnv(CountingEnv):
    """Raises from step() once its step counter reaches ``boom_at`` (once per episode 0)."""

    def __init__(self, boom_at: int, **kw) -> None:
        super().__init__(pattern=[(100, "term")], **kw)
        self.boom_at = boom_at

    def step(self, action):
        if self.episode == 0 and self.t == self.boom_at:
            explode_inside_env(self.t)
        return super().step(action)


def explode_inside_env(t: int) -> None:
    raise RuntimeError(f"kaboom at t={t}")


def exploding_pool(executor: str, **kw):
    fns = [lambda: CountingEnv(pattern=[(100, "term")]),
           lambda: ExplodingEnv(boom_at=2),
           lambda: CountingEnv(pattern=[(100, "term")])]
    env = envhive.make(fns, executor=executor, seed=0, **kw)
    env.reset()
    env.step(np.ones(N, np.int64))
    env.step(np.ones(N, np.int64))
    return env


def check_worker_error(err: envhive.EnvWorkerError) -> None:
    assert isinstance(err, envhive.EnvhiveError)
    assert err.env_id == 1
    assert err.cause_type == "RuntimeError"
    check_msg(err, "env 1", "step()", "RuntimeError", "kaboom at t=2")
    assert "explode_inside_env" in err.worker_traceback
    assert "kaboom at t=2" in err.worker_traceback
    assert "explode_inside_env" in str(err)  # the env's traceback is in the message too


def test_env_step_raises_sync(executor):
    env = exploding_pool(executor)
    with pytest.raises(envhive.EnvWorkerError) as info:
        env.step(np.ones(N, np.int64))
    check_worker_error(info.value)
    t_after = env.get_attr("t")
    steps = env.env_steps
    # the failed env cannot be stepped again before a reset, and nothing is stepped
    with pytest.raises(envhive.ResetNeededError) as info:
        env.step(np.ones(N, np.int64))
    check_msg(info.value, "env 1", "raised", "reset")
    assert env.get_attr("t") == t_after and env.env_steps == steps
    # resetting only the failed env makes the pool usable again
    obs, _ = env.reset(options={"reset_mask": np.array([False, True, False])})
    assert obs[1, 1:3].tolist() == [1, 0]  # env 1: episode 1, step 0
    obs = env.step(np.full(N, 2, np.int64))[0]
    assert obs[:, 2].tolist() == [t_after[0] + 1, 1, t_after[2] + 1]
    assert obs[:, 3].tolist() == [2, 2, 2]
    env.close()


def test_env_step_raises_async(executor):
    env = exploding_pool(executor, batch_size=1)
    env.send(np.ones(N, np.int64))
    received, raised = [], 0
    for _ in range(N):
        try:
            received.append(int(env.recv()[4]["env_id"][0]))
        except envhive.EnvWorkerError as err:
            check_worker_error(err)
            raised += 1
    assert raised == 1 and sorted(received) == [0, 2]
    with pytest.raises(envhive.NothingPendingError):
        env.recv()
    with pytest.raises(envhive.ResetNeededError) as info:
        env.send(np.ones(1, np.int64), np.array([1]))
    check_msg(info.value, "env 1")
    env.async_reset(np.array([1]))
    obs, _, _, _, info = env.recv()
    assert info["env_id"].tolist() == [1] and obs[0, 1:3].tolist() == [1, 0]
    env.step(np.ones(N, np.int64))
    env.close()


class ReshapingEnv(CountingEnv):
    """Returns an observation of the wrong shape from step() at t == 2 (episode 0 only)."""

    def step(self, action):
        obs, rew, term, trunc, info = super().step(action)
        if self.episode == 0 and self.t == 2:
            obs = obs[:3]
        return obs, rew, term, trunc, info


class BadResetEnv(CountingEnv):
    def reset(self, *, seed=None, options=None):
        _, info = super().reset(seed=seed, options=options)
        return {"not": "an array"}, info


def test_env_returns_wrong_obs_shape_from_step(executor):
    fns = [lambda: CountingEnv(pattern=[(100, "term")]),
           lambda: CountingEnv(pattern=[(100, "term")]),
           lambda: ReshapingEnv(pattern=[(100, "term")])]
    env = envhive.make(fns, executor=executor, seed=0)
    env.reset()
    env.step(np.ones(N, np.int64))
    with pytest.raises(envhive.EnvWorkerError) as info:
        env.step(np.ones(N, np.int64))
    err = info.value
    assert err.env_id == 2
    check_msg(err, "env 2", "observation", "expected shape (4,)", "got (3,)")
    with pytest.raises(envhive.ResetNeededError):
        env.step(np.ones(N, np.int64))
    env.reset()
    assert env.step(np.ones(N, np.int64))[0].shape == (N, 4)
    env.close()


def test_env_returns_wrong_obs_from_reset(executor):
    env = envhive.make([lambda: CountingEnv(), lambda: BadResetEnv()], executor=executor)
    with pytest.raises(envhive.EnvWorkerError) as info:
        env.reset()
    assert info.value.env_id == 1
    check_msg(info.value, "env 1", "reset()", "observation")
    with pytest.raises(envhive.ResetNeededError) as info:
        env.step(np.zeros(2, np.int64))
    check_msg(info.value, "env 1")
    env.close()


def test_a_pool_that_failed_to_build_is_collected_quietly(executor, monkeypatch):
    """A pool whose construction raised (here: mismatched spaces, after its executor launched)
    has already closed its executor; collecting it must not run close() on half a pool."""
    import gc
    import sys

    unraisable: list = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    fns = [lambda: CountingEnv(n_actions=3), lambda: CountingEnv(n_actions=4)]
    with pytest.raises(envhive.SpaceMismatchError):
        envhive.make(fns, executor=executor)
    gc.collect()
    assert unraisable == []


def test_ragged_actions_options_not_a_dict_and_bad_process_settings_are_clear_errors(executor):
    with envhive.make(lambda: CountingEnv(), 2, executor=executor) as env:
        env.reset(seed=0)
        with pytest.raises(envhive.ActionError, match="cannot make into one array"):
            env.step([[0], [0, 1]])
        with pytest.raises(envhive.ConfigError, match="options: expected a dict"):
            env.reset(options=[1, 2])
        with pytest.raises(envhive.ConfigError, match="options: expected a dict"):
            env.async_reset(options=[1, 2])
        env.step(np.zeros(2, np.int64))  # nothing was lost: the pool steps on


@pytest.mark.parametrize("kwargs", [
    {"num_workers": -1}, {"num_workers": 0}, {"num_workers": 1.5}, {"num_workers": True},
    {"spin_s": -1}, {"spin_s": "1"}, {"step_timeout": "1"}, {"step_timeout": 0},
])
def test_process_executor_settings_are_checked(kwargs):
    from envhive.executors import ProcessExecutor

    with pytest.raises(envhive.ConfigError, match=next(iter(kwargs))):
        ProcessExecutor(**kwargs)
