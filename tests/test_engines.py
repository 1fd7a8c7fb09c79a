"""The engine protocol, the registry of compiled ids, and what compiled engines share.

``envhive.engines`` is the contract between the native executor and the compiled envs: both
engines implement :class:`~envhive.engines.Engine`, ``step_all`` returns a
:class:`~envhive.engines.StepAllResult` with neutral step info columns, ``call``/``set_attr``
take env ids, and one registry lists every compiled id.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import envhive
from envhive import _ops
from envhive._registry import builtin_ids
from envhive.engines import (
    CompiledEnv,
    Engine,
    EngineKind,
    NativeFactory,
    StepAllResult,
    compiled_env,
    compiled_ids,
    engine_kind,
    engine_kinds,
    family_of,
    load_entry_point,
    native_factory,
    register_kind,
)
from envhive.engines import _registry as engine_registry
from envhive.engines._registry import builtin_compiled_ids, family_modules

pytestmark = pytest.mark.timeout(300)


def _engine(env: envhive.VectorEnv) -> Engine:
    engine = env._pool.executor._engine
    assert isinstance(engine, Engine)
    return engine


# ------------------------------------------------------------------ registry
def test_every_compiled_id_resolves_to_its_engine():
    assert set(compiled_ids()) == set().union(*(compiled_ids(k) for k in engine_kinds()))
    assert set(compiled_ids()) <= set(envhive.list_envs())
    # envhive.testing's counter registers when imported (another test may have): not built in.
    own = {i for i in compiled_ids(prefix="envhive/") if compiled_env(i).engine != "counter"}
    assert own == set(builtin_compiled_ids()) <= set(builtin_ids())
    # EnvPool's ids (envpool/<id>) are compiled ids, but not gymnasium ids of envhive's own
    assert not {i for i in compiled_ids() if i.startswith("envpool/")} & set(builtin_ids())
    for env_id in compiled_ids():
        entry = compiled_env(env_id)
        assert isinstance(entry, CompiledEnv) and entry.id == env_id
        load_entry_point(entry.entry_point)  # importable
        if entry.engine == "envpool":  # its second name is EnvPool's id
            assert entry.family == env_id.removeprefix("envpool/")
        else:
            assert (entry.family is None) == (entry.engine != "mujoco")  # only MuJoCo has families
        kind = engine_kind(entry.engine)
        load_entry_point(kind.factory)
        if kind.peers is not None:
            load_entry_point(kind.peers)


def test_every_compiled_mujoco_id_has_its_family():
    pytest.importorskip("mujoco")
    from envhive.envs.mujoco import ENV_CLASSES
    from envhive.envs.mujoco._families import Family

    compiled = {compiled_env(i).entry_point.rpartition(":")[2] for i in compiled_ids("mujoco")}
    for env_cls in ENV_CLASSES.values():
        family = family_of(env_cls)
        if env_cls.__name__ in compiled:
            assert family is not None and issubclass(family, Family)
        else:
            assert family is None  # Humanoid: threads
    assert family_of(object) is None


@pytest.fixture
def scratch_registry():
    """The registry as it is now, put back after the test (a test may register kinds, or
    make the registry look for installed families again)."""
    engine_kinds()  # envhive's own families are registered before the copy
    saved = [dict(engine_registry._KINDS), dict(engine_registry._COMPILED), list(engine_registry._PENDING),
             set(engine_registry._BUILTIN_KINDS), dict(engine_registry._FOUND), dict(engine_registry._FAMILIES)]
    yield
    for now, then in zip((engine_registry._KINDS, engine_registry._COMPILED, engine_registry._PENDING,
                          engine_registry._BUILTIN_KINDS, engine_registry._FOUND, engine_registry._FAMILIES), saved):
        now.clear()
        (now.extend if isinstance(now, list) else now.update)(then)  # type: ignore[operator]


# The module a new kind brings: its factory builder, its bench peers, its ids (listed lazily),
# and the register_kind call its import makes. Nothing else in envhive is told about it.
SCRATCH_FAMILY = """
from envhive.engines import CompiledEnv, EngineKind, register_kind
from envhive.kernels._adapter import KernelFactory
from envhive.kernels import CartPoleKernel

def factory(entry, kwargs, steps):
    return KernelFactory(CartPoleKernel, kwargs, steps)

def peers(entry, n):
    return [('my peer', entry.id, lambda: None)]

def entries():
    return [CompiledEnv('scratch/Pole-v0', 'scratch', 'scratch')]

register_kind(EngineKind('scratch', '{module}:factory', 'numba', peers='{module}:peers',
                         entries='{module}:entries'))
"""


def _scratch_kind_runs(env_id: str) -> None:
    """The scratch kind's id is listed, built and run on native and serial like CartPole."""
    assert env_id in compiled_ids("scratch")  # listed on first use
    assert env_id in envhive.list_envs()
    factory = native_factory(compiled_env(env_id), None, None)
    assert isinstance(factory, NativeFactory)
    for executor in ("native", "serial"):
        env = envhive.make(env_id, 3, executor=executor, seed=1)
        ref = envhive.make("envhive/CartPole-v1", 3, executor=executor, seed=1)
        assert np.array_equal(env.reset()[0], ref.reset()[0])
        assert np.array_equal(env.step(np.ones(3, np.int64))[0], ref.step(np.ones(3, np.int64))[0])
        env.close()
        ref.close()
    from envhive._cli import unbuildable_reason
    from envhive._cli_bench import plan_tasks

    assert unbuildable_reason(env_id) is None  # numba is there
    assert [t.runner for t in plan_tasks([env_id], [2], None)] == ["envhive native", "my peer"]


def test_a_new_engine_kind_is_one_module(scratch_registry, tmp_path, monkeypatch):
    (tmp_path / "scratch_family.py").write_text(SCRATCH_FAMILY.format(module="scratch_family"))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("scratch_family")  # a family registers itself when imported
    _scratch_kind_runs("scratch/Pole-v0")
    assert "scratch/Pole-v0" not in builtin_ids()  # not envhive's: not registered with gymnasium


def test_an_installed_family_is_found_by_its_entry_point(scratch_registry, tmp_path, monkeypatch):
    """A package that declares its family module in the ``envhive.families`` entry-point
    group is imported the first time a lookup misses, with nothing imported by hand."""
    (tmp_path / "scratch_installed.py").write_text(SCRATCH_FAMILY.format(module="scratch_installed"))
    dist = tmp_path / "scratch_installed-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: scratch-installed\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{engine_registry.FAMILY_GROUP}]\nscratch = scratch_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    engine_registry._FOUND["installed"] = False  # as in a process that has not looked yet
    assert "scratch_installed" not in sys.modules
    _scratch_kind_runs("scratch/Pole-v0")
    assert "scratch_installed" in sys.modules


def test_a_broken_installed_family_is_skipped_with_a_warning(scratch_registry, tmp_path, monkeypatch):
    (tmp_path / "scratch_broken.py").write_text("raise ImportError('scratch: broken on purpose')\n")
    dist = tmp_path / "scratch_broken-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: scratch-broken\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{engine_registry.FAMILY_GROUP}]\nbroken = scratch_broken\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    engine_registry._FOUND["installed"] = False
    with pytest.warns(RuntimeWarning, match="family 'broken'.*broken on purpose"):
        assert compiled_env("scratch/Nothing-v0") is None
    assert compiled_env("envhive/CartPole-v1") is not None  # every other family still works


def test_envhives_own_families_register_themselves():
    """The registry names no kind: each family package's ``_family`` module registers its
    kind when the registry imports it, and nothing else in envhive calls register_kind."""
    assert family_modules() == ["envhive.kernels._family", "envhive.envs.atari._family",
                                "envhive.envs.envpool._family", "envhive.envs.mujoco._family",
                                "envhive.envs.torch._family"]
    assert engine_kinds()[:5] == ["kernel", "atari", "envpool", "mujoco", "torch"]
    src = pathlib.Path(envhive.__file__).parent
    callers = sorted(str(p.relative_to(src)) for p in src.rglob("*.py")
                     if "register_kind(" in p.read_text() and p.name != "_registry.py")
    assert callers == ["envs/atari/_family.py", "envs/envpool/_family.py", "envs/mujoco/_family.py", "envs/torch/_family.py",
                       "kernels/_family.py", "testing/counter/_family.py"]  # the test family
    tree = ast.parse((src / "engines" / "_registry.py").read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node)}
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
               and isinstance(node.value, str) and id(node) not in docstrings}
    assert not strings & set(engine_kinds())  # the code names no kind (its examples may)
    assert not [s for s in strings if "envhive.kernels." in s or "envhive.envs." in s]


def test_family_modules_are_light():
    """Importing envhive (which looks every family up) imports no family's heavy package, and
    each family module alone imports none either."""
    code = (
        "import sys, importlib\n"
        "heavy = ('numba', 'torch', 'mujoco', 'ale_py', 'cv2')\n"
        "import envhive\n"
        "from envhive.engines import compiled_ids, engine_kinds\n"
        "assert len(compiled_ids()) > 10 and len(engine_kinds()) >= 4\n"
        "for module in sys.argv[1:]:\n"
        "    importlib.import_module(module)\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *family_modules()], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def test_engine_kinds_are_checked():
    from envhive.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown engine kind 'nope'"):
        engine_kind("nope")
    with pytest.raises(ConfigError, match="already registered"):
        register_kind(EngineKind("kernel", "x:y", "numpy"))
    with pytest.raises(ConfigError, match="unknown engine kind"):
        engine_registry._add(CompiledEnv("x/Y-v0", "nope", "x:y"))


def test_engines_declare_what_the_native_executor_reads():
    # The native executor reads device and num_threads off the Engine protocol, never getattr.
    for env_id, threads in (("envhive/CartPole-v1", 1), ("envhive/TorchCartPole-v1", 1)):
        if "Torch" in env_id:
            pytest.importorskip("torch")
        env = envhive.make(env_id, 2)
        engine = _engine(env)
        assert engine.num_threads == threads and (engine.device is None) == ("Torch" not in env_id)
        env.close()


# An async engine (envs beside the caller) made of a kernel engine: ``start`` keeps the ids,
# ``collect`` runs them (results in the pool's buffers), ``take_finished`` declines.
ASYNC_FAMILY = """
import numpy as np
from envhive._report import Completion
from envhive.engines import CompiledEnv, EngineKind, register_kind
from envhive.kernels import CartPoleKernel, KernelEngine
from envhive.kernels._adapter import KernelFactory

class DeferredEngine(KernelEngine):
    def __init__(self, kernel):
        super().__init__(kernel)
        self.started = []
    def start(self, ids, options):
        self.started.append((ids.copy(), options))
    def collect(self, min_count):
        out = Completion()
        while self.started:
            ids, options = self.started.pop(0)
            self.run(ids, options, out)
        return out
    def take_finished(self, min_count):
        return None
    def discard(self):
        self.started.clear()

class DeferredFactory(KernelFactory):
    def native_engine(self, num_envs, num_threads=None):
        return DeferredEngine(self.kernel_cls(num_envs, max_episode_steps=self.max_episode_steps))

def factory(entry, kwargs, steps):
    return DeferredFactory(CartPoleKernel, kwargs, steps)

register_kind(EngineKind('deferred', 'scratch_async:factory', 'numba'),
              [CompiledEnv('scratch/Deferred-v0', 'deferred', 'scratch')])
"""


def test_the_native_executor_dispatches_by_the_protocol_an_engine_meets(scratch_registry, tmp_path, monkeypatch):
    """An engine meeting ``AsyncEngine`` runs beside the caller: the native executor's send
    starts its ops, recv collects them, discard forgets them; a plain ``Engine`` runs inside
    send. Either way through the executor's own methods and the declared fast-path
    attributes (``step_all``, ``take_finished``), never methods patched onto the instance."""
    from envhive.engines import AsyncEngine

    (tmp_path / "scratch_async.py").write_text(ASYNC_FAMILY)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("scratch_async")
    deferred = envhive.make("scratch/Deferred-v0", 6, seed=3, batch_size=3, api="pool")
    plain = envhive.make("envhive/CartPole-v1", 6, seed=3, batch_size=3, api="pool")
    for pool, is_async in ((deferred, True), (plain, False)):
        executor = pool.executor
        assert isinstance(executor._engine, AsyncEngine) is is_async
        assert not {"send", "recv", "discard"} & set(vars(executor))
        assert executor.step_all == executor._engine.step_all
        assert executor.take_finished == (executor._engine.take_finished if is_async else None)
    for pool in (deferred, plain):
        pool.async_reset()
    batches = {id(pool): [] for pool in (deferred, plain)}
    rng = np.random.default_rng(0)
    for _ in range(20):
        got = [pool.recv() for pool in (deferred, plain)]
        assert got[0].env_ids.tolist() == got[1].env_ids.tolist()
        actions = rng.integers(0, 2, size=3)
        for pool, batch in zip((deferred, plain), got):
            batches[id(pool)].append((batch.obs.copy(), batch.reward.copy(), batch.terminated.copy()))
            pool.send(actions, batch.env_ids)
    for a, b in zip(batches[id(deferred)], batches[id(plain)]):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    engine = deferred.executor._engine
    assert engine.started  # in flight: sent, not collected
    deferred.executor.discard()
    assert not engine.started and deferred.executor.recv(0).env_ids == []
    for pool in (deferred, plain):
        pool.close()


def test_unknown_ids_are_not_compiled():
    assert compiled_env("CartPole-v1") is None
    assert compiled_env("envhive/Humanoid-v5") is None


# ------------------------------------------------------------------ op rules, compiled once
def test_compiled_op_rules_are_the_ops_module_functions():
    from envhive.engines import _compiled

    assert _compiled.resets_in_op.py_func is _ops.resets_in_op
    ops = np.array([_ops.STEP, _ops.RESET, _ops.STEP_RESET, _ops.STEP_RESET, _ops.STEP_RESET], np.int8)
    term = np.array([True, False, True, False, False])
    trunc = np.array([False, False, False, True, False])
    ids = np.array([4, 3, 2, 1, 0], np.int64)
    want = [i for i in ids.tolist() if _ops.resets_in_op(int(ops[i]), bool(term[i]), bool(trunc[i]))]
    assert _compiled.reset_rows(ids, ops, term, trunc).tolist() == want == [3, 2]
    # The batched engines' Python side: the same rule over arrays.
    from envhive.engines._batched import ended_rows

    assert ended_rows(ids, ops, term, trunc).tolist() == want
    every = [(op, t, u) for op in (_ops.STEP, _ops.RESET, _ops.STEP_RESET) for t in (False, True)
             for u in (False, True)]
    mask = _ops.resets_in_ops(*(np.array(col) for col in zip(*every)))
    assert mask.tolist() == [_ops.resets_in_op(*row) for row in every]


def test_batched_engines_share_the_op_sequence():
    """Every batched engine takes the steps around the op rule from engines._batched."""
    from envhive.engines._batched import BatchedOps
    from envhive.envs.mujoco._native import MujocoEngine
    from envhive.envs.torch import TorchEngine
    from envhive.kernels import _engine

    assert issubclass(MujocoEngine, BatchedOps) and issubclass(TorchEngine, BatchedOps)
    for cls in (MujocoEngine, TorchEngine):  # none restates step_all/run
        assert "step_all" not in vars(cls) and "run" not in vars(cls)
    source = inspect.getsource(_engine.KernelEngine.run)  # its compiled driver does the ops
    assert "refuse_reset_options" in source and "ended_rows" in source and "reset_seeds" in source


def test_drivers_take_the_op_rules_from_the_engines_package():
    """No hand-written copy of the rule in the drivers' source."""
    from envhive.envs.mujoco import _native as mujoco_native
    from envhive.kernels import _engine, _kernel

    for module in (_kernel, _engine, mujoco_native):
        source = inspect.getsource(module)
        assert "STEP_RESET) &" not in source and "== _STEP_RESET" not in source, module.__name__
        assert "reward[i] = 0.0" not in source and "reward[resets] = 0.0" not in source


# ------------------------------------------------------------------ step_all
def test_kernel_step_all_result():
    with envhive.make("envhive/CartPole-v1", 4, seed=0) as env:
        env.reset()
        result = _engine(env).step_all(np.zeros(4, np.int64))
        assert type(result) is StepAllResult
        assert result == (-1, 0, None, None)
        assert _engine(env).step_all(np.full(4, 7, np.int64)).bad == 0


@pytest.mark.parametrize("env_id", ["envhive/Ant-v5", "envhive/Reacher-v5", "envhive/InvertedPendulum-v5"])
def test_mujoco_step_infos_are_neutral_columns(env_id):
    """One column per key, one value per env, gymnasium's dtype; no ``_key`` masks."""
    pytest.importorskip("mujoco")
    n = 3
    gym_id = env_id.split("/", 1)[1]
    with envhive.make(env_id, n, seed=0) as env:
        env.reset()
        engine = _engine(env)
        actions = np.zeros((n, *env.single_action_space.shape), np.float32)
        result = engine.step_all(actions)
        assert type(result) is StepAllResult and result.bad == -1
        want = gym.vector.SyncVectorEnv([lambda: gym.make(gym_id)] * n)
        want.reset(seed=0)
        *_, want_infos = want.step(actions)
        want.close()
        infos = result.step_infos
        assert infos is not None
        assert list(infos) == [k for k in want_infos if not k.startswith("_")]
        for key, column in infos.items():
            assert type(column) is np.ndarray and column.shape == (n,)
            assert column.dtype == want_infos[key].dtype, key
        bad = actions.copy()
        bad[1] = 10.0
        assert engine.step_all(bad) == (1, 0, None, None)


def test_pool_still_reports_gymnasiums_layout():
    pytest.importorskip("mujoco")
    with envhive.make("envhive/HalfCheetah-v5", 2, seed=0) as env:
        env.reset()
        *_, info = env.step(np.zeros((2, 6), np.float32))
        assert list(info)[:4] == ["x_position", "_x_position", "x_velocity", "_x_velocity"]
        assert info["_reward_ctrl"].tolist() == [True, True]


# ------------------------------------------------------------------ call / set_attr with env ids
def test_kernel_call_takes_env_ids():
    with envhive.make("envhive/CartPole-v1", 3, seed=0) as env:
        env.reset()
        engine = _engine(env)
        states = engine.call("state", (), {})
        got = engine.call("state", (), {}, env_ids=[2, 0])
        np.testing.assert_array_equal(got, [states[2], states[0]])
        assert engine.call("action_space", (), {}, [1]) == [gym.spaces.Discrete(2)]
        executor = env._pool.executor
        np.testing.assert_array_equal(executor.call("state", (), {}, [1]), [states[1]])


def test_mujoco_call_and_set_attr_take_env_ids():
    pytest.importorskip("mujoco")
    with envhive.make("envhive/HalfCheetah-v5", 3, seed=0) as env:
        env.reset()
        executor = env._pool.executor
        executor.set_attr("_ctrl_cost_weight", [0.5, 0.25], env_ids=[2, 0])
        assert executor.call("_ctrl_cost_weight", (), {}) == [0.25, 0.1, 0.5]
        assert executor.call("_ctrl_cost_weight", (), {}, env_ids=[2, 1]) == [0.5, 0.1]
        # The compiled step reads the new weights.
        _, reward, *_ = env.step(np.ones((3, 6), np.float32))
        serial = envhive.make("envhive/HalfCheetah-v5", 3, seed=0, executor="serial")
        serial.reset()
        serial.set_attr("_ctrl_cost_weight", [0.25, 0.1, 0.5])
        _, want, *_ = serial.step(np.ones((3, 6), np.float32))
        serial.close()
        np.testing.assert_array_equal(reward, want)


# ------------------------------------------------------------------ named columns
def test_family_columns_are_named_and_packed_in_order():
    pytest.importorskip("mujoco")
    from envhive.envs.mujoco import ENV_CLASSES
    from envhive.envs.mujoco._families import ADDRESS_COLUMNS, COMMON_PARAMS, column_index

    for env_cls in ENV_CLASSES.values():
        family = family_of(env_cls)
        if family is None:
            continue
        env = env_cls()
        own = family.params(env)
        assert set(own) == set(family.param_names)
        par = family.par(env)
        index = column_index(COMMON_PARAMS, family.param_names)
        assert len(par) == len(index)
        for name, value in own.items():
            assert par[index[name]] == value, (family.__name__, name)
        assert par[index["frame_skip"]] == env._frame_skip
        row = family.row(env)
        assert len(row) == len(ADDRESS_COLUMNS) + len(family.addresses)
        env.close()
    with pytest.raises(ValueError, match="duplicate"):
        column_index(("a",), ("a",))


def test_kernel_params_are_named_columns_read_by_name():
    """Every classic kernel declares its ``params`` columns, packs them in that order, and its
    compiled functions index ``params`` by a named constant, never by a bare offset."""
    import re

    from envhive import kernels

    classes = [kernels.CartPoleKernel, kernels.AcrobotKernel, kernels.MountainCarKernel,
               kernels.MountainCarContinuousKernel, kernels.PendulumKernel]
    for cls in classes:
        assert cls.param_names, cls.__name__
        k = cls(2)
        assert k.params.shape == (len(cls.param_names),)
        source = "".join(inspect.getsource(fn.py_func) for fn in cls.compiled())
        assert not re.search(r"params\[\s*\d", source), cls.__name__
    assert kernels.PendulumKernel(1, g=3.5).params.tolist() == [3.5]
    assert kernels.AcrobotKernel(1, book_or_nips="nips").params.tolist() == [1.0]
    with pytest.raises(ValueError, match="expected \\['g'\\]"):
        kernels.PendulumKernel.packed({"gravity": 1.0})


def test_mypy_checks_every_engine_and_factory_against_the_protocols():
    """Every engine class (one with ``step_all``, or a ``BatchedOps``) and every factory class
    (one with ``native_engine``) is passed, in its own module, to an ``_implements_*`` function
    typed with the protocol it must meet, which mypy (run by ``.ci/run``) checks."""
    src = pathlib.Path(envhive.__file__).parent
    missing = []
    for path in sorted(src.rglob("*.py")):
        if path.parent.name == "engines" and path.name in ("_protocol.py", "_batched.py"):
            continue  # the protocol itself, and the base engines subclass
        tree = ast.parse(path.read_text())
        checked = {}  # class name -> the protocols it is checked against
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("_implements_") and node.args.args:
                ann, ret = node.args.args[0].annotation, node.returns
                if isinstance(ann, ast.Name) and isinstance(ret, ast.Name):
                    checked.setdefault(ann.id, set()).add(ret.id)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            wanted = set()
            if "step_all" in methods or "BatchedOps" in bases:
                wanted.add("Engine")
            if {"start", "collect", "take_finished"} <= methods:
                wanted.add("AsyncEngine")
            if "native_engine" in methods:
                wanted.add("NativeFactory")
            if wanted - checked.get(node.name, set()):
                missing.append(f"{path.relative_to(src)}:{node.name} {sorted(wanted - checked.get(node.name, set()))}")
    assert missing == []
