"""The whole screen on every path, and memory checked before anything is reserved.

* 13 ROMs have screens taller than 210 lines (AirRaid and eight others 250, Pooyan 220, ...):
  their frames are the INTER_AREA resize of the whole screen on every executor, identical
  across them; ``envpool_crop=True`` gives EnvPool's frames (the top 210 lines) instead, again
  on every executor.
* A pool that cannot fit (huge frames, a huge stack) is a ``ResourceError`` at ``make()`` on
  every executor, before a game is built or a buffer reserved.
* A sample of every ROM on every executor (``tools/atari_roms.py`` runs them all).
"""

from __future__ import annotations

import errno

import numpy as np
import pytest

ale_py = pytest.importorskip("ale_py")
cv2 = pytest.importorskip("cv2")

import envhive  # noqa: E402
import envhive._memory as memory  # noqa: E402
from envhive.envs.atari import AtariEnv, rom_ids  # noqa: E402
from envhive.envs.atari._ale import rom_facts  # noqa: E402
from envhive.testing import assert_same_transcript, transcript  # noqa: E402

pytestmark = pytest.mark.timeout(300)

TALL = {"air_raid": 250, "pooyan": 220, "carnival": 214, "journey_escape": 230}


@pytest.mark.parametrize("rom, rows", sorted(TALL.items()))
def test_the_screen_of_a_tall_rom_is_known(rom, rows):
    assert rom_facts(rom).screen == (rows, 160)


@pytest.mark.parametrize("crop", [False, True])
@pytest.mark.parametrize("gray", [True, False])
def test_frames_are_the_resize_of_the_whole_screen_or_envpools_crop(crop, gray):
    env = AtariEnv("air_raid", noop_max=0, stack_num=1, use_fire_reset=False, envpool_crop=crop,
                   gray_scale=gray)
    obs, _ = env.reset(seed=0)
    screen = env.ale.getScreenGrayscale() if gray else env.ale.getScreenRGB()
    assert screen.shape[0] == 250 and not (screen[210:] == 0).all()  # game pixels down there
    want = cv2.resize(screen[:210] if crop else screen, (84, 84), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(obs if gray else obs.transpose(1, 2, 0), want.reshape(obs.shape) if gray
                                  else want)
    env.close()


@pytest.mark.parametrize("game, kwargs", [
    ("AirRaid", {}), ("Pooyan", {}), ("Carnival", {"gray_scale": False, "stack_num": 2}),
    ("AirRaid", {"envpool_crop": True}), ("JourneyEscape", {"img_height": 230, "img_width": 160}),
])
def test_tall_roms_give_the_same_frames_on_every_executor(game, kwargs):
    runs = []
    for executor in ("serial", "process", "native"):
        env = envhive.make(f"envhive/{game}-v5", num_envs=2, executor=executor, env_kwargs=kwargs,
                           max_episode_steps=15, autoreset="same_step")
        if executor == "native":
            assert env.executor == "native"
        runs.append(transcript(env, 20, lambda t: np.array([t % 3, (t + 1) % 3]), seed=[3, 4]))
        env.close()
    for other in runs[1:]:
        assert_same_transcript(runs[0], other)


def test_envpools_crop_differs_from_the_whole_screen_only_on_tall_roms():
    for rom, differs in (("air_raid", True), ("pong", False)):
        frames = [AtariEnv(rom, noop_max=0, envpool_crop=crop).reset(seed=1)[0] for crop in (False, True)]
        assert (not np.array_equal(*frames)) is differs


@pytest.mark.parametrize("kwargs", [{"img_height": 100_000, "img_width": 100_000}, {"stack_num": 10**7}])
@pytest.mark.parametrize("executor", ["serial", "thread", "process", "native", "auto"])
def test_a_pool_that_cannot_fit_is_a_resource_error_at_make(kwargs, executor):
    with pytest.raises(envhive.ResourceError) as info:
        envhive.make("envhive/Pong-v5", num_envs=2, env_kwargs=kwargs, executor=executor)
    assert info.value.errno == errno.ENOMEM
    assert "envhive/Pong-v5 x 2 (" in str(info.value) and "per env" in str(info.value)


@pytest.mark.parametrize("executor", ["serial", "native"])
def test_the_check_counts_every_env(monkeypatch, executor):
    """A pool of ordinary games refused for its size alone (the memory available faked):
    nothing is built (no game, no ale_py import needed for the estimate)."""
    monkeypatch.setattr(memory, "available_bytes", lambda: 100_000_000)
    with pytest.raises(envhive.ResourceError, match="x 1,000 "):
        envhive.make("envhive/Pong-v5", num_envs=1000, executor=executor)
    envhive.make("envhive/Pong-v5", num_envs=2, executor=executor).close()  # what fits is made


SAMPLE = ["envhive/AirRaid-v5", "envhive/Pooyan-v5", "envhive/MontezumaRevenge-v5", "envhive/Tetris-v5"]


@pytest.mark.parametrize("env_id", SAMPLE)
def test_a_sample_of_roms_gives_the_same_frames_on_every_executor(env_id):
    """``tools/atari_roms.py`` runs every ROM this way (its table is in docs/atari.md)."""
    from tools.atari_roms import run_id

    row = run_id(env_id, ["serial", "thread", "process", "native"], steps=4)
    assert row["status"] == {"serial": "ok", "thread": "same", "process": "same", "native": "same"}, row


def test_the_sample_is_of_shipped_roms():
    ids = {f"envhive/{''.join(p.capitalize() for p in r.split('_'))}-v5" for r in rom_ids()}
    assert set(SAMPLE) <= ids


def test_envhive_check_runs_a_tall_rom_on_every_executor(capsys):
    """``envhive check envhive/Pooyan-v5`` (220 lines): every executor identical to serial,
    the native engine included, exit status 0."""
    from envhive._cli import main

    assert main(["check", "envhive/Pooyan-v5", "--steps", "8", "--num-envs", "2"]) == 0
    out = capsys.readouterr().out
    assert "native     identical to serial" in out and "DIFFERS" not in out


def test_envhive_check_names_why_the_engine_does_not_run(capsys):
    from envhive._cli import main

    with pytest.MonkeyPatch.context() as mp:
        from envhive.envs.atari import _ale

        mp.setattr(_ale, "binding_problem", lambda: "ale-py 9.9 is not one of the versions")
        assert main(["check", "envhive/Pong-v5", "--steps", "4", "--num-envs", "2"]) == 0
    out = capsys.readouterr().out
    assert "native     not run: the threaded Atari engine cannot run it: ale-py 9.9" in out
    assert "auto executor (2 envs): process" in out
