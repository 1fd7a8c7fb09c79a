"""A pool lent to XLA: the driver its FFI handlers run, and the hand-overs with Python.

``env.xla()`` makes one :class:`Lease` per pool (``pool._lease``). It builds the C++ driver
(``envhive.jax._xla.new_driver``) over the pool's buffers and its per-env state arrays
(``Lifecycle.started``/``ended``/``broken``, ``Books.status``), shared by address, and over
the engine's entry: its C entry (:class:`~envhive.engines.CEntry`: the threaded C++ engines,
the classic-control kernels) or, for an engine without one (MuJoCo), its ``run`` called with
the GIL. The handlers then do what ``Pool.send``/``recv`` do, in C++.

Python and XLA take turns on one pool, so each tells the other when it has used it (two
counters in a shared header):

* before an XLA call after Python used the pool, the handler calls :meth:`Lease.adopt` (with
  the GIL): the rows Python booked and did not hand out, and the ops it left in flight, become
  the driver's (an eager ``async_reset()`` then a jitted ``recv``: EnvPool's way);
* before a Python call after XLA used the pool, the pool calls :meth:`Lease.eager`, which
  takes the books back: finished rows the driver has not handed out are ready for ``recv``,
  the step count, the ended flags and the in-flight counts are the pool's again.

Nothing here imports jax (``envhive.jax._ffi`` does). Rows handed out by XLA carry no infos
but ``env_id`` (and same_step's final observations).

Examples:
    >>> import envhive
    >>> env = envhive.make("envhive/CartPole-v1", num_envs=2, seed=0)
    >>> lease = Lease.of(env.pool)
    >>> lease.num_envs, lease.batch_size, Lease.of(env.pool) is lease
    (2, 2, True)
    >>> env.close()
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from envhive._books import IDLE, PENDING, READY
from envhive._ops import RESET, STEP, STEP_RESET
from envhive._pool import Pool
from envhive._report import Completion
from envhive._spaces import ArrayCodec
from envhive.engines import AsyncEngine, Engine, HasCEntry
from envhive.errors import ClosedError, ConfigError, PendingCallError

__all__ = ["Lease", "CODES", "HEADER"]

#: The element types the driver converts, by numpy dtype (``_xla.cpp``'s ``Code``).
CODES = {np.dtype(np.bool_): 0, np.dtype(np.int8): 1, np.dtype(np.uint8): 2, np.dtype(np.int32): 3,
         np.dtype(np.int64): 4, np.dtype(np.float32): 5, np.dtype(np.float64): 6}
#: The shared header's slots (``_xla.cpp``'s ``Slot``).
HEADER = ("driver_gen", "python_gen", "seen_python", "steps", "head", "count", "in_core", "closed")
_DRIVER_GEN, _PYTHON_GEN, _SEEN, _STEPS, _HEAD, _COUNT, _IN_CORE, _CLOSED = range(len(HEADER))
_MODES = {AutoresetMode.NEXT_STEP: 0, AutoresetMode.SAME_STEP: 1, AutoresetMode.DISABLED: 2}

_USE_INSTEAD = ("use api='jax' (jax arrays out of any executor, jitted code through an ordered "
                "io_callback), or envhive/ ids on executor='native'")


def _array_codec(codec: Any, what: str, name: str) -> ArrayCodec:
    if not isinstance(codec, ArrayCodec) or codec.dtype not in CODES:
        raise ConfigError(f"xla(): {name}'s {what} space is {codec.space}: the XLA path takes one array "
                          f"of bool, int8, uint8, int32, int64, float32 or float64; {_USE_INSTEAD}")
    return codec


def _bounds(codec: ArrayCodec) -> tuple[np.ndarray, np.ndarray]:
    """Each action item's bounds as the codec checks them (``-inf``/``inf``: unchecked; a NaN
    fails either way, as in ``ArrayCodec.validate``)."""
    shape = codec.shape
    low = np.full(shape, -np.inf)
    high = np.full(shape, np.inf)
    if not codec.boolean:
        if codec.low is not None:
            low = np.where(np.isfinite(codec.low), np.broadcast_to(codec.low, shape), -np.inf).astype(np.float64)
        if codec.high is not None:
            high = np.where(np.isfinite(codec.high), np.broadcast_to(codec.high, shape), np.inf).astype(np.float64)
    return np.ascontiguousarray(low.ravel(), np.float64), np.ascontiguousarray(high.ravel(), np.float64)


class Lease:
    """A pool lent to XLA (see the module). Build it with :meth:`of`.

    Args:
        pool: an open pool on the native executor, of one array observation and action.
        name: the id, for messages.
    """

    @classmethod
    def of(cls, pool: Pool, name: str = "") -> Lease:
        """The pool's lease, made on first use."""
        lease = getattr(pool, "_lease", None)
        if lease is None:
            lease = cls(pool, name)
            pool._lease = lease
        return lease  # type: ignore[no-any-return]

    def __init__(self, pool: Pool, name: str) -> None:
        try:
            from envhive.jax import _xla  # type: ignore[attr-defined]  # the compiled extension
        except ImportError:
            raise ConfigError("xla(): the extension envhive.jax._xla is not built (no C++ compiler at "
                              "install?); use api='jax' instead (jax arrays out, jitted code through an "
                              "ordered io_callback)") from None
        if pool.closed:
            raise ClosedError("xla(): the pool is closed: make a new one with envhive.make()")
        name = name or "the pool"
        engine = getattr(pool.executor, "_engine", None)
        if not isinstance(engine, Engine):
            raise ConfigError(f"xla(): {name} runs on the {pool.executor.name} executor; the XLA path "
                              f"steps envhive's compiled engines (executor='native'); {_USE_INSTEAD}")
        entry = engine.c_entry() if isinstance(engine, HasCEntry) else None
        if entry is None and isinstance(engine, AsyncEngine):
            raise ConfigError(f"xla(): {name}'s engine ({type(engine).__name__}) has no C entry; {_USE_INSTEAD}")
        if pool.resident or pool.agents:
            raise ConfigError(f"xla(): {name} keeps {'its results on a torch device' if pool.resident else 'an agent axis'}"
                              f"; {_USE_INSTEAD}")
        b, life, books = pool.buffers, pool._life, pool._books
        obs = _array_codec(b.obs_codec, "observation", name)
        act = _array_codec(pool._act_codec, "action", name)
        self.num_envs, self.batch_size = n, k = pool.num_envs, pool.batch_size
        self._pool = weakref.ref(pool)  # the pool owns the lease, never the other way round
        self._engine = engine
        self._entry = entry
        self.header = np.zeros(len(HEADER), np.int64)
        self._ring = np.zeros(n, np.int64)
        self._ids = np.zeros(n, np.int64)  # the ids of the ops the driver runs (shared)
        self._seen_driver = 0
        self._low, self._high = _bounds(act)
        arrays = dict(ops=b.ops, actions=b.actions, obs=b.obs, final_obs=b.final_obs, reward=b.reward,
                      terminated=b.terminated, truncated=b.truncated, has_seed=b.has_seed,
                      started=life.started, broken=life.broken, ended=life.ended, status=books.status,
                      header=self.header, ring=self._ring, ids=self._ids, act_low=self._low, act_high=self._high,
                      failed=entry.failed if entry else None, watch=entry.watch if entry else None)
        for key, arr in arrays.items():
            if arr is not None and (type(arr) is not np.ndarray or not arr.flags.c_contiguous or not arr.flags.writeable):
                raise ConfigError(f"xla(): {name}'s {key} array is not a writable contiguous numpy array")
        spec: dict[str, Any] = {key: None if arr is None else arr.ctypes.data for key, arr in arrays.items()}
        spec.update(
            num_envs=n, batch_size=k, mode=_MODES[pool.autoreset], op_step=STEP, op_reset=RESET,
            op_step_reset=STEP_RESET, idle=IDLE, pending=PENDING, act_code=CODES[b.actions.dtype],
            act_items=int(np.prod(act.shape, dtype=np.int64)), obs_code=CODES[b.obs.dtype],
            obs_items=int(np.prod(obs.shape, dtype=np.int64)),
            reward_items=int(np.prod(b.spec.reward_shape, dtype=np.int64)), limit=entry.limit if entry else 0,
            run=None if entry else self._run, prepare=self._prepare if entry else None, adopt=self.adopt,
            error=entry.error if entry else str, capsule=entry.capsule if entry else None,
            space=str(pool.action_space), name=name, keep=tuple(a for a in arrays.values() if a is not None),
        )
        self._xla = _xla
        self._closed = False
        self.address: int = _xla.new_driver(spec)
        self.header[_PYTHON_GEN] = 1  # the first call adopts what Python did before it

    # -- called by the driver, with the GIL -----------------------------------------------
    def _live(self) -> Pool:
        pool = self._pool()
        if pool is None or pool.closed:
            raise ClosedError("the pool is closed: make a new one with envhive.make() and call xla() on it")
        return pool

    def _run(self, count: int) -> None:
        """An engine without a C entry runs the ops of the driver's ids in Python; a failed
        env is marked broken and idle (as ``Books.absorb`` does) and its error raised."""
        pool = self._live()
        ids = self._ids[:count].copy()
        done = Completion()
        self._engine.run(ids, None, done)
        if done.errors:
            bad = np.fromiter(done.errors, np.int64)
            pool._books.status[bad] = IDLE
            pool._life.broken[bad] = True
            raise done.errors[min(done.errors)]

    def _prepare(self, count: int) -> None:
        assert self._entry is not None and self._entry.prepare is not None
        self._entry.prepare(self._ids[:count].copy())

    def adopt(self, _: int = 0) -> None:
        """Python used the pool since the last XLA call: what it left becomes the driver's.
        Rows booked and not handed out join the driver's queue (in order); ops in flight in a
        threaded engine stay there for the driver to collect."""
        pool = self._live()
        books = pool._books
        if books.errors:
            raise PendingCallError("an env's error waits for an eager recv(): call recv() before the XLA path")
        if self._entry is not None:
            self._entry.settle()
        if books.in_flight:
            pool._pull(0)  # whatever finished, booked (Lifecycle.finish included)
            if books.errors:
                raise PendingCallError("an env raised: call recv() eagerly for its error before the XLA path")
        h, ring, n = self.header, self._ring, self.num_envs
        for i in books.ready:
            ring[(h[_HEAD] + h[_COUNT]) % n] = i
            h[_COUNT] += 1
            books.status[i] = PENDING
        books.ready.clear()
        books.infos.clear()
        books.final_infos.clear()
        books._forget_tabled()
        h[_IN_CORE] = books.in_flight
        self._seen_driver = int(h[_DRIVER_GEN])

    # -- called by the pool, before each of its calls ------------------------------------
    def eager(self) -> None:
        """A Python call on the pool follows: take the books back if XLA used the pool."""
        h = self.header
        if h[_DRIVER_GEN] != self._seen_driver:
            self._take_back()
        h[_PYTHON_GEN] += 1

    def _take_back(self) -> None:
        pool = self._pool()
        h = self.header
        self._seen_driver = int(h[_DRIVER_GEN])
        if pool is None:
            return
        books, life = pool._books, pool._life
        head, count, n = int(h[_HEAD]), int(h[_COUNT]), self.num_envs
        ready = [int(self._ring[(head + j) % n]) for j in range(count)]
        h[_HEAD] = h[_COUNT] = 0
        books.status[ready] = READY
        books.ready.extend(ready)
        pending = books.status == PENDING
        books.in_flight = int(np.count_nonzero(pending))
        books.resets_in_flight = int(np.count_nonzero(pool.buffers.ops[pending] == RESET))
        h[_IN_CORE] = 0
        life.steps += int(h[_STEPS])
        h[_STEPS] = 0
        life.num_ended = int(np.count_nonzero(life.ended))
        life.any_ended = life.num_ended > 0
        life.first_seeds[life.started] = None
        life.refresh()

    def close(self) -> None:
        """The pool closes: the driver's calls fail from now on (idempotent). Reads no module
        global: it may run at interpreter exit (``Pool.__del__``), after they are gone."""
        if not self._closed:
            self._closed = True
            close = getattr(self._xla, "close_driver", None)  # None once the interpreter exits
            if close is not None:
                close(self.address)  # marks the shared header closed too
