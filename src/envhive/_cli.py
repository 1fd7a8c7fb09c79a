"""The ``envhive`` command: ``bench``, ``list`` and ``check``.

Examples:
    >>> main(["list", "--grep", "no-such-env-id"])
    0
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import envhive
from envhive._bench import Measurement, measure_steps, random_actions
from envhive._registry import _load
from envhive.engines import compiled_env
from envhive.executors import available_executors, compiled_runner

__all__ = ["main"]


def _bench_one(env_id: str, num_envs: int, executor: str, seconds: float) -> Measurement:
    env = envhive.make(env_id, num_envs, executor=executor, seed=0, copy=False)
    try:
        env.reset()
        actions = random_actions(env.action_space, 64)
        return measure_steps(env.step, actions, num_envs, seconds=seconds, runner=f"envhive {executor}", env=env_id)
    finally:
        env.close()


def _bench_gym_sync(env_id: str, num_envs: int, seconds: float) -> Measurement:
    env = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * num_envs, copy=False)
    try:
        env.reset(seed=0)
        actions = random_actions(env.action_space, 64)
        return measure_steps(env.step, actions, num_envs, seconds=seconds, runner="gymnasium SyncVectorEnv", env=env_id)
    finally:
        env.close()


def _bench_gym_vector(env_id: str, num_envs: int, seconds: float) -> Measurement:
    """gymnasium's numpy-vectorized env (``vector_entry_point``), the peer of a kernel."""
    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    try:
        env.reset(seed=0)
        actions = random_actions(env.action_space, 64)
        return measure_steps(env.step, actions, num_envs, seconds=seconds, runner="gymnasium vector_entry_point", env=env_id)
    finally:
        env.close()


def _plan(env_id: str, chosen: list[str] | None) -> tuple[list[str], str, Any]:
    """(executors, gymnasium id of the peer, peer runner) for one env id."""
    compiled = compiled_env(env_id)
    if compiled is not None and compiled.engine == "kernel":
        gym_id: str = getattr(_load(compiled.entry_point), "gym_id")  # noqa: B009
        spec = gym.spec(gym_id)
        peer = _bench_gym_vector if spec.vector_entry_point is not None else _bench_gym_sync
        return (chosen or ["native"]), gym_id, peer
    if compiled is not None:  # compiled MuJoCo: vs gymnasium's own env
        return (chosen or ["native"]), env_id.removeprefix("envhive/"), _bench_gym_sync
    return (chosen or available_executors()), env_id, _bench_gym_sync


def _cmd_bench(args: argparse.Namespace) -> int:
    rows: list[Measurement] = []
    for env_id in args.env:
        executors, gym_id, peer = _plan(env_id, args.executor)
        loop = "compiled" if compiled_runner() else "Python (built without a C compiler)"
        print(f"envhive {envhive.__version__} bench: {env_id}, {args.num_envs} envs, "
              f"~{args.seconds:g} s each; runner loop: {loop}")
        for n in args.num_envs:
            for name in executors:
                rows.append(_bench_one(env_id, n, name, args.seconds))
                _print_row(rows[-1])
            if not args.no_peer:
                rows.append(peer(gym_id, n, args.seconds))
                _print_row(rows[-1])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"envs": args.env, "results": [r.as_dict() for r in rows]}, fh, indent=2)
        print(f"wrote {args.json}")
    return 0


def _print_row(m: Measurement) -> None:
    print(f"  {m.runner:<28} num_envs={m.num_envs:<4} {m.steps_per_s:>12,.0f} steps/s")


def _cmd_list(args: argparse.Namespace) -> int:
    for env_id in envhive.list_envs():
        if args.grep is None or args.grep.lower() in env_id.lower():
            print(env_id)
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    """Run an env on every executor and mode and compare with the serial reference."""
    from envhive.testing import assert_same_transcript, transcript

    status = 0
    for mode in ("next_step", "same_step", "disabled"):
        reference: Any = None
        others = [e for e in available_executors() if e != "serial"]
        if compiled_env(args.env) is not None:  # kernels and compiled MuJoCo ids
            others.insert(0, "native")
        for name in ["serial", *others]:
            env = envhive.make(args.env, args.num_envs, executor=name, autoreset=mode)
            try:
                space = env.action_space
                space.seed(0)
                batches = [space.sample() for _ in range(args.steps)]
                if mode == "disabled":
                    rec = _disabled_transcript(env, batches)
                else:
                    rec = transcript(env, args.steps, batches.__getitem__, seed=0)
            finally:
                env.close()
            if reference is None:
                reference = rec
                print(f"  {mode:<10} serial     ok ({args.steps} steps x {args.num_envs} envs)")
                continue
            try:
                assert_same_transcript(reference, rec)
                print(f"  {mode:<10} {name:<10} identical to serial")
            except AssertionError as err:
                status = 1
                print(f"  {mode:<10} {name:<10} DIFFERS from serial: {err}")
    return status


def _disabled_transcript(env: envhive.VectorEnv, batches: list[Any]) -> list[Any]:
    from envhive.testing._transcript import _snapshot

    rec = [_snapshot(env.reset(seed=0))]
    for actions in batches:
        out = env.step(actions)
        rec.append(_snapshot(out))
        ended = out[2] | out[3]
        if ended.any():
            rec.append(_snapshot(env.reset(options={"reset_mask": np.asarray(ended, bool)})))
    return rec


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``envhive`` command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="envhive", description="Step many RL envs as one batch.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    bench = sub.add_parser("bench", help="steps/s of an env on every available executor")
    bench.add_argument(
        "--env",
        nargs="+",
        default=["CartPole-v1", "envhive/CartPole-v1"],
        help="env ids (default: gymnasium's CartPole-v1 on every general executor, then "
        "envhive's compiled envhive/CartPole-v1 on the native executor)",
    )
    bench.add_argument("--num-envs", type=int, nargs="+", default=[1, 8, 64])
    bench.add_argument("--executor", action="append", help="only this executor (repeatable)")
    bench.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    bench.add_argument(
        "--no-peer", action="store_true", help="skip gymnasium (SyncVectorEnv or vector_entry_point)"
    )
    bench.add_argument("--json", help="also write the results to this JSON file")
    lister = sub.add_parser("list", help="env ids envhive.make accepts")
    lister.add_argument("--grep", help="only ids containing this text")
    check = sub.add_parser("check", help="compare every executor with serial on an env")
    check.add_argument("env")
    check.add_argument("--num-envs", type=int, default=4)
    check.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    handler = {"bench": _cmd_bench, "list": _cmd_list, "check": _cmd_check}[args.cmd]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
