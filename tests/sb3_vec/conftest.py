"""Run Stable-Baselines3's VecEnv tests on envhive's SB3 front end, once per general executor.

Every test runs on every executor of ``envhive.executors.available_executors()`` (the
``executor`` fixture below; ``shim.py`` builds the VecEnvs on it). ``DIFFERENCES`` lists what
envhive does not pass on purpose, each with its reason (``xfail(strict=True)``, so a test that
starts passing is noticed; each one is a bullet of the SB3 section of docs/semantics.md).
"""

from __future__ import annotations

import pathlib

import cloudpickle
import pytest
import torch

from envhive.errors import ActionError
from envhive.executors import available_executors
from sb3_vec import shim

HERE = pathlib.Path(__file__).resolve().parent
EXECUTORS = available_executors()
ALL = frozenset(EXECUTORS)

IN_PROCESS = frozenset(EXECUTORS) - {"process"}

# test name: (executors where it differs, the exception it raises there, why). A test whose
# name also carries parameters (``test_x[...-DummyVecEnv]``) is matched by that suffix.
DIFFERENCES: dict[str, tuple[frozenset[str], type[BaseException] | None, str]] = {
    "test_vecenv_custom_calls[DummyVecEnv]": (
        ALL, AttributeError, "envhive's SB3 VecEnv has no `envs` list of the env objects (SB3's "
        "test reads `vec_env.envs[0]` when the class is DummyVecEnv): the envs live in the "
        "executor, in a worker process on the process executor; get_attr/env_method reach them"),
    "test_subproc_start_method": (
        IN_PROCESS, None, "start_method is the process executor's: the serial and thread "
        "executors start no processes, so an illegal start method is not refused there"),
    "test_check_nan": (
        ALL, ActionError, "envhive checks every action batch against the action space and steps "
        "nothing if it does not fit (ActionError): SB3's test steps 1 env of action space "
        "Box(shape=(1,)) with an array of shape (2, 2), and DummyVecEnv hands row 0 to the env"),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE not in item.path.parents:  # this hook sees the whole session's tests
            continue
        # The envs these tests define go to worker processes by value, not as a reference to
        # their module: importing it (it imports SB3, which imports torch) would cost each
        # worker ~1.5 s of CPU, about all of a process test's time.
        cloudpickle.register_pickle_by_value(item.module)
        name = getattr(item, "originalname", item.name)
        callspec = getattr(item, "callspec", None)
        executor = callspec.params.get("executor") if callspec is not None else None
        suffix = item.name.rsplit("-", 1)[-1].rstrip("]") if "[" in item.name else ""
        where, raises, why = DIFFERENCES.get(
            f"{name}[{suffix}]", DIFFERENCES.get(name, (frozenset(), None, "")))
        if executor in where:
            item.add_marker(pytest.mark.xfail(
                strict=True, raises=raises, reason="deliberate difference: " + why))


@pytest.fixture(autouse=True, params=EXECUTORS)
def executor(request):
    """The executor every VecEnv of the test is built on (``shim.EXECUTOR``)."""
    shim.EXECUTOR = request.param
    # SB3's training tests (SAC, TD3, HER) on one torch thread: the suite runs on 2 cores.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield request.param
    torch.set_num_threads(threads)
    shim.close_all()
