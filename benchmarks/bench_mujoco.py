"""Per-step time of envhive's MuJoCo envs vs gymnasium's, and the raw MuJoCo floor.

Run (with envhive importable, e.g. ``PYTHONPATH=src``):

    python benchmarks/bench_mujoco.py [--steps 2000] [--repeats 7] [ENV_ID ...]

Every variant replays the same seeded random actions from the same seeded reset, so they all
follow the bit-identical trajectory (episode ends included): the differences are pure Python
overhead. Variants:

* ``envhive``: ``envhive.envs.mujoco`` env (built-in time limit).
* ``gym``: ``gymnasium.make(id).unwrapped`` (the loop counts the time limit itself).
* ``gym+wrappers``: ``gymnasium.make(id)`` (TimeLimit, OrderEnforcing, PassiveEnvChecker).
* ``floor``: ``data.ctrl[:] = a; mj_step(m, d, nstep=frame_skip); mj_rnePostConstraint(m, d)``
  with the same resets (states replayed): the simulator work every variant must do.

Reported: the best of ``--repeats`` runs, in microseconds per step, and the Python overhead
above the floor.

``--python-only`` instead replaces ``mj_step`` by a no-op everywhere (the state then stays
put) and times ``step`` alone: the Python time per step, i.e. the GIL-held time that threads
stepping envs cannot overlap (``mj_rnePostConstraint`` still runs where the env calls it).
Its floor is ``data.ctrl[:] = a`` plus ``mj_rnePostConstraint``.

``--ceiling`` measures the physics ceiling of 64 envs on this machine instead: raw ``mj_step``
in 1 and 2 threads (no envhive, no gymnasium API: ``MjData`` of gymnasium's XML, each thread
stepping its half with ``mujoco.mj_step(m, d, nstep=5)``, which releases the GIL,
free-running), envhive's batched physics (one GIL-free call per thread for its slice) and the
physics loop of the native engine (one numba ``parallel=True`` loop calling ``mj_step`` 5
times and, for Ant, ``mj_rnePostConstraint``). Any vector env, EnvPool included, is bounded by
these figures:

    python benchmarks/bench_mujoco.py --ceiling --repeats 3 --json benchmarks/results/mujoco_ceiling.json
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from envhive._bench import write_results
from envhive.envs.mujoco import ENV_CLASSES, MAX_EPISODE_STEPS


def _actions(space: gym.spaces.Box, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.uniform(space.low, space.high).astype(np.float32) for _ in range(n)]


def _run_env(env: gym.Env, actions: list[np.ndarray], limit: int | None) -> Callable[[], None]:
    def run() -> None:
        env.reset(seed=0)
        t = 0
        for a in actions:
            _, _, terminated, truncated, _ = env.step(a)
            t += 1
            if terminated or truncated or t == limit:
                env.reset()
                t = 0

    return run


def _run_floor(env_id: str, actions: list[np.ndarray]) -> Callable[[], None]:
    # Record where episodes end and the states the env resets to, then replay them raw.
    env = ENV_CLASSES[env_id]()
    env.reset(seed=0)
    start = (env.data.qpos.copy(), env.data.qvel.copy())
    resets: list[tuple[np.ndarray, np.ndarray] | None] = []
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            env.reset()
            resets.append((env.data.qpos.copy(), env.data.qvel.copy()))
        else:
            resets.append(None)
    model, data, frame_skip = env.model, env.data, env.frame_skip
    ctrl = data.ctrl
    step, rne = mujoco.mj_step, mujoco.mj_rnePostConstraint

    def set_state(qpos: np.ndarray, qvel: np.ndarray) -> None:
        mujoco.mj_resetData(model, data)
        data.qpos[:] = qpos
        data.qvel[:] = qvel
        mujoco.mj_forward(model, data)

    def run() -> None:
        set_state(*start)
        for a, reset in zip(actions, resets):
            ctrl[:] = a
            step(model, data, frame_skip)
            rne(model, data)
            if reset is not None:
                set_state(*reset)

    return run


def bench(env_id: str, steps: int, repeats: int) -> dict[str, float]:
    """Return the best microseconds per step of each variant for ``env_id``."""
    ours = ENV_CLASSES[env_id]()
    actions = _actions(ours.action_space, steps)
    limit = MAX_EPISODE_STEPS[env_id]
    runs = {
        "envhive": _run_env(ours, actions, None),
        "gym": _run_env(gym.make(env_id).unwrapped, actions, limit),
        "gym+wrappers": _run_env(gym.make(env_id), actions, None),
        "floor": _run_floor(env_id, actions),
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):  # interleaved, so load changes hit every variant alike
        for name, run in runs.items():
            t0 = time.perf_counter()
            run()
            best[name] = min(best[name], (time.perf_counter() - t0) / steps * 1e6)
    return best


def bench_python_only(env_id: str, steps: int, repeats: int) -> dict[str, float]:
    """Best microseconds per ``step`` with ``mj_step`` a no-op, for each variant."""
    ours = ENV_CLASSES[env_id](max_episode_steps=None)
    gym_env = gym.make(env_id).unwrapped
    wrapped = gym.make(env_id, max_episode_steps=10**9)
    for env in (ours, gym_env, wrapped):
        env.reset(seed=0)
    action = _actions(ours.action_space, 1)[0]
    model, data = ours.model, ours.data
    ctrl, rne = data.ctrl, mujoco.mj_rnePostConstraint

    def floor() -> None:
        ctrl[:] = action
        rne(model, data)

    calls = {"envhive": ours.step, "gym": gym_env.step, "gym+wrappers": wrapped.step}
    modules = [m for name, m in sys.modules.items() if name.startswith("envhive.envs.mujoco.")]
    patched = [m for m in modules if hasattr(m, "mj_step")]
    real = mujoco.mj_step

    def noop(*args: object, **kwargs: object) -> None:
        return None

    best = dict.fromkeys([*calls, "floor"], float("inf"))
    mujoco.mj_step = noop
    for m in patched:
        m.mj_step = noop
    try:
        for _ in range(repeats):
            for name, fn in calls.items():
                t0 = time.perf_counter()
                for _ in range(steps):
                    fn(action)
                best[name] = min(best[name], (time.perf_counter() - t0) / steps * 1e6)
            t0 = time.perf_counter()
            for _ in range(steps):
                floor()
            best["floor"] = min(best["floor"], (time.perf_counter() - t0) / steps * 1e6)
    finally:
        mujoco.mj_step = real
        for m in patched:
            m.mj_step = real
    return best


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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_ids", nargs="*", default=["Ant-v5", "HalfCheetah-v5", "Humanoid-v5"])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--python-only", action="store_true", help="time step() with mj_step a no-op")
    parser.add_argument("--ceiling", action="store_true",
                        help="the physics ceiling of --num-envs envs in 1 and 2 threads (Ant, HalfCheetah)")
    parser.add_argument("--num-envs", type=int, default=64, help="with --ceiling")
    parser.add_argument("--seconds", type=float, default=1.5, help="with --ceiling")
    parser.add_argument("--json", default=None, help="with --ceiling: write the rows here")
    args = parser.parse_args()
    if args.ceiling:
        ids = [e for e in args.env_ids if e in XML] if args.env_ids != parser.get_default("env_ids") else list(XML)
        results = [r for env_id in ids for r in probe(env_id, args.num_envs, args.seconds, args.repeats)]
        if args.json:
            write_results(args.json, results)
        return
    what = "python time per step, above floor" if args.python_only else "python overhead above floor"
    print(f"{'env':<26}{'envhive':>9}{'gym':>9}{'gym+wrap':>10}{'floor':>9}   {what}")
    for env_id in args.env_ids:
        if args.python_only:
            r = bench_python_only(env_id, args.steps * 10, args.repeats)
        else:
            r = bench(env_id, args.steps, args.repeats)
        f = r["floor"]
        print(
            f"{env_id:<26}{r['envhive']:9.2f}{r['gym']:9.2f}{r['gym+wrappers']:10.2f}{f:9.2f}   "
            f"envhive {r['envhive'] - f:5.1f}  gym {r['gym'] - f:5.1f}  "
            f"gym+wrappers {r['gym+wrappers'] - f:5.1f}  (us/step)"
        )


if __name__ == "__main__":
    main()
