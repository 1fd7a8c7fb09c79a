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
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import gymnasium as gym
import mujoco
import numpy as np

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_ids", nargs="*", default=["Ant-v5", "HalfCheetah-v5", "Humanoid-v5"])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--python-only", action="store_true", help="time step() with mj_step a no-op")
    args = parser.parse_args()
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
