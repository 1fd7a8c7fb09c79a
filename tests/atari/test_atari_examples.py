"""The Atari examples run end to end and print what they promise."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.timeout(900)


def run(name: str, *args: str, cwd: pathlib.Path) -> str:
    out = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                         text=True, timeout=600, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_frames_example_writes_a_strip_of_a_seeded_episode(tmp_path):
    text = run("atari_frames.py", "--out", "strip.png", "--max-steps", "300", cwd=tmp_path)
    assert "envhive/Pong-v5 seed 0: episode of 300 steps" in text
    import cv2

    strip = cv2.imread(str(tmp_path / "strip.png"))
    assert strip.shape[0] == 210 * 2 + 4 and strip.shape[1] % 160 == 0
    again = run("atari_frames.py", "--out", "again.png", "--max-steps", "300", cwd=tmp_path)
    assert again.splitlines()[0] == text.splitlines()[0]
    assert (cv2.imread(str(tmp_path / "again.png")) == strip).all()  # seeded: the same strip


def test_ppo_example_runs_end_to_end(tmp_path):
    pytest.importorskip("torch")
    text = run("atari_ppo.py", "--total-steps", "512", "--num-steps", "32", "--num-envs", "4",
               cwd=tmp_path)
    assert "native" in text and "done: mean return" in text
