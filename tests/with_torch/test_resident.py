"""Device-resident buffers: a torch batched env on the front end's device keeps its results there.

``make(torch_env, device=d)`` builds the env on ``d`` and, on the native executor, allocates
the pool's observation, final observation, action and reward buffers as tensors on ``d``
(``BufferSpec.resident``). Here (no accelerator) ``d`` is the CPU, which exercises the same
code; what a device would pay is checked by watching the ops: per step no op reads a value
back to the host except the one copy of the flags (and one bool to check tensor actions).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import envhive  # noqa: E402
from envhive.envs.torch import TorchCartPole  # noqa: E402
from envhive.testing import assert_same_transcript  # noqa: E402

pytestmark = pytest.mark.timeout(300)
MODES = ["next_step", "same_step", "disabled"]
IDS = ["envhive/TorchCartPole-v1", "envhive/TorchPendulum-v1"]


def acts_for(env_id: str, t: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(t)
    if "Pendulum" in env_id:
        return rng.uniform(-2, 2, (n, 1)).astype(np.float32)
    return rng.integers(0, 2, n)


def host(x):
    """Tensors (and trees / object arrays of them) as numpy, for comparing."""
    if isinstance(x, torch.Tensor):
        return x.cpu().numpy()
    if isinstance(x, dict):
        return {k: host(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(host(v) for v in x)
    if isinstance(x, np.ndarray) and x.dtype == object:
        out = np.empty(x.shape, dtype=object)
        for i, v in enumerate(x.flat):
            out.flat[i] = host(v)
        return out
    return np.copy(x) if isinstance(x, np.ndarray) else x


def transcript(env, env_id: str, steps: int, tensor_actions: bool) -> list:
    """Reset, steps (partial resets in disabled mode), every result as numpy."""
    disabled = env.autoreset_mode.name == "DISABLED"
    out = [host(env.reset(seed=3))]
    for t in range(steps):
        a = acts_for(env_id, t, env.num_envs)
        step = env.step(torch.from_numpy(a) if tensor_actions and t % 2 else a)
        out.append(host(step))
        ended = host(step[2]) | host(step[3])
        if disabled and ended.any():
            out.append(host(env.reset(options={"reset_mask": ended})))
    return out


def test_a_torch_env_on_the_front_ends_device_is_resident():
    with envhive.make("envhive/TorchCartPole-v1", 4, seed=0, device="cpu", copy=False) as env:
        pool = env.pool
        assert pool.resident and pool.buffers.spec.resident
        b = pool.buffers
        assert isinstance(b.obs, torch.Tensor) and isinstance(b.reward, torch.Tensor)
        assert isinstance(b.actions, torch.Tensor)
        assert isinstance(b.terminated, np.ndarray) and b.device_flags.shape == (2, 4)
        obs, _ = env.reset()
        obs, rew, term, trunc, _ = env.step(torch.ones(4, dtype=torch.int64))
        # copy=False hands out the buffers themselves: the device tensors, no host copy.
        assert obs.data_ptr() == b.obs.data_ptr() and rew.data_ptr() == b.reward.data_ptr()
        assert term.data_ptr() == b.device_flags[0].data_ptr()
        assert trunc.data_ptr() == b.device_flags[1].data_ptr()
        assert env.call("device")[0] == torch.device("cpu")


@pytest.mark.parametrize(("env", "kwargs"), [
    ("envhive/TorchCartPole-v1", {}),  # numpy results: host buffers
    ("envhive/TorchCartPole-v1", {"device": "cpu", "executor": "serial"}),  # batches of one
    ("envhive/CartPole-v1", {"device": "cpu"}),  # a numba kernel writes numpy
])
def test_other_pools_keep_host_buffers(env, kwargs):
    with envhive.make(env, 2, **kwargs) as vec:
        assert not vec.pool.resident
        assert isinstance(vec.pool.buffers.obs, np.ndarray)


@pytest.mark.parametrize("tensor_actions", [False, True], ids=["numpy-actions", "tensor-actions"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("env_id", IDS)
def test_resident_results_equal_host_buffer_results(env_id, mode, tensor_actions):
    """The same env with host buffers (numpy results) is the reference: every value, dtype,
    flag, info and final observation equal, in every mode."""
    with envhive.make(env_id, 5, autoreset=mode, device="cpu") as dev, \
         envhive.make(env_id, 5, autoreset=mode) as ref:
        assert dev.pool.resident and not ref.pool.resident
        got = transcript(dev, env_id, 520, tensor_actions)
        want = transcript(ref, env_id, 520, False)
        assert dev.env_steps == ref.env_steps
    assert_same_transcript(got, want)


@pytest.mark.parametrize("mode", MODES)
def test_async_batches_on_resident_buffers(mode):
    """send/recv with batch_size < num_envs, tensor actions and tensor env ids."""
    def drive(env, as_tensor: bool) -> list:
        out = []
        env.async_reset(seed=1)
        for t in range(300):
            obs, rew, term, trunc, info = env.recv()
            out.append(host((obs, rew, term, trunc, info)))
            ids = info["env_id"]
            ids_np = host(ids)
            if mode == "disabled" and (host(term) | host(trunc)).any():
                ended = ids_np[host(term) | host(trunc)]
                rest = ids_np[~(host(term) | host(trunc))]
                env.async_reset(ended)
                if rest.size:
                    a = acts_for("cartpole", t, rest.size)
                    env.send(torch.from_numpy(a) if as_tensor else a, torch.from_numpy(rest) if as_tensor else rest)
                continue
            a = acts_for("cartpole", t, ids_np.size)
            env.send(torch.from_numpy(a) if as_tensor else a, ids if as_tensor else ids_np)
        return out

    with envhive.make("envhive/TorchCartPole-v1", 6, batch_size=3, autoreset=mode, device="cpu") as dev, \
         envhive.make("envhive/TorchCartPole-v1", 6, batch_size=3, autoreset=mode) as ref:
        got, want = drive(dev, True), drive(ref, False)
    assert_same_transcript(got, want)


# -- what a step reads back from the device ------------------------------------------------
_SYNCS = {"aten._local_scalar_dense.default", "aten.nonzero.default", "aten.masked_select.default",
          "aten.item.default", "aten._unique2.default", "aten.unique_consecutive.default"}


class Reads(TorchDispatchMode):
    """Records every op that makes the host wait for a device value (a scalar read, a
    data-dependent shape, a boolean-mask index) and every copy into ``watch``'s memory."""

    def __init__(self, watch):
        super().__init__()
        self.watch = watch.data_ptr()
        self.syncs: list[str] = []
        self.flag_copies = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if name in _SYNCS or (name == "aten.index.Tensor" and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or []))):
            self.syncs.append(name)
        if name.startswith("aten.copy_") and args[0].data_ptr() == self.watch:
            self.flag_copies += 1
        return func(*args, **(kwargs or {}))


@pytest.fixture
def host_reads(monkeypatch):
    """Counts Python-level reads of tensors into host memory (.cpu(), .numpy(), .tolist(),
    .item()) made while stepping."""
    calls: list[str] = []
    for name in ("cpu", "numpy", "tolist", "item"):
        original = getattr(torch.Tensor, name)

        def spy(self, *a, _original=original, _name=name, **k):
            calls.append(_name)
            return _original(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, spy)
    return calls


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("env_id", IDS)
def test_a_step_reads_back_only_the_flags(env_id, mode, host_reads):
    """Numpy actions: per step, one copy of the flags into the host and nothing else read
    back (autoresets included: their env ids come from the host, noise goes to the device)."""
    with envhive.make(env_id, 8, autoreset=mode, device="cpu", seed=0) as env:
        env.reset()
        for t in range(420):
            a = acts_for(env_id, t, 8)
            host_reads.clear()
            with Reads(torch.from_numpy(env.pool.buffers.host_flags)) as reads:
                obs, rew, term, trunc, info = env.step(a)
            assert reads.syncs == [], f"step {t}: {reads.syncs}"
            # One copy; none when every env was reset instead of stepped (their flags clear).
            stepped = bool((env.pool.buffers.ops != 1).any())
            assert reads.flag_copies == int(stepped), f"step {t}: {reads.flag_copies} flag copies"
            assert host_reads == [], f"step {t}: {host_reads}"
            if mode == "disabled":
                ended = env.pool.buffers.terminated | env.pool.buffers.truncated
                if ended.any():
                    env.reset(options={"reset_mask": ended.copy()})
        assert env.env_steps > 8 * 400  # episodes ended and restarted on the way


@pytest.mark.parametrize("env_id", IDS)
def test_tensor_actions_cost_one_bool(env_id, host_reads):
    with envhive.make(env_id, 8, device="cpu", seed=0) as env:
        env.reset()
        for t in range(50):
            a = torch.from_numpy(acts_for(env_id, t, 8))
            host_reads.clear()
            with Reads(torch.from_numpy(env.pool.buffers.host_flags)) as reads:
                env.step(a)
            assert reads.syncs == ["aten._local_scalar_dense.default"]  # the action check
            assert reads.flag_copies == 1 and host_reads == []


@pytest.mark.parametrize(("env_id", "bad", "fix"), [
    ("envhive/TorchCartPole-v1", lambda a: a.index_fill_(0, torch.tensor([3]), 2), "int"),
    ("envhive/TorchCartPole-v1", lambda a: a.index_fill_(0, torch.tensor([5]), -1), "int"),
    ("envhive/TorchPendulum-v1", lambda a: a.index_fill_(0, torch.tensor([3]), float("nan")), "float"),
    ("envhive/TorchPendulum-v1", lambda a: a.index_fill_(0, torch.tensor([6]), 2.5), "float"),
])
def test_bad_tensor_actions_name_the_env_and_step_nothing(env_id, bad, fix):
    with envhive.make(env_id, 8, device="cpu", seed=0) as env, envhive.make(env_id, 8, seed=0) as ref:
        env.reset(), ref.reset()
        a = torch.from_numpy(acts_for(env_id, 0, 8))
        wrong = bad(a.clone())
        k = int(torch.nonzero(wrong != a)[0, 0]) if fix == "int" else int(
            torch.nonzero(~(wrong == a).reshape(8, -1).all(1))[0, 0])
        with pytest.raises(envhive.ActionError, match=f"env {k}"):
            env.step(wrong)
        assert env.env_steps == 0
        assert_same_transcript([host(env.step(a))], [host(ref.step(a.numpy()))])  # the step after


def test_wrong_tensor_shape_or_dtype_is_the_general_error():
    with envhive.make("envhive/TorchCartPole-v1", 4, device="cpu", seed=0) as env:
        env.reset()
        with pytest.raises(envhive.ActionError, match="shape"):
            env.step(torch.zeros(3, dtype=torch.int64))
        with pytest.raises(envhive.ActionError):
            env.step(torch.full((4,), 0.5))  # floats for a Discrete space
        obs, rew, *_ = env.step(torch.zeros(4, dtype=torch.int32))
        assert rew.tolist() == [1.0] * 4


def test_an_env_device_other_than_the_front_ends_stays_on_the_host():
    """env_kwargs name the env's device: results then cross to the front end's device the
    usual way (here both are the CPU, but named apart: ``cpu`` vs a torch env on ``cpu``
    asked for numpy)."""
    with envhive.make("envhive/TorchCartPole-v1", 2, env_kwargs={"device": "cpu"}) as env:
        assert not env.pool.resident and env.call("device")[0] == torch.device("cpu")


def test_torchrl_front_end_on_resident_buffers_matches_batches_of_one():
    pytest.importorskip("torchrl")
    from torchrl.envs.utils import check_env_specs

    dev = envhive.make(TorchCartPole, 4, api="torchrl", seed=0)
    ref = envhive.make(TorchCartPole, 4, api="torchrl", seed=0, executor="serial")
    try:
        assert dev.pool.resident and not ref.pool.resident
        check_env_specs(dev)
        dev.set_seed(5)
        ref.set_seed(5)
        torch.manual_seed(0)
        a = dev.rollout(700, break_when_any_done=False)
        torch.manual_seed(0)
        b = ref.rollout(700, break_when_any_done=False)
    finally:
        dev.close()
        ref.close()
    assert (a["next", "done"]).any()
    for key in [("observation",), ("next", "observation"), ("next", "reward"), ("next", "done"),
                ("next", "terminated"), ("next", "truncated"), ("action",)]:
        assert torch.equal(a[key], b[key]), key


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no accelerator here")
def test_on_an_accelerator_results_stay_there():  # pragma: no cover - needs a GPU
    with envhive.make("envhive/TorchCartPole-v1", 64, device="cuda", seed=0) as env, \
         envhive.make("envhive/TorchCartPole-v1", 64, seed=0) as ref:
        assert env.pool.resident and env.call("device")[0].type == "cuda"
        obs, _ = env.reset()
        ref.reset()
        for t in range(600):
            a = acts_for("cartpole", t, 64)
            obs, rew, term, trunc, _ = env.step(torch.from_numpy(a).cuda() if t % 2 else a)
            robs, rrew, rterm, rtrunc, _ = ref.step(a)
            assert obs.device.type == rew.device.type == term.device.type == "cuda"
            np.testing.assert_allclose(obs.cpu().numpy(), robs, rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(term.cpu().numpy(), rterm)
