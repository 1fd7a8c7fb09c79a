"""The public surface: names, docstrings, packaging, and gymnasium compatibility of VectorEnv."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.resources
import inspect
import pathlib
import re
import typing

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

import envhive
import envhive.engines
import envhive.executors
import envhive.frontends
import envhive.testing
from envhive.executors import available_executors
from envhive.testing import SPACE_ZOO, CountingEnv, ZooEnv

pytestmark = pytest.mark.timeout(300)

SRC = pathlib.Path(envhive.__file__).resolve().parent
REPO = SRC.parent.parent

EXPECTED_ALL = {
    "make",
    "VectorEnv",
    "AutoresetMode",
    "register",
    "list_envs",
    "EnvhiveError",
    "ConfigError",
    "UnknownEnvError",
    "SpaceMismatchError",
    "ActionError",
    "InvalidStateError",
    "ClosedError",
    "PendingCallError",
    "NothingPendingError",
    "ResetNeededError",
    "EnvWorkerError",
    "WorkerDiedError",
    "StepTimeoutError",
    "ResourceError",
    "UnexpectedKeywordError",
    "ConfigTypeError",
    "ActionTypeError",
    "WaitTimeoutError",
    "__version__",
}

# Public objects whose docstrings carry a runnable "Examples:" block.
WITH_EXAMPLES = [
    (envhive, "make"),
    (envhive, "VectorEnv"),
    (envhive, "register"),
    (envhive, "list_envs"),
    (envhive.executors, "SerialExecutor"),
    (envhive.executors, "register_executor"),
    (envhive.executors, "available_executors"),
    (envhive.testing, "CountingEnv"),
    (envhive.testing, "ZooEnv"),
    (envhive.testing, "transcript"),
    (envhive.testing, "assert_same_transcript"),
    (envhive.engines, "Engine"),
    (envhive.engines, "StepAllResult"),
    (envhive.engines, "CompiledEnv"),
    (envhive.engines, "compiled_ids"),
    (envhive.engines, "compiled_env"),
    (envhive.engines, "family_of"),
    (envhive.engines, "load_entry_point"),
    (envhive.frontends, "DmEnv"),
    (envhive.frontends, "SB3VecEnv"),
    (envhive.frontends, "Pool"),
    (envhive.frontends, "Batch"),
]

PUBLIC_MODULES = [envhive, envhive.executors, envhive.frontends, envhive.testing, envhive.engines]


def test_all_is_exactly_the_public_api():
    assert set(envhive.__all__) == EXPECTED_ALL
    assert len(envhive.__all__) == len(set(envhive.__all__)), "duplicates in __all__"


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_every_exported_name_exists(module):
    for name in module.__all__:
        assert hasattr(module, name), f"{module.__name__}.__all__ lists missing name {name!r}"
    star: dict = {}
    exec(f"from {module.__name__} import *", star)  # noqa: S102
    assert set(module.__all__) <= set(star)


def _own_doc(obj) -> str | None:
    # inspect.getdoc falls back to the base class; we want the object's own docstring.
    return obj.__doc__ if isinstance(obj, type) else inspect.getdoc(obj)


def _documentable(obj) -> bool:
    # Typing aliases (``EnvFactory = Callable[[], gym.Env]``) are callable but cannot carry
    # their own docstring.
    return callable(obj) and typing.get_origin(obj) is None


@pytest.mark.parametrize(
    "module, name",
    [(m, n) for m in PUBLIC_MODULES for n in m.__all__
     if _documentable(getattr(m, n)) and not n.startswith("_")],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_every_public_callable_has_a_docstring(module, name):
    obj = getattr(module, name)
    doc = _own_doc(obj)
    assert doc and len(doc.strip()) >= 20, f"{module.__name__}.{name} has no real docstring"
    # dataclasses without a docstring get a generated one: "Name(field: type, ...)"
    assert not doc.startswith(f"{obj.__name__}("), f"{module.__name__}.{name}: generated doc"


def test_every_public_module_has_a_docstring():
    for module in PUBLIC_MODULES:
        assert module.__doc__ and "Examples:" in module.__doc__, module.__name__


@pytest.mark.parametrize("module, name", WITH_EXAMPLES, ids=lambda x: getattr(x, "__name__", x))
def test_examples_blocks(module, name):
    doc = inspect.getdoc(getattr(module, name))
    assert doc and "Examples:" in doc, f"{module.__name__}.{name} has no Examples: block"
    examples = doc.split("Examples:", 1)[1]
    assert ">>> " in examples, f"{module.__name__}.{name}: Examples: block has no doctest"


def test_vector_env_public_methods_documented():
    for name in ["reset", "step", "close", "call", "get_attr", "set_attr", "render",
                 "async_reset", "send", "recv", "batch_size", "executor", "env_steps", "copy"]:
        attr = inspect.getattr_static(envhive.VectorEnv, name)
        doc = getattr(attr, "__doc__", None)
        assert doc and doc.strip(), f"VectorEnv.{name} has no docstring"
        assert attr is not inspect.getattr_static(gym.vector.VectorEnv, name, None), name


def test_version_matches_distribution():
    assert isinstance(envhive.__version__, str)
    assert envhive.__version__ == importlib.metadata.version("envhive")


def test_py_typed_is_shipped():
    marker = importlib.resources.files("envhive").joinpath("py.typed")
    assert marker.is_file()
    # and declared as package data, so that wheels (not just editable installs) carry it
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^envhive\s*=\s*\[[^\]]*"py\.typed"', section, re.MULTILINE), section


def test_console_scripts_resolve():
    # Every console script the distribution installs must import (a missing module makes the
    # installed ``envhive`` command crash with ModuleNotFoundError).
    dist = importlib.metadata.distribution("envhive")
    scripts = [ep for ep in dist.entry_points if ep.group == "console_scripts"]
    for ep in scripts:
        assert callable(ep.load()), ep


def test_modules_stay_small():
    files = sorted(SRC.rglob("*.py"))
    assert len(files) >= 10
    too_long = {str(f.relative_to(SRC)): n for f in files
                if (n := len(f.read_text().splitlines())) >= 800}
    assert not too_long, f"modules of 800+ lines: {too_long}"


# ---------------------------------------------------------------- VectorEnv surface


def test_vector_env_is_a_gymnasium_vector_env():
    assert issubclass(envhive.VectorEnv, gym.vector.VectorEnv)
    with envhive.make("CartPole-v1", 2) as env:
        assert isinstance(env, gym.vector.VectorEnv)
        assert env.num_envs == 2
        assert env.unwrapped is env


@pytest.mark.parametrize("mode, expected", [
    ("next_step", AutoresetMode.NEXT_STEP),
    ("same_step", AutoresetMode.SAME_STEP),
    ("disabled", AutoresetMode.DISABLED),
    (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP),
    ("SameStep", AutoresetMode.SAME_STEP),
])
def test_metadata_autoreset_mode(mode, expected):
    with envhive.make(lambda: CountingEnv(), 2, autoreset=mode) as env:
        assert isinstance(env.metadata["autoreset_mode"], AutoresetMode)
        assert env.metadata["autoreset_mode"] is expected
    assert envhive.AutoresetMode is AutoresetMode


def test_default_autoreset_is_next_step():
    with envhive.make(lambda: CountingEnv(), 2) as env:
        assert env.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP


def test_repr_names_executor_and_auto():
    with envhive.make("CartPole-v1", 3) as env:
        text = repr(env)
        assert text.startswith("envhive.VectorEnv('CartPole-v1'")
        assert f"executor='{env.executor}" in text and "(auto)" in text
        assert "num_envs=3" in text and "autoreset='next_step'" in text
        assert env.executor in available_executors()
    for name in available_executors():
        with envhive.make("CartPole-v1", 3, executor=name, batch_size=2,
                          autoreset="same_step") as env:
            text = repr(env)
            assert env.executor == name
            assert f"executor='{name}" in text and "(auto)" not in text
            assert "batch_size=2" in text and "autoreset='same_step'" in text
    assert repr(env).endswith(", closed)")


def test_extras():
    with envhive.make(lambda: CountingEnv(), 4, batch_size=2, copy=False) as env:
        assert env.batch_size == 2 and env.copy is False and env.env_steps == 0
        env.reset()
        env.step(np.zeros(4, np.int64))
        assert env.env_steps == 4


@pytest.mark.parametrize("obs_key", sorted(SPACE_ZOO))
def test_batched_spaces_match_gymnasium(obs_key):
    single_obs = SPACE_ZOO[obs_key]
    single_act = SPACE_ZOO["multidiscrete"]
    with envhive.make(lambda: ZooEnv(single_obs, single_act), 3, seed=0) as env:
        assert env.single_observation_space == single_obs
        assert env.single_action_space == single_act
        assert env.observation_space == batch_space(single_obs, 3)
        assert env.action_space == batch_space(single_act, 3)
        obs, _ = env.reset()
        assert env.observation_space.contains(obs)
        obs = env.step(env.action_space.sample())[0]
        assert env.observation_space.contains(obs)


def test_call_get_set_attr():
    with envhive.make(lambda: CountingEnv(), 3) as env:
        env.set_attr("tag", [7, 8, 9])
        assert env.get_attr("tag") == (7, 8, 9)
        env.set_attr("tag", 1)
        assert env.get_attr("tag") == (1, 1, 1)
        assert env.call("_obs", 2)[0].tolist() == [1, -1, 0, 2]
        with pytest.raises(envhive.ConfigError):
            env.set_attr("tag", [1, 2])


def test_import_works_where_the_process_executor_cannot_run():
    # e.g. no POSIX shared memory or semaphores: envhive imports, the executor is unavailable.
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['envhive.executors._process'] = None\n"
        "import envhive\n"
        "from envhive.executors import available_executors\n"
        "assert 'process' not in available_executors(), available_executors()\n"
        "env = envhive.make('CartPole-v1', 2)\n"
        "env.close()\n"
        "try:\n"
        "    envhive.make('CartPole-v1', 2, executor='process')\n"
        "except envhive.ConfigError as err:\n"
        "    assert 'not available' in str(err), err\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    # ... and importing envhive does not import the process executor at all.
    code = "import sys, envhive; print('envhive.executors._process' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "False", out.stderr
