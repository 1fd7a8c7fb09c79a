"""make(device=...): torch tensors out, tensors or numpy in, the same numbers as numpy.

Every executor x autoreset mode x observation space gives, as tensors, exactly the numpy
results (values, dtypes, shapes, info keys and masks); on the CPU the tensors are the pool's
own buffers (zero-copy, shared memory included); actions may be tensors (Dict trees too).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import envhive  # noqa: E402
from envhive.executors import ProcessExecutor, available_executors  # noqa: E402
from envhive.testing import SPACE_ZOO, ZooEnv, assert_same_transcript  # noqa: E402
from envhive.testing._transcript import _snapshot as snapshot  # noqa: E402

pytestmark = pytest.mark.timeout(300)

MODES = ["next_step", "same_step", "disabled"]
EXECUTORS = [*available_executors(), "process-parent-slice"]


def executor(name):
    if name == "process-parent-slice":
        return ProcessExecutor(2, parent_slice=True)
    return name


def untorch(value, where="out"):
    """Tensors back to numpy (copies), checking no numeric numpy array was left unconverted."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy().copy()
    if isinstance(value, dict):
        return {k: untorch(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(untorch(v, f"{where}[{j}]") for j, v in enumerate(value))
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            out = np.empty(value.shape, dtype=object)
            for idx, v in np.ndenumerate(value):
                out[idx] = untorch(v, f"{where}{idx}")
            return out
        assert value.dtype.kind not in "biufc", f"{where}: a numeric numpy array, not a tensor"
        return value.copy()
    return value


def run(env, steps, actions, as_tensor):
    def tensors(a):
        if isinstance(a, dict):
            return {k: tensors(v) for k, v in a.items()}
        if isinstance(a, tuple):
            return tuple(tensors(v) for v in a)
        return torch.as_tensor(np.asarray(a))

    def act(t):
        a = actions(t)
        return tensors(a) if as_tensor else a

    keep = untorch if as_tensor else snapshot
    disabled = env.autoreset_mode.name == "DISABLED"
    out = [keep(env.reset(seed=5))]
    for t in range(steps):
        step = env.step(act(t))
        out.append(keep(step))
        if disabled:
            ended = np.asarray(untorch(step[2]) | untorch(step[3]) if as_tensor else step[2] | step[3])
            if ended.any():
                out.append(keep(env.reset(options={"reset_mask": ended})))
    return out


def zoo(obs_key, act_key="multidiscrete"):
    return lambda: ZooEnv(SPACE_ZOO[obs_key], SPACE_ZOO[act_key], max_len=3)


def zoo_actions(env):
    space = env.action_space
    space.seed(0)
    samples = [space.sample() for _ in range(40)]
    return samples.__getitem__


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", EXECUTORS)
def test_tensors_equal_numpy_on_every_executor_and_mode(name, mode):
    fn = zoo("dict")
    with envhive.make(fn, 3, executor=executor(name), autoreset=mode) as np_env, \
         envhive.make(fn, 3, executor=executor(name), autoreset=mode, device="cpu") as t_env:
        acts = zoo_actions(np_env)
        want = run(np_env, 12, acts, as_tensor=False)
        got = run(t_env, 12, acts, as_tensor=True)
    assert_same_transcript(got, want)


@pytest.mark.parametrize("obs", ["box", "image", "discrete", "multibinary", "tuple", "text"])
def test_tensors_equal_numpy_for_every_space(obs):
    for act in ("multidiscrete", "dict"):
        fn = zoo(obs, act)
        with envhive.make(fn, 2, autoreset="same_step") as np_env, \
             envhive.make(fn, 2, autoreset="same_step", device="cpu") as t_env:
            acts = zoo_actions(np_env)
            assert_same_transcript(run(t_env, 8, acts, True), run(np_env, 8, acts, False))


@pytest.mark.parametrize("name", ["serial", "process"])
def test_cpu_tensors_are_the_pools_buffers(name):
    """copy=False: the tensors share memory with the pool's buffers (the process executor's
    are shared memory), so a step allocates no array and copies nothing."""
    with envhive.make("CartPole-v1", 4, executor=name, copy=False, device="cpu", seed=0) as env:
        obs, _ = env.reset()
        b = env.pool.buffers
        assert obs.data_ptr() == b.obs.ctypes.data
        obs2, rew, term, trunc, _ = env.step(torch.zeros(4, dtype=torch.int64))
        assert obs2.data_ptr() == b.obs.ctypes.data
        assert rew.data_ptr() == b.reward.ctypes.data
        assert term.data_ptr() == b.terminated.ctypes.data
        assert trunc.data_ptr() == b.truncated.ctypes.data
        np.testing.assert_array_equal(obs2.numpy(), b.obs)


def test_async_send_and_recv_take_and_give_tensors():
    with envhive.make("CartPole-v1", 4, batch_size=2, device="cpu", seed=0) as t_env, \
         envhive.make("CartPole-v1", 4, batch_size=2, executor="serial", seed=0) as np_env:
        t_env.async_reset()
        np_env.async_reset()
        for _ in range(20):
            obs, rew, term, trunc, info = t_env.recv()
            n_obs, n_rew, _, _, n_info = np_env.recv()
            assert isinstance(info["env_id"], torch.Tensor) and info["env_id"].dtype == torch.int32
            np.testing.assert_array_equal(obs.numpy(), n_obs)
            np.testing.assert_array_equal(info["env_id"].numpy(), n_info["env_id"])
            action = (obs[:, 2] > 0).long()
            t_env.send(action, info["env_id"])
            np_env.send(action.numpy(), n_info["env_id"])


def test_numeric_infos_are_tensors_and_final_obs_holds_tensors():
    with envhive.make("CartPole-v1", 2, autoreset="same_step", device="cpu", seed=0,
                      max_episode_steps=3) as env:
        env.reset()
        for _ in range(3):
            _, _, _, trunc, info = env.step(torch.ones(2, dtype=torch.int64))
        assert trunc.all()
        assert isinstance(info["_final_obs"], torch.Tensor) and info["_final_obs"].dtype == torch.bool
        assert all(isinstance(o, torch.Tensor) and o.shape == (4,) for o in info["final_obs"])


def test_bad_devices_and_apis_are_clear_errors():
    with pytest.raises(envhive.ConfigError, match="device"):
        envhive.make("CartPole-v1", 2, device="warp-drive")
    with pytest.raises(envhive.ConfigError, match="hold no data"):
        envhive.make("CartPole-v1", 2, device="meta")
    if not torch.cuda.is_available():
        with pytest.raises(envhive.ConfigError, match="'cuda' is not available here"):
            envhive.make("CartPole-v1", 2, device="cuda")
        with pytest.raises(envhive.ConfigError, match="'cuda' is not available here"):
            envhive.make("CartPole-v1", 2, device="cuda", api="torchrl")
    with pytest.raises(envhive.ConfigError, match="dm_env"):
        envhive.make("CartPole-v1", 2, device="cpu", api="dm_env")


def test_without_torch_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(envhive.ConfigError, match=r"pip install 'envhive\[torch\]'"):
        envhive.make("CartPole-v1", 2, device="cpu")


def accelerators():
    found = []
    if torch.cuda.is_available():
        found.append("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        found.append("mps")
    return found or [pytest.param("cuda", marks=pytest.mark.skip(reason="no accelerator here"))]


@pytest.mark.parametrize("device", accelerators())
def test_accelerator_results_equal_cpu_results(device):
    """Written device-agnostic; runs wherever torch sees an accelerator."""
    with envhive.make("CartPole-v1", 8, seed=0, device="cpu") as cpu, \
         envhive.make("CartPole-v1", 8, seed=0, device=device) as dev:
        a, _ = cpu.reset()
        b, _ = dev.reset()
        assert b.device.type == device
        for t in range(50):
            action = torch.full((8,), t % 2)
            a, ra, *_ = cpu.step(action)
            b, rb, *_ = dev.step(action.to(device))
            torch.testing.assert_close(b.cpu(), a)
            torch.testing.assert_close(rb.cpu(), ra)
