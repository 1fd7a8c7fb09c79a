"""CleanRL's ``ppo_atari_envpool.py``, in its smallest port to EnvPool 1.x (examples/cleanrl/),
runs unchanged with ``import envpool`` resolving to ``envhive.envpool``."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "examples" / "cleanrl" / "ppo_atari_envpool.py"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cleanrl_ppo_atari_runs_2k_steps_unchanged(tmp_path):
    pytest.importorskip("tyro")
    pytest.importorskip("torch.utils.tensorboard")
    pytest.importorskip("ale_py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run(
        [sys.executable, "-m", "envhive.envpool", str(SCRIPT), "--total-timesteps", "2048",
         "--num-envs", "8", "--num-steps", "128", "--no-cuda"],
        cwd=tmp_path, capture_output=True, text=True, timeout=850, env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("SPS:") == 2  # two iterations of 8 x 128 steps
    assert "global_step=" in out.stdout  # episodes ended (episodic_life: a life lost ends one)
    assert list((tmp_path / "runs").iterdir())  # its tensorboard log


def test_the_port_changes_only_what_envpool_1x_changed():
    """gym -> gymnasium, reset's (obs, info), step's 5-tuple, and dropping the assignments
    EnvPool 1.x refuses (num_envs and the single spaces are read-only properties there)."""
    text = SCRIPT.read_text()
    assert "import envpool\nimport gymnasium as gym\n" in text
    assert "envs = envpool.make(\n        args.env_id,\n        env_type=\"gym\"," in text
    assert "next_obs, reward, terminations, truncations, info = envs.step(" in text
