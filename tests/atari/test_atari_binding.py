"""The ALE binding's safeguards (``envs/atari/_ale.py``): the version allow-list, the self-check
run in a subprocess once per ale-py library and engine build with its verdict kept in a private
cache directory, a crash there read as a verdict (never a crash of the caller)."""

from __future__ import annotations

import json
import subprocess

import pytest

pytest.importorskip("ale_py")

from envhive.envs.atari import _ale  # noqa: E402


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A private cache of this test's own, and no verdict remembered in this process."""
    monkeypatch.setenv("ENVHIVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ENVHIVE_CACHE", "1")
    _ale.binding_problem.cache_clear()
    yield tmp_path
    _ale.binding_problem.cache_clear()


def test_an_ale_py_outside_the_allow_list_is_refused_before_anything_is_called(monkeypatch, fresh):
    lib = _ale.ale_library()
    monkeypatch.setattr(_ale, "ale_library", lambda: _ale.AleLibrary("0.13.0", lib.path, "0.13.0-x"))
    monkeypatch.setattr(_ale, "_run_self_check", lambda: pytest.fail("no check for a refused version"))
    problem = _ale.binding_problem()
    assert problem is not None and "ale-py 0.13.0 is not one of the versions" in problem and "0.12.x" in problem


def test_the_verdict_is_found_once_and_kept_on_disk(monkeypatch, fresh):
    calls = []
    monkeypatch.setattr(_ale, "_run_self_check", lambda: calls.append(1) or ("step 3 differs", True))
    assert _ale.binding_problem() == "step 3 differs"
    _ale.binding_problem.cache_clear()  # a new process: the verdict is read from the disk
    assert _ale.binding_problem() == "step 3 differs" and len(calls) == 1
    files = list((fresh / "cache" / "atari").glob("check-*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["problem"] == "step 3 differs"
    assert (fresh / "cache" / "atari").stat().st_mode & 0o777 == 0o700


def test_an_inconclusive_check_is_not_kept(monkeypatch, fresh):
    calls = []
    monkeypatch.setattr(_ale, "_run_self_check", lambda: calls.append(1) or ("took over 600 s", False))
    assert _ale.binding_problem() == "took over 600 s"
    _ale.binding_problem.cache_clear()
    _ale.binding_problem()
    assert len(calls) == 2


def test_a_crash_in_the_subprocess_is_a_verdict(monkeypatch):
    def crashed(*args, **kwargs):
        return subprocess.CompletedProcess(args, -11, "", "Segmentation fault")

    monkeypatch.setattr(subprocess, "run", crashed)
    assert _ale._run_self_check() == ("the engine crashed (SIGSEGV) in its self-check against this ale-py", True)


def test_a_verdict_in_a_directory_others_can_write_is_not_trusted(monkeypatch, fresh):
    shared = fresh / "shared"
    (shared / "atari").mkdir(parents=True)
    shared.chmod(0o777)
    lib = _ale.ale_library()

    forged = f"check-{lib.key}-{_ale._file_hash(_ale.extension_path())}.json"
    (shared / "atari" / forged).write_text(json.dumps({"problem": None}))
    monkeypatch.setenv("ENVHIVE_CACHE_DIR", str(shared))
    monkeypatch.setenv("TMPDIR", str(fresh / "tmp"))
    (fresh / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(fresh / "tmp"))
    monkeypatch.setattr(_ale, "_run_self_check", lambda: ("checked again", True))
    with pytest.warns(UserWarning, match="others can write to it"):
        assert _ale.binding_problem() == "checked again"
