"""The pool's buffers, allocated from a layout spec: one array per leaf, one row per env.

:class:`BufferSpec` says what to allocate: the spaces (their codecs give the per-leaf arrays),
whether ``final_obs`` rows exist (only when the pool may plan STEP_RESET), the agents of a
multi-agent env (``agents``: then every env has an agent axis, see below), and the array
namespace and device the front end hands out. Executors supply the allocator (numpy
arrays in process, shared-memory arrays for process workers), so a torch or multi-agent buffer
is a choice of spec, not a new code path: the host arrays are numpy (shared memory must be),
and :meth:`Buffers.views` turns them into zero-copy tensors of the spec's namespace.

The agent axis (``agents``: the possible agents of a multi-agent env, ``envhive._agents``):
observations and actions already carry it (the env's spaces are its agents' spaces batched);
rewards become ``(num_envs, num_agents)``, and three more ``(num_envs, num_agents)`` bool arrays
hold each agent's ``agent_terminated``, ``agent_truncated`` and ``active`` flags. The env-level
``terminated``/``truncated`` stay ``(num_envs,)``: the pool's bookkeeping and autoreset read
only them, whatever the layout.

One exception, for envs whose state lives in tensors on a device (``resident=True``, the
native executor with a torch batched env on the front end's device): observations, final
observations, actions and rewards are then tensors on that device, so results never leave it.
The command block and the flags stay on the host (the pool's bookkeeping reads them); the
engine also keeps the flags on the device (``device_flags``) and copies them to the host once
per step, in one transfer of ``2 x num_envs`` bools (``host_flags``).

Examples:
    >>> from gymnasium import spaces
    >>> spec = BufferSpec(4, spaces.Box(-1, 1, (2, 3)), spaces.MultiDiscrete([2, 2]),
    ...                   agents=("a", "b"))
    >>> b = Buffers.allocate(spec)
    >>> b.obs.shape, b.reward.shape, b.active.shape, b.final_obs is None
    ((4, 2, 3), (4, 2), (4, 2), True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym
import numpy as np

from envhive._agents import AgentRows
from envhive._extras import require
from envhive._memory import check_fits, size_text
from envhive._spaces import Codec, Tree, codec_for, tree_map
from envhive.errors import ActionError, ConfigError

__all__ = [
    "BufferSpec", "Buffers", "as_index", "NAMESPACES", "INPUT_FIELDS", "OUTPUT_FIELDS",
    "clone_tree", "is_tensor", "put_rows", "same_device", "tensor_values",
]

Allocator = Callable[[tuple[int, ...], np.dtype], np.ndarray]

#: Array namespaces a spec may name.
NAMESPACES = ("numpy", "torch")
#: What a runner reads (the command block and the actions) and what it writes.
INPUT_FIELDS = ("ops", "seeds", "has_seed", "actions")
OUTPUT_FIELDS = ("obs", "final_obs", "reward", "terminated", "truncated", "agent_terminated",
                 "agent_truncated", "active")


_INT64_MAX = 2**63 - 1
#: The ``seeds`` column entry of a seed too large for it (seeds are never negative).
_BIG_SEED = -1


def _zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def is_tensor(a: Any) -> bool:
    """Whether ``a`` is a torch tensor (without importing torch)."""
    return type(a).__module__.startswith("torch") and hasattr(a, "data_ptr")


def tensor_values(t: Any, keep_device: bool = False) -> Any:
    """A tensor of actions as numpy on the host: what a policy hands over, made readable.

    Gradients are dropped; a sparse or quantized tensor is made dense; bfloat16 (numpy has
    no such type) becomes float32, which holds every bfloat16 exactly; a conjugate or
    negative view is resolved. A ``meta`` tensor has no values and is refused. With
    ``keep_device``: the same, but a (strided) tensor left on its device, for a pool whose
    buffers live there (bfloat16 then stays: ``copy_`` converts it).

    Examples:
        >>> import torch
        >>> tensor_values(torch.tensor([0.5, 1.5], dtype=torch.bfloat16)).dtype
        dtype('float32')
        >>> tensor_values(torch.tensor([0, 1]).to_sparse()).tolist()
        [0, 1]
    """
    import torch  # a tensor exists, so torch is already imported

    if t.device.type == "meta":
        raise ActionError(
            "actions: expected a tensor with values (on the CPU or an accelerator), got a tensor "
            "on the 'meta' device, which holds none; nothing was stepped"
        )
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_quantized:
        t = t.dequantize()
    if keep_device:
        return t
    t = t.cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    return t.numpy()


def clone_tree(tree: Tree) -> Tree:
    """A copy of every leaf of ``tree`` (numpy arrays or tensors), on the same device.

    Examples:
        >>> a = np.zeros(2); b = clone_tree({"x": a})["x"]
        >>> b is a, b.tolist()
        (False, [0.0, 0.0])
    """
    if type(tree) is np.ndarray:
        return tree.copy()
    return tree_map(lambda a: a.copy() if type(a) is np.ndarray else a.clone(), tree)


_EVERY = slice(None)


def put_rows(buf: Any, where: Any, values: Any) -> None:
    """``buf[where] = values`` for a tensor ``buf``: ``values`` (numpy or a tensor on any
    device) cross to its device and dtype once; ``where`` is a slice or host int ids.

    Examples:
        >>> import torch
        >>> t = torch.zeros(3)
        >>> put_rows(t, np.array([0, 2]), np.ones(2)); t.tolist()
        [1.0, 0.0, 1.0]
    """
    import torch

    v = values if is_tensor(values) else torch.from_numpy(np.ascontiguousarray(values))
    if isinstance(where, slice):  # copy_ converts dtype and device itself, with no new tensor
        view = buf if where == _EVERY else buf[where]
        view.copy_(v if v.shape == view.shape else v.reshape(view.shape))
    else:
        buf[torch.as_tensor(where, device=buf.device)] = v.to(device=buf.device, dtype=buf.dtype)


def same_device(a: Any, b: Any) -> bool:
    """Whether torch devices ``a`` and ``b`` (strings or ``torch.device``; ``None``: not a
    device) name the same device (``"cuda"`` is the current CUDA device)."""
    if a is None or b is None:
        return False
    import torch

    def norm(d: Any) -> Any:
        d = torch.device(d)
        if d.index is None and d.type != "cpu":
            return torch.empty(0, device=d).device  # the current device of that type
        return d

    return bool(norm(a) == norm(b))


def _device_allocator(device: str) -> Allocator:
    """Zeroed tensors on ``device`` with the torch dtype of each numpy dtype."""
    torch = require("torch", "torch", "device-resident buffers")
    dev = torch.device(device)

    def alloc(shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return torch.zeros(shape, dtype=torch.from_numpy(np.zeros(0, dtype)).dtype, device=dev)

    return alloc


def as_index(ids: list[int]) -> slice | list[int]:
    """A slice when ``ids`` is an ascending contiguous run, else ``ids`` itself.

    numpy indexing with a slice is several times cheaper than with a list, and sync calls
    always address a contiguous run of envs.

    Examples:
        >>> as_index([2, 3, 4]), as_index([3, 2])
        (slice(2, 5, None), [3, 2])
    """
    n = len(ids)
    if n and ids[-1] - ids[0] + 1 == n and (n == 1 or ids == list(range(ids[0], ids[-1] + 1))):
        return slice(ids[0], ids[-1] + 1)
    return ids


@dataclass(frozen=True)
class BufferSpec:
    """What a pool's buffers hold; picklable, so a worker rebuilds the same layout.

    Attributes:
        num_envs: rows.
        observation_space: one env's observation space.
        action_space: one env's action space.
        with_final_obs: allocate ``final_obs`` rows (the pool may plan STEP_RESET).
        reward_shape: one env's reward shape: ``()``, or ``(num_agents,)`` with ``agents``
            (set from them when left ``()``).
        agents: the possible agents of a multi-agent env (``()``: no agent axis).
        namespace: the array type front ends hand out: ``"numpy"`` or ``"torch"``.
        device: where the handed-out arrays live (``None``: the host; torch only).
        resident: observations, final observations, actions and rewards are tensors on
            ``device`` (an engine that writes tensors there; see the module docstring).
    """

    num_envs: int
    observation_space: gym.Space
    action_space: gym.Space
    with_final_obs: bool = False
    reward_shape: tuple[int, ...] = ()
    namespace: str = "numpy"
    device: str | None = None
    resident: bool = False
    agents: tuple[str, ...] = ()
    _codecs: list[Codec] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.namespace not in NAMESPACES:
            raise ConfigError(f"array namespace: expected one of {NAMESPACES}, got {self.namespace!r}")
        if self.device is not None and self.namespace == "numpy":
            raise ConfigError(f"device={self.device!r} needs namespace 'torch' (numpy arrays live on the host)")
        if self.resident and self.device is None:
            raise ConfigError("resident buffers need a torch device")
        if self.agents:
            if self.resident:
                raise ConfigError("resident buffers have no agent axis (device engines are single-agent)")
            if self.reward_shape == ():
                object.__setattr__(self, "reward_shape", (len(self.agents),))
            if tuple(self.reward_shape) != (len(self.agents),):
                raise ConfigError(f"reward_shape: expected ({len(self.agents)},) for "
                                  f"{len(self.agents)} agents, got {self.reward_shape!r}")
        shape = tuple(self.reward_shape)
        if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in shape):
            raise ConfigError(f"reward_shape: expected a tuple of positive ints, got {self.reward_shape!r}")

    @property
    def obs_codec(self) -> Codec:
        """The observation space's codec (built once per spec)."""
        return self._codec(0, self.observation_space)

    @property
    def act_codec(self) -> Codec:
        """The action space's codec (built once per spec)."""
        return self._codec(1, self.action_space)

    def _codec(self, k: int, space: gym.Space) -> Codec:
        codecs = self._codecs
        if not codecs:
            codecs.extend([codec_for(self.observation_space), codec_for(self.action_space)])
        return codecs[k]

    def bytes_per_env(self) -> int:
        """Host bytes one env's row takes in every array :meth:`Buffers.allocate` makes
        (an object leaf: its 8-byte pointer; the objects themselves are the env's).

        Examples:
            >>> from gymnasium import spaces
            >>> BufferSpec(10**9, spaces.Box(-1, 1, (4,)), spaces.Discrete(2)).bytes_per_env()
            44
        """
        sizes: list[int] = []

        def count(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
            sizes.append(int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(dtype).itemsize)
            return np.zeros((1, *shape[1:]), dtype)

        one = replace(self, num_envs=1, namespace="numpy", device=None, resident=False, _codecs=[])
        Buffers.allocate(one, count, check=False)
        return sum(sizes)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_codecs"] = []  # rebuilt where unpickled
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


@dataclass
class Buffers:
    """The arrays the pool owns and executors write into, one row per env.

    ``ops``, ``seeds`` and ``has_seed`` are the command block the pool fills before ``send``;
    ``actions`` holds the actions of the envs being stepped. ``final_obs`` exists only when the
    pool may issue ``STEP_RESET`` (``spec.with_final_obs``).

    Seeds are Python ints of any size, as gymnasium takes them (``np.random.SeedSequence``
    gives 128-bit ones). The ``seeds`` column holds those that fit an int64; a larger one
    lives in ``big_seeds`` (a dict by row, not shared memory: a transport that crosses a
    process boundary carries it with the command) and its column entry is ``-1``. Write and
    read them with :meth:`put_seed` and :meth:`seed_of`.

    With a resident spec, ``obs``, ``final_obs``, ``actions`` and ``reward`` are tensors on
    the spec's device; ``terminated`` and ``truncated`` are the rows of ``host_flags`` (one
    ``(2, num_envs)`` host array), mirrored on the device by ``device_flags``.

    With ``spec.agents``, ``agent_terminated``, ``agent_truncated`` and ``active`` are
    ``(num_envs, num_agents)`` bool arrays (else ``None``).

    What the pool hands out is read here, whatever the layout (host or resident, with or
    without agents): :meth:`rows` for every env, :meth:`gather` for some; actions go in with
    :meth:`put_actions`. So the pool has one code path.
    """

    spec: BufferSpec
    obs_codec: Codec
    act_codec: Codec
    obs: Tree
    final_obs: Tree | None
    actions: Tree
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    ops: np.ndarray
    seeds: np.ndarray
    has_seed: np.ndarray
    big_seeds: dict[int, int] = field(default_factory=dict)
    host_flags: np.ndarray | None = None
    device_flags: Any = None
    agent_terminated: np.ndarray | None = None
    agent_truncated: np.ndarray | None = None
    active: np.ndarray | None = None

    def __post_init__(self) -> None:
        # What rows(copy=False) hands out, by with_final, made once: those views never change
        # (a resident layout's flags are the device's), and a sync step of the cheapest envs
        # must not build them again.
        agents = self.agent_rows
        term, trunc = (self.terminated, self.truncated) if self.device_flags is None else self.device_flags
        #: ``rows(False, with_final)`` for ``with_final`` False and True.
        self.row_views = tuple(
            (self.obs, self.reward, term, trunc, final, agents) for final in (None, self.final_obs)
        )

    @classmethod
    def allocate(cls, spec: BufferSpec, alloc: Allocator = _zeros, check: bool = True) -> Buffers:
        """Allocate every array of ``spec`` with ``alloc`` (numpy or shared memory).

        The order of ``alloc`` calls is fixed, so a worker calling this with an allocator that
        maps the parent's segments in order rebuilds the identical layout (with
        ``check=False``: it maps memory already taken). Otherwise buffers that would not fit
        in the memory available are refused first, with a
        :class:`~envhive.errors.ResourceError` saying how much they need.
        """
        n, obs_codec, act_codec = spec.num_envs, spec.obs_codec, spec.act_codec
        if check and not spec.resident:
            per_env = spec.bytes_per_env()
            check_fits(n * per_env, f"the pool's buffers for {n:,} envs ({size_text(per_env)} per env)", per_env)
        if spec.resident:
            return cls._allocate_resident(spec, alloc)
        return cls(
            spec=spec,
            obs_codec=obs_codec,
            act_codec=act_codec,
            obs=obs_codec.allocate(n, alloc),
            final_obs=obs_codec.allocate(n, alloc) if spec.with_final_obs else None,
            actions=act_codec.allocate(n, alloc),
            reward=alloc((n, *spec.reward_shape), np.dtype(np.float64)),
            terminated=alloc((n,), np.dtype(np.bool_)),
            truncated=alloc((n,), np.dtype(np.bool_)),
            ops=alloc((n,), np.dtype(np.int8)),
            seeds=alloc((n,), np.dtype(np.int64)),
            has_seed=alloc((n,), np.dtype(np.bool_)),
            # Last: a worker maps the parent's segments in allocation order.
            **cls._agent_arrays(spec, alloc),
        )

    @staticmethod
    def _agent_arrays(spec: BufferSpec, alloc: Allocator) -> dict[str, Any]:
        """The per-agent flag arrays of an agent axis (none without one)."""
        shape = (spec.num_envs, len(spec.agents))
        names = ("agent_terminated", "agent_truncated", "active") if spec.agents else ()
        return {name: alloc(shape, np.dtype(np.bool_)) for name in names}

    @classmethod
    def _allocate_resident(cls, spec: BufferSpec, alloc: Allocator) -> Buffers:
        """The resident layout: results and actions on the device, commands on the host."""
        if spec.obs_codec.has_objects() or spec.act_codec.has_objects():
            raise ConfigError("resident buffers hold tensors: every leaf of both spaces must be numeric")
        torch = require("torch", "torch", "device-resident buffers")
        n, on_device = spec.num_envs, _device_allocator(str(spec.device))
        # The flags' host copy: pinned where an accelerator can copy into it asynchronously.
        pin = torch.device(str(spec.device)).type == "cuda"
        flags_host = torch.zeros((2, n), dtype=torch.bool, pin_memory=pin)
        host_flags = flags_host.numpy()
        return cls(
            spec=spec,
            obs_codec=spec.obs_codec,
            act_codec=spec.act_codec,
            obs=spec.obs_codec.allocate(n, on_device),
            final_obs=spec.obs_codec.allocate(n, on_device) if spec.with_final_obs else None,
            actions=spec.act_codec.allocate(n, on_device),
            reward=on_device((n, *spec.reward_shape), np.dtype(np.float64)),
            terminated=host_flags[0],
            truncated=host_flags[1],
            ops=alloc((n,), np.dtype(np.int8)),
            seeds=alloc((n,), np.dtype(np.int64)),
            has_seed=alloc((n,), np.dtype(np.bool_)),
            host_flags=host_flags,
            device_flags=on_device((2, n), np.dtype(np.bool_)),
        )

    def put_seed(self, row: int, seed: int | None) -> None:
        """Seed the RESET op of ``row`` with ``seed`` (any non-negative int), or with none.

        Examples:
            >>> from gymnasium import spaces
            >>> b = Buffers.allocate(BufferSpec(2, spaces.Box(0, 1, (1,)), spaces.Discrete(2)))
            >>> b.put_seed(0, 2**64 + 5); b.put_seed(1, 7)
            >>> b.seed_of(0) == 2**64 + 5, b.seed_of(1), int(b.seeds[0])
            (True, 7, -1)
            >>> b.put_seed(0, None); b.seed_of(0), b.big_seeds
            (None, {})
        """
        self.has_seed[row] = seed is not None
        if seed is not None and seed > _INT64_MAX:
            self.seeds[row] = _BIG_SEED
            self.big_seeds[row] = seed
        else:
            self.seeds[row] = 0 if seed is None else seed
            if self.big_seeds:
                self.big_seeds.pop(row, None)

    def put_seeds(self, rows: list[int], seeds: list[int | None]) -> None:
        """:meth:`put_seed` for each of ``rows``; one numpy write when every seed is an int
        that fits the column (the common case: a pool of 10**6 envs seeded at once).

        Examples:
            >>> from gymnasium import spaces
            >>> b = Buffers.allocate(BufferSpec(3, spaces.Box(0, 1, (1,)), spaces.Discrete(2)))
            >>> b.put_seeds([0, 2], [5, 2**70]); b.put_seeds([1], [9])
            >>> [b.seed_of(r) for r in range(3)] == [5, 9, 2**70]
            True
        """
        try:
            column = np.array(seeds, dtype=np.int64)  # None or a big seed: one by one
        except (TypeError, ValueError, OverflowError):
            for row, seed in zip(rows, seeds):
                self.put_seed(row, seed)
            return
        self.seeds[rows] = column
        self.has_seed[rows] = True
        if self.big_seeds:
            for row in rows:
                self.big_seeds.pop(row, None)

    def seed_of(self, row: int) -> int | None:
        """The seed of ``row``'s RESET op (a Python int), or ``None`` for an unseeded one."""
        if not self.has_seed[row]:
            return None
        seed = int(self.seeds[row])
        return seed if seed != _BIG_SEED else self.big_seeds[row]

    def big_seeds_of(self, rows: Any, ids: Any = None) -> dict[int, int] | None:
        """The big seeds (those beyond int64) in use by ``rows``, keyed by ``ids`` (default:
        the rows); ``None`` when there are none: what a transport sends with a command."""
        big = self.big_seeds
        if not big:
            return None
        keys = rows if ids is None else ids
        found = {
            k: big[r] for r, k in zip(rows, keys)
            if r in big and self.has_seed[r] and self.seeds[r] == _BIG_SEED
        }
        return found or None

    @property
    def agent_rows(self) -> Any:
        """The per-agent arrays as an :class:`~envhive._agents.AgentRows` (views), or ``None``."""
        if self.active is None:
            return None
        return AgentRows(self.agent_terminated, self.agent_truncated, self.active)

    def rows(self, copy: bool, with_final: bool) -> tuple[Any, Any, Any, Any, Any, Any]:
        """Every env's results as handed out: ``(obs, reward, terminated, truncated,
        final_obs, agents)``, the buffers themselves or copies (``copy``); ``final_obs`` only
        ``with_final``, ``agents`` an ``AgentRows`` with an agent axis (else ``None``). A
        resident layout gives tensors on its device (the flags from ``device_flags``).

        Examples:
            >>> from gymnasium import spaces
            >>> b = Buffers.allocate(BufferSpec(2, spaces.Box(0, 1, (1,)), spaces.Discrete(2)))
            >>> b.rows(False, False)[0] is b.obs, b.rows(True, False)[0] is b.obs
            (True, False)
        """
        views = self.row_views[with_final]
        if not copy:
            return views
        if self.device_flags is not None:
            return tuple(clone_tree(a) if a is not None else a for a in views)  # type: ignore[return-value]
        obs, reward, term, trunc, final, agents = views
        return (
            obs.copy() if type(obs) is np.ndarray else tree_map(np.copy, obs), reward.copy(),
            term.copy(), trunc.copy(), final if final is None else tree_map(np.copy, final),
            agents if agents is None else AgentRows(*(a.copy() for a in agents)),
        )

    def row_copier(self) -> Callable[[bool], tuple[Any, Any, Any, Any, Any, Any]]:
        """``rows(True, with_final)`` as a function of ``with_final``: for the plain host
        layout (one array of observations, no agent axis), a closure over the arrays, which
        spares a sync step of the cheapest envs the lookups and branches of :meth:`rows`.

        Examples:
            >>> from gymnasium import spaces
            >>> b = Buffers.allocate(BufferSpec(2, spaces.Box(0, 1, (1,)), spaces.Discrete(2)))
            >>> b.row_copier()(False)[0] is b.obs
            False
        """
        obs, reward, term, trunc, final, agents = self.row_views[True]
        if self.device_flags is not None or agents is not None or type(obs) is not np.ndarray:
            return lambda with_final: self.rows(True, with_final)

        def copies(with_final: bool) -> tuple[Any, Any, Any, Any, Any, Any]:
            return (obs.copy(), reward.copy(), term.copy(), trunc.copy(),
                    tree_map(np.copy, final) if with_final else None, None)

        return copies

    def gather(
        self, ids: np.ndarray, copy: bool, with_final: bool, out: tuple[Any, ...]
    ) -> tuple[Any, Any, Any, Any, Any, Any, Any]:
        """The rows of ``ids``: ``(obs, reward, terminated, truncated, ops, final_obs,
        agents)``, as :meth:`rows` lays them out. Without ``copy`` they are gathered into
        ``out`` (``(obs, reward, terminated, truncated, ops)`` arrays of ``len(ids)`` rows the
        caller keeps, so a receive allocates nothing); with it, or resident, into new arrays.
        """
        final = tree_map(lambda a: a[ids], self.final_obs) if with_final else None
        agents = None
        if self.active is not None:
            agents = AgentRows(*(a[ids] for a in self.agent_rows))
        if copy or self.device_flags is not None:  # resident: indexing gathers into new tensors
            term, trunc = (
                (self.terminated, self.truncated) if self.device_flags is None else self.device_flags
            )
            return (tree_map(lambda a: a[ids], self.obs), self.reward[ids], term[ids], trunc[ids],
                    self.ops[ids], final, agents)
        # mode="clip": ids are valid, and the default mode="raise" buffers into a temporary.
        # The method, not np.take: the function's dispatch costs more than a small take.
        take = lambda a, o: a.take(ids, 0, o, "clip")  # noqa: E731
        obs_out, rew_out, term_out, trunc_out, ops_out = out
        return (tree_map(take, self.obs, obs_out), take(self.reward, rew_out),
                take(self.terminated, term_out), take(self.truncated, trunc_out),
                take(self.ops, ops_out), final, agents)

    def put_actions(self, where: slice | np.ndarray, batch: Any) -> None:
        """Write a validated batch of actions into the rows ``where`` (host or device)."""
        acts = self.actions
        if type(acts) is np.ndarray:
            acts[where] = batch
        elif self.spec.resident:
            put_rows(acts, where, batch)
        else:
            tree_map(lambda buf, a: buf.__setitem__(where, a), acts, batch)

    def slice_spec(self, num_envs: int) -> BufferSpec:
        """This layout with ``num_envs`` rows: the spec of a worker's slice-local buffers."""
        return replace(self.spec, num_envs=num_envs, _codecs=self.spec._codecs)

    def copy_rows(
        self, dst: Buffers, src_rows: Any, dst_rows: Any, fields: tuple[str, ...]
    ) -> None:
        """Copy ``fields`` (names of buffers, e.g. :data:`INPUT_FIELDS`) from ``src_rows`` of
        these buffers to ``dst_rows`` of ``dst`` (same layout, any number of rows).

        This is how a transport whose worker holds slice-local buffers moves a command in and
        its results out (rows ``lo..hi`` here are rows ``0..hi-lo`` there).

        Examples:
            >>> from gymnasium import spaces
            >>> spec = BufferSpec(4, spaces.Box(0, 1, (2,)), spaces.Discrete(2))
            >>> pool = Buffers.allocate(spec)
            >>> local = Buffers.allocate(pool.slice_spec(2))
            >>> pool.ops[2:4] = [1, 2]
            >>> pool.copy_rows(local, slice(2, 4), slice(0, 2), INPUT_FIELDS)
            >>> local.ops.tolist()
            [1, 2]
        """
        def copy(src: np.ndarray, out: np.ndarray) -> None:
            out[dst_rows] = src[src_rows]

        if "seeds" in fields and self.big_seeds:
            src_idx = np.arange(self.spec.num_envs)[src_rows].tolist()
            dst_idx = np.arange(dst.spec.num_envs)[dst_rows].tolist()
            for s, d in zip(src_idx, dst_idx):
                if s in self.big_seeds:
                    dst.big_seeds[d] = self.big_seeds[s]
        for name in fields:
            src, out = getattr(self, name), getattr(dst, name)
            if src is None or out is None:
                if src is not out:
                    raise ValueError(f"copy_rows: {name!r} exists on one side only")
                continue
            tree_map(copy, src, out)

    def views(self, tree: Tree) -> Tree:
        """``tree`` (arrays of these buffers) in the spec's namespace: zero-copy on the host.

        numpy: ``tree`` itself. torch: ``torch.from_numpy`` views sharing the buffers' memory
        (object leaves stay numpy: tensors cannot hold Python objects).

        Examples:
            >>> from gymnasium import spaces
            >>> b = Buffers.allocate(BufferSpec(2, spaces.Box(0, 1, (1,)), spaces.Discrete(2)))
            >>> b.views(b.obs) is b.obs
            True
        """
        if self.spec.namespace == "numpy":
            return tree
        torch = require("torch", "torch", "namespace='torch'")
        return tree_map(
            lambda a: a if type(a) is not np.ndarray or a.dtype == object else torch.from_numpy(a), tree
        )

