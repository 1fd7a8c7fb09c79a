"""Session-wide test setup: one local Ray instance for every Ray pool of the session."""

from __future__ import annotations

import importlib.util
import os
import zlib

import pytest


@pytest.fixture(scope="session", autouse=True)
def _one_ray_instance():
    """Pools on the ray executor (the executor suites include it when Ray is installed) share
    one small local Ray instance, started by the first of them: starting Ray takes seconds.
    Each xdist worker is a session of its own, so it has its own instance."""
    if importlib.util.find_spec("ray") is None:
        yield
        return
    from envhive.executors import _ray

    _ray.DEFAULT_INIT_KWARGS.update(
        num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
    )
    yield
    import ray

    if ray.is_initialized():
        ray.shutdown()


#: The suites that run on the ray executor, and how many of each test function's ray cases.
#: A Ray pool costs ~0.7 s to start (two actor processes) against a few ms for the others, and
#: the executor suites have ~700 ray cases: all of them would add minutes to CI on 2 cores.
#: So each test function of these suites runs its first RAY_CASES ray cases in CI, the first
#: RAY_SAMPLE of them in the default suite (the rest with ENVHIVE_MATRIX=rest, below);
#: everything else that parametrizes over the available executors skips ray.
#: ENVHIVE_RAY_TESTS=all runs every ray case (tests/cluster/ always runs).
RAY_SUITES = {
    "test_conformance.py", "test_differential.py", "test_errors.py", "test_seeding.py",
    "test_interrupts.py", "test_interrupt_races.py", "test_properties.py", "test_env_ids_calls.py",
    "test_factory_errors.py", "test_reset_arguments.py", "test_bad_returns.py",
    "test_pool_model.py",
}
RAY_CASES = 3
RAY_SAMPLE = 1

#: The suites that run each of their cases over every executor: gymnasium's and SB3's own
#: suites (vendored), the conformance, differential and error matrices, and a few more. In the
#: default suite each case (a test function with its other parameters) runs on ONE of its
#: executors, picked by a hash of the case (the same every run), so every executor gets its
#: share of the cases at about a third of the time. ENVHIVE_MATRIX=all runs every executor of
#: every case (and RAY_CASES ray cases), ENVHIVE_MATRIX=rest only what the default leaves out
#: (.ci/run runs it after the default suite, so CI runs the whole matrix).
MATRIX_SUITES = (
    "tests/gymnasium_vector/", "tests/sb3_vec/", "tests/conformance/test_conformance.py",
    "tests/test_errors.py", "tests/test_differential.py", "tests/with_torch/test_sb3_frontend.py",
    "tests/test_seeding.py", "tests/test_reset_arguments.py",
)
MATRIX_EXECUTORS = ("serial", "thread", "process", "native")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DEFAULT, _REST, _NEVER = "default", "rest", "never"


def _matrix_case(item) -> tuple[str, str] | None:
    """``(case, executor)`` of a matrix suite's item on one of MATRIX_EXECUTORS, else None."""
    path = os.path.relpath(str(item.path), _ROOT).replace(os.sep, "/")
    if not path.startswith(MATRIX_SUITES):
        return None
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    for name in ("executor", "name"):
        value = callspec.params.get(name)
        if isinstance(value, str) and value in MATRIX_EXECUTORS:
            parts = callspec.id.split("-")
            parts.remove(value)  # the executor's part of the id: the rest names the case
            return f"{path}::{item.originalname}[{'-'.join(parts)}]", value
    return None


def _where(items) -> list[str]:
    """Where each item runs: in the default suite, in the rest (ENVHIVE_MATRIX=rest), never."""
    ray_all = os.environ.get("ENVHIVE_RAY_TESTS") == "all"
    found = [_matrix_case(item) for item in items]
    cases: dict[str, list[str]] = {}
    for case in found:
        if case is not None:
            cases.setdefault(case[0], []).append(case[1])
    seen: dict[str, int] = {}
    where = []
    for item, case in zip(items, found):
        if case is not None:
            executors = sorted(cases[case[0]])
            picked = executors[zlib.crc32(case[0].encode()) % len(executors)]
            where.append(_DEFAULT if case[1] == picked else _REST)
        elif ray_all or not _on_ray(item):
            where.append(_DEFAULT)
        elif item.path.name not in RAY_SUITES:
            where.append(_NEVER)
        else:
            function = f"{item.path}::{item.originalname}"  # its ray cases in collection order
            seen[function] = k = seen.get(function, 0) + 1
            where.append(_DEFAULT if k <= RAY_SAMPLE else _REST if k <= RAY_CASES else _NEVER)
    return where


def _on_ray(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "ray" in [v for v in params.values() if isinstance(v, str)]


def pytest_collection_modifyitems(config, items):
    mode = os.environ.get("ENVHIVE_MATRIX", "sample")
    runs = {"sample": {_DEFAULT}, "rest": {_REST}, "all": {_DEFAULT, _REST}}.get(mode)
    if runs is None:
        raise pytest.UsageError(f"ENVHIVE_MATRIX: expected 'sample', 'all' or 'rest', got {mode!r}")
    kept, dropped = [], []
    for item, where in zip(items, _where(items)):
        (kept if where in runs else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def gate():
    """A gate (tests/bounded.py) envs wait at, in any thread or process, until the test opens it."""
    from tests.bounded import FileGate

    g = FileGate()
    yield g
    g.remove()


@pytest.fixture
def gates():
    """``(inside, go)``: an env opens ``inside`` when it is inside a call, then waits for the
    test to open ``go``: what runs when is the test's decision, not the clock's."""
    from tests.bounded import FileGate

    pair = (FileGate(), FileGate())
    yield pair
    for g in pair:
        g.remove()
