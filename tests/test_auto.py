"""executor="auto" decides from the env's measured costs (executors/_auto.py).

The decision is a pure function of the costs, so these tests inject costs (and fake clocks
for the probe): no timing. Whatever is chosen, the transitions are the same as serial's.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import envhive
from envhive.errors import EnvWorkerError
from envhive.executors import _auto, auto_choice
from envhive.executors._auto import EnvCosts, ExecutorName, decide, probe
from envhive.testing import CountingEnv, assert_same_transcript, transcript

ALL = ("serial", "thread", "process")

# Costs as the probe would measure them (seconds per step).
WAITING = EnvCosts(step_wall=2e-3, step_cpu=2e-5, gil_free=1.0, obs_bytes=32, info_s=0.0,
                   picklable=True, steps=32)
CPU_BOUND = EnvCosts(step_wall=5e-4, step_cpu=5e-4, gil_free=0.0, obs_bytes=32, info_s=0.0,
                     picklable=True, steps=32)
GIL_FREE = EnvCosts(step_wall=5e-4, step_cpu=5e-4, gil_free=0.95, obs_bytes=32, info_s=0.0,
                    picklable=True, steps=32)
CHEAP = EnvCosts(step_wall=5e-6, step_cpu=5e-6, gil_free=None, obs_bytes=16, info_s=0.0,
                 picklable=True, steps=32)


# ---------------------------------------------------------------------------- decide()
def test_cpu_bound_env_gets_one_process_per_core() -> None:
    for cores in (2, 4):
        choice = decide(CPU_BOUND, 16, cores, ALL)
        assert (choice.executor, choice.num_workers) == ("process", cores)
        assert "computes" in choice.reason and "500 us wall" in choice.reason


def test_waiting_env_gets_more_workers_than_cores_up_to_one_per_env() -> None:
    for n in (16, 64):
        choice = decide(WAITING, n, 2, ALL)
        assert choice.executor in ("thread", "process")
        assert 2 < choice.num_workers <= n
        assert "waits" in choice.reason and "workers > 2 cores" in choice.reason
    assert decide(WAITING, 16, 2, ALL).num_workers == 16


def test_gil_releasing_env_gets_threads() -> None:
    choice = decide(GIL_FREE, 16, 2, ALL)
    assert (choice.executor, choice.num_workers) == ("thread", 2)
    assert "95% without the GIL" in choice.reason


def test_unpicklable_factory_never_goes_to_processes() -> None:
    waiting = replace(WAITING, picklable=False)
    assert decide(waiting, 16, 2, ALL).executor == "thread"
    cpu = replace(CPU_BOUND, picklable=False)
    assert decide(cpu, 16, 2, ALL).executor == "serial"


def test_cheap_env_and_one_core_stay_serial() -> None:
    assert decide(CHEAP, 64, 8, ALL).executor == "serial"
    assert "cheap step" in decide(CHEAP, 64, 8, ALL).reason
    # One core: CPU work cannot run in parallel, waiting still can.
    assert decide(CPU_BOUND, 16, 1, ALL).executor == "serial"
    assert decide(WAITING, 16, 1, ALL).num_workers == 16


def test_only_available_executors_are_chosen() -> None:
    assert decide(WAITING, 16, 2, ("serial", "thread")).executor == "thread"
    assert decide(CPU_BOUND, 16, 2, ("serial",)).executor == "serial"
    assert decide(WAITING, 1, 2, ALL).executor == "serial"


def test_env_that_cannot_be_built_in_the_caller_goes_to_workers() -> None:
    failed = EnvCosts(0, 0, None, 0, 0, True, 0, problem="building it raised OSError: busy")
    assert decide(failed, 4, 2, ALL).executor == "process"
    assert decide(replace(failed, picklable=False), 4, 2, ALL).executor == "serial"
    stepping = replace(failed, problem="stepping it raised ValueError: x")
    assert decide(stepping, 4, 2, ALL).executor == "serial"


# ---------------------------------------------------------------------------- probe()
class _Recorder(CountingEnv):
    closed_count = 0

    def close(self) -> None:
        _Recorder.closed_count += 1
        super().close()


def test_probe_reads_the_injected_clocks_and_closes_its_env() -> None:
    ticks = iter(range(10**6))
    _Recorder.closed_count = 0
    costs = probe(_Recorder, clock=lambda: next(ticks) * 1e-3, cpu_clock=lambda: 0.0, max_steps=8)
    assert costs.problem is None
    assert costs.step_wall == pytest.approx(1e-3) and costs.step_cpu == 0.0  # it waits
    assert costs.steps >= 3 and costs.picklable
    assert _Recorder.closed_count == 2  # the probe env and the GIL test's second env


_SHARED = spaces.Discrete(5)  # an action space shared by every env of a module


class _SharedSpaceEnv(CountingEnv):
    def __init__(self) -> None:
        super().__init__()
        self.action_space = _SHARED


def test_probe_leaves_a_shared_action_space_rng_alone() -> None:
    _SHARED.seed(3)
    before = _SHARED.np_random.bit_generator.state
    probe(_SharedSpaceEnv)
    assert _SHARED.np_random.bit_generator.state == before


class _Unpicklable(CountingEnv):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()  # neither the env nor its factory's closure pickles


def test_probe_reports_an_unpicklable_factory_and_a_failing_step() -> None:
    lock = threading.Lock()
    assert not probe(lambda: (lock, _Unpicklable())[1]).picklable

    class Broken(CountingEnv):
        def step(self, action: Any) -> Any:
            raise ValueError("boom")

    costs = probe(Broken)
    assert costs.problem is not None and "ValueError: boom" in costs.problem


# ---------------------------------------------------------------------------- make()
class _RandomEnv(gym.Env):
    """Random obs, rewards and episode ends from its own seeded RNG."""

    observation_space = spaces.Box(-1, 1, (3,), np.float32)
    action_space = spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action: Any) -> Any:
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, float(self.np_random.normal() + action), bool(self.np_random.random() < 0.1), False, {}


def _actions(t: int) -> np.ndarray:
    return np.array([(t + i) % 3 for i in range(6)])


@pytest.mark.parametrize(
    ("costs", "expected"),
    [(CHEAP, "serial"), (replace(WAITING, picklable=False), "thread"),
     (replace(WAITING, gil_free=None), "process")],
)
def test_results_are_identical_whatever_auto_chooses(monkeypatch: pytest.MonkeyPatch,
                                                     costs: EnvCosts, expected: str) -> None:
    probed: list[Any] = []
    monkeypatch.setattr(_auto, "probe", lambda factory: probed.append(factory) or costs)
    with envhive.make(_RandomEnv, 6, seed=7) as env:
        assert env.executor == expected and env.executor.why == env.executor.choice.reason
        assert f"why={env.executor.why!r}" in repr(env) and f"{expected}" in repr(env)
        got = transcript(env, 30, _actions, seed=7)
    with envhive.make(_RandomEnv, 6, executor="serial", seed=7) as ref:
        assert ExecutorName.of(ref.pool.executor).why is None
        assert_same_transcript(transcript(ref, 30, _actions, seed=7), got)
    assert probed == [_RandomEnv]


def test_num_workers_overrides_auto_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_auto, "probe", lambda factory: replace(WAITING, gil_free=None))
    with envhive.make(_RandomEnv, 4, num_workers=2) as env:
        assert env.executor == "process" and "2 workers" in repr(env)


def test_no_probe_for_one_env_or_declared_executors(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(factory: Any) -> EnvCosts:
        raise AssertionError("probed")

    monkeypatch.setattr(_auto, "probe", refuse)
    with envhive.make(_RandomEnv, 1) as env:
        assert env.executor == "serial" and "why=" not in repr(env)
    with envhive.make("envhive/CartPole-v1", 4) as env:
        assert env.executor == "native" and "declares" in env.executor.why
    assert auto_choice([_RandomEnv]).executor == "serial"


def test_a_factory_that_always_raises_gives_the_same_error_as_serial() -> None:
    def bad() -> gym.Env:
        raise ValueError("no env today")

    with pytest.raises(EnvWorkerError) as serial:
        envhive.make(bad, 2, executor="serial")
    with pytest.raises(EnvWorkerError) as auto:
        envhive.make(bad, 2)  # built in worker processes after the caller failed
    assert (auto.value.env_id, str(auto.value).splitlines()[0]) == (
        serial.value.env_id, str(serial.value).splitlines()[0])


def _only_in_a_worker() -> gym.Env:
    # Refuses the caller (say, a simulator already bound there), builds in any worker process.
    import multiprocessing

    if multiprocessing.parent_process() is None:
        raise OSError("simulator already bound in this process")
    return _RandomEnv()


def test_env_that_only_builds_in_workers_is_not_forced_into_the_caller() -> None:
    with envhive.make(_only_in_a_worker, 2, seed=0) as env:
        assert env.executor == "process" and "could not build" in env.executor.why
        assert env.reset(seed=0)[0].shape == (2, 3)


# ---------------------------------------------------------------------------- the CLI
def test_tune_marks_the_default_and_writes_json_and_png(tmp_path: Any, capsys: Any) -> None:
    from envhive._cli import main

    assert main(["tune", "CartPole-v1", "--num-envs", "2", "--seconds", "0.02", "--spans", "1",
                 "--no-peer", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "<- default (auto)" in text and "cheap step" in text
    doc = json.loads((tmp_path / "tune.json").read_text())
    run = doc["runs"][0]
    runners = [r["runner"] for r in run["results"]]
    assert run["default"] == "envhive serial" and runners[0] == "envhive serial"
    assert {"envhive thread x2", "envhive process x2"} <= set(runners)
    assert (tmp_path / "tune.png").stat().st_size > 0


def test_check_prints_the_auto_decision(capsys: Any) -> None:
    from envhive._cli import main

    main(["check", "envhive.testing.factories:cartpole", "--steps", "20", "--num-envs", "8"])
    out = capsys.readouterr().out
    assert "auto executor" in out and "serial" in out and "cheap step" in out


@pytest.mark.parametrize("name", ["thread", "process"])
def test_more_workers_than_cores_keep_results_and_async_order(name: str) -> None:
    # auto gives waiting envs up to one worker per env, beyond the cores.
    from envhive.executors import resolve_executor
    from envhive.executors._spawn import usable_cpus

    n = 2 * usable_cpus() + 2
    with envhive.make(_RandomEnv, n, executor=resolve_executor(name, n, n)[0], seed=3) as env:
        assert f"{n} " in repr(env)
        actions = lambda t: np.array([(t + i) % 3 for i in range(n)])  # noqa: E731
        got = transcript(env, 10, actions, seed=3)
    with envhive.make(_RandomEnv, n, executor="serial", seed=3) as ref:
        assert_same_transcript(transcript(ref, 10, actions, seed=3), got)
    with envhive.make(_RandomEnv, n, executor=resolve_executor(name, n, n)[0],
                      batch_size=2, seed=3) as env:
        env.async_reset(seed=3)
        seen: list[int] = []
        for _ in range(n // 2):
            seen += env.recv()[4]["env_id"].tolist()
        assert sorted(seen) == list(range(n))  # every env exactly once
        env.send(np.zeros(n, np.int64))
        while len(seen) < 2 * n:
            seen += env.recv()[4]["env_id"].tolist()
        assert sorted(seen[n:]) == list(range(n))



_TICKS = {"wall": 0.0}
_CPU = threading.local()
_TICK_LOCK = threading.Lock()


def _wall() -> float:
    return _TICKS["wall"]


def _thread_cpu() -> float:
    return getattr(_CPU, "used", 0.0)


class _Ticking(CountingEnv):
    """A step costs one tick of its thread's fake CPU clock and ``wall`` ticks of the shared
    fake wall clock: 1 as under the GIL (two threads' steps add up), 0.5 as if two threads
    ran their steps side by side."""

    wall = 1.0

    def step(self, action: Any) -> Any:
        with _TICK_LOCK:
            _TICKS["wall"] += self.wall
        _CPU.used = _thread_cpu() + 1.0
        return super().step(action)


class _TickingFree(_Ticking):
    wall = 0.5


def test_gil_reading_is_not_fooled_by_a_slow_earlier_step() -> None:
    """The two-thread test reads the speedup against one step's time measured earlier
    (``alone``); when that step was slow (a cold cache, a busy moment), the wall clock reads a
    GIL-bound step as running in parallel. The threads' CPU clocks do not: a thread waiting
    for the GIL uses no CPU, so two GIL-bound threads' CPU time adds up to the wall time."""
    for env_class, free in ((_Ticking, 0.0), (_TickingFree, 1.0)):
        env = env_class()
        env.reset()
        try:
            # One step took 3 ticks earlier: by the wall clock alone, even the GIL-bound step reads free.
            assert _auto._gil_free(env_class, env, 8, 3.0, _wall, 2.0, cpu_clock=_thread_cpu) == 1.0
            assert _auto._gil_free(env_class, env, 8, 3.0, _wall, 2.0, waits=0.0, cpu_clock=_thread_cpu) == free
            # A step that mostly waits: its CPU share is no figure to divide by; the wall reads.
            assert _auto._gil_free(env_class, env, 8, 3.0, _wall, 2.0, waits=0.9, cpu_clock=_thread_cpu) == 1.0
        finally:
            env.close()
