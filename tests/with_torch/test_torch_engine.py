"""Torch batched envs (envs/torch/): envhive/TorchCartPole-v1 through the pool.

Aligned with the numba kernel envhive/CartPole-v1 (same seeds give the same first states;
trajectories agree to float rounding: torch's sin/cos may differ from libm's in the last bit),
identical on every executor (the serial, thread and process executors run batches of one with
the same torch code), in every autoreset mode, async, and through the TorchRL front end.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import envhive  # noqa: E402
from envhive.executors import available_executors  # noqa: E402
from envhive.testing import assert_same_transcript  # noqa: E402

pytestmark = pytest.mark.timeout(300)
MODES = ["next_step", "same_step", "disabled"]


def actions(t: int, n: int) -> np.ndarray:
    return np.array([(t // 3 + i) % 2 for i in range(n)], np.int64)


def torques(t: int, n: int) -> np.ndarray:
    return np.random.default_rng(t).uniform(-2, 2, (n, 1)).astype(np.float32)


def run(env, steps: int, seed=7, actions=actions):
    """Reset, then steps (partial resets by mask in disabled mode); every output copied."""
    disabled = env.autoreset_mode.name == "DISABLED"
    out = [tuple(np.copy(x) if isinstance(x, np.ndarray) else x for x in env.reset(seed=seed))]
    for t in range(steps):
        step = env.step(actions(t, env.num_envs))
        out.append(tuple(np.copy(x) if isinstance(x, np.ndarray) else x for x in step))
        ended = step[2] | step[3]
        if disabled and ended.any():
            out.append(tuple(np.copy(x) if isinstance(x, np.ndarray) else x
                             for x in env.reset(options={"reset_mask": ended.copy()})))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("torch_id", "kernel_id", "acts", "steps"), [
    ("envhive/TorchCartPole-v1", "envhive/CartPole-v1", actions, 300),
    ("envhive/TorchPendulum-v1", "envhive/Pendulum-v1", torques, 450),
], ids=["cartpole", "pendulum"])
def test_aligned_with_the_numba_kernel(torch_id, kernel_id, acts, steps, mode):
    with envhive.make(torch_id, 6, autoreset=mode) as t_env, \
         envhive.make(kernel_id, 6, autoreset=mode) as k_env:
        got, want = run(t_env, steps, actions=acts), run(k_env, steps, actions=acts)
    assert len(got) == len(want)
    np.testing.assert_array_equal(got[0][0], want[0][0])  # first states: bit for bit
    ends = 0
    for a, b in zip(got[1:], want[1:]):
        np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-6)
        if len(a) == 5:  # a step
            np.testing.assert_allclose(a[1], b[1], rtol=1e-9)  # Pendulum: libm pow vs x * x
            np.testing.assert_array_equal(a[2], b[2])
            np.testing.assert_array_equal(a[3], b[3])
            ends += int((a[2] | a[3]).sum())
    assert ends >= 12  # many episodes ended (and were reset) inside the run


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", [n for n in available_executors() if n != "serial"])
@pytest.mark.parametrize(("env_id", "acts"), [
    ("envhive/TorchCartPole-v1", actions), ("envhive/TorchPendulum-v1", torques),
], ids=["cartpole", "pendulum"])
def test_identical_on_every_executor(env_id, acts, name, mode):
    with envhive.make(env_id, 4, executor="serial", autoreset=mode, max_episode_steps=40) as ref, \
         envhive.make(env_id, 4, executor=name, autoreset=mode, max_episode_steps=40) as env:
        assert_same_transcript(run(env, 120, actions=acts), run(ref, 120, actions=acts))
    with envhive.make(env_id, 4, autoreset=mode, max_episode_steps=40) as native, \
         envhive.make(env_id, 4, executor="serial", autoreset=mode, max_episode_steps=40) as serial:
        assert native.executor == "native"
        assert_same_transcript(run(native, 120, actions=acts), run(serial, 120, actions=acts))


def test_async_batches_match_the_serial_executor():
    def collect(executor):
        env = envhive.make("envhive/TorchCartPole-v1", 4, batch_size=2, executor=executor, seed=3)
        env.async_reset()
        seen = []
        for t in range(80):
            obs, rew, term, trunc, info = env.recv()
            ids = info["env_id"]
            seen.append((ids.copy(), obs.copy(), term.copy()))
            env.send(actions(t, 2), ids)
        env.close()
        return seen

    for (ia, oa, ta), (ib, ob, tb) in zip(collect("native"), collect("serial")):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(ta, tb)


@pytest.mark.parametrize("mode", ["next_step", "disabled"])  # dm_env refuses same_step
def test_dm_env_front_end_runs_it(mode):
    """dm_env time steps of the native batch equal those of batches of one (serial)."""
    def steps(executor):
        env = envhive.make("envhive/TorchCartPole-v1", 4, api="dm_env", seed=2, executor=executor,
                           autoreset=mode)
        out = [env.reset()]
        for t in range(150):
            ts = env.step(actions(t, 4))
            out.append(ts)
            if mode == "disabled" and (ts.step_type == 2).any():
                out.append(env.reset(np.flatnonzero(ts.step_type == 2)))
        env.close()
        return [tuple(np.copy(x) for x in ts) for ts in out]

    native, serial = steps("native"), steps("serial")
    assert sum(int((ts[0] == 2).sum()) for ts in native) > 0  # episodes ended (LAST)
    for a, b in zip(native, serial, strict=True):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_torchrl_front_end_runs_it():
    pytest.importorskip("torchrl")
    from torchrl.envs.utils import check_env_specs

    env = envhive.make("envhive/TorchCartPole-v1", 8, api="torchrl", seed=0)
    check_env_specs(env)
    td = env.rollout(200, break_when_any_done=False)
    assert td["next", "done"].sum() > 0
    env.close()


def test_bad_actions_and_options_are_clear_errors():
    with envhive.make("envhive/TorchCartPole-v1", 2, seed=0) as env:
        env.reset()
        with pytest.raises(envhive.ActionError):
            env.step(np.array([0, 5]))
        env.step(np.array([0, 1]))  # nothing was stepped by the bad call; the pool goes on
        with pytest.raises(envhive.EnvWorkerError, match="reset options"):
            env.reset(options={"x": 1})
    with pytest.raises(TypeError, match="unexpected keyword"):
        envhive.make("envhive/TorchCartPole-v1", 2, env_kwargs={"frameskip": 4})


class Ticker(envhive.engines.TorchBatchedEnv):
    """A user's torch batched env: obs = [step, last action]; ends after ``length`` steps.
    (Not the env id: on other executors each env is a batch of one, whose id is 0.)"""

    single_observation_space = __import__("gymnasium").spaces.Box(0, 1e6, (2,), np.float32)
    single_action_space = __import__("gymnasium").spaces.Discrete(3)

    def __init__(self, num_envs, device="cpu", max_episode_steps=None, length=4):
        super().__init__(num_envs, device, max_episode_steps)
        self.length = length
        self.t = torch.zeros(num_envs, dtype=torch.int64)

    def reset_envs(self, env_ids, seeds):
        self.t[env_ids] = 0
        return torch.zeros((len(env_ids), 2), dtype=torch.float32)

    def step_envs(self, actions, env_ids):
        ids = torch.arange(self.num_envs) if env_ids is None else env_ids
        self.t[ids] += 1
        obs = torch.stack((self.t[ids].to(torch.float32), actions.to(torch.float32)), dim=1)
        term = self.t[ids] >= self.length
        return obs, actions.to(torch.float64), term, torch.zeros_like(term)


@pytest.mark.parametrize("mode", MODES)
def test_a_users_torch_batched_env_class_goes_to_make(mode):
    """make(MyTorchEnv, n): the class is built once for the batch (native) or per env (others),
    with env_kwargs; the pool's autoreset modes apply to it like to any env."""
    with envhive.make(Ticker, 3, autoreset=mode, env_kwargs={"length": 3}) as env, \
         envhive.make(Ticker, 3, autoreset=mode, env_kwargs={"length": 3}, executor="serial") as ref:
        assert env.executor == "native" and "Ticker" in repr(env)
        got = run(env, 12, actions=lambda t, n: np.full(n, t % 3))
        want = run(ref, 12, actions=lambda t, n: np.full(n, t % 3))
        assert_same_transcript(got, want)
        steps = [int(x) for x in np.concatenate([o[0][:, 0] for o in got])]
        # Episodes end after 3 steps and start again (same_step hands out the reset obs of an
        # ending step; the terminal one is in info["final_obs"]).
        assert max(steps) == (2 if mode == "same_step" else 3)
