"""The physics ceiling of MuJoCo envs on this machine: raw ``mj_step`` in 1 and 2 threads.

No envhive, no gymnasium API: 64 ``MjData`` of gymnasium's XML, each thread stepping its half
with ``mujoco.mj_step(m, d, nstep=5)`` (the GIL is released inside), free-running for a fixed
time. Also envhive's batched physics (``envhive.envs.mujoco._batch.step_physics``: one
GIL-free call per thread for its whole slice), and the physics part of the native engine
(one numba ``parallel=True`` loop over all 64 envs calling ``mj_step`` 5 times and, for Ant,
``mj_rnePostConstraint``; threads set with ``numba.set_num_threads``). Any vector env, EnvPool
included, is bounded by these figures.

    python benchmarks/probe_mujoco_ceiling.py --json benchmarks/results/mujoco_ceiling.json
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

import mujoco
import numpy as np

from envhive._bench import write_results

XML = {"Ant-v5": "ant.xml", "HalfCheetah-v5": "half_cheetah.xml"}


def _threads(work: Any, slices: list[np.ndarray], seconds: float) -> float:
    rates: list[float] = []

    def run(sl: np.ndarray) -> None:
        t0, k = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds:
            work(sl)
            k += 1
        rates.append(k * len(sl) / (time.perf_counter() - t0))

    threads = [threading.Thread(target=run, args=(sl,)) for sl in slices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(rates)


def _native_physics(envs: list[Any]) -> Any:
    """``rate(threads, seconds)``: the native engine's physics loop alone, free-running."""
    import numba

    from envhive.envs.mujoco._libmujoco import libmujoco_fns

    fns = libmujoco_fns()
    c_step, c_rne = fns["mj_step"], fns["mj_rnePostConstraint"]

    @numba.njit(nogil=True, parallel=True)
    def physics(ms, ds, rne):  # type: ignore[no-untyped-def]
        for i in numba.prange(ms.size):
            for _ in range(5):
                c_step(ms[i], ds[i])
            if rne:
                c_rne(ms[i], ds[i])

    ms = np.array([e.model._address for e in envs], np.int64)
    ds = np.array([e.data._address for e in envs], np.int64)
    rne = bool(envs[0].rne_post_constraint)
    physics(ms, ds, rne)

    def rate(threads: int, seconds: float) -> float:
        numba.set_num_threads(threads)
        t0, k = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds:
            physics(ms, ds, rne)
            k += 1
        return k * len(envs) / (time.perf_counter() - t0)

    return rate


def probe(env_id: str, n: int, seconds: float, repeats: int) -> list[dict[str, Any]]:
    import gymnasium.envs.mujoco as gm

    from envhive.envs.mujoco import ENV_CLASSES
    from envhive.envs.mujoco._batch import step_physics

    model = mujoco.MjModel.from_xml_path(os.path.join(os.path.dirname(gm.__file__), "assets", XML[env_id]))
    datas = [mujoco.MjData(model) for _ in range(n)]
    envs = [ENV_CLASSES[env_id]() for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i)

    def raw(sl: np.ndarray) -> None:
        for i in sl:
            mujoco.mj_step(model, datas[i], nstep=5)

    def batched(sl: np.ndarray) -> None:
        step_physics([envs[i] for i in sl])

    native = _native_physics(envs)
    rows: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeats):
        for name, work in (("raw mj_step", raw), ("envhive batched physics", batched)):
            for k in (1, 2):
                rate = _threads(work, np.array_split(np.arange(n), k), seconds)
                rows.setdefault((name, k), []).append(rate)
        for k in (1, 2):
            rows.setdefault(("native engine physics", k), []).append(native(k, seconds))
    out = []
    for (name, k), rates in rows.items():
        med = float(np.median(rates))
        print(f"{env_id:<16} {name:<26} {k} thread(s) {med:>10,.0f} steps/s")
        out.append({"env": env_id, "runner": name, "threads": k, "num_envs": n, "steps_per_s": med, "all": rates})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(XML))
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default="benchmarks/results/mujoco_ceiling.json")
    args = parser.parse_args()
    results = [r for env_id in args.envs for r in probe(env_id, args.num_envs, args.seconds, args.repeats)]
    write_results(args.json, results)


if __name__ == "__main__":
    main()
