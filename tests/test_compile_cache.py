"""envhive's compiled code is cached on disk: a second process loads it instead of compiling.

Each case runs two fresh interpreters on one empty cache directory: the first compiles (and
must raise no numba warning, e.g. "cannot cache"), the second must load every compiled
function from the cache and compile none, and both must produce the same transitions. The
keys of the cache are checked directly too: stable across processes, apart for closures over
different values, absent (no caching) for what cannot be described.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(900)

_PROBE = """
import json, sys, warnings
warnings.simplefilter("error")  # a NumbaWarning (e.g. "cannot cache") fails the run
import numpy as np
import envhive
from envhive.engines._jit import compile_report
env = envhive.make(sys.argv[1], 4, seed=0, executor=sys.argv[2])
obs, _ = env.reset()
env.single_action_space.seed(0)
out = []
for t in range(40):
    a = np.stack([env.single_action_space.sample() for _ in range(4)])
    obs, rew, term, trunc, _ = env.step(a)
    out.append([np.asarray(obs).tolist(), rew.tolist(), term.tolist(), trunc.tolist()])
env.close()
print(json.dumps({"report": compile_report(), "out": out}))
"""


def _run(env_id: str, executor: str, cache: pathlib.Path) -> dict:
    env = dict(os.environ, ENVHIVE_CACHE_DIR=str(cache), ENVHIVE_CACHE="1")
    done = subprocess.run([sys.executable, "-c", _PROBE, env_id, executor], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("env_id", "executor"), [
    ("envhive/CartPole-v1", "native"),  # a classic kernel's driver
    ("envhive/MountainCarContinuous-v0", "native"),  # Box actions: the action check
    ("envhive/HalfCheetah-v5", "native"),  # a MuJoCo family: parallel step + reset drivers
    ("envhive/Ant-v5", "native"),  # contact forces, pairwise sums
    ("envhive/HalfCheetah-v5", "thread"),  # step_many's batched physics
])
def test_a_second_process_compiles_nothing(env_id, executor, tmp_path):
    first = _run(env_id, executor, tmp_path)
    assert first["report"] and sum(r["compiled"] for r in first["report"]) > 0
    assert all(r["key"] for r in first["report"]), "a function ran uncached"
    second = _run(env_id, executor, tmp_path)
    compiled = [r for r in second["report"] if r["compiled"]]
    assert not compiled, f"compiled again in a second process: {compiled}"
    assert sum(r["cached"] for r in second["report"]) > 0
    assert second["out"] == first["out"]  # the cached code computes the same transitions
    assert any((tmp_path / d).is_dir() for d in os.listdir(tmp_path))


def test_caching_off_still_runs(tmp_path):
    env = dict(os.environ, ENVHIVE_CACHE="0", ENVHIVE_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _PROBE, "envhive/Pendulum-v1", "native"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])["report"]
    assert all(r["cached"] == 0 for r in report)
    assert not os.listdir(tmp_path)


def test_an_unwritable_cache_directory_compiles_in_the_process(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    env = dict(os.environ, ENVHIVE_CACHE_DIR=str(blocked / "cache"), ENVHIVE_CACHE="1")
    done = subprocess.run([sys.executable, "-c", _PROBE.replace('warnings.simplefilter("error")', ""),
                           "envhive/CartPole-v1", "native"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


# -- the keys ----------------------------------------------------------------------------------
jit_mod = pytest.importorskip("envhive.engines._jit")


def _closure(value):
    @jit_mod.jit()
    def f(x):
        return x + value

    return f


def test_closures_over_different_values_get_different_keys():
    a, b, a2 = _closure(1.0), _closure(2.0), _closure(1.0)
    assert a._envhive_key != b._envhive_key
    assert a._envhive_key == a2._envhive_key
    assert a(1.0) == 2.0 and b(1.0) == 3.0


def test_closures_over_compiled_functions_are_keyed_by_their_keys():
    inner1, inner2 = _closure(1.0), _closure(2.0)

    def outer(inner):
        @jit_mod.jit()
        def g(x):
            return inner(x) * 2

        return g

    assert outer(inner1)._envhive_key != outer(inner2)._envhive_key
    assert outer(inner1)._envhive_key == outer(_closure(1.0))._envhive_key


def test_a_cell_without_a_stable_description_is_not_cached():
    import numba

    plain = numba.njit(lambda x: x)  # not made by envhive's jit: no key of its own

    def outer():
        @jit_mod.jit()
        def g(x):
            return plain(x)

        return g

    g = outer()
    assert g._envhive_key is None
    assert g(3) == 3  # still works, compiled in the process
    assert jit_mod._stable_key(lambda: object) is not None
    holder = object()
    assert jit_mod._stable_key(lambda: holder) is None


def test_keys_and_descriptions_are_stable_across_processes():
    code = ("from envhive.engines._jit import _describe; import numpy as np; "
            "from numba.core import types; "
            "print(_describe((1, 2.5, 'a', np.float32(1), np.arange(3.0), "
            "types.ExternalFunction('envhive_x', types.void(types.int64)))))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
            for _ in range(2)}
    assert len(outs) == 1 and "envhive_x" in outs.pop()


def test_the_source_hash_follows_every_compiled_file(tmp_path):
    pkg = tmp_path / "envhive"
    (pkg / "engines").mkdir(parents=True)
    (pkg / "kernels").mkdir()
    (pkg / "engines" / "a.py").write_text("x = 1\n")
    (pkg / "kernels" / "b.py").write_text("y = 1\n")
    (pkg / "_ops.py").write_text("z = 1\n")
    parts = ("engines", "kernels", "_ops.py")
    h0 = jit_mod.source_hash(pkg, parts)
    assert jit_mod.source_hash(pkg, parts) == h0
    for path in (pkg / "kernels" / "b.py", pkg / "_ops.py"):
        old = path.read_text()
        path.write_text(old + "# changed\n")
        assert jit_mod.source_hash(pkg, parts) != h0, path
        path.write_text(old)
    (pkg / "engines" / "new.py").write_text("")
    assert jit_mod.source_hash(pkg, parts) != h0


def test_c_functions_are_called_by_name():
    import ctypes

    from numba.core import types

    libc = ctypes.CDLL(None)
    labs = jit_mod.c_function("labs_test", libc.labs, types.int64(types.int64))
    assert str(labs).startswith("ExternalFunction(envhive_labs_test")

    @jit_mod.jit()
    def call(x):
        return labs(x)

    assert call(np.int64(-7)) == 7
    with pytest.raises(ValueError, match="no address"):
        jit_mod.c_function("nothing", 0, types.void())


# -- whose directory -----------------------------------------------------------------------------
_WHERE = """
import warnings
warnings.simplefilter("always")
from envhive.engines._jit import _DIR
print(_DIR)
"""


def _where(cache: pathlib.Path, tmp: pathlib.Path) -> tuple[pathlib.Path, str]:
    """The directory a fresh process loads compiled code from, and its warnings."""
    tmp.mkdir(mode=0o700, exist_ok=True)
    env = dict(os.environ, ENVHIVE_CACHE_DIR=str(cache), ENVHIVE_CACHE="1", TMPDIR=str(tmp))
    done = subprocess.run([sys.executable, "-c", _WHERE], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return pathlib.Path(done.stdout.strip().splitlines()[-1]), done.stderr


def _unsafe(kind: str, tmp_path: pathlib.Path) -> pathlib.Path:
    if kind in ("other owner", "shared group") and os.getuid() != 0:
        pytest.skip("needs root to give a directory away")
    if kind == "writable parent":
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o777)  # others may write here, and no sticky bit
        return shared / "cache"
    cache = tmp_path / "cache"
    cache.mkdir()
    if kind == "others can write":
        cache.chmod(0o777)
    elif kind == "other owner":
        os.chown(cache, 12345, 12345)
    elif kind == "shared group":
        os.chown(cache, os.getuid(), 12345)
        cache.chmod(0o770)
    return cache


@pytest.mark.parametrize("kind", ["others can write", "writable parent", "other owner", "shared group"])
def test_a_cache_directory_others_can_write_is_refused(kind, tmp_path):
    """numba's index files are pickles: loading them from a directory someone else can write
    would run their code. envhive warns, naming the directory and why, and uses a private one."""
    cache = _unsafe(kind, tmp_path)
    where, warned = _where(cache, tmp_path / "tmp")
    assert not str(where).startswith(str(cache)), f"loads compiled code from {where}"
    assert str(where).startswith(str(tmp_path / "tmp"))  # the private fallback
    assert where.stat().st_mode & 0o077 == 0 and where.parent.stat().st_mode & 0o077 == 0
    assert "not loading compiled code from" in warned and str(cache) in warned
    assert not (cache.exists() and any(cache.iterdir())), "wrote into the refused directory"


@pytest.mark.parametrize("parent_mode", [0o755, 0o1777])  # 1777: a shared /tmp, sticky
def test_a_private_cache_directory_is_used_and_made_private(parent_mode, tmp_path):
    parent = tmp_path / "home"
    parent.mkdir()
    parent.chmod(parent_mode)
    where, warned = _where(parent / "cache", tmp_path / "tmp")
    assert where.parent == parent / "cache" and where.name.startswith("numba-")
    assert where.stat().st_mode & 0o777 == 0o700 and where.parent.stat().st_mode & 0o777 == 0o700
    assert "not loading" not in warned
