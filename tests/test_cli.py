"""The ``envhive`` command: list, check and bench (tiny runs; the figures are not checked)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

import envhive
from envhive import _bench, _cli_bench
from envhive._cli import main

TINY = ["--num-envs", "1", "2", "--executor", "serial", "--seconds", "0.02", "--spans", "2"]


# ------------------------------------------------------------------------------------ list


def test_list_filters_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--grep", "envhive/cartpole"]) == 0
    assert capsys.readouterr().out.split() == ["envhive/CartPole-v1"]


def test_list_marks_ids_that_cannot_be_built_here(capsys: pytest.CaptureFixture[str]) -> None:
    from envhive._registry import _ENVHIVE

    envhive.register("envhive-test/Missing-v0", "no_such_module_for_envhive:Env")
    try:
        assert main(["list", "--grep", "envhive-test/missing"]) == 0
        out, err = capsys.readouterr()
        assert "envhive-test/Missing-v0  (cannot be built here: needs no_such_module_for_envhive)" in out
        assert "1 of 1 ids cannot be built here" in err
        assert main(["list", "--grep", "envhive-test/missing", "--available"]) == 0
        assert capsys.readouterr().out == ""
    finally:
        _ENVHIVE.pop("envhive-test/Missing-v0")
    # gymnasium's mujoco-py ids are placeholders that only raise: found without building.
    assert main(["list", "--grep", "Ant-v2"]) == 0
    assert "Ant-v2  (cannot be built here: needs mujoco-py" in capsys.readouterr().out
    assert main(["list", "--grep", "CartPole-v1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "CartPole-v1" in lines and "envhive/CartPole-v1" in lines  # buildable: no mark


def _no_broken_pipe(stderr: str) -> None:
    assert "BrokenPipeError" not in stderr and "Traceback" not in stderr, stderr


def test_list_into_a_reader_that_stops_early() -> None:
    """``envhive list | head``: the reader goes away, envhive stops without a traceback."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    reader = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"],
                              stdin=subprocess.PIPE)
    assert reader.stdin is not None
    done = subprocess.run([sys.executable, "-m", "envhive", "list"], stdout=reader.stdin,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    reader.stdin.close()
    reader.wait(timeout=30)
    _no_broken_pipe(done.stderr)
    # And with the reader gone before the first write (the pipe surely breaks).
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "envhive", "list"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    finally:
        os.close(write_end)
    _no_broken_pipe(done.stderr)
    assert done.returncode == 1


# --------------------------------------------------------------------- version and errors


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"envhive {envhive.__version__}"


def test_a_user_error_prints_its_message_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--env", "CartPol-v1", "--seconds", "0.01"]) == 2
    out, err = capsys.readouterr()
    assert "envhive bench: error: Unknown environment id 'CartPol-v1'" in err
    assert "Did you mean" in err and "Traceback" not in err + out


def test_other_exceptions_keep_their_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    import envhive._cli as cli

    def boom(args: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli, "_cmd_list", boom)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["list"])


# ------------------------------------------------------------------------------- check


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


# A failing env on ``envhive check ENV_ID``: one FAIL line with the reason, exit status 1, no
# traceback, whatever fails (issue 41, finding 6).
BROKEN_IDS = {
    "envhive-test/RaisesInInit-v0": "tests.cli_envs:RaisesInInit",
    "envhive-test/RaisesInReset-v0": "tests.cli_envs:RaisesInReset",
    "envhive-test/RaisesInStep-v0": "tests.cli_envs:RaisesInStep",
    "envhive-test/NotImportable-v0": "no_such_module_for_envhive:Env",
    "envhive-test/RaisesInWorkers-v0": "tests.cli_envs:RaisesInWorkers",
}


@pytest.fixture
def broken_ids() -> Iterator[None]:
    from envhive._registry import _ENVHIVE

    for env_id, entry in BROKEN_IDS.items():
        envhive.register(env_id, entry)
    # gymnasium's registry too: its entry points are imported where the env is built.
    gym.register("EnvhiveTest/GymNotImportable-v0", entry_point="no_such_module_for_envhive:Env")
    try:
        yield
    finally:
        for env_id in BROKEN_IDS:
            _ENVHIVE.pop(env_id)
        gym.registry.pop("EnvhiveTest/GymNotImportable-v0")


def _one_failure(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``envhive check`` on a failing env: exit status 1, no traceback, one FAIL line
    (returned)."""
    assert main(["check", *argv, "--num-envs", "2", "--steps", "6"]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "error:" not in err, out + err
    failed = [line for line in out.splitlines() if "FAIL" in line]
    assert len(failed) == 1, out
    return failed[0]


@pytest.mark.parametrize("env_id, reason", [
    ("CartPole-v9", "FAIL  CartPole-v9: UnknownEnvError: Unknown environment id 'CartPole-v9'"),
    ("envhive-test/RaisesInInit-v0",
     "serial     FAIL: env 0: the env factory raised ValueError: no such level: 'maze-9'"),
    ("envhive-test/RaisesInReset-v0", "serial     FAIL: env 0: reset() raised RuntimeError: the reset exploded"),
    ("envhive-test/RaisesInStep-v0", "serial     FAIL: env 0: step() raised RuntimeError: the step exploded"),
    ("envhive-test/NotImportable-v0",
     "FAIL  envhive-test/NotImportable-v0: ModuleNotFoundError: No module named 'no_such_module_for_envhive'"),
    ("EnvhiveTest/GymNotImportable-v0", "serial     FAIL: env 0: the env factory raised "
     "ModuleNotFoundError: No module named 'no_such_module_for_envhive'"),
])
def test_check_of_a_failing_id_is_one_line(capsys: pytest.CaptureFixture[str], broken_ids: None,
                                           env_id: str, reason: str) -> None:
    assert reason in _one_failure(capsys, [env_id])


def test_check_goes_on_past_an_executor_that_fails(capsys: pytest.CaptureFixture[str],
                                                   broken_ids: None) -> None:
    """An env that fails only in worker processes: the process line fails in each mode, the
    others are compared, the exit status is 1, and still no traceback."""
    assert main(["check", "envhive-test/RaisesInWorkers-v0", "--num-envs", "2", "--steps", "6"]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    for mode in ("next_step", "same_step", "disabled"):
        assert f"{mode:<10} serial     ok" in out
        assert f"{mode:<10} thread     identical to serial" in out
        assert f"{mode:<10} process    FAIL: env 0: step() raised OSError: no display in a worker" in out
    assert "auto executor (2 envs): " in out


def test_check_of_a_factory_that_does_not_import_has_no_traceback(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert "ModuleNotFoundError: No module named 'no_such_module_for_envhive'" in _one_failure(
        capsys, ["no_such_module_for_envhive:make_env"])


CHECKS = ["import", "picklable", "builds", "spaces", "reset API", "step API", "seeded reset",
          "worker process", "seeded pools", "time per step"]


def _lines(out: str) -> dict[str, str]:
    """check name -> its status, from the report's lines."""
    found = {}
    for line in out.splitlines():
        parts = line.split(maxsplit=1)
        if len(parts) == 2 and parts[0] in ("ok", "FAIL", "skip"):
            name = next((c for c in CHECKS if parts[1].startswith(c + " ")), None)
            if name:
                found[name] = parts[0]
    return found


def test_check_a_good_factory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "envhive.testing.factories:cartpole", "--steps", "30"]) == 0
    out = capsys.readouterr().out
    assert _lines(out) == dict.fromkeys(CHECKS, "ok"), out
    assert "all checks passed" in out and "us per step" in out


def test_check_an_unpicklable_factory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "envhive.testing.factories:unpicklable", "--steps", "30"]) == 1
    out = capsys.readouterr().out
    status = _lines(out)
    assert status["picklable"] == "FAIL" and status["worker process"] == "FAIL", out
    assert status["builds"] == status["seeded pools"] == "ok"
    assert "FAIL  picklable        cloudpickle cannot serialize it (TypeError: cannot pickle '_thread.lock' object)" in out


def test_check_an_env_that_ignores_the_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "envhive.testing.factories:unseeded", "--steps", "30"]) == 1
    out = capsys.readouterr().out
    status = _lines(out)
    assert status["seeded reset"] == status["seeded pools"] == "FAIL", out
    assert status["worker process"] == status["picklable"] == "ok"
    assert "two reset(seed=123) gave different observations: the env ignores the seed" in out


def test_check_an_old_api_env_skips_what_depends_on_the_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "envhive.testing.factories:old_api", "--steps", "10"]) == 1
    out = capsys.readouterr().out
    assert _lines(out)["step API"] == "FAIL" and "old 4-tuple API" in out
    assert _lines(out)["worker process"] == "skip"


def test_check_a_factory_that_does_not_import(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "no_such_module_for_envhive:make_env"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  import           ModuleNotFoundError: No module named 'no_such_module_for_envhive'" in out


# ------------------------------------------------------------------------------- bench


def test_measurement_starts_its_clock_after_build_reset_and_warm_up() -> None:
    log: list[str] = []

    class Env:
        action_space = envhive.make("CartPole-v1", 2).action_space

        def __init__(self) -> None:
            log.append("build")

        def reset(self, seed: int | None = None) -> None:
            log.append("reset")

        def step(self, actions: object) -> None:
            log.append("step")

        def close(self) -> None:
            log.append("close")

    def clock() -> float:
        log.append("clock")
        return time.perf_counter()

    m = _bench.measure_env(Env, 2, seconds=0.01, spans=3, clock=clock)
    first = log.index("clock")
    assert log[:2] == ["build", "reset"] and log[2:first] == ["step"] * 20
    assert log[-1] == "close" and len(m.samples) == 3
    assert m.steps_per_s == sorted(m.samples)[1]  # the median of the timed spans


def test_a_process_pool_is_timed_only_after_its_workers_answered() -> None:
    """The first clock read comes after the process pool was built, reset and stepped 20
    times, each step returned by its workers."""
    seen: list[tuple[int, int]] = []

    class Counted:
        def __init__(self) -> None:
            self.env = envhive.make("CartPole-v1", 2, executor="process", seed=0)
            self.action_space = self.env.action_space
            self.returned = 0

        def reset(self, seed: int | None = None) -> object:
            return self.env.reset(seed=seed)

        def step(self, actions: object) -> object:
            out = self.env.step(actions)
            self.returned += 1
            return out

        def close(self) -> None:
            self.env.close()

    pool: list[Counted] = []

    def build() -> Counted:
        pool.append(Counted())
        return pool[-1]

    def clock() -> float:
        seen.append((pool[0].returned, pool[0].env.env_steps))
        return time.perf_counter()

    _bench.measure_env(build, 2, seconds=0.01, spans=2, clock=clock)
    returned, env_steps = seen[0]
    assert returned == 20 and env_steps > 20  # the workers answered every warm-up step


def test_bench_writes_table_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    argv = ["bench", "--env", "CartPole-v1", "envhive/CartPole-v1", *TINY, "--out", str(tmp_path)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    # progress (one line per point when stderr is not a terminal)
    assert "[1/8] CartPole-v1 x1 envhive serial:" in err and "[8/8]" in err
    # the table: every runner, the ratio to the peer of the same run, the peer marked
    assert "vs peer (same run)" in out and "<- the peer (1x)" in out
    assert "x gymnasium SyncVectorEnv" in out and "x gymnasium vector_entry_point" in out
    assert "vector_entry_point: gymnasium's numpy-vectorized" in out  # the footer
    assert f"wrote {tmp_path}{os.sep}: bench.json, bench.png" in out
    doc = json.loads((tmp_path / "bench.json").read_text())
    assert doc["command"].startswith("envhive bench --env CartPole-v1")
    assert {"machine", "cpus", "python", "envhive"} <= set(doc["machine"])
    rows = doc["results"]
    runners = {(r["env"], r["runner"]) for r in rows}
    assert ("CartPole-v1", "gymnasium SyncVectorEnv") in runners
    assert ("CartPole-v1", "gymnasium vector_entry_point") in runners  # the kernel's peer
    assert all(r["steps_per_s"] > 0 and len(r["samples"]) == 2 for r in rows)
    ours = [r for r in rows if not r["peer"]]
    assert all(r["vs_peer"] > 0 and r["peer_runner"].startswith("gymnasium") for r in ours)
    png = (tmp_path / "bench.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    from matplotlib.image import imread

    assert imread(tmp_path / "bench.png").shape[2] in (3, 4)


def test_bench_states_the_process_round_trip_at_one_env(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--env", "CartPole-v1", "--num-envs", "1", "--executor", "serial",
            "--executor", "process", "--seconds", "0.02", "--spans", "2", "--no-peer",
            "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "process at 1 env (CartPole-v1):" in out and "the round trip to the worker process" in out


def test_bench_default_folder_and_json_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--env", "CartPole-v1", *TINY, "--json", "copy.json"]) == 0
    (folder,) = (tmp_path / "envhive-bench").iterdir()
    assert (folder / "bench.json").exists() and (tmp_path / "copy.json").exists()
    assert f"wrote {os.path.join('envhive-bench', folder.name, '')}" in capsys.readouterr().out


def test_bench_without_matplotlib_skips_the_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert main(["bench", "--env", "CartPole-v1", *TINY, "--no-peer", "--out", str(tmp_path)]) == 0
    assert "plot skipped: matplotlib is not installed" in capsys.readouterr().out
    assert (tmp_path / "bench.json").exists() and not (tmp_path / "bench.png").exists()


def test_bench_shows_a_progress_bar_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr(_cli_bench, "_stderr_console",
                        lambda: Console(file=screen, force_terminal=True, width=120))
    assert main(["bench", "--env", "CartPole-v1", *TINY, "--no-peer", "--out", str(tmp_path)]) == 0
    text = screen.getvalue()
    assert "CartPole-v1 x" in text and "/2" in text and "\x1b[" in text  # a live bar, redrawn


def test_bench_of_a_compiled_mujoco_id_uses_native_and_gymnasiums_env(tmp_path: Path) -> None:
    pytest.importorskip("mujoco")
    assert main(["bench", "--env", "envhive/Swimmer-v5", "--num-envs", "2", "--seconds", "0.05",
                 "--spans", "2", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert [(r["env"], r["runner"]) for r in rows] == [
        ("envhive/Swimmer-v5", "envhive native"),
        ("Swimmer-v5", "gymnasium SyncVectorEnv"),
    ]


def test_the_table_marks_a_point_whose_spans_disagree() -> None:
    from rich.console import Console

    def row(runner: str, samples: list[float], peer: bool) -> _cli_bench.Row:
        task = _cli_bench.Task("CartPole-v1", "CartPole-v1", 8, runner, peer, lambda: None)
        m = _bench.Measurement(runner, "CartPole-v1", 8, sorted(samples)[1], 1.0, 10, samples)
        return _cli_bench.Row(task, m)

    rows = _cli_bench._with_ratios([row("envhive serial", [100.0, 300.0, 310.0], False),
                                    row("gymnasium SyncVectorEnv", [100.0, 101.0, 99.0], True)])
    assert rows[0].unstable and not rows[1].unstable and rows[0].vs_peer == 3.0
    screen = Console(file=io.StringIO(), width=120)
    screen.print(_cli_bench._table(rows, "CartPole-v1"))
    text = screen.file.getvalue()
    assert "300 *" in text and "3.0x gymnasium SyncVectorEnv" in text and "<- the peer (1x)" in text


def test_cache_shows_the_directory_in_use_and_clears_stale_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from envhive.engines import _jit

    (tmp_path / f"numba-{_jit._HASH}").mkdir()
    (tmp_path / f"numba-{_jit._HASH}" / "x.nbc").write_bytes(b"0" * 1000)
    (tmp_path / "numba-0000000000000000").mkdir()
    monkeypatch.setenv("ENVHIVE_CACHE_DIR", str(tmp_path))
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path) in out and "(in use)" in out and "numba-0000000000000000" in out
    assert main(["cache", "--clear", "--stale"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"numba-{_jit._HASH}"]
    assert main(["cache", "--clear"]) == 0
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("ENVHIVE_CACHE", "0")
    assert main(["cache"]) == 0
    assert "off" in capsys.readouterr().out
