"""Native (in-C/numpy) vector envs: envhive's native ids vs EnvPool and gymnasium, all in one run.

    python benchmarks/bench_native.py --json benchmarks/results/native.json
    python benchmarks/bench_native.py --quick                # smoke run, all envs, 1 and 8 envs
    python benchmarks/bench_native.py --runners envpool gymnasium   # the peer columns only

Steps per second (one step of one env = 1), random actions pre-generated from the batched
action space and cycled (sampling is not timed), ``--repeats`` interleaved repeats (the runner
order rotates each repeat), medians. For every (env, num_envs) case:

- ``EnvPool sync``: ``envpool.make(id, env_type="gymnasium", num_envs=n, seed=0)``, ``step``
  with a batch of actions. EnvPool runs in a persistent worker subprocess (this file with
  ``--peer-worker envpool``; requests and results are JSON lines on its stdin/stdout), so it
  can live in another venv (``--envpool-python``) and never shares a process with MuJoCo's
  Python bindings; it is measured interleaved with the others, so machine drift hits all alike.
- ``gymnasium``: ``gymnasium.make_vec(id, n, vectorization_mode="vector_entry_point")`` where
  the id has a numpy-vectorized entry point (CartPole-v1), else ``SyncVectorEnv`` (copy=False).
- ``envhive``: :func:`envhive_factory` (``envhive.make("envhive/" + id, num_envs=n)``).

A runner that fails records its error string in the JSON and the run goes on. The envhive row
carries ``ratio_vs``: per peer, the median of the per-repeat ratios envhive/peer (each pair
measured in the same repeat, back to back). EnvPool: ``pip install -r benchmarks/peers/requirements.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

CLASSIC = ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1"]
MUJOCO = ["Ant-v5", "HalfCheetah-v5"]
ENVPOOL = "EnvPool sync"
ENVHIVE = "envhive"
N_ACTIONS = 64  # pre-generated action batches, cycled
PEERS_VENV_PYTHON = "/root/venv-peers/bin/python"


def envhive_factory(env_id: str, n: int) -> Any:
    """The envhive runner's env: a gymnasium-API VectorEnv with ``n`` copies of ``env_id``."""
    import envhive

    return envhive.make("envhive/" + env_id, num_envs=n)


def _bench_helpers() -> tuple[Callable, Callable]:
    """``measure_steps`` and ``random_actions`` from envhive._bench, also in a venv without envhive."""
    try:
        from envhive._bench import measure_steps, random_actions
    except ImportError:  # a peers-only venv: load the file itself (it needs only gymnasium)
        import importlib.util

        path = Path(__file__).resolve().parents[1] / "src" / "envhive" / "_bench.py"
        spec = importlib.util.spec_from_file_location("_envhive_bench", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        measure_steps, random_actions = mod.measure_steps, mod.random_actions
    return measure_steps, random_actions


def _measure(step: Callable, space: Any, n: int, seconds: float) -> dict[str, Any]:
    measure_steps, random_actions = _bench_helpers()
    m = measure_steps(step, random_actions(space, N_ACTIONS), n, seconds=seconds)
    return {"steps_per_s": m.steps_per_s, "us_per_call": 1e6 * m.seconds / m.calls, "calls": m.calls}


# ---------------------------------------------------------------- peer worker (subprocess side)

def _envpool_case(req: dict[str, Any]) -> dict[str, Any]:
    import envpool
    from gymnasium.vector.utils import batch_space

    n = req["num_envs"]
    kw = {"num_threads": req["num_threads"]} if req.get("num_threads") else {}
    env = envpool.make(req["env"], env_type="gymnasium", num_envs=n, seed=req.get("seed", 0), **kw)
    try:
        env.reset()  # envpool ignores reset(seed=...): the seed goes to make()
        space = batch_space(getattr(env, "single_action_space", env.action_space), n)
        out = _measure(env.step, space, n, req["seconds"])
    finally:
        env.close()
        del env
    out["num_threads"] = req.get("num_threads") or "auto"
    return out


def peer_worker(name: str) -> None:
    """Serve measurement requests (JSON lines on stdin), one JSON line per answer on stdout."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed (C++ or Python) goes to stderr, not into the protocol
    sys.stdout = sys.stderr
    warnings.filterwarnings("ignore", message=".*precision lowered.*")

    def say(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    if name != "envpool":
        say({"error": f"unknown peer worker {name!r}"})
        return
    try:
        import envpool
    except Exception as err:
        say({"error": f"{type(err).__name__}: {err}"})
        return
    say({"ready": True, "envpool": envpool.__version__, "python": sys.executable,
         "numpy": np.__version__})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            say(_envpool_case(json.loads(line)))
        except Exception as err:
            say({"error": f"{type(err).__name__}: {err}"})


# ---------------------------------------------------------------- peer worker (parent side)

class PeerWorker:
    """A persistent ``--peer-worker`` subprocess; restarted once if it dies or hangs."""

    def __init__(self, name: str, python: str, timeout: float) -> None:
        self.name, self.python, self.timeout = name, python, timeout
        self.proc: subprocess.Popen | None = None
        self.info: dict[str, Any] = {}
        self.error: str | None = None  # set when the peer cannot be used at all
        self._start()

    def _start(self) -> None:
        cmd = [self.python, str(Path(__file__).resolve()), "--peer-worker", self.name]
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, bufsize=1)
            hello = self._read(120.0)
        except Exception as err:
            self.error = f"cannot start {self.name} worker with {self.python}: {type(err).__name__}: {err}"
            self.stop()
            return
        if "error" in hello:
            self.error = f"{self.name} unavailable in {self.python}: {hello['error']}"
            self.stop()
            return
        self.info = {k: v for k, v in hello.items() if k != "ready"}

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError(f"{self.name} worker gave no answer in {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} worker exited (code {self.proc.wait()})")
        return json.loads(line)

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.error:
            raise RuntimeError(self.error)
        if self.proc is None or self.proc.poll() is not None:
            self._start()
            if self.error:
                raise RuntimeError(self.error)
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            out = self._read(self.timeout + 10 * req["seconds"])
        except Exception:
            self.stop()  # a fresh worker for the next request
            raise
        if "error" in out:
            raise RuntimeError(out["error"])
        return out

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


# ---------------------------------------------------------------- runners (this process)

def _local(build: Callable[[], tuple]) -> Callable[[str, int, float], dict[str, Any]]:
    def run(env_id: str, n: int, seconds: float) -> dict[str, Any]:
        step, space, close = build()
        try:
            return _measure(step, space, n, seconds)
        finally:
            close()
    return run


def runners_for(env_id: str, n: int, which: list[str], worker: PeerWorker | None,
                envpool_threads: int) -> dict[str, Callable[[str, int, float], dict[str, Any]]]:
    """runner name -> run(env_id, n, seconds) returning a measurement dict (raises on failure)."""
    import gymnasium as gym

    out: dict[str, Callable[[str, int, float], dict[str, Any]]] = {}
    if "envpool" in which and worker is not None:
        def envpool_run(e: str, k: int, s: float) -> dict[str, Any]:
            return worker.request({"env": e, "num_envs": k, "seconds": s, "seed": 0,
                                   "num_threads": envpool_threads})
        out[ENVPOOL] = envpool_run
    if "gymnasium" in which:
        try:
            has_vec = gym.spec(env_id).vector_entry_point is not None
        except Exception:
            has_vec = False
        mode = "vector_entry_point" if has_vec else "sync"
        kwargs = {} if has_vec else {"copy": False}

        def gym_build() -> tuple:
            env = gym.make_vec(env_id, n, vectorization_mode=mode, vector_kwargs=kwargs)
            env.reset(seed=0)
            return env.step, env.action_space, env.close
        name = "gymnasium vector_entry_point" if has_vec else "gymnasium SyncVectorEnv"
        out[name] = _local(gym_build)
    if "envhive" in which:
        def hive_build() -> tuple:
            env = envhive_factory(env_id, n)
            env.reset(seed=0)
            return env.step, env.action_space, env.close
        out[ENVHIVE] = _local(hive_build)
    return out


def run_case(env_id: str, n: int, args: argparse.Namespace, worker: PeerWorker | None) -> list[dict[str, Any]]:
    """All runners for one (env, n), ``args.repeats`` interleaved repeats; one row per runner."""
    runners = runners_for(env_id, n, args.runners, worker, args.envpool_threads)
    names = list(runners)
    got: dict[str, dict[int, dict[str, Any]]] = {k: {} for k in names}
    errors: dict[str, str] = {}
    if worker is not None and worker.error and ENVPOOL in runners:
        errors[ENVPOOL] = worker.error
    for r in range(args.repeats):
        shift = r % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            if name in errors:
                continue
            try:
                got[name][r] = runners[name](env_id, n, args.seconds)
            except Exception as err:
                errors[name] = f"{type(err).__name__}: {err}"
    rows = []
    for name in names:
        row: dict[str, Any] = {"runner": name, "env": env_id, "num_envs": n}
        if got[name]:
            ms = list(got[name].values())
            row["steps_per_s"] = float(np.median([m["steps_per_s"] for m in ms]))
            row["us_per_call"] = float(np.median([m["us_per_call"] for m in ms]))
            row["samples"] = [m["steps_per_s"] for m in ms]
        else:
            row["steps_per_s"] = None
        if name in errors:
            row["error"] = errors[name]
        if name == ENVPOOL and worker is not None:
            row["peer"] = dict(worker.info, num_threads=args.envpool_threads or "auto")
        rows.append(row)
    hive = got.get(ENVHIVE, {})
    if hive:  # ratios from the same repeats: envhive and the peer measured back to back
        ratios = {}
        for name in names:
            paired = [hive[r]["steps_per_s"] / got[name][r]["steps_per_s"]
                      for r in hive if name != ENVHIVE and r in got[name]]
            if paired:
                ratios[name] = float(np.median(paired))
        rows[names.index(ENVHIVE)]["ratio_vs"] = ratios
    for row in rows:
        fig = (f"{row['steps_per_s']:>12,.0f} steps/s {row['us_per_call']:>9.1f} us/call"
               if row["steps_per_s"] is not None else f"{'-':>12}")
        err = f"  [{row['error'][:90]}]" if "error" in row else ""
        ratio = "".join(f"  {v:.2f}x vs {k}" for k, v in row.get("ratio_vs", {}).items())
        print(f"{env_id:<25} n={n:<3} {row['runner']:<29} {fig}{ratio}{err}", flush=True)
    return rows


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    for div, suf in ((1e6, "M"), (1e3, "K")):
        if x >= div:
            return f"{x / div:.3g}{suf}"
    return f"{x:.3g}"


def print_table(rows: list[dict[str, Any]]) -> None:
    """Summary: one line per (env, n); steps/s per runner kind and envhive's ratios."""
    cases: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for row in rows:
        kind = "gymnasium" if row["runner"].startswith("gymnasium") else row["runner"]
        cases.setdefault((row["env"], row["num_envs"]), {})[kind] = row
    print()
    print(f"{'env':<25} {'n':>3}  {'EnvPool':>8} {'gymnasium':>11} {'envhive':>8}"
          f"  {'hive/EnvPool':>12} {'hive/gym':>8}")
    for (env_id, n), by in cases.items():
        g = by.get("gymnasium")
        gtxt = "-"
        if g and g["steps_per_s"] is not None:
            gtxt = _fmt(g["steps_per_s"]) + (" (v)" if "vector" in g["runner"] else " (s)")
        ratio = by.get(ENVHIVE, {}).get("ratio_vs", {})
        rp = ratio.get(ENVPOOL)
        rg = next((v for k, v in ratio.items() if k.startswith("gymnasium")), None)
        print(f"{env_id:<25} {n:>3}  {_fmt(by.get(ENVPOOL, {}).get('steps_per_s')):>8} {gtxt:>11} "
              f"{_fmt(by.get(ENVHIVE, {}).get('steps_per_s')):>8}  "
              f"{(f'{rp:.2f}x' if rp else '-'):>12} {(f'{rg:.2f}x' if rg else '-'):>8}")
    print("(v) = gymnasium vector_entry_point (numpy-vectorized), (s) = SyncVectorEnv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=CLASSIC + MUJOCO)
    parser.add_argument("--num-envs", type=int, nargs="+", default=None, help="default: 1 8 64")
    parser.add_argument("--seconds", type=float, default=None, help="per measurement (default 0.75)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repeats (default 3)")
    parser.add_argument("--runners", nargs="+", choices=["envpool", "gymnasium", "envhive"],
                        default=["envpool", "gymnasium", "envhive"])
    parser.add_argument("--envpool-python", default=None,
                        help=f"python with envpool (default: this one if it has envpool, else "
                             f"{PEERS_VENV_PYTHON} if present)")
    parser.add_argument("--envpool-threads", type=int, default=0, help="0: EnvPool's default")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1 and 8 envs, 1 repeat, 0.15 s, JSON to the temp dir")
    parser.add_argument("--json", default=None, help="default: benchmarks/results/native.json")
    parser.add_argument("--peer-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer_worker:
        peer_worker(args.peer_worker)
        return
    args.num_envs = args.num_envs or ([1, 8] if args.quick else [1, 8, 64])
    args.seconds = args.seconds or (0.15 if args.quick else 0.75)
    args.repeats = args.repeats or (1 if args.quick else 3)
    if args.json is None:
        args.json = (os.path.join(tempfile.gettempdir(), "envhive-native-quick.json") if args.quick
                     else str(Path(__file__).resolve().parent / "results" / "native.json"))
    args.json = os.path.abspath(args.json)
    # MuJoCo appends every warning (gymnasium's HalfCheetah XML: 'settotalmass' is deprecated)
    # to MUJOCO_LOG.TXT in the working directory: keep that out of the source tree.
    os.chdir(tempfile.mkdtemp(prefix="bench_native-"))
    warnings.filterwarnings("ignore", message=".*precision lowered.*")

    worker = None
    if "envpool" in args.runners:
        python = args.envpool_python
        if python is None:
            import importlib.util

            has = importlib.util.find_spec("envpool") is not None
            python = sys.executable if has or not os.path.exists(PEERS_VENV_PYTHON) else PEERS_VENV_PYTHON
        worker = PeerWorker("envpool", python, timeout=120.0)
        print(f"EnvPool: {worker.error or worker.info}", flush=True)

    from envhive._bench import write_results

    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    try:
        for env_id in args.envs:
            for n in args.num_envs:
                rows.extend(run_case(env_id, n, args, worker))
    finally:
        if worker is not None:
            worker.stop()
    print_table(rows)
    print(f"({time.perf_counter() - start:.0f} s)")
    write_results(args.json, rows)


if __name__ == "__main__":
    main()
