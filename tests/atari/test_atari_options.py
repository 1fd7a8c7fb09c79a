"""Atari ids and options: every ale-py ROM is an id; EnvPool's option names and defaults, ale-py's
aliases; spaces and action sets equal to EnvPool's; bad options are ConfigErrors naming them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import envhive
from envhive.envs.atari import AtariOptions, game_name, rom_ids
from envhive.envs.atari._options import NO_SINGLE_PLAYER
from envhive.errors import ConfigError, UnexpectedKeywordError

ale_py = pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from envhive.envs.atari import AtariEnv  # noqa: E402


def test_every_rom_ale_runs_is_an_id_and_listed():
    """Every ROM ale-py ships but the four ALE has no single-player version of (ale-py
    registers no env for them either; ALE's loadROM ends the process on them)."""
    roms = ale_py.roms.get_all_rom_ids()
    ids = set(envhive.list_envs())
    assert len(roms) > 100
    assert set(NO_SINGLE_PLAYER) <= set(roms)
    assert rom_ids() == sorted(set(roms) - set(NO_SINGLE_PLAYER))
    assert {f"envhive/{game_name(r)}-v5" for r in rom_ids()} <= ids
    assert not {f"envhive/{game_name(r)}-v5" for r in NO_SINGLE_PLAYER} & ids
    assert "envhive/MsPacman-v5" in ids and "envhive/Pong-v5" in ids


@pytest.mark.parametrize("game", NO_SINGLE_PLAYER)
def test_roms_with_no_single_player_game_are_refused_not_fatal(game):
    with pytest.raises(ConfigError, match="no single-player"):
        AtariEnv(game)
    with pytest.raises(envhive.UnknownEnvError):
        envhive.make(f"envhive/{game_name(game)}-v5")


def test_importing_envhive_does_not_import_ale_py():
    code = "import sys, envhive; envhive.list_envs(); print('ale_py' in sys.modules, 'cv2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_defaults_are_envpool_v5():
    o = AtariOptions.parse("pong", {})
    assert (o.img_height, o.img_width, o.gray_scale, o.stack_num, o.frame_skip, o.noop_max) == (84, 84, True, 4, 4, 30)
    assert (o.episodic_life, o.zero_discount_on_life_loss, o.reward_clip) == (False, False, False)
    assert (o.repeat_action_probability, o.use_fire_reset, o.full_action_space) == (0.0, True, False)
    assert (o.max_episode_steps, o.use_inter_area_resize, o.mode, o.difficulty) == (27000, True, -1, -1)


def test_ale_py_aliases():
    o = AtariOptions.parse("pong", {"grayscale": False, "frameskip": 2, "reward_clipping": True,
                                    "max_num_frames_per_episode": 1000})
    assert (o.gray_scale, o.frame_skip, o.reward_clip, o.max_episode_steps) == (False, 2, True, 500)
    with pytest.raises(ConfigError, match="given twice"):
        AtariOptions.parse("pong", {"grayscale": False, "gray_scale": True})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stack": 4}, "stack"),
        ({"frame_skip": 0}, "frame_skip"),
        ({"gray_scale": 1}, "gray_scale"),
        ({"repeat_action_probability": 2.0}, "repeat_action_probability"),
        ({"reset_order": "sideways"}, "reset_order"),
        ({"img_height": 8.5}, "img_height"),
        ({"noop_max": 2**33}, r"noop_max: expected an int in 0\.\.2147483647, got 8589934592"),
        ({"noop_max": -1}, "noop_max"),
        ({"mode": 99}, r"mode: expected one of the ROM's modes \[0, 1\] \(or -1: its default\), got 99"),
        ({"difficulty": 99}, r"difficulty: expected one of the ROM's difficulties \[0, 1, 2, 3\]"),
        ({"mode": -2}, "mode"),
        ({"envpool_crop": 1}, "envpool_crop"),
        ({"ram_info": "yes"}, r"ram_info: expected a bool"),
    ],
)
@pytest.mark.parametrize("executor", ["serial", "process", "native", "auto"])
def test_bad_options_are_config_errors_naming_them(kwargs, match, executor):
    """At make(), in the caller, on every executor: nothing is built."""
    with pytest.raises(ConfigError, match=match):
        envhive.make("envhive/Pong-v5", num_envs=2, env_kwargs=kwargs, executor=executor)


def test_a_mode_the_rom_has_not_is_refused_by_the_env_itself_too():
    with pytest.raises(ConfigError, match="modes"):
        AtariEnv("pong", mode=7)


def test_unknown_keyword_suggests_the_envpool_name():
    with pytest.raises(UnexpectedKeywordError, match="gray_scale"):
        AtariOptions.parse("pong", {"grey_scale": True})
    with pytest.raises(ConfigError, match="Pongg"):
        AtariEnv("Pongg")


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"gray_scale": False, "stack_num": 2}, {"img_height": 64, "img_width": 48, "full_action_space": True},
     {"mode": 1, "difficulty": 1}],
)
@pytest.mark.parametrize("game", ["Pong", "Breakout", "MsPacman"])
def test_spaces_and_action_set_equal_envpool(game, kwargs):
    envpool = pytest.importorskip("envpool")
    if "mode" in kwargs and game != "Pong":
        pytest.skip("modes differ per game")
    ref = envpool.make(f"{game}-v5", env_type="gymnasium", num_envs=1, **kwargs)
    env = envhive.make(f"envhive/{game}-v5", num_envs=1, env_kwargs=kwargs, executor="serial")
    assert env.single_observation_space == ref.observation_space
    assert env.single_action_space == ref.action_space
    obs, info = env.reset(seed=0)
    robs, rinfo = ref.reset()
    assert obs.shape[1:] == robs.shape[1:] and obs.dtype == robs.dtype
    for key in ("lives", "reward", "terminated", "elapsed_step"):
        assert info[key].dtype == rinfo[key].dtype, key
    # The same actions: the minimal (or full) set, in ALE's order.
    assert env.call("_actions")[0] == list(
        ale_py.ALEInterface.getLegalActionSet(env.call("ale")[0]) if kwargs.get("full_action_space")
        else env.call("ale")[0].getMinimalActionSet())
    env.close()
    ref.close()


def test_rgb_frames_are_channels_first_like_envpool():
    env = AtariEnv("pong", gray_scale=False, stack_num=2, noop_max=0, render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (6, 84, 84)
    screen = env.render()
    assert screen.shape == (210, 160, 3)
    import cv2

    expect = cv2.resize(screen, (84, 84), interpolation=cv2.INTER_AREA).transpose(2, 0, 1)
    np.testing.assert_array_equal(obs[3:], expect)


def test_step_before_reset_and_bad_actions_raise():
    env = AtariEnv("pong")
    with pytest.raises(envhive.errors.ResetNeededError):
        env.step(0)
    env.reset(seed=0)
    for bad in (6, -1, 1.5, "x"):
        with pytest.raises(envhive.ActionError):
            env.step(bad)
