"""The ``envhive`` command: ``bench``, ``list``, ``check`` and ``cache``.

``envhive bench`` measures steps/s next to gymnasium's vector envs (:mod:`envhive._cli_bench`),
``envhive check`` compares executors or checks your env factory (:mod:`envhive._cli_check`),
``envhive list`` prints the env ids and marks those that cannot be built here, ``envhive
cache`` shows (and ``--clear`` empties) the on-disk cache of compiled code.

Errors of envhive's own (``envhive.EnvhiveError``: a mistyped id, a bad option) print their
message, without a traceback, and exit with status 2. ``envhive check`` is the exception: what
fails in the env it checks (an unknown id included) is one ``FAIL`` line with the reason, exit
status 1. Any other exception keeps its traceback.

Examples:
    >>> main(["list", "--grep", "no-such-env-id"])
    0
    >>> main(["check", "CartPole-v9"])  # doctest: +ELLIPSIS
      FAIL  CartPole-v9: UnknownEnvError: Unknown environment id 'CartPole-v9'...
    1
    >>> unbuildable_reason("CartPole-v1") is None
    True
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

import envhive
from envhive._cli_check import disabled_transcript as _disabled_transcript  # noqa: F401 (tests import it here)
from envhive.engines import compiled_env, engine_kind
from envhive.errors import EnvhiveError

__all__ = ["main", "unbuildable_reason"]

# How to install what a missing top-level module belongs to.
_INSTALL = {
    "Box2D": 'pip install swig && pip install "gymnasium[box2d]"',
    "jax": 'pip install "gymnasium[jax]"',
    "mujoco": 'pip install "gymnasium[mujoco]"',
    "torch": "pip install torch",
    "shimmy": 'pip install "shimmy[gym-v26]"',
    "ale_py": "pip install ale-py",
    "mujoco-py": "gymnasium's v2/v3 MuJoCo envs moved to gymnasium-robotics (use the v5 ids)",
}


def _reason(err: BaseException) -> str:
    """A few words on why an import failed: the missing module, else the message's start."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ModuleNotFoundError) and cause.name:
            return f"needs {cause.name.split('.')[0]}"
        cause = cause.__cause__ or cause.__context__
    text = " ".join(str(err).split())
    if "gymnasium-robotics" in text:
        return "needs mujoco-py: moved to gymnasium-robotics"
    if "shimmy" in text:
        return "needs shimmy"
    first = text.split(". ")[0]
    return first if len(first) <= 60 else first[:57] + "..."


def _module_reason(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except Exception as err:
        return _reason(err)
    return None


def _spec_reason(module: str) -> str | None:
    return None if importlib.util.find_spec(module) is not None else f"needs {module}"


def unbuildable_reason(env_id: str) -> str | None:
    """Why ``env_id`` cannot be built on this machine, or ``None`` if it looks buildable.

    Cheap: no env is built. A compiled id needs its engine's package (looked up, not
    imported); any other id's entry point module must import (gymnasium's placeholders for
    ids moved elsewhere raise at once and say where).

    Examples:
        >>> unbuildable_reason("envhive/CartPole-v1") is None
        True
    """
    from envhive._registry import _BUILTIN, _ENVHIVE

    compiled = compiled_env(env_id)
    if compiled is not None:  # its engine kind says what it needs (not imported here)
        return _spec_reason(engine_kind(compiled.engine).needs)
    own = _ENVHIVE.get(env_id) or _BUILTIN.get(env_id)
    if own is not None:
        entry: Any = own.entry_point
    elif env_id in gym.registry:
        entry = gym.registry[env_id].entry_point
    else:
        return "unknown id"
    if isinstance(entry, str):
        return _module_reason(entry.partition(":")[0])
    if callable(entry) and getattr(entry, "__name__", "").startswith("_raise"):
        try:  # gymnasium's placeholders (mujoco-py envs, gym compatibility) only raise
            entry()
        except Exception as err:
            return _reason(err)
    return None


def _cmd_list(args: argparse.Namespace) -> int:
    import warnings

    ids = [i for i in envhive.list_envs() if args.grep is None or args.grep.lower() in i.lower()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reasons = {i: unbuildable_reason(i) for i in ids}
    width = max((len(i) for i in ids), default=0)
    for env_id in ids:
        why = reasons[env_id]
        engine = ""
        if args.engines:  # the engine kind of a compiled id; Python envs run on any executor
            compiled = compiled_env(env_id)
            engine = f"  [{compiled.engine if compiled is not None else 'python'}]"
        if why is None:
            print(f"{env_id:<{width}}{engine}" if engine else env_id)
        elif not args.available:
            print(f"{env_id:<{width}}{engine}  (cannot be built here: {why})")
    missing = sorted({w.removeprefix("needs ").split(":")[0] for w in reasons.values()
                      if w and w.startswith("needs ")})
    count = sum(w is not None for w in reasons.values())
    if count:
        hints = "; ".join(f"{m}: {_INSTALL[m]}" if m in _INSTALL else m for m in missing)
        shown = "left out" if args.available else "marked"
        print(f"{count} of {len(ids)} ids cannot be built here ({shown})"
              + (f". To install: {hints}" if hints else ""), file=sys.stderr)
    return 0


def _cmd_bench(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from envhive._cli_bench import run_bench

    return run_bench(args, argv)


def _cmd_tune(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from envhive._cli_tune import run_tune

    return run_tune(args, argv)


def _cmd_check(args: argparse.Namespace) -> int:
    from envhive._cli_check import run_check

    return run_check(args)


def _dir_size(path: Any) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _cmd_cache(args: argparse.Namespace) -> int:
    """Where envhive's compiled code is cached, how big it is, and (``--clear``) empty it."""
    import shutil

    from envhive.engines._jit import cache_dir

    current = cache_dir()
    if current is None:
        print("compiled-code cache: off (ENVHIVE_CACHE=0); every process compiles")
        return 0
    root = current.parent
    entries = sorted(root.glob("numba-*")) if root.is_dir() else []
    print(f"compiled-code cache: {root}")
    for path in entries:
        what = "in use" if path == current else "from other versions of envhive, numba or mujoco"
        print(f"  {path.name}  {_dir_size(path) / 1e6:7.1f} MB  ({what})")
    if not entries:
        print("  (empty: the first use of each compiled id will compile and fill it)")
    if args.clear:
        stale = [p for p in entries if p != current] if args.stale else entries
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)
        print(f"removed {len(stale)} director{'y' if len(stale) == 1 else 'ies'}")
    return 0


def _parser() -> argparse.ArgumentParser:
    from envhive._cli_bench import add_bench_arguments
    from envhive._cli_tune import add_tune_arguments

    parser = argparse.ArgumentParser(prog="envhive", description="Step many RL envs as one batch.")
    parser.add_argument("--version", action="version", version=f"envhive {envhive.__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)
    bench = sub.add_parser(
        "bench", help="steps/s on every executor next to gymnasium's, with a table, JSON and plot")
    add_bench_arguments(bench)
    tuner = sub.add_parser(
        "tune", help="time every executor and worker count for one env; marks auto's default")
    add_tune_arguments(tuner)
    lister = sub.add_parser("list", help="env ids envhive.make accepts (and which cannot be built here)")
    lister.add_argument("--grep", help="only ids containing this text")
    lister.add_argument("--available", action="store_true", help="only ids that can be built here")
    lister.add_argument("--engines", action="store_true",
                        help="show which engine runs each id (kernel, mujoco, atari, envpool, ...; "
                             "python: a Python env on any executor)")
    check = sub.add_parser(
        "check", help="ENV_ID: compare every executor with serial; package.module:factory: "
        "check your env factory for the pool")
    check.add_argument("env", metavar="ENV_ID | module:factory")
    check.add_argument("--num-envs", type=int, default=4)
    check.add_argument("--steps", type=int, default=200)
    cache = sub.add_parser("cache", help="where compiled code is cached, its size; --clear to empty it")
    cache.add_argument("--clear", action="store_true", help="remove the cached code")
    cache.add_argument("--stale", action="store_true",
                       help="with --clear: only what this envhive/numba/mujoco no longer uses")
    return parser


def _stdout_to_devnull() -> None:
    """After a broken pipe: point stdout at /dev/null so the flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (captured output)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``envhive`` command; returns the exit status.

    0: done; 1: a check failed (or the reader of the output went away); 2: a usage error or
    an ``EnvhiveError`` (message only, no traceback).
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(args_list)
    try:
        if args.cmd in ("bench", "tune"):
            status = (_cmd_bench if args.cmd == "bench" else _cmd_tune)(args, args_list)
        else:
            status = {"list": _cmd_list, "check": _cmd_check, "cache": _cmd_cache}[args.cmd](args)
        sys.stdout.flush()  # a broken pipe shows here, not in the interpreter's exit flush
        return status
    except EnvhiveError as err:
        print(f"envhive {args.cmd}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `envhive list | head`: the reader is gone, stop quietly
        _stdout_to_devnull()
        return 1
    except KeyboardInterrupt:
        print(f"envhive {args.cmd}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
