"""The Ray executor: a pool's envs on Ray actors, across the machines of a cluster.

Each of ``num_actors`` actors hosts a contiguous slice of envs (:class:`SliceHost`, built
inside the actor from cloudpickled factories) and runs the same worker core as a worker
process, over slice-local buffers. What crosses the network per command and actor: the
command's rows of the input buffers (ops, seeds, actions) as numpy arrays, and back the output
rows (observations, rewards, flags; final observations only of envs whose episode ended) as
numpy arrays through Ray's object store: one batched result per actor per call, never one per
env. Options, object-typed values, infos and errors travel as the core's typed messages,
pickled exactly as on the process executor (``_wire.py``), only when there are any. The parent
applies replies with the pieces the process executor uses (:class:`RunResults`,
:func:`call_results`, :class:`SliceMap`, :class:`SendQueue`, :class:`RestartBook`).

Overlap: ``send`` submits actor calls and returns; ``recv`` gathers finished results with
``ray.wait`` (first-finished first, by the time each actor reports), so an async pool keeps the
cluster busy while the caller learns. Each actor runs one command at a time; later sends to a
busy actor queue here and go out merged when it finishes.

Faults: Ray never retries a step (``max_task_retries=0``: a step is not idempotent) and never
restarts an actor itself (``max_restarts=0``). An actor that dies (its process killed, its node
lost) fails the command it ran, noticed at the next ``ray.wait`` poll (``_POLL_S``) once Ray
knows (at once for a killed process; a lost node within Ray's health-check period): by default
:class:`~envhive.errors.WorkerDiedError` and the executor shuts down; with
``on_worker_failure="restart"`` a new actor is built in its place and the episodes it lost are
reported truncated with ``info["worker_restarted"]``. ``step_timeout`` kills a hung actor.

Cleanup: ``close()`` (and garbage collection, interpreter exit) kills every actor and removes
the placement group: nothing is left in the cluster. Ray itself, if this executor started it,
stays up for the process (as Ray's own libraries leave it).
"""

from __future__ import annotations

import math
import sys
import time
import weakref
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import cloudpickle
import numpy as np

from envhive._arguments import check_count, check_seconds
from envhive._buffers import Buffers
from envhive._extras import require
from envhive._interrupts import deferred_interrupts
from envhive._report import Completion, EnvFactory, EnvProps
from envhive.errors import (
    ClosedError,
    ConfigError,
    ResourceError,
    StepTimeoutError,
    WorkerDiedError,
)
from envhive.executors._core import Call, CallReply, CommandKind, ErrorReply, Run, SetAttr
from envhive.executors._parent import (
    RunResults,
    call_commands,
    call_results,
    not_rebuilt,
    resend_after_rebuild,
    set_attr_commands,
)
from envhive.executors._protocol import Executor
from envhive.executors._ray_actor import SliceHost, final_leaves, input_leaves, output_leaves
from envhive.executors._slices import RestartBook, SendQueue, SliceMap
from envhive.executors._wire import encode_command

__all__ = ["RayExecutor"]

_POLL_S = 0.05  # how often a waiting recv checks step timeouts (ray.wait wakes on results)
_RESTART_ATTEMPTS = 3
_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
#: The arguments of the ``ray.init()`` a RayExecutor makes when Ray is not running yet (the
#: executor's ``address``/``init_kwargs`` override them). A test session sets a small local
#: instance here, started by the first Ray pool and shared by all of them.
DEFAULT_INIT_KWARGS: dict[str, Any] = {"log_to_driver": False}


def _ray() -> ModuleType:
    return require("ray", "ray", 'executor="ray"')


class _Actor:
    """Parent-side handle of one actor: its slice, the command it runs, what queues behind."""

    def __init__(self, w: int, lo: int, hi: int, blob: bytes) -> None:
        self.w, self.lo, self.hi, self.blob = w, lo, hi, blob
        self.handle: Any = None
        self.ref: Any = None  # the running command's ObjectRef
        self.busy: list[int] | None = None  # env ids of the running RUN ([] for a call)
        self.busy_options: dict[str, Any] | None = None
        self.discard = False  # the running command's results are to be dropped
        self.sent_at = 0.0
        self.queue = SendQueue()


class _Cluster:
    """What close() releases, held apart from the executor for ``weakref.finalize``."""

    def __init__(self) -> None:
        self.actors: list[_Actor] = []
        self.group: Any = None  # the placement group

    def __call__(self) -> None:
        ray = _ray()
        if not ray.is_initialized():
            return  # Ray was shut down first: its actors and groups went with it
        for actor in self.actors:
            if actor.handle is not None:
                try:
                    ray.kill(actor.handle, no_restart=True)
                except Exception:  # already dead
                    pass
                actor.handle = actor.ref = None
        if self.group is not None:
            try:
                ray.util.remove_placement_group(self.group)
            except Exception:
                pass
            self.group = None


class RayExecutor(Executor):
    """Runs envs on Ray actors, one contiguous slice of envs per actor.

    Args:
        num_actors: actors to start (default: one per CPU of the cluster, or as many as
            ``envs_per_actor`` needs; at most one per env).
        envs_per_actor: envs per actor, instead of ``num_actors``.
        num_cpus: CPUs each actor reserves (default: Ray's actor default, which schedules it
            where a CPU is and reserves none, so pools never wait for each other's CPUs; with
            a placement group, 1).
        num_gpus: GPUs each actor reserves.
        resources: custom Ray resources each actor reserves (e.g. ``{"simulator": 1}``).
        placement_strategy: ``None`` (default: actors spread over the nodes, Ray's ``"SPREAD"``
            scheduling, no reservation), or a placement-group strategy (``"PACK"``,
            ``"SPREAD"``, ``"STRICT_PACK"``, ``"STRICT_SPREAD"``): one bundle per actor,
            reserved together before any actor starts and freed by ``close()``.
        address: the cluster to join when Ray is not initialized in this process (e.g.
            ``"auto"`` or ``"ray://head:10001"``); default: the running Ray instance, else a
            new local one (``ray.init()``).
        init_kwargs: further arguments of that ``ray.init`` call.
        step_timeout: seconds an actor may take for one command before it is declared hung
            (it is killed).
        on_worker_failure: ``"raise"`` (default) or ``"restart"``, as on the process executor.
        launch_timeout: seconds to wait for the placement group and the actors to start
            (a cluster without the resources asked for fails after that, naming them).

    Examples:
        >>> import envhive
        >>> env = envhive.make("CartPole-v1", 4, executor=RayExecutor(num_actors=2))  # doctest: +SKIP
    """

    name = "ray"

    def __init__(
        self,
        num_actors: int | None = None,
        *,
        envs_per_actor: int | None = None,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        resources: dict[str, float] | None = None,
        placement_strategy: str | None = None,
        address: str | None = None,
        init_kwargs: dict[str, Any] | None = None,
        step_timeout: float | None = None,
        on_worker_failure: str = "raise",
        launch_timeout: float = 300.0,
    ) -> None:
        check_count(num_actors, "num_actors")
        check_count(envs_per_actor, "envs_per_actor")
        if num_actors is not None and envs_per_actor is not None:
            raise ConfigError(
                f"num_actors={num_actors} and envs_per_actor={envs_per_actor}: give one of them"
            )
        if placement_strategy is not None and placement_strategy not in _STRATEGIES:
            raise ConfigError(
                f"placement_strategy: expected None or one of {list(_STRATEGIES)}, got "
                f"{placement_strategy!r}"
            )
        if on_worker_failure not in ("raise", "restart"):
            raise ConfigError(
                f"on_worker_failure: expected 'raise' or 'restart', got {on_worker_failure!r}"
            )
        amounts = {"num_cpus": num_cpus, "num_gpus": num_gpus, **{
            f"resources[{k!r}]": v for k, v in (resources or {}).items()}}
        for what, value in amounts.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise ConfigError(f"{what}: expected a number >= 0 (per actor) or None, got {value!r}")
        if placement_strategy is not None and num_cpus == 0 and not num_gpus and not any((resources or {}).values()):
            raise ConfigError(
                "placement_strategy: a placement group reserves one bundle per actor, and with "
                "num_cpus=0 and no other resources the bundles would be empty"
            )
        check_seconds(step_timeout, "step_timeout")
        check_seconds(launch_timeout, "launch_timeout")
        self.num_actors = num_actors
        self.envs_per_actor = envs_per_actor
        self.num_cpus, self.num_gpus = num_cpus, num_gpus
        self.resources = dict(resources or {})
        self.placement_strategy = placement_strategy
        self.address = address
        self.init_kwargs = dict(init_kwargs or {})
        self.step_timeout = step_timeout
        self.on_worker_failure = on_worker_failure
        self.launch_timeout = launch_timeout
        self._state = _Cluster()
        self._finalizer = weakref.finalize(self, self._state)
        self._closed = False
        self._map = SliceMap(0, 1)
        self._restarts = RestartBook()
        self._buffers: Buffers | None = None
        self._remote: Any = None  # SliceHost as a Ray actor class

    # ------------------------------------------------------------------ launch
    def _connect(self) -> ModuleType:
        ray = _ray()
        if not ray.is_initialized():
            # log_to_driver=False by default: envs' prints stay in the actors' logs.
            ray.init(**{**DEFAULT_INIT_KWARGS, "address": self.address, **self.init_kwargs})
        return ray

    def _count(self, ray: ModuleType, num_envs: int) -> int:
        if self.num_actors is not None:
            return self.num_actors
        if self.envs_per_actor is not None:
            return math.ceil(num_envs / self.envs_per_actor)
        cpus = ray.cluster_resources().get("CPU", 1.0)
        return max(1, int(cpus // (self.num_cpus or 1.0)))

    def launch(self, factories: Sequence[EnvFactory]) -> list[EnvProps]:
        self._claim()
        ray = self._connect()
        self._map = SliceMap(len(factories), self._count(ray, len(factories)))
        for w, (lo, hi) in enumerate(self._map.bounds):
            try:
                blob = cloudpickle.dumps(list(factories[lo:hi]))
            except Exception as err:
                self.close()
                raise ConfigError(
                    f"env {lo}: the env factory cannot be serialized for a Ray actor "
                    f"({type(err).__name__}: {err}). Pass a factory that builds the env, e.g. "
                    "lambda: MyEnv(...); it may capture anything cloudpickle can serialize."
                ) from err
            self._state.actors.append(_Actor(w, lo, hi, blob))
        try:
            self._reserve(ray)
            for actor in self._state.actors:
                self._start(actor)
            return [p for actor in self._state.actors for p in self._handshake(actor)]
        except BaseException:
            self.close()
            raise

    def _bundle(self) -> dict[str, float]:
        bundle = {"CPU": 1.0 if self.num_cpus is None else self.num_cpus, **self.resources}
        if self.num_gpus:
            bundle["GPU"] = self.num_gpus
        return {k: v for k, v in bundle.items() if v}

    def _reserve(self, ray: ModuleType) -> None:
        """Reserve the placement group (one bundle per actor), if one was asked for."""
        if self.placement_strategy is None:
            return
        bundles = [self._bundle() for _ in self._state.actors]
        group = ray.util.placement_group(bundles, strategy=self.placement_strategy)
        self._state.group = group
        ready, _ = ray.wait([group.ready()], timeout=self.launch_timeout)
        if not ready:
            raise ResourceError(
                f"the Ray cluster could not reserve a {self.placement_strategy} placement group "
                f"of {len(bundles)} bundles of {bundles[0]} within {self.launch_timeout:.0f} s "
                f"(cluster resources: {ray.cluster_resources()})"
            )

    def _start(self, actor: _Actor) -> None:
        ray = _ray()
        if self._remote is None:
            self._remote = ray.remote(SliceHost)
        options: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0}
        if self.num_gpus:
            options["num_gpus"] = self.num_gpus
        if self.resources:
            options["resources"] = self.resources
        if self._state.group is not None:  # exactly its bundle's resources, in its bundle
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                self._state.group, placement_group_bundle_index=actor.w
            )
            options["num_cpus"] = self._bundle().get("CPU", 0.0)
        else:
            options["scheduling_strategy"] = "SPREAD"
            if self.num_cpus is not None:
                options["num_cpus"] = self.num_cpus
        actor.handle = self._remote.options(**options).remote(actor.blob, actor.lo, actor.hi, sys.path)

    def _handshake(self, actor: _Actor) -> list[EnvProps]:
        ray = _ray()
        ref = actor.handle.props.remote()
        ready, _ = ray.wait([ref], timeout=self.launch_timeout)
        what = f"actor {actor.w} (envs {actor.lo}..{actor.hi - 1})"
        if not ready:
            raise ResourceError(
                f"{what} did not start within {self.launch_timeout:.0f} s: the Ray cluster may "
                f"lack the resources it asks for (cluster resources: {ray.cluster_resources()})"
            )
        try:
            reply = cloudpickle.loads(ray.get(ref))
        except ray.exceptions.RayError as err:
            raise WorkerDiedError(
                f"{what} died while building its envs: {err}",
                env_ids=list(range(actor.lo, actor.hi)), exitcode=None,
            ) from None
        if isinstance(reply, ErrorReply):
            raise reply.error
        return reply  # type: ignore[no-any-return]

    def bind(self, buffers: Buffers) -> None:
        self._buffers = buffers
        self._results = RunResults(buffers, self._restarts)
        self._inputs = input_leaves(buffers)
        self._outputs = output_leaves(buffers)
        self._finals = final_leaves(buffers)
        try:
            for actor in self._state.actors:
                self._bind_actor(actor)
        except BaseException:
            self.close()
            raise

    def _bind_actor(self, actor: _Actor) -> None:
        ray = _ray()
        assert self._buffers is not None
        try:
            ray.get(actor.handle.bind.remote(self._buffers.slice_spec(actor.hi - actor.lo)))
        except ray.exceptions.RayError as err:
            raise WorkerDiedError(
                f"actor {actor.w} (envs {actor.lo}..{actor.hi - 1}) died while allocating its "
                f"buffers: {err}", env_ids=list(range(actor.lo, actor.hi)), exitcode=None,
            ) from None

    # ------------------------------------------------------------------ commands
    def _check_usable(self) -> None:
        if self._closed:
            raise ClosedError("the ray executor is closed (it may have shut down after an actor failure)")

    def send(self, env_ids: np.ndarray, options: dict[str, Any] | None = None) -> None:
        self._check_usable()
        actors = self._state.actors
        for w, ids in self._map.split(env_ids):
            actor = actors[w]
            if actor.busy is None:
                self._dispatch(actor, ids, options)
            else:
                actor.queue.push(ids, options)

    def _dispatch(self, actor: _Actor, ids: list[int], options: dict[str, Any] | None) -> None:
        b = self._buffers
        assert b is not None
        if self._restarts.lost:  # envs of a rebuilt actor: their ops become resets now
            self._restarts.substitute_lost(ids, b)
        message = None
        big = b.big_seeds_of(ids) if b.big_seeds else None
        if options is not None or self._results.act_objects or big is not None:
            run = Run(ids, options, self._results.object_actions(ids), big)
            message = encode_command(run, f"the reset options or actions of envs {ids}")
        if ids[-1] - ids[0] == len(ids) - 1 and ids == list(range(ids[0], ids[-1] + 1)):
            rows: Any = slice(ids[0], ids[-1] + 1)  # a run of ids (a sync step): views, no copy
        else:
            rows = ids
        inputs = [leaf[rows] for leaf in self._inputs]
        with deferred_interrupts():  # the call goes out and is recorded, or neither
            actor.ref = actor.handle.run.remote(message, ids, inputs)
            actor.busy, actor.busy_options = ids, options
            actor.sent_at = time.monotonic()

    def recv(self, min_count: int) -> Completion:
        self._check_usable()
        out = Completion()
        got = 0
        while got < min_count and any(a.busy is not None for a in self._state.actors):
            got += self._sweep(out, _POLL_S, min_count - got)
        if min_count <= 0:  # a poll: what finished, waiting for none
            self._sweep(out, 0.0, 0)
            self._check_timeouts()
        return out

    def _sweep(self, out: Completion, timeout: float, needed: int = 1) -> int:
        """Collect every finished command, first finished first, and start what queued
        behind each. Waits up to ``timeout`` for the first, or for all when ``needed`` (env
        results the caller waits for) takes every running command (a sync step: one
        ``ray.wait`` instead of one per actor)."""
        ray = _ray()
        busy = {a.ref: a for a in self._state.actors if a.ref is not None}
        if not busy:
            return 0
        refs = list(busy)
        running = sum(len(a.busy or ()) for a in busy.values() if not a.discard)
        want = len(refs) if needed >= running else 1
        ready, _ = ray.wait(refs, num_returns=want, timeout=timeout)
        if not ready:
            self._check_timeouts()
            return 0
        if len(ready) < len(refs):  # any others that finished meanwhile come too
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        results = []
        for ref in ready:
            try:
                results.append((busy[ref], ray.get(ref)))
            except ray.exceptions.RayError as err:
                self._fail(busy[ref], "died", err)  # raises, or rebuilds and resends
        results.sort(key=lambda r: r[1][3])  # by the time each finished
        got = 0
        for actor, result in results:
            got += self._collect(actor, result, out)
            if actor.queue and actor.busy is None:
                self._dispatch(actor, *actor.queue.pop(merge=True))
        return got

    def _collect(self, actor: _Actor, result: Any, out: Completion) -> int:
        with deferred_interrupts():  # reported whole or dropped whole (discard)
            ids, actor.busy, actor.ref = actor.busy or [], None, None
            if actor.discard:
                actor.discard = False
                return 0
            outputs, finals, message, _ = result
            for leaf, values in zip(self._outputs, outputs):
                leaf[ids] = values
            reply = None if message is None else cloudpickle.loads(message)
            if finals is not None:
                assert reply is not None  # finals come only with final infos
                ended = [i for i in ids if i in reply.final_infos]
                for leaf, values in zip(self._finals, finals):
                    leaf[ended] = values
            return self._results.apply(ids, reply, out)

    def discard(self) -> None:
        for actor in self._state.actors:
            actor.queue.clear()
            if actor.busy is not None:
                actor.discard = True
                self._restarts.forget(actor.busy)

    def _drain(self) -> None:
        """Before a call: wait for the commands ``discard`` gave up on, and drop them."""
        while any(a.ref is not None for a in self._state.actors):
            self._sweep(Completion(), _POLL_S)

    # ------------------------------------------------------------------ faults
    def _check_timeouts(self) -> None:
        if self.step_timeout is None:
            return
        now = time.monotonic()
        for actor in self._state.actors:
            if actor.busy is not None and now - actor.sent_at > self.step_timeout:
                self._fail(actor, "hung", None)

    def _fail(self, actor: _Actor, how: str, cause: BaseException | None) -> BaseException | None:
        """Handle a dead or hung actor: rebuild it (restart mode; returns the error a call it
        ran must raise) or shut the executor down and raise."""
        envs = list(range(actor.lo, actor.hi))
        calling = actor.busy == [] and not actor.discard
        doing = "a call/get_attr/set_attr" if actor.busy == [] else f"envs {actor.busy}"
        if how == "hung":
            what = f"exceeded step_timeout={self.step_timeout} s running {doing}"
        else:
            what = f"died while running {doing} ({type(cause).__name__}: {cause})"
        error = StepTimeoutError if how == "hung" else WorkerDiedError
        if self.on_worker_failure == "restart":
            failure = error(
                f"actor {actor.w} (envs {actor.lo}..{actor.hi - 1}) {what}; it was rebuilt (its "
                "envs start a new episode on their next step) and the call's results are lost",
                env_ids=envs, exitcode=None,
            ) if calling else None
            self._restart(actor)
            return failure
        self.close()
        raise error(
            f"actor {actor.w} (envs {actor.lo}..{actor.hi - 1}) {what}; the executor was shut "
            "down. Use on_worker_failure='restart' to rebuild failed actors instead.",
            env_ids=envs, exitcode=None,
        )

    def _restart(self, actor: _Actor) -> None:
        ray = _ray()
        pending, options = actor.busy or [], actor.busy_options
        if actor.discard:  # nobody waits for that command any more
            pending, options = [], None
        actor.busy, actor.ref, actor.discard = None, None, False
        for attempt in range(1, _RESTART_ATTEMPTS + 1):
            try:
                ray.kill(actor.handle, no_restart=True)
            except Exception:  # already dead
                pass
            try:
                self._start(actor)
                self._handshake(actor)
                self._bind_actor(actor)
                break
            except Exception as err:
                if attempt < _RESTART_ATTEMPTS:
                    continue
                self.close()
                raise not_rebuilt("actor", actor, _RESTART_ATTEMPTS, err) from err
        assert self._buffers is not None
        resend_after_rebuild(actor, pending, options, self._restarts, self._buffers, self._dispatch)

    # ------------------------------------------------------------------ env access
    def _roundtrip(
        self, commands: dict[int, Call | SetAttr], order: Sequence[int] | None, what: str
    ) -> dict[int, Any]:
        """Send one Call or SetAttr to each actor in ``commands`` (keyed by slice) and gather
        the values (see :func:`call_results` for what is raised)."""
        messages = {w: encode_command(command, what) for w, command in commands.items()}
        self._check_usable()
        ray = _ray()
        self._drain()
        waiting: dict[Any, _Actor] = {}
        for w, message in messages.items():
            actor = self._state.actors[w]
            with deferred_interrupts():
                actor.ref = actor.handle.call.remote(int(CommandKind.of(commands[w])), message)
                actor.busy, actor.sent_at = [], time.monotonic()
                waiting[actor.ref] = actor
        replies: dict[int, CallReply | ErrorReply] = {}
        failures: dict[int, BaseException] = {}
        while waiting:
            ready, _ = ray.wait(list(waiting), num_returns=1, timeout=_POLL_S)
            for ref in ready:
                actor = waiting.pop(ref)
                try:
                    message = ray.get(ref)
                except ray.exceptions.RayError as err:
                    failure = self._fail(actor, "died", err)
                    failures[actor.w] = failure  # type: ignore[assignment]
                    continue
                actor.busy = actor.ref = None
                replies[actor.w] = cloudpickle.loads(message)
            for ref, actor in list(waiting.items()):
                if self.step_timeout is not None and time.monotonic() - actor.sent_at > self.step_timeout:
                    del waiting[ref]
                    failures[actor.w] = self._fail(actor, "hung", None)  # type: ignore[assignment]
        return call_results(replies, failures, order if order is not None else self._map.all_ids)

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        commands = call_commands(self._map, name, args, kwargs, env_ids)
        replies = self._roundtrip(commands, env_ids, f"the arguments of call({name!r})")
        return self._map.ordered(env_ids, self._map.group(env_ids), replies)

    def set_attr(
        self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None
    ) -> None:
        commands = set_attr_commands(self._map, name, values, env_ids)
        self._roundtrip(commands, env_ids, f"the values of set_attr({name!r})")

    def close(self) -> None:
        self._closed = True
        if self._finalizer.alive:
            with deferred_interrupts():
                self._finalizer()

    def actor_handles(self) -> list[Any]:
        """The live actors' handles, in slice order (for monitoring and tests)."""
        return [a.handle for a in self._state.actors if a.handle is not None]

    def actor_locations(self) -> list[tuple[str, int]]:
        """Each actor's Ray node id and process id, in slice order."""
        ray = _ray()
        return [tuple(x) for x in ray.get([h.where.remote() for h in self.actor_handles()])]  # type: ignore[misc]

    def describe(self) -> str:
        k = len(self._state.actors)
        where = f", {self.placement_strategy} placement group" if self.placement_strategy else ""
        return f"ray, {k} actor{'s' if k != 1 else ''}{where}"
