"""``envhive check``: an env id on every executor, or your env factory checked for the pool.

``envhive check ENV_ID`` runs the id on every executor and autoreset mode and compares each run
with the serial executor's. ``envhive check package.module:factory`` imports a zero-argument
factory returning a ``gymnasium.Env`` and checks, one line each, what the pool relies on.

Examples:
    >>> is_factory_target("envhive.testing.factories:cartpole"), is_factory_target("CartPole-v1")
    (True, False)
    >>> is_factory_target("ale_py:ALE/Pong-v5")  # gymnasium's "module:id" form is an id
    False
    >>> report = check_factory("envhive.testing.factories:cartpole", steps=20)
    >>> report.ok, [line.name for line in report.lines][:3]
    (True, ['import', 'picklable', 'builds'])
"""

from __future__ import annotations

import argparse
import importlib
import numbers
import os
import pickle
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np

import envhive
from envhive._registry import resolve_id
from envhive.engines import compiled_env
from envhive.executors import auto_choice, available_executors

__all__ = ["is_factory_target", "check_factory", "CheckLine", "FactoryReport", "run_check",
           "failure_reason"]

_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def is_factory_target(text: str) -> bool:
    """Whether ``text`` names a callable (``package.module:name``) rather than an env id."""
    return _TARGET.fullmatch(text) is not None


# ------------------------------------------------------------------------- check ENV_ID


def failure_reason(err: BaseException) -> str:
    """One line saying why a check failed: an env's error without its traceback (which env,
    what raised), anything else as ``Type: message``.

    Examples:
        >>> failure_reason(envhive.EnvWorkerError("step raised ValueError: bad", env_id=2,
        ...                                       worker_traceback="Traceback ..."))
        'env 2: step raised ValueError: bad'
        >>> failure_reason(KeyError("x"))
        "KeyError: 'x'"
    """
    if isinstance(err, envhive.EnvWorkerError):
        return _one_line(f"env {err.env_id}: {err.message}")
    return _short(err)


def _check_id(args: argparse.Namespace) -> int:
    """Run an env on every executor and mode and compare with the serial reference.

    Nothing here shows a traceback: a failure is one ``FAIL`` line with its reason (exit
    status 1). When the serial reference itself fails (an unknown id, an entry point that
    does not import, an env that raises while built, reset or stepped), nothing can be
    compared and the check stops there.
    """
    from envhive.testing import assert_same_transcript

    try:
        factory = resolve_id(args.env, None, None)[0]
    except Exception as err:
        print(f"  FAIL  {args.env}: {failure_reason(err)}")
        return 1
    status = 0
    native = compiled_env(args.env) is not None  # kernels, compiled MuJoCo, Atari, ...
    problem = factory.native_problem() if native else None  # type: ignore[attr-defined]
    if problem is not None:
        print(f"  native     not run: {problem.reason}")
    for mode in ("next_step", "same_step", "disabled"):
        reference: Any = None
        others = [e for e in available_executors(include_cluster=False) if e != "serial"]
        if native and problem is None:
            others.insert(0, "native")
        for name in ["serial", *others]:
            try:
                env = envhive.make(args.env, args.num_envs, executor=name, autoreset=mode)
                rec = _seeded_transcript(env, args.steps, disabled=mode == "disabled")
            except Exception as err:
                print(f"  {mode:<10} {name:<10} FAIL: {failure_reason(err)}")
                if reference is None:  # the serial reference: nothing to compare with
                    return 1
                status = 1
                continue
            if reference is None:
                reference = rec
                print(f"  {mode:<10} serial     ok ({args.steps} steps x {args.num_envs} envs)")
                continue
            try:
                assert_same_transcript(reference, rec)
                print(f"  {mode:<10} {name:<10} identical to serial")
            except AssertionError as err:
                status = 1
                print(f"  {mode:<10} {name:<10} DIFFERS from serial: {_one_line(str(err))}")
    try:
        choice = auto_choice([resolve_id(args.env, None, None)[0]] * args.num_envs)
        print(f"  auto executor ({args.num_envs} envs): {choice.label()}: {choice.reason}")
    except Exception as err:
        status = 1
        print(f"  auto executor ({args.num_envs} envs): FAIL: {failure_reason(err)}")
    return status


def _seeded_transcript(env: envhive.VectorEnv, steps: int, disabled: bool = False) -> list[Any]:
    """``env`` reset with seed 0 and stepped ``steps`` times with actions from its action
    space seeded with 0, every result recorded; then closed."""
    from envhive.testing import transcript

    try:
        space = env.action_space
        space.seed(0)
        batches = [space.sample() for _ in range(steps)]
        if disabled:
            return disabled_transcript(env, batches)
        return transcript(env, steps, batches.__getitem__, seed=0)
    finally:
        env.close()


def disabled_transcript(env: envhive.VectorEnv, batches: list[Any]) -> list[Any]:
    """A transcript in autoreset mode ``disabled``: ended envs reset through a reset mask."""
    from envhive.testing._transcript import _snapshot

    rec = [_snapshot(env.reset(seed=0))]
    for actions in batches:
        out = env.step(actions)
        rec.append(_snapshot(out))
        ended = out[2] | out[3]
        if ended.any():
            rec.append(_snapshot(env.reset(options={"reset_mask": np.asarray(ended, bool)})))
    return rec


# ------------------------------------------------------------- check module:factory


@dataclass
class CheckLine:
    """One check: ``status`` is ``"ok"``, ``"FAIL"`` or ``"skip"``; ``detail`` says why."""

    name: str
    status: str
    detail: str

    def __str__(self) -> str:
        return f"  {self.status:<4}  {self.name:<16} {self.detail}"


@dataclass
class FactoryReport:
    """Every check run on one factory, in order."""

    target: str
    lines: list[CheckLine] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No check failed."""
        return all(line.status != "FAIL" for line in self.lines)


class _Failed(Exception):
    """A check failed with this message."""


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split())
    return _one_line(f"{type(err).__name__}: {text}" if text else type(err).__name__, limit)


def _import(target: str) -> Callable[[], Any]:
    module_name, _, attr = target.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:  # as `python -m` would find it
        sys.path.insert(0, os.getcwd())
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise _Failed(f"{target} is a {type(obj).__name__}, not a callable")
    return obj  # type: ignore[no-any-return]


def _picklable(factory: Any) -> str:
    try:
        blob = cloudpickle.dumps(factory)
        cloudpickle.loads(blob)
    except Exception as err:
        raise _Failed(
            f"cloudpickle cannot serialize it ({_short(err, 120)}). The process executor ships "
            "the factory to its workers: use a module-level function or a class that builds "
            "the env, and create locks, files or connections inside the env") from None
    try:
        pickle.dumps(factory)
        how = "pickle and cloudpickle"
    except Exception:
        how = "cloudpickle (not plain pickle: fine, envhive uses cloudpickle)"
    return f"serializes with {how}"


def _describe(env: gym.Env) -> str:
    chain = []
    e: Any = env
    while isinstance(e, gym.Wrapper):
        chain.append(type(e).__name__)
        e = e.env
    return type(e).__name__ + (f" (in {' < '.join(chain)})" if chain else "")


def _space_text(space: gym.Space) -> str:
    if isinstance(space, gym.spaces.Box):
        return f"Box{space.shape} {space.dtype}"
    text = str(space)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_spaces(env: gym.Env) -> str:
    for name in ("observation_space", "action_space"):
        space = getattr(env, name, None)
        if not isinstance(space, gym.spaces.Space):
            raise _Failed(f"env.{name} is {type(space).__name__}, expected a gymnasium.spaces.Space")
    return (f"observation {_space_text(env.observation_space)}, "
            f"action {_space_text(env.action_space)}")


def _check_obs(env: gym.Env, obs: Any, where: str) -> None:
    if not env.observation_space.contains(obs):
        shape = getattr(obs, "shape", None)
        dtype = getattr(obs, "dtype", type(obs).__name__)
        raise _Failed(f"{where} returned an observation outside observation_space "
                      f"(got shape {shape}, dtype {dtype}; space {env.observation_space})")


def _check_reset(env: gym.Env) -> str:
    out = env.reset(seed=0)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise _Failed(f"reset(seed=0) returned {type(out).__name__}"
                      f"{f' of {len(out)}' if isinstance(out, tuple) else ''}; expected (obs, info)")
    obs, info = out
    if not isinstance(info, dict):
        raise _Failed(f"reset(seed=0) returned info of type {type(info).__name__}; expected a dict")
    _check_obs(env, obs, "reset(seed=0)")
    return "reset(seed=0) -> (obs, info), obs in observation_space"


def _is_bool(x: Any) -> bool:
    return isinstance(x, (bool, np.bool_))


def _check_steps(env: gym.Env, steps: int) -> str:
    env.action_space.seed(0)
    env.reset(seed=0)
    ended = 0
    for t in range(steps):
        out = env.step(env.action_space.sample())
        where = f"step {t}"
        if not (isinstance(out, tuple) and len(out) == 5):
            n = len(out) if isinstance(out, tuple) else None
            old = " (gym's old 4-tuple API: split done into terminated, truncated)" if n == 4 else ""
            raise _Failed(f"{where} returned {type(out).__name__}{f' of {n}' if n else ''}; "
                          f"expected (obs, reward, terminated, truncated, info){old}")
        obs, reward, term, trunc, info = out
        _check_obs(env, obs, where)
        if not isinstance(reward, (numbers.Real, np.floating, np.integer)) or isinstance(reward, bool):
            raise _Failed(f"{where}: reward is {type(reward).__name__}; expected a float")
        if not (_is_bool(term) and _is_bool(trunc)):
            raise _Failed(f"{where}: terminated/truncated are {type(term).__name__}/"
                          f"{type(trunc).__name__}; expected bool")
        if not isinstance(info, dict):
            raise _Failed(f"{where}: info is {type(info).__name__}; expected a dict")
        if term or trunc:
            ended += 1
            env.reset()
    return (f"{steps} steps -> (obs, reward, terminated, truncated, info) with bool flags, dict "
            f"info, obs in observation_space ({ended} episodes ended)")


def _check_reset_seed(env: gym.Env) -> str:
    from envhive.testing._transcript import _same, _snapshot

    first = _snapshot(env.reset(seed=123)[0])
    env.action_space.seed(1)
    for _ in range(3):
        if any(env.step(env.action_space.sample())[2:4]):
            break
    second = _snapshot(env.reset(seed=123)[0])
    try:
        _same(first, second, "obs")
    except AssertionError:
        raise _Failed("two reset(seed=123) gave different observations: the env ignores the "
                      "seed (call super().reset(seed=seed) and draw from self.np_random)") from None
    return "two reset(seed=123) gave equal observations"


def _check_worker(factory: Callable[[], Any]) -> str:
    env = envhive.make(factory, 2, executor="process", seed=0)
    try:
        env.reset()
        env.action_space.seed(0)
        for _ in range(5):
            env.step(env.action_space.sample())
        how = re.search(r"executor='([^']*)'", repr(env))
    finally:
        env.close()
    return f"2 envs built, reset and stepped in worker processes ({how[1] if how else 'process'})"


def _check_transcripts(factory: Callable[[], Any], steps: int) -> str:
    from envhive.testing import assert_same_transcript

    recs = [_seeded_transcript(envhive.make(factory, 2, executor="serial", seed=0), steps)
            for _ in range(2)]
    try:
        assert_same_transcript(recs[0], recs[1])
    except AssertionError as err:
        raise _Failed(f"two pools with seed=0 and the same actions differ, first in "
                      f"{_where(str(err))}") from None
    return f"two pools with seed=0 gave identical transcripts ({steps} steps x 2 envs)"


def _where(message: str) -> str:
    """``'call 3[1]: ...'`` (from assert_same_transcript) as ``'the reward of step 3'``."""
    found = re.match(r"call (\d+)\[(\d+)\]", message)
    if found is None:
        return message.split(":")[0]
    call, item = int(found[1]), int(found[2])
    names = ("obs", "info") if call == 0 else ("obs", "reward", "terminated", "truncated", "info")
    what = names[item] if item < len(names) else f"item {item}"
    return f"the {what} of " + ("the first reset" if call == 0 else f"step {call}")


def _time_steps(env: gym.Env, steps: int) -> str:
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(steps)]
    env.reset(seed=0)
    for a in actions[:10]:  # warm-up
        if any(env.step(a)[2:4]):
            env.reset()
    times = []
    clock = time.perf_counter
    for a in actions:
        start = clock()
        out = env.step(a)
        times.append(clock() - start)
        if out[2] or out[3]:
            env.reset()
    us = 1e6 * statistics.median(times)
    return f"median {us:,.1f} us per step over {steps} steps (1 env, this process)"


def auto_line(factory: Callable[[], Any], num_envs: int) -> str:
    """What ``executor="auto"`` picks for ``num_envs`` envs of ``factory``, and why."""
    choice = auto_choice([factory] * num_envs)
    return f"{num_envs} envs: {choice.label()}: {choice.reason}"


def check_factory(target: str, steps: int = 100,
                  emit: Callable[[CheckLine], None] | None = None,
                  num_envs: int = 16) -> FactoryReport:
    """Check the factory ``target`` (``package.module:callable``) for the pool, one line each.

    ``emit`` is called with each line as soon as its check is done. Later checks that need
    an earlier one's result are skipped when it failed.
    """
    report = FactoryReport(target)
    state: dict[str, Any] = {}

    def run(name: str, fn: Callable[[], str], needs: tuple[str, ...] = ()) -> None:
        missing = [n for n in needs if n not in state]
        if missing:
            line = CheckLine(name, "skip", f"needs the {missing[0]!r} check")
        else:
            try:
                line = CheckLine(name, "ok", fn())
                state[name] = True
            except _Failed as err:
                line = CheckLine(name, "FAIL", str(err))
            except Exception as err:
                line = CheckLine(name, "FAIL", failure_reason(err))
        report.lines.append(line)
        if emit is not None:
            emit(line)

    def imported() -> str:
        factory = state["factory"] = _import(target)
        kind = ("a class" if isinstance(factory, type) else "a function"
                if callable(factory) and hasattr(factory, "__code__")
                else f"a {type(factory).__name__} instance")
        return f"{target} is {kind}"

    def builds() -> str:
        env = state["factory"]()
        if not isinstance(env, gym.Env):
            raise _Failed(f"the factory returned {type(env).__name__}; expected a gymnasium.Env")
        state["env"] = env
        return f"the factory returned {_describe(env)}"

    run("import", imported)
    run("picklable", lambda: _picklable(state["factory"]), ("import",))
    run("builds", builds, ("import",))
    run("spaces", lambda: _check_spaces(state["env"]), ("builds",))
    run("reset API", lambda: _check_reset(state["env"]), ("spaces",))
    run("step API", lambda: _check_steps(state["env"], steps), ("reset API",))
    run("seeded reset", lambda: _check_reset_seed(state["env"]), ("step API",))
    run("worker process", lambda: _check_worker(state["factory"]), ("step API",))
    run("seeded pools", lambda: _check_transcripts(state["factory"], steps), ("step API",))
    run("time per step", lambda: _time_steps(state["env"], max(steps, 20)), ("step API",))
    run("auto executor", lambda: auto_line(state["factory"], num_envs), ("step API",))
    if "env" in state:
        state["env"].close()
    return report


def run_check(args: argparse.Namespace) -> int:
    """The ``envhive check`` command: 0 if every check passed, 1 otherwise."""
    if not is_factory_target(args.env):
        return _check_id(args)
    report = check_factory(args.env, args.steps, emit=lambda line: print(line, flush=True),
                           num_envs=args.num_envs)
    failed = sum(line.status == "FAIL" for line in report.lines)
    print(f"{failed} check(s) failed" if failed else "all checks passed")
    return 0 if report.ok else 1
