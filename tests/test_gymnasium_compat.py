"""What gymnasium's vector envs offer beyond the common API, on envhive pools.

gymnasium's own vector-env suite runs against envhive in tests/gymnasium_vector/; these are
envhive's own checks of the same features, on every executor and mode: ``observation_mode``,
gymnasium's ``*_async``/``*_wait`` calls (equal to ``step``/``reset``, timeouts that never
hang and leave the call pending), ``np_random_seed``, and envhive errors that are also
gymnasium's error classes.
"""

from __future__ import annotations

import functools
import multiprocessing

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import batch_differing_spaces

import envhive
from envhive.executors import available_executors
from envhive.testing import CountingEnv, ZooEnv, assert_same_transcript, transcript
from tests.bounded import LONG, FileGate, Watchdog

pytestmark = pytest.mark.timeout(300)

MODES = ["next_step", "same_step", "disabled"]


@pytest.fixture(params=available_executors())
def executor(request):
    return request.param


class GateEnv(gym.Env):
    """A step with action 1 (a reset with ``gated=True``) waits until ``gate`` opens: a wait
    that must time out is sure to, whatever the machine's load."""

    observation_space = spaces.Box(0, 1, (1,), np.float32)
    action_space = spaces.Box(0, 5, (), np.float32)

    def __init__(self, gate: FileGate, gated_reset: bool = False) -> None:
        self.gate, self.gated_reset = gate, gated_reset
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.gated_reset:
            assert self.gate.wait(), "the test never opened the gate"
        return np.zeros(1, np.float32), {}

    def step(self, action):
        if float(action):
            assert self.gate.wait(), "the test never opened the gate"
        self.steps += 1
        return np.full(1, self.steps, np.float32), 1.0, False, False, {"steps": self.steps}



def counting(n: int = 3, **kw) -> list:
    return [lambda i=i: CountingEnv(pattern=[(2 + i, "term"), (3, "trunc")], tag=i, with_info=True)
            for i in range(n)]


# -- observation_mode --------------------------------------------------------------------
def boxes(highs):
    return [lambda h=h: ZooEnv(spaces.Box(0, h, (2,), np.float32), spaces.Discrete(2)) for h in highs]


def test_observation_mode_different(executor):
    env = envhive.make(boxes([1, 2, 3]), executor=executor, observation_mode="different", seed=0)
    own = [spaces.Box(0, h, (2,), np.float32) for h in (1, 2, 3)]
    assert env.observation_mode == "different"
    assert env.observation_space == batch_differing_spaces(own)
    assert env.single_observation_space == own[0]
    obs, _ = env.reset()
    assert obs in env.observation_space
    assert obs[2].max() > 1  # env 2's values are its own space's (ZooEnv samples them)
    for _ in range(5):
        obs, *_ = env.step(env.action_space.sample())
        assert obs in env.observation_space
    env.close()


def test_observation_mode_custom_tuple(executor):
    batched = spaces.Box(0, np.array([[1, 1], [2, 2]], np.float32), (2, 2), np.float32)
    single = spaces.Box(0, 1, (2,), np.float32)
    env = envhive.make(boxes([1, 2]), executor=executor, observation_mode=(batched, single))
    assert env.observation_space is batched and env.single_observation_space == single
    env.reset(seed=0)
    env.close()


def test_observation_mode_same_refuses_differing_spaces(executor):
    with pytest.raises(envhive.SpaceMismatchError) as info:
        envhive.make(boxes([1, 2]), executor=executor)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)
    assert "use `observation_mode='different'`" in str(info.value)


@pytest.mark.parametrize("mode", ["different", (spaces.Box(0, 1, (2, 3)), spaces.Box(0, 1, (3,)))])
def test_observation_mode_refuses_other_shapes(executor, mode, monkeypatch):
    fns = [lambda: ZooEnv(spaces.Box(0, 1, (2,)), spaces.Discrete(2)),
           lambda: ZooEnv(spaces.Box(0, 1, (3,)), spaces.Discrete(2))]
    started = []
    start = multiprocessing.process.BaseProcess.start

    def recorded(proc):
        started.append(proc)
        start(proc)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", recorded)
    with pytest.raises(envhive.SpaceMismatchError) as info:
        envhive.make(fns, executor=executor, observation_mode=mode)
    assert "shape and dtype" in str(info.value)
    # A pool that fails to build stops its workers (they wait for their buffers): each was
    # told to stop and exited by itself (status 0), none was left running or terminated.
    assert started or executor != "process"
    assert [proc.exitcode for proc in started] == [0] * len(started)


def test_observation_mode_argument_errors():
    with pytest.raises(envhive.ConfigError, match="Invalid `observation_mode`"):
        envhive.make(boxes([1]), observation_mode="mixed")
    with pytest.raises(envhive.ConfigTypeError):
        envhive.make(boxes([1]), observation_mode=("a", "b"))
    with pytest.raises(envhive.ConfigError, match="api='gymnasium'"):
        envhive.make(boxes([1]), observation_mode="different", api="dm_env")


# -- *_async / *_wait ----------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_step_async_equals_step(executor, mode):
    """step_async + step_wait give exactly what step gives (same_step's final_obs, infos and
    disabled's partial resets included)."""
    sync = envhive.make(counting(), executor="serial", autoreset=mode)
    split = envhive.make(counting(), executor=executor, autoreset=mode)
    actions = lambda t: np.array([t % 2, 1, 0])  # noqa: E731

    class Split:  # split's calls, each as one async + wait
        def reset(self, seed=None, options=None):
            split.reset_async(seed=seed, options=options)
            return split.reset_wait(timeout=30.0)

        def step(self, a):
            split.step_async(a)
            return split.step_wait()

    if mode == "disabled":  # disabled needs its ended envs reset: use the masked reset
        def run(env):
            out = [env.reset(seed=0)]
            for t in range(12):
                step = env.step(actions(t))
                out.append(step)
                done = step[2] | step[3]
                if done.any():
                    out.append(env.reset(options={"reset_mask": done}))
            return out
        a, b = run(sync), run(Split())
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_transcript([x], [y])
    else:
        assert_same_transcript(transcript(sync, 12, actions), transcript(Split(), 12, actions))
    assert split.env_steps == sync.env_steps
    sync.close()
    split.close()


@pytest.mark.parametrize("executor", [e for e in available_executors() if e != "serial"])
def test_step_wait_timeout_leaves_the_step_pending(executor, gate):
    env = envhive.make([functools.partial(GateEnv, gate)] * 2, executor=executor, num_workers=2)
    env.reset(seed=0)
    env.step_async(np.array([0.0, 1.0], np.float32))  # env 1 waits at the gate
    with Watchdog(LONG, "step_wait(timeout=0.05)"):  # it returns, it does not hang
        with pytest.raises(envhive.WaitTimeoutError) as info:
            env.step_wait(timeout=0.05)
    assert isinstance(info.value, multiprocessing.TimeoutError)
    assert isinstance(info.value, TimeoutError)
    assert "The call to `step_wait` has timed out after 0.05 second(s)" in str(info.value)
    with pytest.raises(envhive.PendingCallError):
        env.step(np.zeros(2, np.float32))  # still pending
    gate.open()
    obs, rew, *_ = env.step_wait(timeout=LONG)  # the same step, finished
    assert obs[:, 0].tolist() == [1.0, 1.0] and rew.tolist() == [1.0, 1.0]
    assert env.step(np.zeros(2, np.float32))[0][:, 0].tolist() == [2.0, 2.0]
    env.close()


@pytest.mark.parametrize("executor", [e for e in available_executors() if e != "serial"])
def test_reset_wait_timeout(executor, gate):
    env = envhive.make([functools.partial(GateEnv, gate, True)] * 2, executor=executor, num_workers=2)
    env.reset_async(seed=0)
    with Watchdog(LONG, "reset_wait(timeout=0.05)"):
        with pytest.raises(multiprocessing.TimeoutError):
            env.reset_wait(timeout=0.05)
    gate.open()
    obs, _ = env.reset_wait()
    assert obs.shape == (2, 1)
    env.close()


def test_async_call_order_errors(executor):
    env = envhive.make(counting(), executor=executor)
    with pytest.raises(gym.error.NoAsyncCallError, match="without any prior call to `reset_async`"):
        env.reset_wait()
    env.reset_async(seed=0)
    with pytest.raises(gym.error.AlreadyPendingCallError) as info:
        env.step_async(np.zeros(3, np.int64))
    assert info.value.name == "reset"
    assert "pending call to `reset`" in str(info.value)
    for call in (lambda: env.send(np.zeros(3, np.int64)), env.recv, env.async_reset):
        with pytest.raises(envhive.PendingCallError):
            call()
    with pytest.raises(gym.error.NoAsyncCallError, match="`step_wait`.*`reset` is pending"):
        env.step_wait()
    env.reset_wait()
    env.step_async(np.zeros(3, np.int64))
    with pytest.warns(UserWarning, match="Calling `close` while waiting for a pending call to `step`"):
        env.close()
    with pytest.raises(gym.error.ClosedEnvironmentError):
        env.reset_async()


def test_async_after_envpool_sends_is_refused(executor):
    env = envhive.make(counting(), executor=executor, batch_size=1)
    env.async_reset()
    with pytest.raises(envhive.PendingCallError, match="recv"):
        env.step_async(np.zeros(3, np.int64))
    env.close()


def test_env_error_in_step_wait(executor):
    class Fails(CountingEnv):
        def step(self, action):
            if action == 1:
                raise ValueError("boom")
            return super().step(action)

    env = envhive.make([Fails] * 3, executor=executor)
    env.reset(seed=0)
    env.step_async(np.array([0, 1, 0]))
    with pytest.raises(envhive.EnvWorkerError, match="boom") as info:
        env.step_wait()
    assert info.value.env_id == 1
    env.reset()
    env.step_async(np.zeros(3, np.int64))
    assert env.step_wait()[0].shape == (3, 4)
    env.close()


def test_reset_async_mask_equals_reset_mask(executor):
    a = envhive.make(counting(), executor="serial", autoreset="disabled")
    b = envhive.make(counting(), executor=executor, autoreset="disabled")
    for env in (a, b):
        env.reset(seed=0)
        env.step(np.ones(3, np.int64))
    mask = np.array([True, False, True])
    want = a.reset(seed=5, options={"reset_mask": mask})
    b.reset_async(seed=5, options={"reset_mask": mask})
    assert_same_transcript([want], [b.reset_wait()])
    a.close()
    b.close()


def test_pool_wait_gathers_envpool_sends_in_env_order(executor):
    env = envhive.make(counting(4), executor=executor, batch_size=1)
    env.async_reset([3, 1])
    batch = env.pool.wait()
    assert batch.op.tolist() == [-1, 1, -1, 1]
    assert batch.obs[[1, 3], 0].tolist() == [1, 3]
    with pytest.raises(envhive.NothingPendingError):
        env.pool.wait()
    env.close()


# -- seeds, errors -----------------------------------------------------------------------
def test_np_random_seed(executor):
    env = envhive.make("CartPole-v1", 3, executor=executor)
    env.reset(seed=42)
    assert env.np_random_seed == (42, 43, 44)
    env.reset()
    assert env.np_random_seed == (42, 43, 44)
    gens = env.np_random
    assert len(gens) == 3 and all(isinstance(g, np.random.Generator) for g in gens)
    with pytest.raises(AttributeError):
        env.np_random = np.random.default_rng()
    env.close()


def test_errors_are_gymnasiums_too(executor):
    assert issubclass(envhive.ClosedError, gym.error.ClosedEnvironmentError)
    assert issubclass(envhive.PendingCallError, gym.error.AlreadyPendingCallError)
    assert issubclass(envhive.NothingPendingError, gym.error.NoAsyncCallError)
    assert issubclass(envhive.ResetNeededError, gym.error.ResetNeeded)
    assert issubclass(envhive.ActionError, gym.error.InvalidAction)
    assert issubclass(envhive.UnknownEnvError, gym.error.UnregisteredEnv)
    env = envhive.make(counting(), executor=executor)
    with pytest.raises(gym.error.ResetNeeded):
        env.step(np.zeros(3, np.int64))
    env.reset()
    with pytest.raises(TypeError) as info:
        env.step(0)
    assert isinstance(info.value, envhive.ActionTypeError)
    with pytest.raises(ValueError):
        env.step(np.zeros(2, np.int64))
    with pytest.raises(TypeError, match=r"must have `dtype=np.bool_`, got int64"):
        env.reset(options={"reset_mask": np.array([1, 0, 1])})
    with pytest.raises(ValueError, match=r"must have shape `\(3,\)`, got \(2,\)"):
        env.reset(options={"reset_mask": np.array([True, False])})
    env.close()
    with pytest.raises(gym.error.ClosedEnvironmentError):
        env.reset()


class Picky(spaces.Space):
    """A user-defined space whose contains() raises for a value of the wrong type."""

    def contains(self, x):
        return 0 <= x <= 3

    def __eq__(self, other):
        return isinstance(other, Picky)


class PickyEnv(gym.Env):
    observation_space = spaces.Discrete(2)
    action_space = Picky()

    def reset(self, *, seed=None, options=None):
        return 0, {}

    def step(self, action):
        return 0, 0.0, False, False, {}


def test_custom_space_contains_raising_is_an_action_error(executor):
    env = envhive.make([PickyEnv] * 2, executor=executor)
    env.reset()
    with pytest.raises(envhive.ActionError, match=r"contains\(\) raised TypeError"):
        env.step(["a", "b"])
    env.step([1, 2])
    env.close()
