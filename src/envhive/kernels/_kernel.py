"""The kernel interface: a batch of envs whose state lives in arrays, stepped by compiled code.

A kernel family (CartPole, Pendulum, ...) supplies three small numba functions for one env:

* ``step_one(params, state, actions, i, obs) -> (reward, terminated)``: advance ``state``
  (one env's row) with ``actions[i]`` and write the observation into ``obs`` (its row);
* ``reset_one(params, state, noise, obs)``: start an episode from ``noise`` (this reset's row of
  random draws) and write the observation;
* ``valid_one(params, actions, i) -> bool``: whether ``actions[i]`` lies in the action space.

:func:`build_driver` wraps them into one compiled loop over env ids that performs the executor
ops (STEP, RESET, STEP_RESET), keeps the time limit, and writes straight into the pool's
buffers. There is no Python per env on that path.

**Random numbers.** Resets must draw exactly what gymnasium's env would draw, so that a seed
gives the same episode everywhere. Each env keeps its own ``numpy.random.Generator``, made by
``gymnasium.utils.seeding.np_random`` like ``Env.reset(seed=...)`` does. Python draws a *stock*
of the next ``STOCK`` resets' values from it with the family's ``draw`` method (the very call
gymnasium makes, with a leading ``size`` axis: the generator yields the same numbers whether
drawn one reset at a time or a block at a time). The compiled loop consumes one row per reset
and reports when an env's stock runs out; Python then draws the next block. Seeding an env
throws its stock away and starts a new one, as reseeding gymnasium's env restarts its
generator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium as gym
import numba
import numpy as np
from gymnasium.utils import seeding

from envhive._buffers import BufferSpec
from envhive._ops import RESET, RESET_REWARD
from envhive.engines._compiled import address_to_voidptr, resets_in_op
from envhive.engines._jit import jit
from envhive.errors import ConfigError, UnexpectedKeywordError
from envhive.kernels._rng import (
    MAX_SEED,
    entropy_words,
    fill_row,
    fill_uniform,
    generator_of,
    seed_words,
    uniform_span,
)

__all__ = ["Kernel", "Binding", "build_driver", "STOCK"]

#: Resets drawn ahead per env (one Python call per env every ``STOCK`` episodes).
STOCK = 32
#: The same for a large pool whose generators are compiled (``uniform_bounds``): the op loop
#: then refills an env's stock itself when it runs out, and a deep stock would only cost
#: memory (1 KB per CartPole env at 32) and the time to touch it.
_LARGE_POOL, _LARGE_POOL_STOCK = 2**16, 8
#: An estimate of one env's ``numpy.random.Generator`` (gymnasium's per-env generator, kept
#: for exact seeding) and its Python records, for the memory check before a pool is built
#: (measured with tracemalloc and a pool's resident memory, as docs/benchmarks.md says).
_GENERATOR_BYTES = 1050

Driver = Callable[..., tuple[int, int, int]]


# Slots of the binding table (see Binding): array addresses, then sizes.
(_STATE, _ELAPSED, _NOISE, _NOISE_POS, _PARAMS, _OPS, _OBS, _FINAL_OBS, _REWARD, _TERM, _TRUNC,
 _WORDS, _IN_WORDS, _LOW, _SPAN,
 _N, _STATE_DIM, _STOCK, _NOISE_DIM, _OBS_DIM, _N_PARAMS, _MAX_STEPS, _DRAW_DIM, _TO_F32,
 _TABLE_SIZE) = range(25)


class Binding:
    """The arrays one driver call works on, as a table of addresses and sizes.

    numba checks the type of every array argument on every call: with a dozen arrays that
    costs more than stepping a batch of CartPoles. So the arrays are bound once, as an int64
    table of their addresses, which the driver turns back into arrays with ``numba.carray``.
    This object keeps every array alive for as long as the table can be used.

    Args:
        kernel: the kernel whose state arrays are bound.
        ops, obs, final_obs, reward, terminated, truncated: the pool's buffers (C-contiguous;
            ``obs`` and ``final_obs`` float32 of shape ``(num_envs, obs_dim)``).
    """

    def __init__(
        self,
        kernel: Kernel,
        ops: np.ndarray,
        obs: np.ndarray,
        final_obs: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        k = kernel
        n = k.num_envs
        arrays = (k.state, k.elapsed, k.noise, k.noise_pos, k.params, ops, obs, final_obs,
                  reward, terminated, truncated, k._words, k._in_words, k._low, k._span)
        want = (np.float64, np.int64, np.float64, np.int64, np.float64, np.int8, np.float32,
                np.float32, np.float64, np.bool_, np.bool_, np.uint64, np.bool_, np.float64,
                np.float64)
        for a, dtype in zip(arrays, want):
            rows_ok = a is k.params or a is k._low or a is k._span or (a.ndim >= 1 and a.shape[0] == n)
            if a.dtype != dtype or not a.flags.c_contiguous or not rows_ok:
                raise ValueError(
                    f"kernel binding: expected a C-contiguous {np.dtype(dtype)} array with "
                    f"{n} rows, got {a.dtype} {a.shape}"
                )
        if obs.ndim != 2 or final_obs.shape != obs.shape:
            raise ValueError(f"kernel binding: expected obs of shape ({n}, dim), got {obs.shape}")
        self.arrays = arrays  # keeps them alive
        table = np.zeros(_TABLE_SIZE, np.int64)
        table[:_N] = [a.ctypes.data for a in arrays]
        table[_N:] = [n, k.state_dim, k.noise.shape[1], k.noise_dim, obs.shape[1], k.params.size,
                      k.max_episode_steps, k._low.size, k.uniform_bounds is not None and k.uniform_bounds[2]]
        self.table = table


def build_driver(step_one: Any, reset_one: Any, valid_one: Any) -> Driver:
    """Compile the op loop for one kernel family (lazily, on its first call).

    The family's functions are closed over rather than passed as arguments: numba then calls
    them directly (and can inline them) instead of going through a dispatcher on every call.

    The op rules are ``envhive._ops``' own functions and constants, compiled
    (``envhive.engines._compiled.resets_in_op``): the rule exists once.

    An env whose stock of reset draws runs out draws the next stock in the loop when its
    generator is compiled (``Kernel._in_words``): no call back to Python, whose restock cost
    more per call than stepping 64 CartPoles. Others are counted for :meth:`Kernel.restock`.

    The returned function takes ``(ids, actions, table, validate)``, with ``table`` from a
    :class:`Binding`, and returns ``(bad, low, done)``: ``bad`` is the position in ``ids`` of
    the first invalid action (``-1`` if none; with ``validate`` set, nothing is run when one is
    invalid), ``low`` the number of envs whose noise stock is used up (and was not drawn
    again in the loop), ``done`` the number of stepped envs whose episode ended (terminated or
    truncated).
    """

    @jit(nogil=True)
    def drive(ids, actions, table, validate):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        n = table[_N]
        sd, stock, nd, od = table[_STATE_DIM], table[_STOCK], table[_NOISE_DIM], table[_OBS_DIM]
        state = numba.carray(address_to_voidptr(table[_STATE]), (n, sd), np.float64)
        elapsed = numba.carray(address_to_voidptr(table[_ELAPSED]), n, np.int64)
        noise = numba.carray(address_to_voidptr(table[_NOISE]), (n, stock, nd), np.float64)
        noise_pos = numba.carray(address_to_voidptr(table[_NOISE_POS]), n, np.int64)
        params = numba.carray(address_to_voidptr(table[_PARAMS]), table[_N_PARAMS], np.float64)
        ops = numba.carray(address_to_voidptr(table[_OPS]), n, np.int8)
        obs = numba.carray(address_to_voidptr(table[_OBS]), (n, od), np.float32)
        final_obs = numba.carray(address_to_voidptr(table[_FINAL_OBS]), (n, od), np.float32)
        reward = numba.carray(address_to_voidptr(table[_REWARD]), n, np.float64)
        terminated = numba.carray(address_to_voidptr(table[_TERM]), n, np.bool_)
        truncated = numba.carray(address_to_voidptr(table[_TRUNC]), n, np.bool_)
        words = numba.carray(address_to_voidptr(table[_WORDS]), (n, 4), np.uint64)
        in_words = numba.carray(address_to_voidptr(table[_IN_WORDS]), n, np.bool_)
        draw_low = numba.carray(address_to_voidptr(table[_LOW]), table[_DRAW_DIM], np.float64)
        draw_span = numba.carray(address_to_voidptr(table[_SPAN]), table[_DRAW_DIM], np.float64)
        to_f32 = table[_TO_F32] != 0
        max_steps = table[_MAX_STEPS]
        count = ids.size
        if validate:
            for k in range(count):
                if not valid_one(params, actions, ids[k]):
                    return k, 0, 0
        low = 0
        done = 0
        for k in range(count):
            i = ids[k]
            op = ops[i]
            if op == RESET:
                p = noise_pos[i]
                if p >= stock:  # the caller restocks after every call: cannot happen
                    raise RuntimeError("envhive kernel: reset noise stock exhausted")
                reset_one(params, state[i], noise[i, p], obs[i])
                low += _used_draw(i, p, noise, noise_pos, stock, in_words, words, draw_low,
                                  draw_span, to_f32)
                elapsed[i] = 0
                reward[i] = RESET_REWARD
                terminated[i] = False
                truncated[i] = False
                continue
            r, term = step_one(params, state[i], actions, i, obs[i])
            steps = elapsed[i] + 1
            elapsed[i] = steps
            trunc = max_steps > 0 and steps >= max_steps
            reward[i] = r
            terminated[i] = term
            truncated[i] = trunc
            done += term or trunc
            if resets_in_op(op, term, trunc):
                final_obs[i, :] = obs[i]
                p = noise_pos[i]
                if p >= stock:
                    raise RuntimeError("envhive kernel: reset noise stock exhausted")
                reset_one(params, state[i], noise[i, p], obs[i])
                low += _used_draw(i, p, noise, noise_pos, stock, in_words, words, draw_low,
                                  draw_span, to_f32)
                elapsed[i] = 0
        return -1, low, done

    return drive


@jit(nogil=True, inline="always")
def _used_draw(i, p, noise, noise_pos, stock, in_words, words, low, span, to_f32):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Env ``i`` used row ``p`` of its stock: move on, drawing a new stock if that was the
    last row and its generator is compiled (1 if the stock is used up and left to Python)."""
    if p + 1 < stock:
        noise_pos[i] = p + 1
        return 0
    if in_words[i]:
        fill_row(words, i, low, span, to_f32, noise[i], stock)
        noise_pos[i] = 0
        return 0
    noise_pos[i] = p + 1
    return 1


class Kernel:
    """A batch of ``num_envs`` envs of one family, state in arrays (struct of arrays).

    Subclasses set the class attributes below and implement :meth:`spaces` and
    :meth:`draw`. Users do not build kernels directly: ``envhive.make("envhive/CartPole-v1",
    ...)`` does, and the ``native`` executor steps them.

    Attributes:
        id: the envhive id (``"envhive/CartPole-v1"``).
        gym_id: the gymnasium reference env this kernel reproduces.
        state_dim: floats of state per env.
        noise_dim: floats drawn per reset.
        default_max_episode_steps: the time limit of gymnasium's registration.
        defaults: constructor keywords (``make(env_kwargs=...)``) and their defaults.
        param_names: the columns of ``params`` (one float each), in order; the family's
            compiled functions read them by these names (``engines.column_index``), never by
            bare offsets. By default a keyword per column, as ``float(config[name])``.

    Args:
        num_envs: batch size.
        max_episode_steps: time limit (truncation); ``None`` takes the family's default and
            ``0`` disables it.
        **kwargs: family keywords (see ``defaults``).

    Examples:
        >>> from envhive.kernels import CartPoleKernel
        >>> k = CartPoleKernel(4)
        >>> k.state.shape, k.observation_space.shape, k.max_episode_steps
        ((4, 4), (4,), 500)
    """

    id: ClassVar[str] = ""
    gym_id: ClassVar[str] = ""
    state_dim: ClassVar[int] = 0
    noise_dim: ClassVar[int] = 0
    default_max_episode_steps: ClassVar[int] = 0
    defaults: ClassVar[dict[str, Any]] = {}
    param_names: ClassVar[tuple[str, ...]] = ()
    #: ``(low, high, to_float32)`` when :meth:`draw` is ``rng.uniform(low, high, size=(count,
    #: noise_dim))`` (then ``.astype(np.float32)`` if ``to_float32``): generators and stocks
    #: are then made compiled (kernels/_rng.py), bit for bit; ``None``: in Python, per env.
    uniform_bounds: ClassVar[tuple[tuple[float, ...], tuple[float, ...], bool] | None] = None
    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}
    _driver: ClassVar[Driver | None] = None

    def __init__(self, num_envs: int, max_episode_steps: int | None = None, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(self.defaults))
        if unknown:
            raise UnexpectedKeywordError(
                f"{self.id}: __init__() got an unexpected keyword argument {unknown[0]!r} "
                f"(unknown keyword(s) {unknown}; expected some of {sorted(self.defaults)})"
            )
        self.config = {**self.defaults, **kwargs}
        if max_episode_steps is None:
            max_episode_steps = self.default_max_episode_steps
        if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, (int, np.integer)) or max_episode_steps < 0:
            raise ConfigError(
                f"{self.id}: max_episode_steps: expected a non-negative int, got {max_episode_steps!r}"
            )
        self.max_episode_steps = int(max_episode_steps)
        self.num_envs = n = int(num_envs)
        self.params = self.pack_params(self.config)
        self.observation_space, self.action_space = self.spaces(self.config)
        self.stock = self.stock_for(n)  # resets drawn ahead per env
        self.state = np.zeros((n, self.state_dim), np.float64)
        self.elapsed = np.zeros(n, np.int64)
        self.noise = np.zeros((n, self.stock, self.noise_dim), np.float64)
        # Generators and stocks are made on first need (restock), not here: a pool seeded at
        # its first reset would throw away n entropy-seeded generators (each costly to make).
        self.noise_pos = np.full(n, self.stock, np.int64)
        self._rngs: list[np.random.Generator | None] = [None] * n
        # Families whose draw is one Generator.uniform call keep each env's generator as four
        # words (kernels/_rng.py: seeded, drawn from, compiled, bit for bit); ``_in_words``
        # says whose generator lives there rather than in ``_rngs``.
        self._words = np.zeros((n, 4), np.uint64)
        self._in_words = np.zeros(n, np.bool_)
        bounds = self.uniform_bounds or ((), (), False)
        self._low, self._span = uniform_span(bounds[0], bounds[1])  # what the compiled draws take
        self._has_rng = np.zeros(n, np.bool_)

    def stock_for(self, num_envs: int) -> int:
        """Resets drawn ahead per env in a kernel of ``num_envs`` (fewer for a huge pool, whose
        refills are cheap)."""
        large = num_envs >= _LARGE_POOL and self.uniform_bounds is not None
        return _LARGE_POOL_STOCK if large else STOCK

    def bytes_per_env(self, num_envs: int | None = None) -> int:
        """Host bytes one env of this kernel (or of one of ``num_envs`` envs) holds once reset,
        with its rows of the pool's buffers: its state row, time step, stock of draws and
        position, and its generator (four words and three flags when compiled, else a numpy
        generator: ``_GENERATOR_BYTES``). ``make`` checks a pool's need from it
        (``KernelFactory.bytes_per_env``) before the kernel is built."""
        stock = self.stock if num_envs is None else self.stock_for(num_envs)
        rng = 32 + 3 + 8 if self.uniform_bounds is not None else _GENERATOR_BYTES
        rows = BufferSpec(1, self.observation_space, self.action_space, with_final_obs=True).bytes_per_env()
        return 8 * (self.state_dim + 1 + stock * self.noise_dim + 1) + rng + rows

    # ------------------------------------------------------------------ family hooks
    @classmethod
    def spaces(cls, config: dict[str, Any]) -> tuple[gym.Space, gym.Space]:
        """(observation_space, action_space) of one env, exactly gymnasium's."""
        raise NotImplementedError

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """The random draws of ``count`` successive resets, shape ``(count, noise_dim)``.

        Must be gymnasium's own call with a leading ``count`` axis, so that the generator
        yields the numbers gymnasium's env would draw, in the same order.
        """
        raise NotImplementedError

    @classmethod
    def pack_params(cls, config: dict[str, Any]) -> np.ndarray:
        """The family's keywords as the float64 array its compiled functions read.

        Override to derive columns from keywords (a variant name as a number), and return
        :meth:`packed` of the column values.
        """
        return cls.packed({name: config[name] for name in cls.param_names})

    @classmethod
    def packed(cls, values: dict[str, Any]) -> np.ndarray:
        """``values`` (one per name of ``param_names``) as the ``params`` array, in order.

        Examples:
            >>> from envhive.kernels import PendulumKernel
            >>> PendulumKernel.packed({"g": 9.81}).tolist()
            [9.81]
        """
        if set(values) != set(cls.param_names):
            raise ValueError(f"{cls.id}: params: expected {list(cls.param_names)}, got {sorted(values)}")
        return np.array([float(values[name]) for name in cls.param_names], np.float64)

    @classmethod
    def compiled(cls) -> tuple[Any, Any, Any]:
        """``(step_one, reset_one, valid_one)``: the family's numba functions."""
        raise NotImplementedError

    # ------------------------------------------------------------------ machinery
    @classmethod
    def driver(cls) -> Driver:
        """The family's compiled op loop (built once per class)."""
        drive = cls.__dict__.get("_driver")
        if drive is None:
            drive = build_driver(*cls.compiled())
            cls._driver = drive
        return drive

    def seed(self, i: int, seed: int | None) -> None:
        """Give env ``i`` a new generator, as ``Env.reset(seed=seed)`` does."""
        self._rngs[i] = seeding.np_random(seed)[0]
        self._in_words[i], self._has_rng[i] = False, True
        self._refill(i)

    def seed_many(self, ids: np.ndarray, seeds: list[int | None]) -> None:
        """:meth:`seed` for each env of ``ids`` whose seed (``seeds[k]``) is not ``None``, in
        one compiled call when the family's draw allows (``uniform_bounds``; a seed beyond
        2**64 - 1 takes numpy's path)."""
        picked = [(i, seed) for i, seed in zip(ids.tolist(), seeds) if seed is not None]
        if not picked:
            return
        compiled = self.uniform_bounds is not None
        fast = [(i, seed) for i, seed in picked if compiled and seed <= MAX_SEED]
        for i, seed in picked:
            if not (compiled and seed <= MAX_SEED):
                self.seed(i, seed)
        if fast:
            rows = np.array([i for i, _ in fast], np.int64)
            words = np.empty((rows.size, 4), np.uint64)
            seed_words(np.array([seed for _, seed in fast], np.uint64), words)
            self._words[rows] = words
            self._to_words(rows)

    def _to_words(self, ids: np.ndarray) -> None:
        """Envs ``ids`` (generators just written to ``_words``) draw their stock from them."""
        self._in_words[ids] = self._has_rng[ids] = True
        rngs = self._rngs
        for i in ids.tolist():
            rngs[i] = None
        self._fill_words(ids)

    def _fill_words(self, ids: np.ndarray) -> None:
        assert self.uniform_bounds is not None
        low, high, to_f32 = self.uniform_bounds
        fill_uniform(self._words, ids, ids, np.array(low), np.array(high), to_f32, self.noise, self.stock)
        self.noise_pos[ids] = 0

    def _refill(self, i: int) -> None:
        if self._in_words[i]:
            self._fill_words(np.array([i], np.int64))
            return
        self.noise[i] = self.draw(self.rng(i), self.stock)
        self.noise_pos[i] = 0

    def restock(self, ids: list[int] | None = None) -> None:
        """Draw new stock for every env (or every env in ``ids``) that has none left.

        Called after every run that used up a stock, and before a run with RESET ops for the
        envs it resets (an env never reset has no stock yet). The compiled loop relies on
        every env it resets having at least one row.
        """
        if ids is None:
            # Envs with no generator were never reset: stocked at their first reset instead.
            empty = np.flatnonzero((self.noise_pos >= self.stock) & self._has_rng)
        else:
            rows = np.asarray(ids, np.int64)
            empty = rows[self.noise_pos[rows] >= self.stock]
            fresh = empty[~self._has_rng[empty]]
            if fresh.size and self.uniform_bounds is not None:
                # First resets without a seed: generators from fresh OS entropy, as
                # SeedSequence() makes them, all at once.
                words = np.empty((fresh.size, 4), np.uint64)
                entropy_words(words)
                self._words[fresh] = words
                self._to_words(fresh)
                empty = empty[self.noise_pos[empty] >= self.stock]
        if not empty.size:
            return
        in_words = self._in_words[empty]
        if in_words.any():
            self._fill_words(empty[in_words])
        for i in empty[~in_words].tolist():
            self._refill(i)

    def rng(self, i: int) -> np.random.Generator:
        """Env ``i``'s generator (its state is ``self.stock`` resets ahead of use, at most).

        An env never seeded gets one from fresh entropy, as gymnasium's ``Env.np_random``.
        """
        rng = self._rngs[i]
        if rng is None and self._in_words[i]:
            # Asked for as an object (call("np_random"), a family without uniform_bounds):
            # made in exactly the words' state; the env draws in Python from then on.
            rng = self._rngs[i] = generator_of(self._words[i])
            self._in_words[i] = False
        elif rng is None:
            rng = self._rngs[i] = seeding.np_random(None)[0]
            self._has_rng[i] = True
        return rng
