"""Run gymnasium's vector-env tests on envhive pools, once per general executor.

Every test runs on every executor of ``envhive.executors.available_executors()`` (the
``executor`` fixture below; ``shim.py`` builds the pools on it). The lists below mark what
is not envhive's to pass, each with its reason: deliberate differences (``xfail(strict=True)``,
so a test that starts passing is noticed; each one is a bullet of "Differences from
gymnasium's vector envs" in docs/semantics.md) and tests of gymnasium's own internals (skipped).
"""

from __future__ import annotations

import pathlib

import pytest

from envhive.executors import available_executors
from gymnasium_vector import shim

HERE = pathlib.Path(__file__).resolve().parent
EXECUTORS = available_executors()
ALL = frozenset(EXECUTORS)

VALIDATES_ACTIONS = (
    "envhive checks every action batch against the action space and steps nothing if one "
    "action is outside it (ActionError); gymnasium passes any action to the envs"
)
TYPED_BUFFERS = (
    "envhive hands each env its action from the pool's action buffer, in the action space's "
    "dtype (np.float32 for this Box; SlowEnv's time.sleep(action) refuses it), where gymnasium "
    "passes the caller's element as is (np.float64 here)"
)
OBJECT_ARRAYS = (
    "observations of spaces with no array form (custom spaces, Text, Graph, ...) are batched "
    "as an object array (one row per env), where gymnasium gives a tuple"
)
DIFFERENCES: dict[str, tuple[frozenset[str], str]] = {
    # test name: (executors where it differs, why)
    "test_final_obs_info": (ALL, VALIDATES_ACTIONS + " (it steps Discrete(4) with 4)"),
    "test_custom_space_sync_vector_env": (
        ALL, VALIDATES_ACTIONS + " (the strings are not in CustomSpace); and " + OBJECT_ARRAYS),
    "test_custom_space_async_vector_env": (
        ALL, VALIDATES_ACTIONS + " (the strings are not in CustomSpace); and " + OBJECT_ARRAYS),
    "test_custom_space_async_vector_env_shared_memory": (
        ALL, "envhive has no shared_memory switch to refuse: array leaves always go through "
        "shared memory and object leaves (a custom space) as messages, so the pool builds"),
    "test_step_timeout_async_vector_env": (ALL, TYPED_BUFFERS),
    "test_autoreset_within_step": (
        ALL, "info['final_obs'] rows are read from the pool's typed buffers: np.int64(2) for a "
        "Discrete observation the env returned as the int 2 (equal values, another type)"),
    "test_async_vector_subenv_error": (
        ALL, "an env's exception is raised as envhive.EnvWorkerError (naming the env, carrying "
        "its traceback as a string, the pool still usable), not re-raised as the env's own "
        "exception type after gymnasium's logged warnings and a worker shutdown"),
    "test_check_spaces_sync_vector_env": (
        ALL, "envhive's message (a SpaceMismatchError, also a RuntimeError) does not name "
        "gymnasium's SyncVectorEnv"),
    "test_reset_timeout_async_vector_env": (
        frozenset({"serial"}), "the serial executor runs the envs inside reset_async, in the "
        "calling thread: reset_wait finds them done and its timeout never fires"),
}
INTERNALS = {
    "test_metadata_sync_vector_env": "reads SyncVectorEnv.envs, its private list of sub-envs",
    "test_vector_add_info": "tests gymnasium.vector.VectorEnv._add_info, a private helper, on "
    "gymnasium's own base class: no envhive code runs",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE not in item.path.parents:  # this hook sees the whole session's tests
            continue
        name = getattr(item, "originalname", item.name)
        if name in INTERNALS:
            item.add_marker(pytest.mark.skip(reason="gymnasium internals: " + INTERNALS[name]))
            continue
        callspec = getattr(item, "callspec", None)
        executor = callspec.params.get("executor") if callspec is not None else None
        where, why = DIFFERENCES.get(name, (frozenset(), ""))
        if executor in where:
            item.add_marker(pytest.mark.xfail(strict=True, reason="deliberate difference: " + why))


@pytest.fixture(autouse=True, params=EXECUTORS)
def executor(request):
    """The executor every pool of the test is built on (``shim.EXECUTOR``)."""
    shim.EXECUTOR = request.param
    yield request.param
    shim.close_all()
