"""The ``envhive`` command: list, check and bench (tiny runs; the figures are not checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envhive._cli import main


def test_list_filters_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--grep", "envhive/cartpole"]) == 0
    assert capsys.readouterr().out.split() == ["envhive/CartPole-v1"]


def test_check_compares_every_executor_with_serial(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "envhive/CartPole-v1", "--num-envs", "2", "--steps", "30"]) == 0
    out = capsys.readouterr().out
    for mode in ("next_step", "same_step", "disabled"):
        assert f"{mode:<10} native     identical to serial" in out
        assert f"{mode:<10} process    identical to serial" in out


def test_check_includes_native_for_compiled_mujoco_ids(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mujoco")
    assert main(["check", "envhive/HalfCheetah-v5", "--num-envs", "2", "--steps", "20"]) == 0
    assert "native     identical to serial" in capsys.readouterr().out


def test_bench_writes_json_with_the_peer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    argv = ["bench", "--env", "CartPole-v1", "envhive/CartPole-v1", "--num-envs", "2",
            "--executor", "serial", "--seconds", "0.05", "--json", str(out)]
    assert main(argv) == 0
    rows = json.loads(out.read_text())["results"]
    runners = {(r["env"], r["runner"]) for r in rows}
    assert ("CartPole-v1", "gymnasium SyncVectorEnv") in runners
    assert ("CartPole-v1", "gymnasium vector_entry_point") in runners  # the kernel's peer
    assert all(r["steps_per_s"] > 0 for r in rows)


def test_bench_of_a_compiled_mujoco_id_uses_native_and_gymnasiums_env(tmp_path: Path) -> None:
    pytest.importorskip("mujoco")
    out = tmp_path / "bench.json"
    assert main(["bench", "--env", "envhive/Swimmer-v5", "--num-envs", "2", "--seconds", "0.05",
                 "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(r["env"], r["runner"]) for r in rows] == [
        ("envhive/Swimmer-v5", "envhive native"),
        ("Swimmer-v5", "gymnasium SyncVectorEnv"),
    ]
