"""executor="auto" on a shared machine (executors/_load.py, _auto.py, the thread executor's
revisit): the share of the cores the probe measures, the decision under that load, the
revisit of a thread choice with the pool's own calls, and the background load of ``envhive
tune``. Loads and clocks are injected: nothing here decides on the wall clock.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import envhive
from envhive._bench import background_load
from envhive.executors import ThreadExecutor, _auto, _thread
from envhive.executors._auto import EnvCosts, Load, decide, predict, probe
from envhive.executors._load import cores_for, measure_load, slowest_share
from envhive.testing import CountingEnv, assert_same_transcript, transcript
from tests.test_auto import ALL, CHEAP, CPU_BOUND, GIL_FREE, WAITING

# A MuJoCo-like step: short, mostly without the GIL.
SHORT_GIL_FREE = replace(GIL_FREE, step_wall=1.2e-4, step_cpu=1.2e-4, gil_free=0.8, obs_bytes=300)
KINDS = {"waiting": WAITING, "cpu_bound": CPU_BOUND, "gil_free": GIL_FREE,
         "short_gil_free": SHORT_GIL_FREE, "cheap": CHEAP}


def idle(cores: int) -> Load:
    """What the probe's threads get on an idle machine (a little short of every core)."""
    k = min(cores, 8)
    return Load(cores, k, 0.97 * k)


def busy(cores: int, others: int) -> Load:
    """What they get beside ``others`` busy processes: ``k C / (k + B)`` cores."""
    k = min(cores, 8)
    return Load(cores, k, k * cores / (k + others))


# ---------------------------------------------------------------------------- the load
def test_load_reads_other_busy_work_from_the_cores_the_threads_got() -> None:
    assert Load(2, 2, 2.0).others == 0 and not Load(2, 2, 2.0).busy
    assert Load(2, 2, 1.9).others == 0  # noise of a short probe: idle
    assert Load(2, 2, 4 / 3).others == pytest.approx(1.0) and Load(2, 2, 4 / 3).busy
    assert Load(2, 2, 1.0).others == pytest.approx(2.0)
    # Fewer threads than cores that got their cores: nothing is known of the rest (idle).
    assert Load(16, 8, 7.9).others == 0
    assert Load(16, 8, 4.0).others == pytest.approx(24.0)
    assert "busy elsewhere" in Load(2, 2, 4 / 3).summary() and "idle" in Load(2, 2, 2.0).summary()


def test_the_cores_a_pool_gets_beside_other_work() -> None:
    assert cores_for(1, 2, 1.0) == 1.0 and cores_for(2, 2, 0.0) == 2.0
    assert cores_for(2, 2, 1.0) == pytest.approx(4 / 3)
    assert cores_for(16, 2, 1.0) > cores_for(4, 2, 1.0) > cores_for(2, 2, 1.0)  # more shares
    # The slowest worker of a sync call: one per core beside a busy process shares its core.
    assert slowest_share(2, 2, 0.0) == 1.0 and slowest_share(2, 2, 1.0) == 0.5
    assert slowest_share(16, 2, 1.0) == pytest.approx(1 / 9)


def test_measure_load_runs_one_thread_per_core_and_leaves_none_behind() -> None:
    load = measure_load(2, seconds=0.01)
    assert load.cores == 2 and load.threads == 2 and 0 < load.got <= 2.5
    assert measure_load(64, seconds=0.005).threads == 8
    assert not [t for t in threading.enumerate() if t.name.startswith("envhive-load")]


# ---------------------------------------------------------------------------- decide()
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("cores", [2, 4])
@pytest.mark.parametrize("n", [16, 64])
def test_an_idle_measurement_changes_no_choice(kind: str, cores: int, n: int) -> None:
    costs = KINDS[kind]
    before = decide(costs, n, cores, ALL)
    after = decide(replace(costs, load=idle(cores)), n, cores, ALL)
    assert (after.executor, after.num_workers) == (before.executor, before.num_workers)
    assert after.predicted == before.predicted and after.predicted_idle == {}


@pytest.mark.parametrize("costs", [CPU_BOUND, replace(CPU_BOUND, step_wall=1e-3, step_cpu=1e-3)])
@pytest.mark.parametrize("n", [16, 64])
def test_a_busy_machine_gets_no_worker_per_core_and_no_pile_of_workers(costs: EnvCosts, n: int) -> None:
    cores = 2
    idle_choice = decide(costs, n, cores, ALL)
    assert (idle_choice.executor, idle_choice.num_workers) == ("process", cores)
    choice = decide(replace(costs, load=busy(cores, 1)), n, cores, ALL)
    # One worker per core waits, every call, for the one sharing its core with the other
    # process; workers beyond the cores dilute that, up to 4 per core for a computing env.
    assert choice.executor == "process" and cores < choice.num_workers <= 4 * cores
    assert "busy elsewhere" in choice.reason and "with and without it" in choice.reason
    label = choice.label()
    assert choice.predicted[label] >= 1.2 * choice.predicted["serial"]  # the floor, loaded
    # ... and it holds without the load too.
    assert choice.predicted_idle[label] >= 0.85 * max(choice.predicted_idle.values())


def test_a_busy_machine_keeps_serial_when_nothing_is_clearly_faster() -> None:
    # A short computing step beside a busy process: its process round trips cost as much as
    # the share of the cores more workers would win, so nothing is predicted 1.2x serial
    # under that load, and the cheap choice stands (on an idle machine processes would win).
    short = replace(CPU_BOUND, step_wall=3.5e-5, step_cpu=3.5e-5)
    assert decide(short, 16, 2, ALL).executor == "process"
    choice = decide(replace(short, load=busy(2, 1)), 16, 2, ALL)
    assert choice.executor == "serial" and "no executor predicted" in choice.reason
    assert max(choice.predicted.values()) < 1.2 * choice.predicted["serial"]


def test_a_waiting_env_keeps_its_workers_on_a_busy_machine() -> None:
    for n in (16, 64):
        choice = decide(replace(WAITING, load=busy(2, 1)), n, 2, ALL)
        assert (choice.executor, choice.num_workers) == ("process", n)
        assert "as it waits" in choice.reason


def test_a_busy_machine_counts_run_queue_delay_as_computing_not_waiting() -> None:
    # Beside 3 busy processes on 2 cores the caller got 0.4 of a core: a 300 us computation
    # took 750 us of wall time. Read as waiting, it would get one worker per env.
    costs = replace(CPU_BOUND, step_wall=7.5e-4, step_cpu=3e-4, load=busy(2, 4))
    choice = decide(costs, 64, 2, ALL)
    assert choice.num_workers is None or choice.num_workers <= 8
    assert "computes" in choice.reason or choice.executor == "serial"


def test_serial_prediction_under_load_is_what_the_probe_saw() -> None:
    # The probe's wall time already includes the other load: predicting serial under that
    # load gives the probe's own rate back.
    costs = replace(CPU_BOUND, step_wall=7.5e-4, step_cpu=3e-4, load=busy(2, 4))
    assert predict(costs, "serial", 1, 16, 2, over=_auto.Overheads(per_env=0.0)) == pytest.approx(1 / 7.5e-4)


# ---------------------------------------------------------------------------- probe()
def test_probe_records_the_load_it_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter(range(10**6))
    seen: list[int] = []

    def load(cores: int) -> Load:
        seen.append(cores)
        return busy(cores, 1)

    costs = probe(CountingEnv, clock=lambda: next(ticks) * 1e-3, cpu_clock=lambda: 0.0,
                  max_steps=8, load=load, cores=2)
    assert seen == [2] and costs.load == busy(2, 1) and costs.others == pytest.approx(1.0)
    assert "busy elsewhere" in costs.summary()


def test_probe_measures_no_load_for_a_cheap_env_nor_when_threads_run_out() -> None:
    def refuse(cores: int) -> Load:
        raise AssertionError("measured")

    assert probe(CountingEnv, load=refuse, max_steps=8).load is None  # a cheap step

    def no_threads(cores: int) -> Load:
        raise RuntimeError("can't start new thread")

    ticks = iter(range(10**6))
    costs = probe(CountingEnv, clock=lambda: next(ticks) * 1e-3, cpu_clock=lambda: 0.0,
                  max_steps=8, load=no_threads)
    assert costs.problem is None and costs.load is None and costs.gil_free is not None


# ---------------------------------------------------------------------------- the revisit
_FAKE = [0.0]
_FAKE_LOCK = threading.Lock()
_COSTS = {"main": 1.0, "thread": 1.0}


class _TimedEnv(CountingEnv):
    """Advances the fake clock by what a step costs in the thread that runs it, and records
    which thread that was."""

    ran: list[bool] = []  # per step: run in the caller's (main) thread

    def step(self, action: Any) -> Any:
        main = threading.current_thread() is threading.main_thread()
        with _FAKE_LOCK:
            _FAKE[0] += _COSTS["main" if main else "thread"]
            _TimedEnv.ran.append(main)
        if main:
            # Lets the woken threads take their shares before the caller could take them
            # back, so each route of a trial runs as named.
            time.sleep(2e-3)
        return super().step(action)


def _actions(t: int) -> np.ndarray:
    return np.array([(t + i) % 2 for i in range(4)])


CALLS = _thread._WARM_CALLS + 2 * _thread._TRIAL_CALLS  # warm-up and one trial


@pytest.mark.parametrize(("main", "thread", "route"), [(0.1, 1.0, "caller"), (1.0, 0.1, "threads")])
def test_revisit_keeps_the_route_its_trial_found_faster(monkeypatch: pytest.MonkeyPatch, main: float,
                                                         thread: float, route: str) -> None:
    monkeypatch.setattr(_thread, "_clock", lambda: _FAKE[0])
    monkeypatch.setitem(_COSTS, "main", main)
    monkeypatch.setitem(_COSTS, "thread", thread)
    with envhive.make(_TimedEnv, 4, executor=ThreadExecutor(2, revisit=True), seed=1) as env:
        got = transcript(env, CALLS, _actions, seed=1)  # reset + CALLS - 1 steps: the trial's end
        _TimedEnv.ran = []
        got += transcript(env, 12, _actions, seed=2)
        after = list(_TimedEnv.ran)
        text = repr(env)
    with envhive.make(_TimedEnv, 4, executor="serial", seed=1) as ref:
        want = transcript(ref, CALLS, _actions, seed=1) + transcript(ref, 12, _actions, seed=2)
    assert_same_transcript(got, want)
    if route == "caller":
        assert all(after) and "revisited: the caller alone" in text
    else:
        assert not all(after) and "revisited: threads" in text


def test_revisit_is_off_unless_asked_and_on_when_auto_picks_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_thread, "_clock", lambda: _FAKE[0])
    monkeypatch.setitem(_COSTS, "main", 0.1)
    with envhive.make(_TimedEnv, 4, executor=ThreadExecutor(2), seed=1) as env:
        transcript(env, CALLS + 4, _actions, seed=1)
        assert "revisited" not in repr(env) and not env.pool.executor.revisit
    monkeypatch.setattr(_auto, "probe", lambda factory: replace(WAITING, picklable=False))
    with envhive.make(_TimedEnv, 4, seed=1) as env:
        assert env.executor == "thread" and env.pool.executor.revisit
        transcript(env, CALLS + 4, _actions, seed=1)
        assert "revisited: the caller alone" in repr(env)


# ---------------------------------------------------------------------------- background load
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # background_load reaps what it stops: a stopped pid is gone
    except ProcessLookupError:
        return False
    return True


def test_background_load_runs_its_processes_and_stops_them_on_an_interrupt() -> None:
    with pytest.raises(KeyboardInterrupt):
        with background_load(2) as pids:
            assert len(pids) == 2 and all(_alive(p) for p in pids)
            raise KeyboardInterrupt
    assert not any(_alive(p) for p in pids)


def test_tune_runs_beside_a_background_load(tmp_path: Any, capsys: Any) -> None:
    from envhive._cli import main

    assert main(["tune", "CartPole-v1", "--num-envs", "2", "--seconds", "0.02", "--spans", "1",
                 "--no-peer", "--background-load", "1", "--out", str(tmp_path)]) == 0
    assert "beside 1 busy background process" in capsys.readouterr().out
    doc = json.loads((tmp_path / "tune.json").read_text())
    assert doc["settings"]["background_load"] == 1 and doc["runs"][0]["default"] == "envhive serial"
