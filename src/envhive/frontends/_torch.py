"""Torch arrays for the front ends: the pool's numpy results as tensors on a device, and
actions from tensors on any device.

The pool's buffers are numpy on the host (shared memory must be), except for a torch batched
env on the front end's device: its buffers are tensors there (``BufferSpec.resident``), handed
out as they are, and tensor actions stay on the device. Otherwise, on the CPU a tensor is
a zero-copy view of them (``torch.from_numpy``; also of the process executor's shared-memory
buffers): with ``copy=False`` the observation tensor *is* the pool's buffer. On an accelerator
each array crosses once per batch: it is copied into a pinned staging tensor, kept per leaf,
and sent with ``non_blocking=True``; the staging tensor is reused only after its last transfer
has finished (an event per leaf). Actions may be numpy arrays or tensors on any device: a
tensor crosses to the host once per batch (``.cpu()``, free on the CPU) and is read as numpy
without a copy.

Numeric info arrays (values and ``_key`` masks) become tensors too; object arrays stay object
arrays, with their elements converted (``final_obs`` holds one observation per row).

Examples:
    >>> import envhive, numpy as np, torch
    >>> env = envhive.make("CartPole-v1", num_envs=2, seed=0, device="cpu")
    >>> obs, info = env.reset()
    >>> type(obs).__name__, obs.dtype, obs.device.type
    ('Tensor', torch.float32, 'cpu')
    >>> obs, rew, term, trunc, info = env.step(torch.tensor([0, 1]))
    >>> rew.tolist()
    [1.0, 1.0]
    >>> env.close()
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envhive._buffers import tensor_values
from envhive._extras import require
from envhive._spaces import Tree, tree_map
from envhive.errors import ConfigError

__all__ = ["ArrayTrees", "TorchArrays", "torch_device"]


def torch_device(device: Any) -> Any:
    """``device`` (a string such as ``"cpu"`` or ``"cuda:0"``, or a ``torch.device``) as a
    ``torch.device``; a clear error when torch is missing or the device does not parse."""
    torch = require("torch", "torch", f"device={device!r} (torch tensors)")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ConfigError(f"device: expected a torch device such as 'cpu' or 'cuda:0', got {device!r} ({err})") from None
    if dev.type == "meta":
        raise ConfigError("device: 'meta' tensors hold no data; expected 'cpu' or an accelerator")
    try:
        torch.empty(1, device=dev)  # fails now, not at the first step, if it is not usable
    except Exception as err:  # AssertionError (no CUDA build), RuntimeError (no such device)
        raise ConfigError(f"device: {device!r} is not available here ({type(err).__name__}: {err})") from None
    return dev


class ArrayTrees:
    """What every front end's array converter shares: object arrays converted element by
    element, strings kept, trees (Dict/Tuple) and gymnasium-layout infos walked. A subclass
    converts one numeric array (``_numeric``) and actions (``actions``).
    """

    def array(self, a: Any) -> Any:
        """One numpy array converted (object arrays: elements converted; strings as they are)."""
        if not isinstance(a, np.ndarray):
            return a
        if a.dtype == object:
            out = np.empty(a.shape, dtype=object)
            for i, v in enumerate(a.flat):
                out.flat[i] = self.tree(v) if v is not None else None
            return out
        if a.dtype.kind not in "biufc":  # strings, bytes: nothing a tensor can hold
            return a
        return self._numeric(a)

    def _numeric(self, a: np.ndarray) -> Any:
        raise NotImplementedError

    def tree(self, tree: Tree) -> Any:
        """A (Dict/Tuple) tree of arrays as the same tree converted."""
        if isinstance(tree, np.ndarray):
            return self.array(tree)
        if isinstance(tree, (dict, tuple)):
            return tree_map(self.array, tree)
        return tree

    def infos(self, infos: dict[str, Any]) -> dict[str, Any]:
        """gymnasium-layout infos with numeric arrays converted (nested dicts recurse)."""
        return {k: self.infos(v) if isinstance(v, dict) else self.array(v) for k, v in infos.items()}


class TorchArrays(ArrayTrees):
    """Converts a front end's numpy results to tensors on ``device``, and actions back.

    Args:
        device: a ``torch.device`` (see :func:`torch_device`).
        keep_tensor_actions: hand tensor actions to the pool as they are (a resident pool
            takes them on its device) instead of as numpy.
    """

    def __init__(self, device: Any, keep_tensor_actions: bool = False) -> None:
        import torch

        self.torch = torch
        self.device = device
        self.keep_tensor_actions = keep_tensor_actions
        self.on_host = device.type == "cpu"
        # Pinned staging needs an accelerator runtime; without one (a device type this build
        # cannot pin for) arrays cross from pageable memory, which is still one copy.
        self._pin = not self.on_host and torch.cuda.is_available()
        self._staging: dict[tuple[int, tuple[int, ...], str], tuple[Any, Any]] = {}

    # -- results -------------------------------------------------------------------------
    def _numeric(self, a: np.ndarray) -> Any:
        """One numeric array as a tensor on the device."""
        host = self.torch.from_numpy(a if a.flags.writeable else a.copy())
        if self.on_host:
            return host
        return self._to_device(host)

    def _to_device(self, host: Any) -> Any:
        if not self._pin:
            return host.to(self.device, non_blocking=False)
        key = (0, tuple(host.shape), str(host.dtype))  # bounded: one slot per shape and dtype
        slot = self._staging.get(key)
        if slot is None:
            slot = (self.torch.empty(host.shape, dtype=host.dtype, pin_memory=True),
                    self.torch.cuda.Event())
            self._staging[key] = slot
        staging, done = slot
        done.synchronize()  # its previous transfer has finished: safe to overwrite
        staging.copy_(host)
        out = staging.to(self.device, non_blocking=True)
        done.record()
        return out

    # -- actions -------------------------------------------------------------------------
    def actions(self, actions: Any) -> Any:
        """Actions as numpy: tensors (any device; trees of them) cross to the host once, as
        :func:`~envhive._buffers.tensor_values` makes them (bfloat16 as float32, sparse made
        dense, ``meta`` refused)."""
        torch = self.torch
        if isinstance(actions, torch.Tensor):
            return tensor_values(actions, keep_device=self.keep_tensor_actions)
        if isinstance(actions, (dict, tuple)):
            return tree_map(self.actions, actions)
        return actions
