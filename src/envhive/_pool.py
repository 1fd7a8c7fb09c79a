"""The pool: buffers, the state machine, and autoreset, above any executor.

Everything that must mean the same on every executor lives here: validation of actions, the
per-env state machine (idle → pending → ready → idle), which op each env gets (autoreset), how
infos are batched, and what is returned (views or copies). Sync ``step``/``reset`` are the async
primitives (send everything, receive everything) with outputs in env order.

The pool is made of parts it owns (by composition; none holds a reference to the pool):

* its books (``_books.Books``): what was sent and what came back (``IDLE`` → ``PENDING`` →
  ``READY`` → ``IDLE``), how the pool waits for it and hands the rows out;
* its envs' life cycle (``_lifecycle.Lifecycle``): started, ended, broken, blocked, the step
  count and make()'s first seeds;
* its fast paths (``_paths.FastPaths``): which of the inline, fused, lean send and lean recv
  paths it may take, chosen once from its executor and buffer layout.

Examples:
    >>> import envhive
    >>> env = envhive.make("CartPole-v1", num_envs=4, batch_size=2, seed=0)
    >>> env.async_reset()
    >>> obs, rew, term, trunc, info = env.recv()
    >>> obs.shape, info["env_id"].tolist()
    ((2, 4), [0, 1])
    >>> env.close()
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from envhive._arguments import (
    action_error,
    check_agents,
    check_options,
    check_seconds,
    check_spaces,
    env_ids_of,
    normalize_seeds,
    reset_mask_ids,
)
from envhive._autoreset import plan_ops, plan_ops_into
from envhive._batch import NO_OP, Batch
from envhive._books import IDLE, Books
from envhive._buffers import (
    Buffers,
    BufferSpec,
    is_tensor,
    same_device,
    tensor_values,
)
from envhive._infos import engine_columns, take_infos
from envhive._interrupts import deferred_interrupts
from envhive._lifecycle import Lifecycle
from envhive._ops import Op
from envhive._paths import FastPaths
from envhive._report import Completion, EnvFactory
from envhive.errors import (
    ActionError,
    ClosedError,
    ConfigError,
    EnvhiveError,
    NothingPendingError,
    PendingCallError,
    WorkerDiedError,
)
from envhive.executors._auto import ExecutorName
from envhive.executors._protocol import Executor

__all__ = ["Pool", "normalize_seeds"]

_RESET = int(Op.RESET)
_STEP_RESET = int(Op.STEP_RESET)
_STEP = int(Op.STEP)
_new_batch = tuple.__new__  # Batch(...) without the NamedTuple's Python __new__ frame

#: Pools whose executor's workers belong to this process (``Executor.fork_safe`` is False).
_FORK_BOUND: weakref.WeakSet[Pool] = weakref.WeakSet()


def _close_inherited_pools() -> None:
    """In a process just forked from this one: its copies of those pools are closed (a call
    raises ``ClosedError`` saying why) before anything can write into the buffers they share
    with the parent's workers. The executors let go of the workers themselves
    (``executors._supervisor``)."""
    for pool in list(_FORK_BOUND):
        pool._left_by_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_close_inherited_pools)


class Pool:
    """A batch of envs run by one executor, with one autoreset policy.

    Front ends (``envhive.frontends``: gymnasium, dm_env, ...) are thin layers over this class:
    ``reset``, ``step`` and ``recv`` return a neutral :class:`~envhive._batch.Batch` each lays
    out its own way. Build one with :func:`envhive.make` and take ``.pool``.

    Args:
        factories: one zero-argument env factory per env.
        executor: runs the envs (not yet launched).
        autoreset: the autoreset mode.
        batch_size: how many envs ``recv`` returns (``None``: all).
        seed: seeds for the first reset (see :func:`normalize_seeds`).
        copy: return copies (True) or views into the pool's buffers (False).
        device: the torch device the front end hands results out on (``None``: numpy). When
            the executor's engine writes tensors on that very device (a torch batched env on
            the native executor), the buffers live there (``resident``): see ``_buffers``.
        observation_mode: ``"same"``, ``"different"`` (observation spaces may differ in
            bounds) or ``(batched, single)``, as gymnasium's; see ``check_spaces``.

    Examples:
        >>> import envhive, numpy as np
        >>> pool = envhive.make("CartPole-v1", num_envs=2, seed=0).pool
        >>> batch = pool.reset()
        >>> batch.obs.shape, batch.op.tolist()
        ((2, 4), [1, 1])
        >>> pool.call("spec", env_ids=[1])[0].id
        'CartPole-v1'
        >>> pool.close()
    """

    def __init__(
        self,
        factories: Sequence[EnvFactory],
        executor: Executor,
        *,
        autoreset: AutoresetMode,
        batch_size: int | None = None,
        seed: Any = None,
        copy: bool = True,
        device: Any = None,
        observation_mode: Any = "same",
    ) -> None:
        n = len(factories)
        if batch_size is None:
            batch_size = n
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or not 1 <= batch_size <= n:
            raise ConfigError(f"batch_size: expected an int in [1, num_envs={n}], got {batch_size!r}")
        self.num_envs = n
        self.batch_size = int(batch_size)
        self.autoreset = autoreset
        self.copy = bool(copy)
        # make(seed=...) seeds each env's first reset that succeeds (checked before anything
        # is built; see Lifecycle).
        first_seeds = normalize_seeds(seed, n)
        self.executor = executor
        # Closed until fully built: a pool whose construction failed has nothing for close()
        # or __del__ to do (the failing step closed the executor itself).
        self.closed = True
        self._forked_from: int | None = None  # set in a forked child (_left_by_fork)
        #: Set while the pool is lent to XLA (``envhive.jax._lease.Lease``): every public call
        #: first calls its ``eager()``, which takes the books back from the XLA path.
        self._lease: Any = None
        self._launch(factories, device, observation_mode)
        self._all = np.arange(n)
        self._all.flags.writeable = False  # passed to executors for every all-env call
        self._every = slice(None)
        # Row ops of a call where every env ran the same op (copy=True hands these out).
        self._uniform_ops = [np.full(n, op, np.int8) for op in range(len(Op))]
        for ops in self._uniform_ops:
            ops.flags.writeable = False
        self._maybe_seeded = True  # some buffers.has_seed entry may be set
        # The mode's op for an env that did not end (plan_ops' plain op), and the row ops of a
        # sync step that planned no RESET: every env ran it.
        self._plain_op = _STEP_RESET if autoreset is AutoresetMode.SAME_STEP else _STEP
        self._plain_ops = self._uniform_ops[self._plain_op]
        # Each env's life cycle (started, ended, broken, blocked, steps), and what was sent and
        # what came back (per-env status, in-flight counts, infos, errors): see the module.
        self._life = Lifecycle(self.buffers, autoreset, first_seeds)
        self._books = Books(self.buffers, self._all, self.batch_size, self.copy, self._life.broken)
        self._rows = self._books.copies  # every env's rows as copies: step's common case
        # What the pool may take besides the general path (_paths), decided once.
        self._paths = FastPaths.choose(executor, self._act_codec, n, self.resident)
        self._device = self.buffers.actions.device if self.resident else None
        if not executor.fork_safe:  # its workers are this process's: see _left_by_fork
            _FORK_BOUND.add(self)
        self.closed = False

    def _launch(self, factories: Sequence[EnvFactory], device: Any, observation_mode: Any) -> None:
        """Build the envs, check their spaces, allocate the buffers from them and bind the
        executor to those; anything failing closes the executor."""
        executor = self.executor
        props = executor.launch(factories)
        try:
            self.observation_space = check_spaces(props, observation_mode)
            #: Each env's own observation space (they differ with observation_mode="different").
            self.observation_spaces = tuple(p.observation_space for p in props)
            first = props[0]
            self.props = first
            self.action_space = first.action_space
            resident = same_device(device, executor.resident_device)
            #: The possible agents of a multi-agent env (``()``: one agent, no agent axis).
            self.agents = check_agents(props)
            spec = BufferSpec(
                self.num_envs, self.observation_space, self.action_space,
                with_final_obs=self.autoreset is AutoresetMode.SAME_STEP,
                namespace="torch" if resident else "numpy",
                device=str(executor.resident_device) if resident else None, resident=resident,
                agents=self.agents,
            )
            #: Results and actions live on the device (tensors); the command block on the host.
            self.resident = resident
            self._act_codec = spec.act_codec
            self.buffers = Buffers.allocate(spec, executor.allocate)
            executor.bind(self.buffers)
        except BaseException:
            executor.close()
            raise

    @property
    def env_steps(self) -> int:
        """Number of ``env.step`` calls made so far (resets are not steps)."""
        if self._lease is not None:
            self._lease.eager()
        return self._life.steps

    # ------------------------------------------------------------------ description
    def describe(self) -> str:
        """What runs the envs, for the front ends' ``repr``: the executor's description,
        e.g. ``'thread, 2 threads'``."""
        return self.executor.describe()

    @property
    def executor_name(self) -> ExecutorName:
        """The executor's name (e.g. ``"serial"``), with ``executor="auto"``'s reason and
        measured figures when it was chosen by auto."""
        return ExecutorName.of(self.executor)

    # ------------------------------------------------------------------ checks
    def _check_open(self) -> None:
        if self.closed:
            if self._forked_from is not None:  # only ever in a forked child
                from envhive.executors._supervisor import forked_error

                raise forked_error(f"this pool (on the {self.executor.name} executor)", self._forked_from)
            raise ClosedError(
                "the pool is closed (by close(), or after a worker failure): make a new one "
                "with envhive.make()"
            )

    def _check_sync(self, what: str) -> None:
        self._check_open()
        self._books.check_sync(what)

    def _env_ids(self, env_id: Any) -> np.ndarray:
        return self._all if env_id is None else env_ids_of(env_id, self.num_envs)

    def _check_steppable(self, ids: np.ndarray) -> None:
        self._life.check_steppable(ids, slice(None) if ids is self._all else ids)

    def _validated_actions(self, actions: Any, ids: np.ndarray) -> Any:
        if is_tensor(actions):  # a resident pool's general path validates on the host
            actions = tensor_values(actions)
        batch, bad = self._act_codec.validate(actions, ids.size)
        if bad is None:
            return batch
        where = "" if bad.index is None else f" (env {int(ids[bad.index])})"
        raise action_error(f"invalid actions{where}: {bad}; nothing was stepped", actions)

    # ------------------------------------------------------------------ core moves
    def _dispatch(
        self,
        ids: np.ndarray,
        ops: np.ndarray | int | None,
        seeds: list[int | None] | None = None,
        options: dict[str, Any] | None = None,
        sync: bool = False,
        resets: int = 0,
        send: bool = True,
    ) -> None:
        """Write the command block for ``ids`` and hand it to the executor.

        ``ops=None``: the ops are already in ``buffers.ops``, with ``resets`` RESET ops among
        them. ``sync``: a sync call (``Books.sent``). ``send=False``: only the bookkeeping;
        the caller runs the ops itself (``Executor.run_all``).
        """
        b = self.buffers
        sel = slice(None) if ids is self._all else ids
        if ops is not None:
            b.ops[sel] = ops
            if isinstance(ops, int):
                resets = ids.size if ops == _RESET else 0
            else:
                resets = int(np.count_nonzero(ops == _RESET))
        if seeds is not None:
            b.put_seeds(ids.tolist(), seeds)
            self._maybe_seeded = True
        elif resets and self._maybe_seeded:
            self._clear_seeds(ids)
        self._books.sent(sel, ids.size, resets, sync)
        if send:
            self.executor.send(ids, options)

    def _clear_seeds(self, ids: np.ndarray) -> None:
        """Autoresets take no seed: clear any left for ``ids`` by an earlier seeded reset."""
        b = self.buffers
        b.has_seed[slice(None) if ids is self._all else ids] = False
        if b.big_seeds:
            for i in ids.tolist():
                b.big_seeds.pop(i, None)
        self._maybe_seeded = ids is not self._all

    def _pull(self, min_count: int, sync: bool = False, run_all: Any = None) -> int:
        """Receive completions of at least ``min_count`` envs (``executor.recv``; ``run_all()``
        if given) and book them (``_absorb``): the books' ``Pull``. A dead worker closes the
        pool."""
        done = self._waited(self.executor.recv, min_count) if run_all is None else self._waited(run_all, None)
        return self._absorb(done, sync)

    def _waited(self, call: Any, arg: Any) -> Any:
        """``call(arg)``: an executor's call that waits for results. A dead worker means the
        executor shut itself down (``on_worker_failure="raise"``): so does the pool."""
        try:
            return call(arg)
        except WorkerDiedError:
            self.close()
            raise

    def _cut_short(
        self, err: BaseException, ids: np.ndarray, always: bool = False, sync: bool = True
    ) -> None:
        """A call raised ``err`` with its ops dispatched or half booked: keep the pool usable.

        Ctrl-C (or ``SystemExit``, or a bug) can cut a call short anywhere. envhive's own
        errors leave the books straight, unless ops are still in flight after a sync call or
        the error came out of dispatch (``always``). Then the pool gives up on everything in
        flight (``Executor.discard``) and marks the call's envs and every env in flight as
        needing a reset. Nothing waits for an env: the next ``reset()`` works.
        """
        if isinstance(err, ClosedError) and not self.closed:
            self.close()  # the executor shut itself down (a worker could not be rebuilt)
            return
        if self.closed or isinstance(err, (PendingCallError, NothingPendingError)):
            return  # raised before the call changed anything
        if not always and isinstance(err, EnvhiveError) and not (sync and self._books.pending):
            return  # booked before it was raised (async: other envs stay in flight)
        with deferred_interrupts():  # a second Ctrl-C must not cut this short too
            try:
                self.executor.discard()
            except BaseException:
                self.close()  # an executor that cannot even drop its work is of no more use
                return
            lost = self._books.give_up()  # every env sent and not handed out
            lost[ids] = True
            self._life.break_envs(lost)

    def cut_short(self, err: BaseException) -> None:
        """A front end's own work after one of this pool's calls was cut short by ``err``
        (a Ctrl-C in its layout of a ``recv``): give up everything in flight, as a call cut
        short inside the pool does, so that the next ``reset()`` works."""
        self._cut_short(err, self._all[:0], always=True, sync=False)

    def raised_around(self, err: BaseException) -> None:
        """A front end's call around one of this pool's calls raised ``err``: a Ctrl-C (or
        ``SystemExit``), maybe in the front end's frame as the pool's call returned, gives up
        what is in flight (:meth:`cut_short`); an ``Exception`` (the pool's own, or about the
        front end's input) loses nothing. Called from a ``try`` over the front end's whole
        body (not a ``with``: a signal can land as its ``__exit__`` returns)."""
        if not isinstance(err, Exception):
            self.cut_short(err)

    def _absorb(self, done: Completion, sync: bool = False) -> int:
        """Account for a completion of the general path (``send``/``recv``, ``run_all``): the
        books' part (``Books.absorb``), then the envs' (``Lifecycle.finish``)."""
        ids, count, resets, failed = self._books.absorb(done, sync)
        if count:
            self._life.finish(ids, count, resets, done.ended, failed)
        elif failed:
            self._life.refresh()
        return count

    # ------------------------------------------------------------------ sync API
    def reset(self, seed: Any = None, options: dict[str, Any] | None = None) -> Batch:
        """Reset all envs (or those in ``options["reset_mask"]``); one row per env.

        Rows of envs the mask leaves out have op :data:`~envhive._batch.NO_OP` and repeat their
        current observation.
        """
        if self._lease is not None:
            self._lease.eager()
        self._check_sync("reset")
        check_options(options)
        # Envs get the caller's options minus reset_mask (a copy: the caller's dict is not
        # mutated, unlike gymnasium's); an env gets options= only when some remain (reset_env).
        options = dict(options) if options is not None else None
        ids = self._all
        if options is not None and "reset_mask" in options:
            ids = reset_mask_ids(options.pop("reset_mask"), self.num_envs)
        seeds = self._life.seeds_for(seed, ids)
        try:
            self._dispatch(ids, _RESET, seeds, options, sync=True)
            self._books.drain(self._pull)
        except BaseException as err:
            self._cut_short(err, ids)
            raise
        infos, _, _ = self._books.take_infos(ids.tolist(), self.num_envs, by_env=True)
        op = np.full(self.num_envs, NO_OP, np.int8)
        op[ids] = _RESET
        return self._books.all_rows(infos, {}, None, op)

    def step(self, actions: Any) -> Batch:
        """Step every env with its action (autoreset as planned by the pool's mode)."""
        # A try block costs nothing in CPython 3.11+ until it catches.
        try:
            if self._lease is not None:
                self._lease.eager()
            paths, books, life = self._paths, self._books, self._life
            if paths.step_all is not None and not (
                self.closed or books.in_flight or books.ready or life.any_blocked
            ):
                # The inline step (_paths): the same semantics as the general path in fewer
                # numpy calls (no command block per env, no completion lists) and the same
                # bookkeeping (Lifecycle.finish). It is written out here, not in a helper,
                # because it runs on every step of the cheapest envs. A batch of the wrong shape
                # or dtype takes the general path, which raises the error (errors are raised
                # in one place).
                arr = actions if type(actions) is np.ndarray else paths.inline_batch(actions, self._device)
                if arr.shape == paths.batch_shape and (
                    type(arr) is not np.ndarray or arr.dtype.char in paths.chars  # tensor: checked
                ):
                    b = self.buffers
                    resets = plan_ops_into(self.autoreset, life.ended_i8, life.num_ended, b.ops)
                    bad, done, step_infos, reset_infos = paths.step_all(arr)
                    if bad >= 0:
                        self._validated_actions(actions, self._all)  # raises, naming the env
                        raise ActionError(
                            f"invalid actions (outside {self.action_space}); nothing was stepped"
                        )
                    if done == 0 and not resets and not life.any_ended:
                        life.steps += self.num_envs  # Lifecycle.finish's common step, inline
                    else:
                        life.finish(self._every, self.num_envs, resets, done)
                    op = None if resets else self._plain_ops
                    if step_infos is None and not reset_infos:
                        # No infos at all (kernels): only same_step's rows that ended.
                        if done and not life.keeps_ended:
                            return books.all_rows({}, {}, b.terminated | b.truncated, op)
                        if op is not None and self.copy:  # all_rows' common case, inline
                            obs, reward, term, trunc, _, agents = self._rows(False)
                            return _new_batch(Batch, (self._all, obs, reward, term, trunc, op,
                                                      None, None, {}, {}, agents))
                        return books.all_rows({}, {}, None, op)
                    return self._inline_rows(step_infos, reset_infos, resets, done, op)
            if paths.fused and type(actions) is np.ndarray and not (
                self.closed or books.in_flight or books.ready or life.any_blocked
            ) and actions.shape == paths.batch_shape and actions.dtype.char in paths.chars and (
                paths.in_bounds(actions)  # type: ignore[misc]  # set with fused
            ):
                return self._step_fused(actions)
            return self._step_general(actions)
        except BaseException as err:
            self._cut_short(err, self._all)
            raise

    def _step_general(self, actions: Any) -> Batch:
        """``step``'s general path, the definition: every check, the executor's ``send`` and
        ``recv`` (or ``run_all``), the books' ``absorb`` and ``drain`` (inside ``step``'s
        guard)."""
        self._check_sync("step")
        ids, books, life, run_all = self._all, self._books, self._life, self._paths.run_all
        batch = self._validated_actions(actions, ids)
        self._check_steppable(ids)
        self.buffers.put_actions(slice(None), batch)
        resets = plan_ops_into(self.autoreset, life.ended_i8, life.num_ended, self.buffers.ops)
        self._dispatch(ids, None, sync=True, resets=resets, send=run_all is None)
        if run_all is not None:
            self._pull(0, True, run_all)
        books.drain(self._pull)
        infos, finals, has_final = books.take_infos(range(self.num_envs), self.num_envs)
        return books.all_rows(infos, finals, has_final, None if resets else self._plain_ops)

    def _step_fused(self, actions: np.ndarray) -> Batch:
        """The fused step (``_paths``): ``step``'s general path in fewer moves, for executors
        that fuse a sync call (``Executor.run_all``) and a valid batch of actions that is one
        array.

        The same books as ``_dispatch`` + ``_absorb`` + ``Books.drain`` keep: when every env
        reports its op with no error (the common case), they reduce to the counts below. An
        env that raised takes the general bookkeeping, which raises its error.
        """
        b, n, books, life = self.buffers, self.num_envs, self._books, self._life
        b.actions[...] = actions
        resets = plan_ops_into(self.autoreset, life.ended_i8, life.num_ended, b.ops)
        if resets and self._maybe_seeded:
            self._clear_seeds(self._all)
        books.in_flight, books.resets_in_flight = n, resets  # a Ctrl-C in the run drops them
        done = self._waited(self._paths.run_all, None)
        if done.errors:
            self._absorb(done, sync=True)
            books.drain(self._pull)  # raises the first env's error, every env idle again
        books.in_flight = books.resets_in_flight = 0
        life.finish(self._every, n, resets, done.ended)
        op = None if resets else self._plain_ops
        if done.infos or done.final_infos:
            return books.all_rows(*take_infos(done.infos, done.final_infos, range(n), n), op)
        return books.all_rows({}, {}, None, op)

    def _inline_rows(
        self, step_infos: Any, reset_infos: dict[int, dict[str, Any]] | None, resets: int,
        done: int, op: np.ndarray | None,
    ) -> Batch:
        """The rows of an inline step whose engine gave infos (``step``'s inline path)."""
        n, same_step = self.num_envs, not self._life.keeps_ended
        columns = engine_columns(step_infos, n)
        if resets or (done and same_step):  # some env was reset by this call
            return self._books.all_rows(*self._books.inline_infos(columns, reset_infos or {}, same_step))
        return self._books.all_rows(columns, {}, None, op)

    # ------------------------------------------------------------------ async API
    def async_reset(
        self, env_id: Any = None, seed: Any = None, options: dict[str, Any] | None = None
    ) -> None:
        """Start resetting ``env_id`` (default: all envs); results come from ``recv``."""
        ids = self._all[:0]
        dispatched = False
        # The whole call is guarded, checks included: other envs may be in flight, and a
        # Ctrl-C anywhere must leave a pool that reset() takes (see _cut_short).
        try:
            if self._lease is not None:
                self._lease.eager()
            self._check_open()
            ids = self._env_ids(env_id)
            self._books.check_idle(ids, "async_reset")
            check_options(options)
            seeds = self._life.seeds_for(seed, ids)
            dispatched = True
            self._dispatch(ids, _RESET, seeds, dict(options) if options is not None else None)
        except BaseException as err:
            self._cut_short(err, ids, always=dispatched, sync=False)
            raise

    def send(self, actions: Any, env_id: Any = None) -> None:
        """Start stepping ``env_id`` (default: all envs) with ``actions``, one row per env."""
        ids = self._all[:0]
        dispatched = False
        try:  # guarded whole, as async_reset
            if self._lease is not None:
                self._lease.eager()
            self._check_open()
            paths, life = self._paths, self._life
            lean = paths.send_ids(actions, env_id, self._books.status) if (
                paths.lean_send and not life.any_blocked) else None
            if lean is not None:  # the lean send (_paths): checked in one go
                ids = lean
                self.buffers.actions[ids] = actions
                dispatched = True  # no env ended: every op is the mode's plain one (no planning)
                self._dispatch(ids, plan_ops(self.autoreset, life.ended[ids]) if life.any_ended else self._plain_op)
                return
            ids = self._env_ids(env_id)
            self._books.check_idle(ids, "send")
            batch = self._validated_actions(actions, ids)
            self._check_steppable(ids)
            self.buffers.put_actions(ids, batch)
            dispatched = True
            self._dispatch(ids, plan_ops(self.autoreset, life.ended[ids] if life.any_ended else None))
        except BaseException as err:
            self._cut_short(err, ids, always=dispatched, sync=False)
            raise

    @property
    def pending(self) -> int:
        """How many envs were sent and are not received yet (running, or ready for ``recv``)."""
        if self._lease is not None:
            self._lease.eager()
        return self._books.pending

    def recv(self) -> Batch:
        """The first ``batch_size`` envs to finish, one row each (``env_ids`` says which)."""
        books, ids, k = self._books, self._all[:0], self.batch_size
        try:  # guarded whole, as send: envs taken off the books are handed out or given up
            if self._lease is not None:
                self._lease.eager()
            self._check_open()
            take_finished = self._paths.take_finished
            if take_finished is not None and books.in_flight >= k and books.only_in_flight:
                # The lean recv (_paths): the engine hands over the finished envs with no
                # Completion (Executor.take_finished); the same books as below, in fewer moves.
                got = self._waited(take_finished, k)
                if got is not None:
                    finished, ended, table = got
                    ids = finished[:k]
                    resets = books.absorb_finished(finished, k, table)
                    self._life.finish(finished, finished.size, resets, ended)
                    return books.hand_out_finished(ids, table)
            ids = books.take(k, self._pull)
            return books.hand_out(ids, k)
        except BaseException as err:
            # Rows taken and not handed out are lost with the rest: their envs need a reset.
            self._cut_short(err, ids, sync=False)
            raise

    def wait(self, timeout: float | None = None, *, caller: str = "wait") -> Batch:
        """Receive every env in flight at once: one row per env of the pool, in env order.

        After ``send``/``async_reset`` of any envs, ``wait`` waits for all of them and returns
        what ``step``/``reset`` would: every env's row, envs that were not sent with op
        ``NO_OP`` and their current observation: gymnasium's ``step_wait``/``reset_wait``.

        Args:
            timeout: seconds to wait at most (``None``: until done). If the envs have not
                all finished by then, :class:`~envhive.errors.WaitTimeoutError` is raised and
                they stay in flight: a later ``wait`` (or ``recv``) returns them.
            caller: the name the timeout's message gives the call (``"step_wait"``, ...).

        Raises:
            envhive.NothingPendingError: nothing was sent.
            envhive.WaitTimeoutError: ``timeout`` ran out.
            envhive.EnvWorkerError: an env raised; it is raised once every env sent has
                finished, the others' results are dropped with it and every env is idle again
                (as for ``step``).

        Examples:
            >>> import envhive
            >>> pool = envhive.make("CartPole-v1", num_envs=3, seed=0).pool
            >>> pool.async_reset([0, 2])
            >>> batch = pool.wait(timeout=10.0)
            >>> batch.op.tolist(), batch.obs.shape
            ([1, -1, 1], (3, 4))
            >>> pool.close()
        """
        n, books = self.num_envs, self._books
        sent = self._all[:0]
        try:  # guarded whole, as send: the books change below (see _books)
            if self._lease is not None:
                self._lease.eager()
            self._check_open()
            check_seconds(timeout, "timeout", zero_ok=True)
            # Every env sent: cut short by a Ctrl-C, their rows are lost (they need a reset),
            # also once wait_all has marked them idle and before their rows are handed out.
            sent = np.flatnonzero(books.status != IDLE)
            op = books.wait_all(self._pull, timeout, caller)
            return books.all_rows(*books.take_infos(range(n), n), op)
        except BaseException as err:
            self._cut_short(err, sent, sync=False)
            raise

    # ------------------------------------------------------------------ env access
    def call(
        self,
        name: str,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        env_ids: Any = None,
    ) -> tuple[Any, ...]:
        """Call (or read) ``name`` on every env, or on ``env_ids`` (results in their order):
        a method with ``args``/``kwargs``, an attribute as is (SB3's ``env_method``)."""
        if self._lease is not None:
            self._lease.eager()
        self._check_sync("call")
        ids = None if env_ids is None else self._env_ids(env_ids).tolist()
        try:
            return tuple(self.executor.call(name, tuple(args), dict(kwargs or {}), ids))
        except BaseException as err:  # a cut-short call leaves replies in flight: drop them
            self._cut_short(err, self._all[:0], sync=False)
            raise

    def set_attr(self, name: str, values: Any, env_ids: Any = None) -> None:
        """Set ``name`` on every env (or ``env_ids``): a list/tuple gives one value per env,
        anything else is given to each."""
        if self._lease is not None:
            self._lease.eager()
        self._check_sync("set_attr")
        ids = None if env_ids is None else self._env_ids(env_ids).tolist()
        count = self.num_envs if ids is None else len(ids)
        if not isinstance(values, (list, tuple)):
            values = [values] * count
        if len(values) != count:
            raise ConfigError(f"set_attr({name!r}): expected {count} values (one per env), got {len(values)}")
        try:
            self.executor.set_attr(name, list(values), ids)
        except BaseException as err:
            self._cut_short(err, self._all[:0], sync=False)
            raise

    def _left_by_fork(self) -> None:
        """This is a forked child's copy of the pool: it cannot be used (see ``_FORK_BOUND``)."""
        if not self.closed:
            self.closed = True
            self._forked_from = os.getppid()

    def __del__(self) -> None:
        # The pool, not its front end, owns the executor: a pool kept alone (``env.pool``)
        # stays open after its front end is dropped, and closes when it is dropped itself.
        if getattr(self, "closed", True) is False and hasattr(self, "executor"):
            self.close()

    def close(self) -> None:
        """Close the executor and every env. Idempotent: a close cut short (Ctrl-C) is
        finished by the next ``close()``, as the executor's close is."""
        if not self.closed:
            self.closed = True
            self._books.give_up()
        lease = getattr(self, "_lease", None)
        if lease is not None:
            lease.close()
        executor = getattr(self, "executor", None)
        if executor is not None:
            executor.close()
