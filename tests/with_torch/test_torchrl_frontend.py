"""make(api="torchrl"): a TorchRL EnvBase over any pool, with clean data and exact counts.

Checked against TorchRL itself: its spec checker, its GymWrapper over gymnasium's own
SyncVectorEnv (same seeds, same policy, same tensors), its StepCounter, its Collector and
ReplayBuffer. The data contract: no stored transition pairs one episode's observation with
the next episode's, on every executor; an ended episode costs no second round trip.
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchrl")

from torchrl.collectors import Collector  # noqa: E402
from torchrl.data import LazyTensorStorage, ReplayBuffer  # noqa: E402
from torchrl.envs import GymWrapper, StepCounter, TransformedEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import envhive  # noqa: E402
from envhive.executors import ProcessExecutor, available_executors  # noqa: E402
from envhive.testing import SPACE_ZOO, CountingEnv, ZooEnv  # noqa: E402

pytestmark = pytest.mark.timeout(300)

EXECUTORS = [*available_executors(), "process-parent-slice"]


def executor(name):
    return ProcessExecutor(2, parent_slice=True) if name == "process-parent-slice" else name


def counting(n, lengths=(3, 5, 4)):
    # Episodes of different lengths per env, so that envs end at different steps.
    return [functools.partial(CountingEnv, pattern=[(lengths[i % len(lengths)], "term"), (2, "trunc")],
                              tag=i, with_info=False) for i in range(n)]


@pytest.mark.parametrize(("obs", "act"), [
    ("box", "multidiscrete"), ("discrete", "dict"), ("dict", "multidiscrete"),
    ("tuple", "dict"), ("multibinary", "multidiscrete"), ("image", "multidiscrete"),
])
def test_check_env_specs_passes(obs, act):
    fn = lambda: ZooEnv(SPACE_ZOO[obs], SPACE_ZOO[act], max_len=3)  # noqa: E731
    env = envhive.make(fn, 3, api="torchrl", seed=0)
    check_env_specs(env)
    env.rollout(10, break_when_any_done=False)
    env.close()


def test_check_env_specs_for_gymnasium_ids():
    for env_id in ("CartPole-v1", "Pendulum-v1", "envhive/CartPole-v1"):
        env = envhive.make(env_id, 4, api="torchrl", seed=0)
        check_env_specs(env)
        env.close()


def lean_policy(td):
    obs = td["observation"]
    return td.set("action", (obs[..., 2] > 0).long())


@pytest.mark.parametrize("name", EXECUTORS)
def test_rollouts_equal_torchrls_gym_wrapper_over_gymnasium(name):
    """TorchRL's GymWrapper over SyncVectorEnv(same_step) is TorchRL's own reading of the same
    data (terminal obs from final_obs); envhive must give the same tensors."""
    ref_env = GymWrapper(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3,
                                                  autoreset_mode=gym.vector.AutoresetMode.SAME_STEP),
                         categorical_action_encoding=True)
    ref_env.set_seed(11)
    ref = ref_env.rollout(150, lean_policy, break_when_any_done=False)
    ref_env.close()
    env = envhive.make("CartPole-v1", 3, api="torchrl", executor=executor(name))
    env.set_seed(11)
    got = env.rollout(150, lean_policy, break_when_any_done=False)
    env.close()
    assert int(ref["next", "done"].sum()) >= 3  # episodes ended inside the run
    for key in ("observation", "action", ("next", "observation"), ("next", "done"),
                ("next", "terminated"), ("next", "truncated")):
        torch.testing.assert_close(got[key], ref[key], msg=str(key))
    torch.testing.assert_close(got["next", "reward"], ref["next", "reward"].to(torch.float32))


@pytest.mark.parametrize("name", EXECUTORS)
def test_no_stored_transition_crosses_an_episode_boundary(name):
    """Collector + ReplayBuffer: every stored (obs, next obs) pair is one step of one episode,
    and StepCounter counts exactly what the envs count. CountingEnv's obs is [tag, episode,
    step, last_action]."""
    env = TransformedEnv(envhive.make(counting(4), api="torchrl", executor=executor(name)), StepCounter())
    policy = lambda td: td.set("action", torch.ones(td.batch_size, dtype=torch.int64))  # noqa: E731
    collector = Collector(env, policy, frames_per_batch=40, total_frames=400)
    buffer = ReplayBuffer(storage=LazyTensorStorage(1000))
    for batch in collector:
        buffer.extend(batch.reshape(-1))
    collector.shutdown()
    data = buffer[:]
    assert len(data) == 400
    obs, nxt = data["observation"], data["next", "observation"]
    assert torch.equal(obs[:, 0], nxt[:, 0])  # same env
    assert torch.equal(obs[:, 1], nxt[:, 1]), "a transition crosses an episode boundary"
    assert torch.equal(nxt[:, 2], obs[:, 2] + 1)  # one step
    assert torch.equal(data["next", "step_count"].squeeze(-1), nxt[:, 2])  # counted exactly
    done = data["next", "done"].squeeze(-1)
    assert done.sum() > 20
    ended_term = data["next", "terminated"].squeeze(-1)
    assert torch.equal(done, ended_term | data["next", "truncated"].squeeze(-1))


def test_an_ended_episode_costs_no_second_round_trip():
    """step_and_maybe_reset: the reset TorchRL asks for after an episode end is served from
    the same_step round trip; the envs' reset() is called once per episode, not twice."""
    class Counted(CountingEnv):
        resets = 0

        def reset(self, *, seed=None, options=None):
            Counted.resets += 1
            return super().reset(seed=seed, options=options)

    env = envhive.make(lambda: Counted(pattern=[(3, "term")], tag=0, with_info=False), 2,
                       api="torchrl", executor="serial")
    td = env.reset()
    for _ in range(9):
        td = td.set("action", torch.ones(2, dtype=torch.int64))
        out, td = env.step_and_maybe_reset(td)
    assert Counted.resets == 2 + 2 * 3  # the first reset, then one per ended episode (3 each)
    assert td["observation"][:, 2].tolist() == [0, 0]  # the root holds the reset obs
    assert out["next", "observation"][:, 2].tolist() == [3, 3]  # "next": the terminal obs
    env.close()


def test_a_reset_of_a_running_env_is_a_real_reset():
    env = envhive.make(counting(3, lengths=(50,)), api="torchrl", executor="serial")
    td = env.reset()
    for _ in range(4):
        td = td.set("action", torch.ones(3, dtype=torch.int64))
        _, td = env.step_and_maybe_reset(td)
    assert td["observation"][:, 2].tolist() == [4, 4, 4]
    reset = env.reset(td.set("_reset", torch.tensor([[False], [True], [False]])))
    assert reset["observation"][:, 1:3].tolist() == [[0, 4], [1, 0], [0, 4]]
    env.close()


def test_set_seed_is_reproducible_and_seeds_as_make_seed_does():
    """set_seed(s) resets every env now with s + i (as TorchRL's GymWrapper seeds gymnasium's
    vector envs): the same as make(seed=s) followed by a first reset."""
    def run(env):
        out = env.rollout(60, lean_policy, break_when_any_done=False)
        env.close()
        return out

    a = envhive.make("CartPole-v1", 3, api="torchrl")
    a.set_seed(5)
    b = envhive.make("CartPole-v1", 3, api="torchrl")
    b.set_seed(5)
    c = envhive.make("CartPole-v1", 3, api="torchrl", seed=5)
    c.reset()
    ra, rb, rc = run(a), run(b), run(c)
    torch.testing.assert_close(ra["observation"], rb["observation"])
    torch.testing.assert_close(ra["observation"], rc["observation"])


def test_a_non_picklable_env_runs_in_process_workers():
    pytest.importorskip("dmlab2d")
    from tests.process.lab2d_env import Lab2dEnv

    env = envhive.make(lambda: Lab2dEnv("commons_harvest"), 2, api="torchrl",
                       executor=ProcessExecutor(2), max_episode_steps=5)
    check_env_specs(env)
    td = env.rollout(12, break_when_any_done=False)
    assert td["next", "observation"].shape == (2, 12, 208, 224, 3)
    assert td["next", "truncated"].sum() >= 4  # crossed episode ends
    env.close()


def test_misuse_is_a_clear_error():
    with pytest.raises(envhive.ConfigError, match="manages resets itself"):
        envhive.make("CartPole-v1", 2, api="torchrl", autoreset="next_step")
    with pytest.raises(envhive.ConfigError, match="copy=False"):
        envhive.make("CartPole-v1", 2, api="torchrl", copy=False)
    with pytest.raises(envhive.ConfigError, match="Text space has no tensor form"):
        envhive.make(lambda: ZooEnv(SPACE_ZOO["text"], SPACE_ZOO["multidiscrete"]), 2, api="torchrl")
    assert np.asarray(True)  # numpy imported for the module's other uses


def test_without_torchrl_the_error_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torchrl", None)  # import torchrl now raises ImportError
    with pytest.raises(envhive.ConfigError, match=r"pip install 'envhive\[torchrl\]'"):
        envhive.make("CartPole-v1", 2, api="torchrl")


def accelerators():
    found = ["cuda"] if torch.cuda.is_available() else []
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        found.append("mps")
    return found or [pytest.param("cuda", marks=pytest.mark.skip(reason="no accelerator here"))]


@pytest.mark.parametrize("device", accelerators())
def test_an_accelerator_env_gives_the_cpu_envs_data(device):
    """Written device-agnostic; runs wherever torch sees an accelerator."""
    def run(dev):
        env = envhive.make("CartPole-v1", 4, api="torchrl", device=dev, seed=0)
        out = env.rollout(80, lambda td: td.set("action", (td["observation"][..., 2] > 0).long()),
                          break_when_any_done=False)
        env.close()
        return out

    cpu, dev = run("cpu"), run(device)
    assert dev.device.type == device
    for key in ("observation", ("next", "observation"), ("next", "done"), ("next", "reward")):
        torch.testing.assert_close(dev[key].cpu(), cpu[key], msg=str(key))
