"""call / get_attr / set_attr on chosen envs (SB3's ``env_method(indices=...)``), on every executor."""

from __future__ import annotations

import functools

import pytest

import envhive
from envhive.executors import ProcessExecutor, available_executors
from envhive.testing import CountingEnv

N = 5


def make(executor):
    fns = [functools.partial(CountingEnv, tag=i) for i in range(N)]
    if executor == "process-parent-slice":
        return envhive.make(fns, executor=ProcessExecutor(2, parent_slice=True))
    return envhive.make(fns, executor=executor, num_workers=2 if executor != "serial" else None)


@pytest.mark.parametrize("executor", [*available_executors(), "process-parent-slice"])
def test_calls_reach_exactly_the_chosen_envs_in_their_order(executor):
    with make(executor) as env:
        env.reset(seed=0)
        assert env.get_attr("tag") == tuple(range(N))
        assert env.get_attr("tag", env_ids=[4, 0, 2]) == (4, 0, 2)
        env.set_attr("tag", [40, 30], env_ids=[4, 3])
        assert env.get_attr("tag") == (0, 1, 2, 30, 40)
        env.set_attr("tag", 7, env_ids=[1])  # one value for each chosen env
        assert env.get_attr("tag") == (0, 7, 2, 30, 40)
        pool = env.pool
        assert pool.call("get_wrapper_attr", ("tag",), env_ids=[3, 1]) == (30, 7)
        # Calls with arguments reach the chosen envs only: reset env 2 alone, by method call.
        obs, _ = pool.call("reset", kwargs={"seed": 5}, env_ids=[2])[0]
        assert obs.tolist()[:3] == [2, 1, 0]  # env 2, its second episode, step 0


@pytest.mark.parametrize("bad, match", [([5], r"\[0, 5\)"), ([1, 1], "once"), ([[0]], "1-d")])
def test_bad_env_ids_are_refused(bad, match):
    with make("serial") as env:
        with pytest.raises(envhive.ConfigError, match=match):
            env.get_attr("tag", env_ids=bad)
        with pytest.raises(envhive.ConfigError, match=match):
            env.set_attr("tag", 1, env_ids=bad)


def test_set_attr_wants_one_value_per_chosen_env():
    with make("serial") as env, pytest.raises(envhive.ConfigError, match="expected 2 values"):
        env.set_attr("tag", [1, 2, 3], env_ids=[0, 1])


def test_native_engines_take_env_ids_too():
    with envhive.make("envhive/CartPole-v1", 4, seed=0) as env:
        env.reset()
        assert len(env.get_attr("np_random", env_ids=[3, 1])) == 2


class RaisesOnTag(CountingEnv):
    def boom(self):
        if self.tag == 2:
            raise ValueError("boom from tag 2")
        return self.tag


@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
def test_a_raising_call_names_the_env_that_raised(executor):
    """On every executor: an EnvWorkerError naming the env (its own exception as the
    cause), and the pool goes on."""
    fns = [functools.partial(RaisesOnTag, tag=i) for i in range(4)]
    with envhive.make(fns, executor=executor) as env:
        with pytest.raises(envhive.EnvWorkerError, match="boom from tag 2") as info:
            env.call("boom")
        assert info.value.env_id == 2
        with pytest.raises(envhive.EnvWorkerError) as info:
            env.get_attr("no_such_attribute")
        assert info.value.env_id == 0 and "no_such_attribute" in str(info.value)
        with pytest.raises(envhive.EnvWorkerError) as info:
            env.pool.call("no_such_attribute", env_ids=[3, 1])
        assert info.value.env_id == 3
        assert env.pool.call("boom", env_ids=[3, 1]) == (3, 1)


class EchoEnv(CountingEnv):
    """Its ``echo`` method returns its tag with what it was called with."""

    def echo(self, *args, **kwargs):
        return self.tag, args, kwargs


@pytest.mark.parametrize("executor", available_executors())
def test_vector_env_call_takes_env_ids_for_itself(executor):
    """README: ``call`` takes ``env_ids=``, as ``get_attr``/``set_attr`` do; it chooses the
    envs and is never passed on to the env's method (it used to be, to every env)."""
    fns = [functools.partial(EchoEnv, tag=i) for i in range(3)]
    with envhive.make(fns, executor=executor) as env:
        assert env.call("echo", 1, key=2, env_ids=[2, 0]) == ((2, (1,), {"key": 2}), (0, (1,), {"key": 2}))
        assert env.call("echo", key=3) == tuple((i, (), {"key": 3}) for i in range(3))
        with pytest.raises(envhive.ConfigError, match=r"\[0, 3\)"):
            env.call("echo", env_ids=[3])
