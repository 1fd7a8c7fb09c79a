"""Before/after throughput: envhive at a base commit vs a head tree, with the peers, one run.

Shows that a change to the core lost no speed. For each benchmark (64 envs each, or each of
``--num-envs``):

1. ``CartPole serial`` / ``CartPole thread``: the serial / thread executor on gymnasium
   CartPole-v1, vs gymnasium ``SyncVectorEnv``.
2. ``CartPole process`` and ``CartPole process parent_slice``: the process executor (one
   worker per CPU; and ``ProcessExecutor(parent_slice=True)``), vs a plain for-loop over 64
   gymnasium envs in one process.
3. ``native CartPole``: ``envhive.make("envhive/CartPole-v1", 64)`` vs EnvPool.
4. ``native HalfCheetah`` / ``native Ant``: the compiled MuJoCo ``envhive/HalfCheetah-v5`` and
   ``envhive/Ant-v5`` vs EnvPool.
5. ``Atari <Game> x<n> <mode>``: ``envhive/Pong-v5`` and ``envhive/Breakout-v5`` (the native
   Atari engine, ``executor="auto"``) at 8 and 64 envs, sync (``step``) and async (``send`` of
   the half received, ``recv`` of the next half: ``batch_size = n / 2``), vs EnvPool the same
   way (``--only Atari`` runs these alone).

How: ``git worktree add`` of ``--base`` (default ``e95c985``, the commit before the refactor)
into a temporary directory, ``python setup.py -q build_ext --inplace`` there (builds the C loop
wherever that commit keeps it), then for every benchmark and repeat a fresh subprocess for
base, for head and for the peer, base/head order alternating each repeat (A B, B A, ...) so
machine drift hits both alike. The envhive subprocesses get ``PYTHONPATH=<tree>/src`` and
refuse to run unless ``envhive.__file__`` is inside that tree and
``envhive.executors.compiled_runner()`` is true. Each subprocess (this file with ``--worker``)
builds the env, pre-samples 64 action batches (not timed), warms up, then calls
``env.step(actions)`` for ``--seconds`` per rep, ``--reps`` reps, and reports the median rate.
The worker code is the same for base, head and peer, so only the library differs. The table
reports medians over ``--repeats`` in env-steps per second (calls x num_envs / s). The
temporary worktree is removed at the end, also on Ctrl-C or SIGTERM.

Full run (about 4 minutes on 2 cores, estimated from the quick run), from the repository root::

    python benchmarks/compare_commits.py --base e95c985 --json benchmarks/results/compare_commits.json

``--matrix`` measures the pool's own cost instead: CartPole-v1 on the serial, thread and
process executors at 1, 8 and 64 envs, each with sync ``step`` and with EnvPool's async loop
(``recv()`` a batch of half the envs, ``send`` their actions back by ``info["env_id"]``), plus
native CartPole, HalfCheetah and Ant at 64 envs (sync); no peers (the ratio that matters is
head/base). About 15 minutes on 2 cores::

    python benchmarks/compare_commits.py --matrix --base e4b8406 --json /tmp/compare_matrix.json

``--paired ROUNDS`` keeps base, head and the peer alive side by side (one worker process each,
built and warmed up once) and times one span of each per round, the order alternating; the
head/base figure is then the median of the per-round ratios, with their quartiles. Neighbouring
spans see the same machine, so drift slower than a span cancels out: on a shared or throttled
machine it separates base and head far better than fresh subprocesses a minute apart::

    python benchmarks/compare_commits.py --base e4b8406 --paired 16 --json /tmp/paired.json

Smoke run (about a minute)::

    python benchmarks/compare_commits.py --quick

Per-call cost across batch sizes, base and head only::

    python benchmarks/compare_commits.py --base e4b8406 --only cartpole --num-envs 1 8 64 --no-peers

EnvPool (the peer for 3 and 4) is in the ``bench`` extra; if it does not import, its column
reads ``missing`` and the JSON says why.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
NUM_ENVS = 64
N_ACTIONS = 64  # pre-sampled action batches, cycled
ENVHIVE_KINDS = ("serial", "thread", "process", "process_parent_slice", "native", "native_async")
PEER_NAMES = {"gym_sync": "gymnasium SyncVectorEnv", "gym_loop": "plain for-loop",
              "envpool": "EnvPool", "envpool_async": "EnvPool"}
ASYNC_KINDS = ("native_async", "envpool_async")

BENCHMARKS: list[dict[str, str]] = [
    {"name": "CartPole serial", "kind": "serial", "env_id": "CartPole-v1",
     "peer": "gym_sync", "peer_id": "CartPole-v1"},
    {"name": "CartPole thread", "kind": "thread", "env_id": "CartPole-v1",
     "peer": "gym_sync", "peer_id": "CartPole-v1"},
    {"name": "CartPole process", "kind": "process", "env_id": "CartPole-v1",
     "peer": "gym_loop", "peer_id": "CartPole-v1"},
    {"name": "CartPole process parent_slice", "kind": "process_parent_slice",
     "env_id": "CartPole-v1", "peer": "gym_loop", "peer_id": "CartPole-v1"},
    {"name": "native CartPole", "kind": "native", "env_id": "envhive/CartPole-v1",
     "peer": "envpool", "peer_id": "CartPole-v1"},
    {"name": "native HalfCheetah", "kind": "native", "env_id": "envhive/HalfCheetah-v5",
     "peer": "envpool", "peer_id": "HalfCheetah-v5"},
    {"name": "native Ant", "kind": "native", "env_id": "envhive/Ant-v5",
     "peer": "envpool", "peer_id": "Ant-v5"},
    *({"name": f"Atari {game} x{n} {mode}", "kind": "native" if mode == "sync" else "native_async",
       "env_id": f"envhive/{game}-v5", "peer": "envpool" if mode == "sync" else "envpool_async",
       "peer_id": f"{game}-v5", "num_envs": str(n)}
      for game in ("Pong", "Breakout") for n in (8, 64) for mode in ("sync", "async")),
]

#: ``--matrix``: the pool's per-call cost across executors, sizes and sync/async loops.
MATRIX: list[dict[str, Any]] = [
    {"name": f"CartPole {kind} x{n} {mode}", "kind": kind, "env_id": "CartPole-v1",
     "num_envs": n, "mode": mode, "peer": None}
    for kind in ("serial", "thread", "process") for n in (1, 8, 64) for mode in ("sync", "async")
] + [
    {"name": f"native {name} x64 sync", "kind": "native", "env_id": f"envhive/{name}-{v}",
     "num_envs": 64, "mode": "sync", "peer": None}
    for name, v in (("CartPole", "v1"), ("HalfCheetah", "v5"), ("Ant", "v5"))
]


# --------------------------------------------------------------------------- worker side


class _GymLoop:
    """A plain for-loop over ``n`` gymnasium envs in one process, resetting finished envs."""

    def __init__(self, env_id: str, n: int) -> None:
        import gymnasium as gym

        self.envs = [gym.make(env_id) for _ in range(n)]
        self.single_action_space = self.envs[0].action_space

    def reset(self, seed: int) -> None:
        for i, e in enumerate(self.envs):
            e.reset(seed=seed + i)

    def step(self, actions: Any) -> None:
        for e, a in zip(self.envs, actions):
            _, _, term, trunc, _ = e.step(a)
            if term or trunc:
                e.reset()

    def close(self) -> None:
        for e in self.envs:
            e.close()


def _make(kind: str, env_id: str, n: int, batch_size: int | None = None) -> tuple[Any, Any]:
    """(env with reset/step/close, single-env action space) for one runner kind (the async
    kinds ``native_async``/``envpool_async``: ``batch_size = n / 2``)."""
    if kind in ENVHIVE_KINDS:
        import envhive

        kw: dict[str, Any] = {} if batch_size is None else {"batch_size": batch_size}
        if kind == "native_async":
            env = envhive.make(env_id, n, batch_size=max(n // 2, 1), copy=False)
        elif kind in ("serial", "thread", "process"):
            env = envhive.make(env_id, n, executor=kind, **kw)
        elif kind == "process_parent_slice":
            from envhive.executors import ProcessExecutor

            env = envhive.make(env_id, n, executor=ProcessExecutor(parent_slice=True), **kw)
        else:
            env = envhive.make(env_id, n, **kw)
    elif kind == "gym_sync":
        import gymnasium as gym

        env = gym.vector.SyncVectorEnv([lambda: gym.make(env_id) for _ in range(n)])
    elif kind == "gym_loop":
        env = _GymLoop(env_id, n)
    elif kind == "envpool":
        import envpool

        env = envpool.make_gymnasium(env_id, num_envs=n, seed=0)
    elif kind == "envpool_async":
        import envpool

        env = envpool.make_gymnasium(env_id, num_envs=n, batch_size=max(n // 2, 1), seed=0)
    else:
        raise ValueError(f"unknown runner kind {kind!r}")
    space = getattr(env, "single_action_space", None) or env.action_space
    return env, space


def _actions(space: Any, n: int, count: int, seed: int = 1) -> list[Any]:
    """``count`` batches of ``n`` random actions from a single-env Discrete or Box space."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if hasattr(space, "n"):
        return [rng.integers(0, int(space.n), size=n).astype(np.int64) for _ in range(count)]
    low = np.broadcast_to(space.low, space.shape)
    high = np.broadcast_to(space.high, space.shape)
    return [rng.uniform(low, high, size=(n, *space.shape)).astype(space.dtype)
            for _ in range(count)]


def _check_tree(tree: str) -> dict[str, Any]:
    """Import envhive; fail unless it comes from ``tree`` and its compiled loop is active."""
    import envhive
    from envhive.executors import compiled_runner

    where = str(Path(envhive.__file__).resolve())
    root = str(Path(tree).resolve())
    if not where.startswith(root + os.sep):
        raise RuntimeError(f"envhive imported from {where}, not from {root}")
    if not compiled_runner():
        raise RuntimeError(f"envhive's compiled loop is not active in {root} (extension not built?)")
    return {"envhive_file": where, "compiled_runner": True}


class _Runner:
    """One runner, built and warmed up: :meth:`span` times calls for about ``seconds``.

    ``mode="sync"``: ``env.step(actions)``. ``mode="async"`` (and the async kinds): EnvPool's
    loop on a pool with ``batch_size = max(1, n // 2)``: ``recv()`` a batch, ``send`` its
    actions back to the envs it names (``info["env_id"]``); a call is one recv + one send, and
    counts ``batch_size`` env-steps."""

    def __init__(self, spec: dict[str, Any]) -> None:
        kind, env_id = spec["kind"], spec["env_id"]
        n = int(spec.get("num_envs", NUM_ENVS))
        mode = "async" if kind in ASYNC_KINDS else spec.get("mode", "sync")
        self.result: dict[str, Any] = {"kind": kind, "env_id": env_id, "num_envs": n, "mode": mode}
        if kind in ENVHIVE_KINDS:
            self.result.update(_check_tree(spec["tree"]))
        t0 = time.perf_counter()
        self.k = k = max(1, n // 2) if mode == "async" else n
        env, space = _make(kind, env_id, n, k if mode == "async" else None)
        self.env = env
        acts = _actions(space, k, N_ACTIONS)
        if mode == "async":
            env.async_reset()

            def call(i: int) -> None:
                ids = env.recv()[4]["env_id"]
                env.send(acts[i % N_ACTIONS], ids)
        else:
            env.reset(seed=0)

            def call(i: int) -> None:
                env.step(acts[i % N_ACTIONS])
        self.call = call
        warm_end = time.perf_counter() + min(0.5, float(spec["seconds"]) / 2)
        i = 0
        while i < 20 or time.perf_counter() < warm_end:  # JIT, caches, worker start-up
            call(i)
            i += 1
        self.calls = i
        self.result["setup_s"] = time.perf_counter() - t0

    def span(self, seconds: float) -> float:
        """Env-steps per second over one timed span of about ``seconds``."""
        call, calls = self.call, 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(10):
                call(self.calls + calls)
                calls += 1
            now = time.perf_counter()
            if now >= deadline:
                break
        self.calls += calls
        return calls * self.k / (now - start)

    def close(self) -> None:
        self.env.close()


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure one runner: median env-steps/s over ``reps`` timed spans of ``seconds``."""
    runner = _Runner(spec)
    try:
        rates = [runner.span(float(spec["seconds"])) for _ in range(int(spec["reps"]))]
    finally:
        runner.close()
    return {**runner.result, "rep_rates": rates, "rate": statistics.median(rates)}


def serve(spec: dict[str, Any]) -> None:
    """``--paired``'s worker: build the runner, print ``READY``, then one timed span per ``go``
    line on stdin (``RATE <steps/s>`` back), until ``quit`` or end of input."""
    runner = _Runner(spec)
    try:
        print("READY " + json.dumps(runner.result), flush=True)
        for line in sys.stdin:
            if line.strip() != "go":
                break
            print(f"RATE {runner.span(float(spec['seconds']))!r}", flush=True)
    finally:
        runner.close()


# --------------------------------------------------------------------------- driver side


def _interrupt_on_signals() -> None:
    """SIGINT (also if inherited as ignored) and SIGTERM raise KeyboardInterrupt, so the
    ``finally`` blocks remove the temporary worktree."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, handler)


def _run(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def base_worktree(ref: str, build: bool, log: list[dict[str, Any]]) -> Iterator[Path]:
    """A temporary ``git worktree`` of ``ref`` with its C extension built in place; removed after."""
    tmp = Path(tempfile.mkdtemp(prefix="envhive-base-"))
    path = tmp / "tree"
    cmd = ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), ref]
    p = _run(cmd, REPO, 120)
    log.append({"cmd": cmd, "returncode": p.returncode})
    try:
        if p.returncode != 0:
            raise SystemExit(f"git worktree add {ref} failed: {p.stderr.strip()}")
        if build:
            cmd = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
            t0 = time.perf_counter()
            p = _run(cmd, path, 600)
            log.append({"cmd": cmd, "cwd": str(path), "returncode": p.returncode,
                        "seconds": round(time.perf_counter() - t0, 1)})
            if p.returncode != 0:
                raise SystemExit(f"building {ref}'s extension failed: {p.stderr.strip()[-2000:]}")
        yield path
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)],
                       capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True)


def run_one(spec: dict[str, Any], tree: Path | None, timeout: float) -> dict[str, Any]:
    """One measurement in a fresh subprocess; envhive runs get ``PYTHONPATH=<tree>/src``."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if tree is not None:
        env["PYTHONPATH"] = str(tree / "src")
        spec = {**spec, "tree": str(tree)}
    cmd = [sys.executable, str(HERE), "--worker", json.dumps(spec)]
    record: dict[str, Any] = {"cmd": cmd, "pythonpath": env.get("PYTHONPATH")}
    try:
        # cwd outside both trees, so neither is importable from the current directory
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                           cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {**record, "error": f"timeout after {timeout:.0f}s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        return {**record, "error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    return {**record, **json.loads(lines[-1][len("RESULT "):])}


class _Server:
    """A ``--paired`` worker subprocess (:func:`serve`): one runner kept alive across spans."""

    def __init__(self, spec: dict[str, Any], tree: Path | None, timeout: float) -> None:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if tree is not None:
            env["PYTHONPATH"] = str(tree / "src")
            spec = {**spec, "tree": str(tree)}
        self.timeout = timeout
        self.error: str | None = None
        self.info: dict[str, Any] = {}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE), "--serve", json.dumps(spec)], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=tempfile.gettempdir())
        line = self._line()
        if line is not None and line.startswith("READY "):
            self.info = json.loads(line[len("READY "):])
        elif self.error is None:
            self.error = self._fail()

    def _line(self) -> str | None:
        """The worker's next line, or None (``self.error`` says why) after ``timeout``."""
        import selectors

        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(self.timeout):
                self.error = f"no answer within {self.timeout:.0f}s"
                return None
        line = self.proc.stdout.readline()
        return line.strip() or None

    def _fail(self) -> str:
        self.close()
        err = self.proc.stderr.read() if self.proc.stderr is not None else ""
        return (err.strip().splitlines() or ["no output"])[-1]

    def span(self) -> float | None:
        """One timed span; None once the worker has failed."""
        if self.error is not None:
            return None
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.error = self._fail()
            return None
        line = self._line()
        if line is None or not line.startswith("RATE "):
            if self.error is None:
                self.error = self._fail()
            return None
        return float(line[len("RATE "):])

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_paired(spec: dict[str, Any], peer_spec: dict[str, Any] | None, base: Path, head: Path,
               rounds: int, timeout: float) -> dict[str, Any]:
    """Base, head (and the peer) kept alive side by side, one span each per round, the order
    alternating (base head peer, peer head base, ...): neighbouring spans see the same machine,
    so the per-round ratio head/base cancels drift slower than a span."""
    servers = {"base": _Server(spec, base, timeout), "head": _Server(spec, head, timeout)}
    if peer_spec is not None:
        servers["peer"] = _Server(peer_spec, None, timeout)
    try:
        rates: dict[str, list[float]] = {k: [] for k in servers}
        ratios: list[float] = []
        for r in range(rounds):
            order = list(servers) if r % 2 == 0 else list(reversed(servers))
            got = {k: servers[k].span() for k in order}
            for k, v in got.items():
                if v is not None:
                    rates[k].append(v)
            if got["base"] and got["head"]:
                ratios.append(got["head"] / got["base"])
    finally:
        for s in servers.values():
            s.close()
    out: dict[str, Any] = {"rates": rates, "head_base_ratios": ratios,
                           "errors": {k: s.error for k, s in servers.items() if s.error}}
    if ratios:
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        out.update(ratio=statistics.median(ratios), ratio_q1=q[0], ratio_q3=q[2])
    return out


def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return None


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "cpu_count": os.cpu_count(),
        "versions": {m: _version(m) for m in ("numpy", "numba", "gymnasium", "mujoco", "envpool")},
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        info["loadavg_start"] = os.getloadavg()
    return info


def _git_rev(tree: Path) -> str | None:
    p = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() or None


def _git_dirty(tree: Path) -> bool | None:
    p = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                       capture_output=True, text=True)
    return bool(p.stdout.strip()) if p.returncode == 0 else None


def _median(samples: list[dict[str, Any]]) -> float | None:
    rates = [s["rate"] for s in samples if "rate" in s]
    return statistics.median(rates) if rates else None


def _fmt(x: float | None) -> str:
    return "missing" if x is None else f"{x:,.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}"


def table(entries: list[dict[str, Any]]) -> str:
    """The before/after table in markdown."""
    lines = ["| benchmark | base steps/s | head steps/s | head/base | peer steps/s | head/peer |",
             "|---|---:|---:|---:|---:|---:|"]
    for e in entries:
        peer = "-" if e["peer"] is None else f"{_fmt(e['peer_rate'])} ({PEER_NAMES[e['peer']]})"
        ratio = _ratio(e["head"], e["base"])
        if (paired := e.get("paired")) and "ratio" in paired:
            # the median of the per-round ratios, with their quartiles
            ratio = f"{paired['ratio']:.3f} ({paired['ratio_q1']:.2f}-{paired['ratio_q3']:.2f})"
        lines.append(f"| {e['name']} | {_fmt(e['base'])} | {_fmt(e['head'])} | "
                     f"{ratio} | {peer} | {_ratio(e['head'], e['peer_rate'])} |")
    return "\n".join(lines)


def _peer_available(kind: str) -> str | None:
    """None if the peer library imports here, else why not."""
    if kind not in ("envpool", "envpool_async"):
        return None
    p = subprocess.run([sys.executable, "-c", "import envpool"], capture_output=True, text=True,
                       cwd=tempfile.gettempdir())
    if p.returncode == 0:
        return None
    last = (p.stderr.strip().splitlines() or ["import failed"])[-1]
    return f"envpool not importable ({last}); pip install envpool"


def compare(args: argparse.Namespace, base: Path, head: Path, out: dict[str, Any]) -> None:
    """Run every benchmark, base and head interleaved, the peer after each pair."""
    chosen = [b for b in (MATRIX if args.matrix else BENCHMARKS)
              if not args.only or args.only.lower() in b["name"].lower()]
    # A benchmark whose name gives its batch size (Atari x8, x64, the matrix) runs at that size.
    benches = [{**b, "num_envs": int(b["num_envs"])} for b in chosen if "num_envs" in b]
    benches += [{**b, "name": f"{b['name']} x{n}" if len(args.num_envs) > 1 else b["name"], "num_envs": n}
                for b in chosen if "num_envs" not in b for n in args.num_envs]
    missing = {k: why for k in {b["peer"] for b in benches} - {None} if (why := _peer_available(k))}
    if args.no_peers:
        missing = {b["peer"]: "not measured (--no-peers)" for b in benches if b["peer"] is not None}
    out["peers_missing"] = missing
    t_start = time.perf_counter()
    for b in benches:
        spec = {"kind": b["kind"], "env_id": b["env_id"], "seconds": args.seconds,
                "reps": args.reps, "num_envs": b["num_envs"], "mode": b.get("mode", "sync")}
        peer_spec = None if b["peer"] is None else {**spec, "kind": b["peer"], "env_id": b["peer_id"]}
        if args.paired:
            if b["peer"] in missing:
                peer_spec = None
            paired = run_paired(spec, peer_spec, base, head, args.paired, args.timeout)
            med = {k: statistics.median(v) if v else None for k, v in paired["rates"].items()}
            entry = {"name": b["name"], "envhive": spec, "peer": b["peer"],
                     "peer_spec": peer_spec, "base": med["base"], "head": med["head"],
                     "peer_rate": med.get("peer"), "paired": paired}
            out["benchmarks"].append(entry)
            ratio = paired.get("ratio")
            print(f"# {b['name']}: base {_fmt(entry['base'])}, head {_fmt(entry['head'])}, "
                  f"paired head/base {'n/a' if ratio is None else f'{ratio:.3f}'} "
                  f"({time.perf_counter() - t_start:.0f}s)"
                  + (f"; errors: {paired['errors']}" if paired["errors"] else ""),
                  file=sys.stderr, flush=True)
            continue
        samples: dict[str, list[dict[str, Any]]] = {"base": [], "head": [], "peer": []}
        for r in range(args.repeats):
            order = [("base", base), ("head", head)]
            if r % 2:
                order.reverse()
            for label, tree in order:
                samples[label].append(run_one(spec, tree, args.timeout))
            if peer_spec is not None and b["peer"] in missing:
                samples["peer"].append({"error": missing[b["peer"]]})
            elif peer_spec is not None:
                samples["peer"].append(run_one(peer_spec, None, args.timeout))
        entry = {"name": b["name"], "envhive": spec, "peer": b["peer"], "peer_spec": peer_spec,
                 "base": _median(samples["base"]), "head": _median(samples["head"]),
                 "peer_rate": _median(samples["peer"]), "samples": samples}
        out["benchmarks"].append(entry)
        errs = sorted({s["error"] for v in samples.values() for s in v if "error" in s})
        peer = "" if peer_spec is None else f", peer {_fmt(entry['peer_rate'])}"
        print(f"# {b['name']}: base {_fmt(entry['base'])}, head {_fmt(entry['head'])}{peer} "
              f"({time.perf_counter() - t_start:.0f}s)"
              + (f"; errors: {errs}" if errs else ""), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--paired", type=int, default=0, metavar="ROUNDS",
                    help="keep base, head and peer alive side by side and time ROUNDS spans of "
                         "each, alternating; head/base is the median of the per-round ratios")
    ap.add_argument("--base", default="e95c985", help="git ref or commit to compare against")
    ap.add_argument("--head", type=Path, default=REPO,
                    help="source tree to test (its src/ goes on PYTHONPATH; C loop built in place)")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved repeats (default 3)")
    ap.add_argument("--reps", type=int, default=None, help="timed spans per subprocess (default 3)")
    ap.add_argument("--seconds", type=float, default=None, help="per timed span (default 0.5)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run, about a minute: 1 repeat, 1 span of 0.3 s")
    ap.add_argument("--no-build", action="store_true", help="do not build the base's extension")
    ap.add_argument("--timeout", type=float, default=180.0, help="per subprocess, seconds")
    ap.add_argument("--only", help="run benchmarks whose name contains this (case-insensitive)")
    ap.add_argument("--json", type=Path, default=None, help="write results here")
    ap.add_argument("--num-envs", type=int, nargs="+", default=[NUM_ENVS],
                    help=f"batch sizes, each benchmark at each (default {NUM_ENVS})")
    ap.add_argument("--no-peers", action="store_true", help="measure base and head only")
    ap.add_argument("--matrix", action="store_true",
                    help="the pool's cost: serial/thread/process x 1/8/64 envs x sync/async, "
                         "native CartPole/HalfCheetah/Ant (see the module docstring)")
    args = ap.parse_args(argv)

    if args.serve:
        serve(json.loads(args.serve))
        return 0
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0

    quick = {"repeats": 1, "reps": 1, "seconds": 0.3}
    full = {"repeats": 3, "reps": 3, "seconds": 0.5}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    head = args.head.resolve()
    if not (head / "src" / "envhive" / "__init__.py").is_file():
        ap.error(f"--head {head}: no src/envhive/__init__.py there")

    _interrupt_on_signals()
    out: dict[str, Any] = {
        "command": [Path(sys.executable).name, *sys.argv],
        "machine": machine_info(),
        "num_envs": None if args.matrix else args.num_envs, "matrix": args.matrix,
        "repeats": args.repeats, "reps": args.reps,
        "seconds": args.seconds, "quick": args.quick,
        "paired_rounds": args.paired,
        "unit": "env-steps per second (calls x num_envs / s); medians over repeats"
                + (" (rounds); head/base: median of the per-round ratios" if args.paired else ""),
        "setup_commands": [], "benchmarks": [],
    }
    t0 = time.perf_counter()
    try:
        with base_worktree(args.base, not args.no_build, out["setup_commands"]) as base:
            out["base"] = {"ref": args.base, "commit": _git_rev(base), "tree": str(base)}
            out["head"] = {"tree": str(head), "commit": _git_rev(head), "dirty": _git_dirty(head)}
            print(f"# base {args.base} = {out['base']['commit']} in {base}\n"
                  f"# head {head} = {out['head']['commit']}"
                  + (" (+ uncommitted changes)" if out["head"]["dirty"] else ""),
                  file=sys.stderr, flush=True)
            compare(args, base, head, out)
    except KeyboardInterrupt:
        print("# interrupted; temporary worktree removed", file=sys.stderr)
        return 130
    out["machine"]["loadavg_end"] = os.getloadavg()
    out["wall_seconds"] = round(time.perf_counter() - t0, 1)
    print(table(out["benchmarks"]))
    envs = "num_envs as named" if args.matrix else f"{args.num_envs} envs unless the name says"
    how = (f"{args.paired} paired rounds (head/base: median and quartiles of the per-round ratios)"
           if args.paired else f"medians of {args.repeats} interleaved repeats")
    print(f"\n{out['wall_seconds']:.0f}s wall; {how}, "
          f"{envs}, env-steps/s; load {out['machine'].get('loadavg_start')} -> "
          f"{out['machine']['loadavg_end']}", file=sys.stderr)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
