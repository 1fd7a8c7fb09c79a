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
:func:`call_results`, :class:`SliceMap`, :class:`SendQueue`, :class:`RestartBook`), and is
supervised by the same code (:class:`~envhive.executors._supervisor.Supervisor`: launch, faults,
restarts, calls, close, fork); this module is the transport.

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
A Ctrl-C while an actor is rebuilt kills the half-built replacement: the next command finds
the actor dead and rebuilds it, as on the process executor.

Cleanup: ``close()`` (and garbage collection, interpreter exit) kills every actor and removes
the placement group: nothing is left in the cluster. Ray itself, if this executor started it,
stays up for the process (as Ray's own libraries leave it). A process forked from the caller
cannot use the pool (``ClosedError``) and never kills its parent's actors; note that Ray
itself does not support ``fork`` after ``ray.init()``: such a child hangs in Ray's own exit
hook unless it leaves with ``os._exit``.
"""

from __future__ import annotations

import math
import sys
import time
from types import ModuleType
from typing import Any

import cloudpickle

from envhive._arguments import check_count, check_seconds
from envhive._buffers import Buffers
from envhive._extras import require
from envhive._interrupts import deferred_interrupts
from envhive._report import Completion, EnvProps
from envhive.errors import ConfigError, ResourceError, WorkerDiedError
from envhive.executors._core import CommandKind, ErrorReply
from envhive.executors._ray_actor import SliceHost, final_leaves, input_leaves, output_leaves
from envhive.executors._supervisor import Slot, Supervisor

__all__ = ["RayExecutor"]

_POLL_S = 0.05  # how often a waiting recv checks step timeouts (ray.wait wakes on results)
_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
#: The arguments of the ``ray.init()`` a RayExecutor makes when Ray is not running yet (the
#: executor's ``address``/``init_kwargs`` override them). A test session sets a small local
#: instance here, started by the first Ray pool and shared by all of them.
DEFAULT_INIT_KWARGS: dict[str, Any] = {"log_to_driver": False}


def _ray() -> ModuleType:
    return require("ray", "ray", 'executor="ray"')


class _Actor(Slot):
    """Parent-side handle of one actor: the supervisor's :class:`Slot` plus the actor and the
    ``ObjectRef`` of the command it runs."""

    def __init__(self, w: int, lo: int, hi: int, blob: bytes) -> None:
        super().__init__(w, lo, hi, blob)
        self.handle: Any = None
        self.ref: Any = None  # the running command's ObjectRef

    def become_idle(self) -> None:
        super().become_idle()
        self.ref = None


class _Cluster:
    """What close() releases, held apart from the executor for ``weakref.finalize``."""

    def __init__(self) -> None:
        self.workers: list[_Actor] = []
        self.group: Any = None  # the placement group

    def __call__(self) -> None:
        ray = _ray()
        if not ray.is_initialized():
            return  # Ray was shut down first: its actors and groups went with it
        for actor in self.workers:
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


class RayExecutor(Supervisor):
    """Runs envs on Ray actors, one contiguous slice of envs per actor.

    Args:
        num_actors: actors to start (default: one per CPU of the cluster, or as many as
            ``envs_per_actor`` needs; at most one per env).
        on_worker_failure: ``"raise"`` (default) or ``"restart"``, as on the process executor.
        step_timeout: seconds an actor may take for one command before it is declared hung
            (it is killed).
        launch_timeout: seconds to wait for the placement group and the actors to start
            (a cluster without the resources asked for fails after that, naming them).
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

    Examples:
        >>> import envhive
        >>> env = envhive.make("CartPole-v1", 4, executor=RayExecutor(num_actors=2))  # doctest: +SKIP
    """

    name = "ray"
    what = "actor"
    place = "Ray actor"
    _slots: list[_Actor]

    def __init__(
        self,
        num_actors: int | None = None,
        *,
        on_worker_failure: str = "raise",
        step_timeout: float | None = None,
        launch_timeout: float = 300.0,
        envs_per_actor: int | None = None,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        resources: dict[str, float] | None = None,
        placement_strategy: str | None = None,
        address: str | None = None,
        init_kwargs: dict[str, Any] | None = None,
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
        check_seconds(launch_timeout, "launch_timeout")
        super().__init__(_Cluster(), step_timeout, on_worker_failure)
        self.num_actors = num_actors
        self.envs_per_actor = envs_per_actor
        self.num_cpus, self.num_gpus = num_cpus, num_gpus
        self.resources = dict(resources or {})
        self.placement_strategy = placement_strategy
        self.address = address
        self.init_kwargs = dict(init_kwargs or {})
        self.launch_timeout = launch_timeout
        self._remote: Any = None  # SliceHost as a Ray actor class

    # ------------------------------------------------------------------ launch
    def _num_slices(self, num_envs: int) -> int:
        ray = _ray()
        if not ray.is_initialized():
            # log_to_driver=False by default: envs' prints stay in the actors' logs.
            ray.init(**{**DEFAULT_INIT_KWARGS, "address": self.address, **self.init_kwargs})
        if self.num_actors is not None:
            return self.num_actors
        if self.envs_per_actor is not None:
            return math.ceil(num_envs / self.envs_per_actor)
        cpus = ray.cluster_resources().get("CPU", 1.0)
        return max(1, int(cpus // (self.num_cpus or 1.0)))

    def _new_slot(self, w: int, lo: int, hi: int, blob: bytes) -> _Actor:
        return _Actor(w, lo, hi, blob)

    def _bundle(self) -> dict[str, float]:
        bundle = {"CPU": 1.0 if self.num_cpus is None else self.num_cpus, **self.resources}
        if self.num_gpus:
            bundle["GPU"] = self.num_gpus
        return {k: v for k, v in bundle.items() if v}

    def _prepare(self) -> None:
        """Reserve the placement group (one bundle per actor), if one was asked for."""
        if self.placement_strategy is None:
            return
        ray = _ray()
        bundles = [self._bundle() for _ in self._slots]
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
        what = actor.name(self.what)
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

    def _attach(self, buffers: Buffers) -> None:
        self._inputs = input_leaves(buffers)
        self._outputs = output_leaves(buffers)
        self._finals = final_leaves(buffers)

    def _bind_slot(self, actor: _Actor) -> None:
        ray = _ray()
        assert self._buffers is not None
        try:
            ray.get(actor.handle.bind.remote(self._buffers.slice_spec(actor.hi - actor.lo)))
        except ray.exceptions.RayError as err:
            raise WorkerDiedError(
                f"{actor.name(self.what)} died while allocating its buffers: {err}",
                env_ids=list(range(actor.lo, actor.hi)), exitcode=None,
            ) from None

    def _stop(self, actor: _Actor) -> None:
        if actor.handle is None:
            return
        try:
            _ray().kill(actor.handle, no_restart=True)
        except Exception:  # already dead
            pass

    # ------------------------------------------------------------------ commands
    def _publish(self, actor: _Actor, ids: list[int], options: dict[str, Any] | None,
                 message: bytes | None) -> None:
        if ids[-1] - ids[0] == len(ids) - 1 and ids == list(range(ids[0], ids[-1] + 1)):
            rows: Any = slice(ids[0], ids[-1] + 1)  # a run of ids (a sync step): views, no copy
        else:
            rows = ids
        inputs = [leaf[rows] for leaf in self._inputs]
        with deferred_interrupts():  # the call goes out and is recorded, or neither
            actor.ref = actor.handle.run.remote(message, ids, inputs)
            actor.busy, actor.busy_options = ids, options
            actor.sent_at = time.monotonic()

    def _send_call(self, actor: _Actor, kind: CommandKind, message: bytes) -> None:
        with deferred_interrupts():  # the call goes out and is recorded, or neither
            actor.ref = actor.handle.call.remote(int(kind), message)
            actor.busy, actor.calling, actor.sent_at = [], True, time.monotonic()

    def _call_replies(self) -> list[tuple[_Actor, bytes]]:
        ray = _ray()
        waiting = {a.ref: a for a in self._slots if a.calling and a.ref is not None}
        replies = []
        ready, _ = ray.wait(list(waiting), num_returns=1, timeout=_POLL_S) if waiting else ([], [])
        for ref in ready:
            actor = waiting[ref]
            try:
                message = ray.get(ref)
            except ray.exceptions.RayError as err:
                self._fail(actor, "died", err)  # raises, or rebuilds (the call then raises)
                continue
            actor.busy = actor.ref = None
            actor.calling = False
            replies.append((actor, message))
        self._check_workers()  # step timeouts
        return replies

    def recv(self, min_count: int) -> Completion:
        self._check_usable()
        out = Completion()
        got = 0
        while got < min_count and any(a.busy is not None for a in self._slots):
            got += self._collect_some(out, min_count - got)
        if min_count <= 0:  # a poll: what finished, waiting for none
            self._sweep(out, 0.0, 0)
            self._check_workers()
        return out

    def _collect_some(self, out: Completion, needed: int) -> int:
        return self._sweep(out, _POLL_S, needed)

    def _sweep(self, out: Completion, timeout: float, needed: int = 1) -> int:
        """Collect every finished command, first finished first, and start what queued
        behind each. Waits up to ``timeout`` for the first, or for all when ``needed`` (env
        results the caller waits for) takes every running command (a sync step: one
        ``ray.wait`` instead of one per actor)."""
        ray = _ray()
        busy = {a.ref: a for a in self._slots if a.ref is not None}
        if not busy:
            return 0
        refs = list(busy)
        running = sum(len(a.busy or ()) for a in busy.values() if not a.discard)
        want = len(refs) if needed >= running else 1
        ready, _ = ray.wait(refs, num_returns=want, timeout=timeout)
        if not ready:
            self._check_workers()  # step timeouts
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
            self._refill(actor)
        return got

    def _collect(self, actor: _Actor, result: Any, out: Completion) -> int:
        with deferred_interrupts():  # reported whole or dropped whole (discard)
            ids, actor.busy, actor.ref = actor.busy or [], None, None
            if actor.discard:
                actor.discard = actor.calling = False
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

    # ------------------------------------------------------------------ faults
    def _how_it_died(self, actor: _Actor, cause: BaseException | None) -> tuple[str, int | None]:
        return f"({type(cause).__name__}: {cause})", None

    def _left_behind(self) -> None:
        """Nothing to let go of: the actors are Ray's processes, not this one's children, and
        the executor's copy in a forked child is closed without killing them."""

    # ------------------------------------------------------------------ monitoring
    def actor_handles(self) -> list[Any]:
        """The live actors' handles, in slice order (for monitoring and tests)."""
        return [a.handle for a in self._slots if a.handle is not None]

    def actor_locations(self) -> list[tuple[str, int]]:
        """Each actor's Ray node id and process id, in slice order."""
        ray = _ray()
        return [tuple(x) for x in ray.get([h.where.remote() for h in self.actor_handles()])]  # type: ignore[misc]

    def describe(self) -> str:
        k = len(self._slots)
        where = f", {self.placement_strategy} placement group" if self.placement_strategy else ""
        return f"ray, {k} actor{'s' if k != 1 else ''}{where}"
