"""envhive's VectorEnv goes wherever gymnasium's vector envs go.

Third-party code reads attributes of gymnasium's vector envs (TorchRL's ``GymWrapper`` reads
``autoreset_mode``) and probes env constructors with optional keywords, retrying without them
on ``TypeError`` (TorchRL's ``GymEnv`` passes ``frameskip``). Both must work with envhive.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest

import envhive

MODES = {
    "next_step": gym.vector.AutoresetMode.NEXT_STEP,
    "same_step": gym.vector.AutoresetMode.SAME_STEP,
    "disabled": gym.vector.AutoresetMode.DISABLED,
}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_attributes_gymnasium_vector_envs_carry(mode):
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2, autoreset_mode=MODES[mode])
    with envhive.make("CartPole-v1", 2, autoreset=mode) as env:
        for name in ("autoreset_mode", "observation_mode", "num_envs", "render_mode",
                     "single_observation_space", "single_action_space", "observation_space",
                     "action_space"):
            assert getattr(env, name) == getattr(ref, name), name
        assert env.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"]
    ref.close()


def test_an_unknown_keyword_is_a_type_error_in_pythons_words():
    with pytest.raises(TypeError, match="unexpected keyword argument 'frameskip'") as info:
        gym.make("envhive/CartPole-v1", frameskip=4)
    assert isinstance(info.value, envhive.UnexpectedKeywordError)
    assert isinstance(info.value, envhive.ConfigError)
    with pytest.raises(TypeError, match="unexpected keyword argument 'frameskip'"):
        envhive.make("envhive/CartPole-v1", 2, env_kwargs={"frameskip": 4})


@pytest.mark.parametrize("mode", ["same_step", "disabled"])
def test_torchrl_gym_wrapper_takes_an_envhive_vector_env(mode):
    """TorchRL's GymWrapper over envhive's VectorEnv gives what it gives over gymnasium's
    (TorchRL refuses next_step for both, by design)."""
    pytest.importorskip("torchrl")
    import torch
    from torchrl.envs import GymWrapper

    def rollout(vec):
        env = GymWrapper(vec)
        env.set_seed(3)

        def policy(td):
            obs = td["observation"]
            action = torch.zeros(obs.shape[0], 2)
            action[torch.arange(obs.shape[0]), (obs[:, 2] > 0).long()] = 1  # lean-following
            return td.set("action", action)

        out = env.rollout(120, policy, break_when_any_done=False)
        env.close()
        return out

    ref = rollout(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3,
                                            autoreset_mode=MODES[mode]))
    got = rollout(envhive.make("CartPole-v1", 3, autoreset=mode))
    assert int(ref["next", "done"].sum()) > 0  # episodes did end in the run
    for key in ("observation", ("next", "observation"), ("next", "reward"), ("next", "done"),
                ("next", "terminated"), ("next", "truncated")):
        torch.testing.assert_close(got[key], ref[key], msg=str(key))


def test_torchrl_gym_env_builds_envhive_ids(tmp_path):
    """TorchRL's GymEnv(id, num_envs=n) probes the constructor with frameskip= and builds a
    gymnasium AsyncVectorEnv whose workers TorchRL spawns. A spawned worker knows envhive's
    ids because it re-imports the user's script, which imports envhive: run it as a script."""
    pytest.importorskip("torchrl")
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(
        """
        import envhive
        import numpy as np
        from torchrl.envs import GymEnv

        if __name__ == "__main__":
            env = GymEnv("envhive/CartPole-v1", num_envs=2)
            td = env.rollout(10, break_when_any_done=False)
            assert td.batch_size == (2, 10), td.batch_size
            assert np.isfinite(td["next", "observation"].numpy()).all()
            env.close()
            print("OK")
        """
    ))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]


WRAPPERS = {
    "RecordEpisodeStatistics": lambda e: gym.wrappers.vector.RecordEpisodeStatistics(e),
    "NormalizeObservation": lambda e: gym.wrappers.vector.NormalizeObservation(e),
    "NormalizeReward": lambda e: gym.wrappers.vector.NormalizeReward(e),
    "DictInfoToList": lambda e: gym.wrappers.vector.DictInfoToList(e),
    "ClipReward": lambda e: gym.wrappers.vector.ClipReward(e, -0.5, 0.5),
    "FlattenObservation": lambda e: gym.wrappers.vector.FlattenObservation(e),
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_gymnasium_vector_wrappers_work_as_on_sync_vector_env(wrapper, mode):
    """gymnasium's own vector wrappers over envhive give what they give over SyncVectorEnv, and
    refuse the same modes with the same error."""
    wrap = WRAPPERS[wrapper]
    base = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3, autoreset_mode=MODES[mode])
    env = envhive.make("CartPole-v1", 3, autoreset=mode)
    try:
        ref = wrap(base)
    except ValueError as err:  # the wrapper does not support this mode
        base.close()
        with pytest.raises(ValueError, match=re.escape(str(err).split(",")[0])):
            wrap(env)
        env.close()
        return
    env = wrap(env)
    np.testing.assert_array_equal(env.reset(seed=1)[0], ref.reset(seed=1)[0])
    disabled = mode == "disabled"
    length = np.zeros(3, int)
    for t in range(80):
        act = np.array([t % 2, 1, 0])
        got, want = env.step(act), ref.step(act)
        length += 1
        for x, y in zip(got[:4], want[:4]):
            np.testing.assert_allclose(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        ended = np.asarray(want[2]) | np.asarray(want[3])
        if wrapper == "RecordEpisodeStatistics":
            assert ("episode" in got[4]) == ("episode" in want[4])
            if "episode" in got[4]:
                # The true lengths. (Over SyncVectorEnv a partial reset zeroes every env's
                # statistics: SyncVectorEnv pops "reset_mask" from the caller's options before
                # the wrapper reads them. envhive leaves the caller's options alone.)
                np.testing.assert_array_equal(got[4]["episode"]["l"][ended], length[ended])
                if not disabled:
                    np.testing.assert_array_equal(got[4]["episode"]["l"], want[4]["episode"]["l"])
        if disabled and ended.any():
            env.reset(options={"reset_mask": ended})
            ref.reset(options={"reset_mask": ended})
        if ended.any():
            # next_step: the step after the end is the reset (no step of the new episode).
            length[ended] = -1 if mode == "next_step" else 0
    env.close()
    ref.close()
