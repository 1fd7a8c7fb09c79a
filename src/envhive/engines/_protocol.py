"""The engine protocol: what the ``native`` executor drives, what builds it, and what
``step_all`` returns. Every hook an engine may have is declared here.

An *engine* owns a whole batch of compiled envs and performs the pool's ops on them
(``envhive._ops``), writing straight into the pool's buffers: ``KernelEngine`` (classic-control
kernels), ``MujocoEngine`` (MuJoCo families), ``TorchEngine`` (torch batched envs), the Atari
engine, and any kind a family registers (``envhive.engines._registry``). A
:class:`NativeFactory` builds one: called, it builds one env (every other executor);
``native_engine`` builds the whole batch.

What an engine can do is told by the protocol it meets, checked once when the native executor
launches it (``isinstance`` of these runtime-checkable protocols), never by looking for a
method: every engine is an :class:`Engine` (sync: ``step_all``, ``run``); an
:class:`AsyncEngine` also runs its envs beside the caller (``start``, ``collect``,
``take_finished``, ``discard``). mypy checks every engine and factory against these
protocols (an ``_implements_*`` function beside each); nothing inherits from them.

Examples:
    >>> import numpy as np
    >>> r = StepAllResult(bad=-1, done=0, step_infos={"x": np.zeros(2)}, reset_infos=None)
    >>> r.bad, list(r.step_infos)
    (-1, ['x'])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from envhive._buffers import Buffers
from envhive._report import Completion, EnvProps

__all__ = ["Engine", "AsyncEngine", "HasCEntry", "CEntry", "NativeFactory", "NativeProblem", "StepAllResult",
           "TakesBatchSize"]


class NativeProblem(NamedTuple):
    """Why a factory's native engine cannot run its envs here, and where they run instead.

    Examples:
        >>> NativeProblem("the C++ extension is not built", "process").executor
        'process'
    """

    reason: str
    executor: str


class StepAllResult(NamedTuple):
    """What :meth:`Engine.step_all` returns (a NamedTuple: built every step, so it must be cheap).

    Attributes:
        bad: ``-1``, or the first env whose action is outside the action space (then nothing
            ran).
        done: how many stepped envs ended their episode (terminated or truncated).
        step_infos: neutral columns: key -> array of shape ``(num_envs, ...)``, one value per
            env, dtype as gymnasium would batch it; no ``"_key"`` mask entries (the rows of
            envs this call reset are ignored by the pool). ``None``: the envs have no step
            infos.
        reset_infos: env id -> non-empty reset info, for the envs this call reset; ``None``:
            none.

    Examples:
        >>> bad, done, step_infos, reset_infos = StepAllResult(-1, 2, None, {3: {"seeded": 1}})
        >>> done, reset_infos
        (2, {3: {'seeded': 1}})
    """

    bad: int
    done: int
    step_infos: dict[str, np.ndarray] | None
    reset_infos: dict[int, dict[str, Any]] | None


@runtime_checkable
class Engine(Protocol):
    """A batch of ``num_envs`` compiled envs that performs the pool's ops (``envhive._ops``).

    Life cycle: built by the id's factory (``factory.native_engine(num_envs, num_threads)``),
    ``bind`` once, then any number of ``step_all`` / ``run`` / ``call`` / ``set_attr``, then
    ``close``.

    Attributes:
        props: the envs' properties (one object for all of them).
        num_envs: batch size.
        device: the torch device the engine writes its results on (the pool then keeps its
            buffers there when the front end asks for that device: ``BufferSpec.resident``),
            or ``None``: host arrays.
        num_threads: threads the engine steps a batch with (``1``: the calling thread only).

    Examples:
        >>> from envhive.kernels import CartPoleKernel, KernelEngine
        >>> isinstance(KernelEngine(CartPoleKernel(2)), Engine)
        True
    """

    props: EnvProps
    num_envs: int
    device: Any
    num_threads: int

    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (once)."""
        ...

    def step_all(self, actions: np.ndarray) -> StepAllResult:
        """Run the op in ``buffers.ops`` of every env, env ``i``'s action from ``actions[i]``
        (the caller's batch: dtype and shape checked by the pool, values not). All ops finish
        inside the call; with a bad action nothing runs."""
        ...

    def run(self, ids: np.ndarray, options: dict[str, Any] | None, out: Completion) -> None:
        """The general path: the ops of ``ids`` (int64), actions from the bound buffers;
        report every env of ``ids`` in ``out`` (``env_ids`` or ``errors``)."""
        ...

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        """Call (or read) ``name`` on the envs ``env_ids`` (``None``: all); results in that order."""
        ...

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """Set ``name`` on the envs ``env_ids`` (``None``: all): ``values[k]`` to ``env_ids[k]``."""
        ...

    def close(self) -> None:
        """Release the envs."""
        ...


@runtime_checkable
class AsyncEngine(Engine, Protocol):
    """An :class:`Engine` whose envs run beside the caller (worker processes, C++ threads):
    the native executor's ``send`` starts their ops and returns, ``recv`` collects the first
    finished, so the caller's own work overlaps the envs' (EnvPool's ``send``/``recv``).

    ``start(ids, options)`` starts the ops in ``buffers.ops`` of envs ``ids`` (int64), actions
    and seeds read from the bound buffers now; ``collect(min_count)`` waits until at least
    ``min_count`` started ops finished (fewer when nothing else is running) and reports every
    finished one exactly once, results written into the bound buffers; ``take_finished`` is
    ``collect`` without a :class:`~envhive._report.Completion` (the pool's lean ``recv``:
    ``Executor.take_finished``); ``discard()`` forgets every op started and not collected,
    without waiting (the executor protocol's ``discard``). Sync ``step_all`` / ``run`` are
    called only with nothing started.
    """

    def start(self, ids: np.ndarray, options: dict[str, Any] | None) -> None:
        """Start the ops of ``ids``; returns before they finish."""
        ...

    def collect(self, min_count: int) -> Completion:
        """Wait for at least ``min_count`` finished ops; report every finished one."""
        ...

    def take_finished(self, min_count: int) -> tuple[np.ndarray, int, Any] | None:
        """Wait for at least ``min_count`` finished ops and take every finished one, when none
        of them raised: ``(env ids (int64), how many ended their episode, the InfoTable of
        their infos)``; ``None``: nothing taken (an op raised, or results are pending from
        before), ``collect`` reports them."""
        ...

    def discard(self) -> None:
        """Forget every started op not collected yet (queued ones never run)."""
        ...


class CEntry(NamedTuple):
    """An engine's C entry: how code holding no GIL (envhive's JAX FFI handlers,
    ``envhive.jax``) runs the ops written in the pool's buffers.

    Attributes:
        capsule: a PyCapsule named ``"envhive.batch_api"`` holding an ``envhive_batch_api``
            (``include/envhive/batch_api.h``). With ``start`` and ``collect`` set, ops run
            beside the caller; with only ``run``, each call finishes its ops, and ``run``
            returning ``-2`` means that Python must work first (``prepare``), nothing ran.
        prepare: Python work before the ops of ``ids`` run (an engine's draws ahead running
            out), called with the GIL; ``None``: none.
        watch: an int32 column: ``prepare(ids)`` is due when one of ``ids`` has
            ``watch[i] >= limit`` (``None``: only when ``run`` asks for it).
        limit: see ``watch``.
        failed: a bool column set for an env whose op failed (``None``: ops never fail).
        error: env ``i``'s failed op's message (``kind: text``).
        settle: called with the GIL before the C entry is used after Python drove the engine
            (a discard waited out).

    Examples:
        >>> CEntry(None, None, None, 0, None, str, lambda: None).watch is None
        True
    """

    capsule: Any
    prepare: Callable[[np.ndarray], None] | None
    watch: np.ndarray | None
    limit: int
    failed: np.ndarray | None
    error: Callable[[int], str]
    settle: Callable[[], None]


@runtime_checkable
class HasCEntry(Protocol):
    """An engine whose ops code holding no GIL can run, bound to the pool's buffers
    (:class:`CEntry`): the threaded C++ engines and the classic-control kernels. Engines
    without one (MuJoCo, torch) run their ops in Python when a JAX program steps them
    (``envhive.jax``: ``Engine.run`` called with the GIL).

    Examples:
        >>> from envhive.kernels import CartPoleKernel, KernelEngine
        >>> isinstance(KernelEngine(CartPoleKernel(2)), HasCEntry)
        True
    """

    def c_entry(self) -> CEntry:
        """The C entry (call after ``bind``)."""
        ...


@runtime_checkable
class TakesBatchSize(Protocol):
    """A factory whose engine is built for the pool's ``batch_size`` (envs per ``recv``):
    ``make`` sets ``engine_batch_size`` before the engine is built (``None``: every env, a
    sync pool). EnvPool's engine builds EnvPool's pool in its async mode for a smaller one.

    Examples:
        >>> class Hinted:
        ...     engine_batch_size = None
        >>> isinstance(Hinted(), TakesBatchSize), isinstance(object(), TakesBatchSize)
        (True, False)
    """

    engine_batch_size: int | None


@runtime_checkable
class NativeFactory(Protocol):
    """The factory of a compiled id (``engines._registry.native_factory`` builds it).

    Every executor gets one per env: the serial, thread and process executors call it for one
    env (a ``gymnasium.Env`` stepped by the same compiled code, so every executor gives the
    same numbers); the native executor calls :meth:`native_engine` once for the whole batch.
    It must pickle (process workers build their envs from it).

    Attributes:
        preferred_executor: what ``executor="auto"`` picks for a batch of these.
        preferred_min_envs: ``auto`` picks it from this many envs on.
        engine_device: where ``native_engine`` builds a batch that can live on a torch device
            (set by ``make(device=)``; ``None``: the engine's default). Engines of host
            arrays ignore it.

    Examples:
        >>> from envhive.engines import compiled_env, native_factory
        >>> f = native_factory(compiled_env("envhive/Pendulum-v1"), None, None)
        >>> isinstance(f, NativeFactory), f.key() == native_factory(compiled_env("envhive/Pendulum-v1"), None, None).key()
        (True, True)
    """

    preferred_executor: str
    preferred_min_envs: int
    engine_device: Any

    def __call__(self) -> Any:
        """One env (a ``gymnasium.Env``)."""
        ...

    def native_problem(self) -> NativeProblem | None:
        """Why :meth:`native_engine` cannot run these envs here (an option it lacks, a compiled
        extension not built, a library that failed a check), and the executor that runs them
        instead; ``None``: it can. ``executor="auto"`` then takes that executor and says why;
        ``executor="native"`` raises ``ConfigError`` with the reason."""
        ...

    def bytes_per_env(self, num_envs: int) -> int:
        """Memory one env of a batch of ``num_envs`` takes, wherever it runs (its state, its
        engine's share, its rows of the pool's buffers): ``make`` checks ``num_envs`` times it
        against the memory available before anything is built or reserved, on every
        executor (``_memory.check_fits``)."""
        ...

    def native_engine(self, num_envs: int, num_threads: int | None = None) -> Engine:
        """The native executor's engine for ``num_envs`` of these envs."""
        ...

    def key(self) -> tuple[Any, ...]:
        """What must be equal for factories to share one engine (one configuration)."""
        ...
