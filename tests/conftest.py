"""Session-wide test setup: one local Ray instance for every Ray pool of the session."""

from __future__ import annotations

import importlib.util
import os

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
#: So each test function of these suites runs its first RAY_CASES ray cases; everything
#: else that parametrizes over the available executors skips ray. ENVHIVE_RAY_TESTS=all runs
#: every ray case (tests/cluster/ always runs).
RAY_SUITES = {
    "test_conformance.py", "test_differential.py", "test_errors.py", "test_seeding.py",
    "test_interrupts.py", "test_interrupt_races.py", "test_properties.py", "test_env_ids_calls.py",
    "test_factory_errors.py", "test_reset_arguments.py", "test_bad_returns.py",
    "test_pool_model.py",
}
RAY_CASES = 3


def pytest_collection_modifyitems(config, items):
    if os.environ.get("ENVHIVE_RAY_TESTS") == "all":
        return
    kept, dropped = [], []
    seen: dict[str, int] = {}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "ray" not in [v for v in params.values() if isinstance(v, str)]:
            kept.append(item)
            continue
        function = f"{item.path}::{item.originalname}"
        seen[function] = seen.get(function, 0) + 1
        if item.path.name in RAY_SUITES and seen[function] <= RAY_CASES:
            kept.append(item)
        else:
            dropped.append(item)
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
