"""Torch-native batched envs: the protocol, and the engine the native executor drives them with.

A *torch batched env* keeps the state of all its envs in tensors on one device and resets or
steps any subset of them in one call (the IsaacLab ``DirectRLEnv`` shape). Subclass
:class:`TorchBatchedEnv` and implement :meth:`~TorchBatchedEnv.reset_envs` and
:meth:`~TorchBatchedEnv.step_envs`; everything else (the three autoreset modes, partial
resets, ``send``/``recv``, every front end) comes from the pool, as for any other env.

:class:`TorchEngine` runs one on the ``native`` executor. It binds tensor views of the pool's
buffers (``torch.from_numpy``: on the CPU the env's results land in the very arrays the front
ends hand out, with one ``copy_`` per array and no conversion). Per call it reads the ops the
pool planned, steps the envs that step, resets those that reset (seeded from the command
block), and writes final observations for same_step's ended envs.

Devices: when the front end asks for the env's own device (``envhive.make(..., device=)``
builds the env there), the pool's observation, final observation, action and reward buffers
are tensors on that device (``BufferSpec.resident``) and results never leave it. Per step one
small transfer crosses to the host: the ``(2, num_envs)`` terminated/truncated flags, which
the pool's bookkeeping (autoreset planning, episode counts) reads. Tensor actions are checked
on the device, which reads one bool. Otherwise (numpy results, or another device) the results
are copied into the pool's host buffers, one copy per array.

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envhive/TorchCartPole-v1", num_envs=4, seed=0)
    >>> env.executor
    'native'
    >>> obs, info = env.reset()
    >>> obs, rew, term, trunc, info = env.step(np.ones(4, dtype=np.int64))
    >>> obs.shape, rew.tolist()
    ((4, 4), [1.0, 1.0, 1.0, 1.0])
    >>> env.close()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from envhive._buffers import Buffers, is_tensor, put_rows
from envhive._extras import require
from envhive._ops import RESET_REWARD
from envhive._report import Completion, EnvProps
from envhive.engines._batched import BatchedOps
from envhive.errors import ConfigError

__all__ = ["TorchBatchedEnv", "TorchEngine", "NoiseStock"]


class TorchBatchedEnv:
    """Base class of a batch of envs whose state lives in torch tensors on ``device``.

    Subclasses set ``single_observation_space`` and ``single_action_space`` (one env's; a Box
    observation, a Box or Discrete action) and implement :meth:`reset_envs` and
    :meth:`step_envs`. Episodes end on their own (``terminated``), or by the env's time limit
    (``truncated``): keep a per-env step counter, as ``max_episode_steps`` says.

    Args:
        num_envs: the batch size.
        device: a torch device for the state (``"cpu"``, ``"cuda:0"``, ...).
        max_episode_steps: time limit (``None``: the class default).
    """

    single_observation_space: gym.spaces.Space
    single_action_space: gym.spaces.Space
    metadata: dict[str, Any] = {"render_modes": []}
    default_max_episode_steps: int = 0
    #: The gymnasium env this one reproduces (``envhive bench``'s peer), if any.
    gym_id: str = ""

    #: Host copies of the env ids of the current call, set by the engine (see host_ids).
    _host_ids: tuple[Any, np.ndarray] | None = None

    def __init__(self, num_envs: int, device: Any = "cpu", max_episode_steps: int | None = None) -> None:
        torch = require("torch", "torch", f"{type(self).__name__} (a torch batched env)")
        self.torch = torch
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        steps = self.default_max_episode_steps if max_episode_steps is None else max_episode_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ConfigError(f"max_episode_steps: expected a non-negative int, got {steps!r}")
        self.max_episode_steps = steps
        #: Steps taken in each env's episode (subclasses zero it in ``reset_envs``).
        self.elapsed = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)

    @staticmethod
    def rows(env_ids: Any) -> Any:
        """An index for the rows of ``env_ids`` (``None``: every row)."""
        return slice(None) if env_ids is None else env_ids

    def host_ids(self, env_ids: Any) -> np.ndarray:
        """``env_ids`` (a tensor) as a numpy array: the engine's own host copy when it passed
        them (no device read), else read from the device."""
        known = self._host_ids
        if known is not None and known[0] is env_ids:
            return known[1]
        return env_ids.cpu().numpy()

    def tick(self, env_ids: Any) -> Any:
        """Count one step of envs ``env_ids`` (``None``: all); returns their ``truncated``
        flags (the time limit reached)."""
        idx = self.rows(env_ids)
        self.elapsed[idx] += 1
        elapsed = self.elapsed[idx]
        limit = self.max_episode_steps
        return elapsed >= limit if limit else self.torch.zeros_like(elapsed, dtype=self.torch.bool)

    def reset_envs(self, env_ids: Any, seeds: Sequence[int | None]) -> Any:
        """Start a new episode in envs ``env_ids`` (int64 tensor on ``device``), each seeded
        with its entry of ``seeds`` (``None``: continue its generator), as ``Env.reset(seed=)``
        does. Returns their observations, shape ``(len(env_ids), *obs_shape)``."""
        raise NotImplementedError

    def step_envs(self, actions: Any, env_ids: Any) -> tuple[Any, Any, Any, Any]:
        """Step envs ``env_ids`` with ``actions`` (one row each, on ``device``); ``env_ids``
        is ``None`` for every env in order (the common case: no gather, no scatter). Returns
        ``(obs, reward, terminated, truncated)`` rows for those envs."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the batch holds (nothing here; subclasses with resources override)."""


class NoiseStock:
    """Per-env reset noise drawn ahead on the host, the way gymnasium's envs draw it.

    Each env has its own generator (``gymnasium.utils.seeding.np_random``, re-made when a reset
    brings a seed, made unseeded at an env's first reset otherwise), and ``draw(rng, count)``
    draws ``count`` resets' worth at once: the same stream as one draw per reset, since a
    Generator's numbers come in order. A reset then costs an index, not a Python call per env.

    Examples:
        >>> import numpy as np, torch
        >>> stock = NoiseStock(2, 3, lambda rng, k: rng.uniform(-1, 1, size=(k, 3)))
        >>> stock.take(torch.tensor([0, 1]), [5, None]).shape
        (2, 3)
    """

    STOCK = 64

    def __init__(self, num_envs: int, dim: int, draw: Any) -> None:
        self._draw = draw
        self._rngs: list[np.random.Generator | None] = [None] * num_envs
        self._stock = np.zeros((num_envs, self.STOCK, dim))
        self._pos = np.full(num_envs, self.STOCK)

    def _refill(self, i: int) -> None:
        self._stock[i] = self._draw(self._rngs[i], self.STOCK)
        self._pos[i] = 0

    def take(self, env_ids: Any, seeds: Sequence[int | None]) -> np.ndarray:
        """The next reset's noise of each env in ``env_ids`` (host ids, or a tensor), seeded
        as asked."""
        from gymnasium.utils import seeding

        rngs, pos = self._rngs, self._pos
        ids = env_ids if isinstance(env_ids, np.ndarray) else env_ids.cpu().numpy()
        for k, seed in enumerate(seeds):
            i = int(ids[k])
            if seed is not None or rngs[i] is None:
                rngs[i] = seeding.np_random(seed)[0]
                self._refill(i)
        for i in ids[pos[ids] >= self.STOCK].tolist():
            self._refill(i)
        noise = self._stock[ids, pos[ids]]
        pos[ids] += 1
        return noise


class TorchEngine(BatchedOps):
    """Drives a :class:`TorchBatchedEnv` for the native executor (see the module docstring)."""

    def __init__(self, env: TorchBatchedEnv) -> None:
        self.env = env
        self.torch = env.torch
        self.num_envs = env.num_envs
        #: Where the env's tensors live: the pool keeps its buffers there when the front end
        #: asks for this device (``Executor.resident_device``).
        self.device = env.device
        self.num_threads = 1  # torch's own intra-op threads, in the calling thread
        self.props = EnvProps(env.single_observation_space, env.single_action_space,
                              dict(env.metadata), None, None)
        self._space = env.single_action_space
        self._all = np.arange(env.num_envs, dtype=np.int64)

    what = "torch batched envs"  # they take no reset options

    def bind(self, buffers: Buffers) -> None:
        """Bind the pool's buffers (once): its device tensors when resident, else tensor views
        of its host arrays."""
        torch = self.torch
        self._b = b = buffers
        self._bind_ops(b)
        self._resident = b.spec.resident
        if self._resident:
            self._obs, self._reward, self._final = b.obs, b.reward, b.final_obs
            self._term, self._trunc = b.device_flags  # rows of one (2, n) tensor
            self._host_flags = torch.from_numpy(b.host_flags)
        else:
            t = torch.from_numpy
            self._obs, self._reward = t(b.obs), t(b.reward)
            self._final = t(b.final_obs) if b.final_obs is not None else None
            self._term, self._trunc = t(b.terminated), t(b.truncated)
        space = self._space
        if isinstance(space, gym.spaces.Box):
            self._low = torch.as_tensor(space.low.reshape(-1), device=self.device)
            self._high = torch.as_tensor(space.high.reshape(-1), device=self.device)

    # -- actions -----------------------------------------------------------------------
    def _first_bad(self, actions: Any, ids: np.ndarray) -> int:
        """The first env of ``ids`` whose action is outside the action space, or -1.

        Tensor actions are checked where they are, with one read of a single bool; numpy
        ones on the host."""
        if not ids.size:
            return -1
        space = self._space
        if is_tensor(actions):
            acts = actions if ids.size == self.num_envs else actions[self.torch.from_numpy(ids).to(actions.device)]
            if isinstance(space, gym.spaces.Discrete):
                bad = (acts < space.start) | (acts >= space.start + space.n)
            else:
                flat = acts.reshape(ids.size, -1)
                bad = ~self.torch.isfinite(flat).all(dim=1) | (flat < self._low).any(dim=1) | (
                    flat > self._high).any(dim=1)
            if not bool(bad.any()):  # the one read; where a bad action is, only on error
                return -1
            return int(ids[int(self.torch.argmax(bad.to(self.torch.uint8)))])
        acts = actions[ids]
        if isinstance(space, gym.spaces.Discrete):
            bad = (acts < space.start) | (acts >= space.start + space.n)
        elif isinstance(space, gym.spaces.Box):
            flat = acts.reshape(len(ids), -1)
            bad = ~np.isfinite(flat).all(axis=1) | (flat < space.low.reshape(-1)).any(axis=1) | (
                flat > space.high.reshape(-1)).any(axis=1)
        else:  # pragma: no cover - refused at construction
            return -1
        hits = np.flatnonzero(bad)
        return int(ids[hits[0]]) if hits.size else -1

    # -- ops ---------------------------------------------------------------------------
    def _rows(self, ids: np.ndarray) -> Any:
        """An index of the buffers' rows ``ids``: on the device when the buffers are there."""
        rows = self.torch.from_numpy(ids)
        return rows.to(self.device, non_blocking=True) if self._resident else rows

    def _reset_envs(self, ids: np.ndarray, seeds: Sequence[int | None]) -> Any:
        """Reset envs ``ids`` (host ids); returns their observations."""
        dev_ids = self.torch.from_numpy(ids).to(self.device, non_blocking=True)
        self.env._host_ids = (dev_ids, ids)  # what host_ids() answers without reading the device
        return self.env.reset_envs(dev_ids, seeds)

    # -- the op sequence's primitives (engines._batched.BatchedOps) ---------------------
    def _step_rows(self, step_ids: np.ndarray, actions: Any) -> int:
        """Step envs ``step_ids`` (``actions``: one row per env of the pool, numpy, or a
        tensor for resident buffers). The flags cross to the host once, after the step."""
        torch, env, b = self.torch, self.env, self._b
        # Every env in order (the common step): whole tensors, no gather or scatter.
        every = step_ids.size == self.num_envs and (
            step_ids is self._all or np.array_equal(step_ids, self._all))
        acts = actions if is_tensor(actions) else torch.from_numpy(actions)
        if not every:
            acts = acts[torch.from_numpy(step_ids).to(acts.device)]
        acts = acts.to(env.device, non_blocking=True)
        dev_ids = None if every else torch.from_numpy(step_ids).to(env.device, non_blocking=True)
        obs, reward, term, trunc = env.step_envs(acts, dev_ids)
        rows = slice(None) if every else self._rows(step_ids)
        put_rows(self._obs, rows, obs)
        put_rows(self._reward, rows, reward)
        put_rows(self._term, rows, term)
        put_rows(self._trunc, rows, trunc)
        if self._resident:  # the step's one device-to-host transfer: the (2, n) flags
            self._host_flags.copy_(b.device_flags)
        return int(np.count_nonzero(b.terminated[step_ids] | b.truncated[step_ids]))

    def _reset_rows(
        self, ids: np.ndarray, seeds: Sequence[int | None], out: Completion | None
    ) -> tuple[np.ndarray, dict[int, dict[str, Any]]]:
        put_rows(self._obs, self._rows(ids), self._reset_envs(ids, seeds))
        return ids, {}

    def _keep_final(self, ids: np.ndarray) -> None:
        r = self._rows(ids)
        assert self._final is not None
        self._final[r] = self._obs[r]

    def _clear_reset_rows(self, ids: np.ndarray) -> None:
        r = self._rows(ids)
        self._reward[r] = RESET_REWARD
        self._term[r] = False
        self._trunc[r] = False
        if self._resident:  # and their host copy (host buffers: the views above)
            self._b.terminated[ids] = False
            self._b.truncated[ids] = False

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        """The batched env's attribute ``name`` (called with the arguments if callable), once
        per env asked for: the envs share one object."""
        ids = range(self.num_envs) if env_ids is None else list(env_ids)
        if name in ("observation_space", "action_space"):
            return [getattr(self.env, f"single_{name}")] * len(ids)
        value = getattr(self.env, name)
        if callable(value):
            value = value(*args, **kwargs)
        return [value] * len(ids)

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """Refused: the envs share one object, so a per-env value has nowhere to go."""
        raise ConfigError(f"set_attr({name!r}): a torch batched env's envs share one object")

    def close(self) -> None:
        """Let the env release what it holds."""
        self.env.close()


if TYPE_CHECKING:
    from envhive.engines import Engine

    def _implements_engine(engine: TorchEngine) -> Engine:
        return engine  # mypy checks TorchEngine against the Engine protocol here
