"""``envhive.make(..., api="jax")``: gymnasium's vector API with jax arrays, for any env.

:class:`JaxVectorEnv` is :class:`envhive.VectorEnv` (the same calls, layout and infos) whose
observations, rewards, flags and numeric infos are jax arrays (:class:`JaxArrays`). On the
CPU an array is taken without a copy (dlpack) where jax can take it: a dtype jax keeps
(float64 becomes float32 unless ``jax_enable_x64`` is on: a cast) and 64-byte aligned memory
(jax's requirement; numpy's allocations often are not, and then jax copies once). The arrays
taken are the row copies the pool hands out (``copy=True``), never its buffers, which change
with every step. On another device, one host-to-device transfer per array per call
(``jax.device_put``).
Actions may be jax arrays (read on the host without a copy on the CPU).

Its :meth:`JaxVectorEnv.xla` returns EnvPool's ``(handle, recv, send, step)`` for every env:
the FFI path of ``envhive.jax._ffi`` where the pool can be lent to XLA (envhive's compiled
ids on the native executor), else the same functions over the pool's eager calls through an
ordered ``jax.experimental.io_callback`` (``envhive.jax._callback``): Python envs inside
``jit``, slower (each call leaves the compiled program for Python).

Examples:
    >>> import envhive, jax, numpy as np
    >>> env = envhive.make("CartPole-v1", num_envs=2, api="jax", seed=0)
    >>> obs, info = env.reset()
    >>> type(obs).__name__, obs.dtype
    ('ArrayImpl', dtype('float32'))
    >>> obs, reward, term, trunc, info = env.step(jax.numpy.array([0, 1]))
    >>> reward.dtype, reward.tolist()
    (dtype('float32'), [1.0, 1.0])
    >>> env.close()
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envhive._spaces import tree_map
from envhive.errors import ConfigError
from envhive.frontends._gymnasium import VectorEnv
from envhive.frontends._torch import ArrayTrees

__all__ = ["JaxVectorEnv", "JaxArrays", "jax_device"]


def jax_device(device: Any) -> Any:
    """``device`` (a jax ``Device``, or a platform name such as ``"cpu"`` or ``"gpu"``) as a
    jax ``Device``; a clear error when there is none.

    Examples:
        >>> jax_device("cpu").platform
        'cpu'
    """
    import jax

    if isinstance(device, jax.Device):
        return device
    if isinstance(device, str):
        try:
            return jax.devices(device)[0]
        except RuntimeError as err:
            raise ConfigError(f"device: {device!r} is not available to jax here ({err})") from None
    raise ConfigError(f"device: api='jax' takes a jax Device or a platform name ('cpu', 'gpu'), got {device!r}")


class JaxArrays(ArrayTrees):
    """Converts the front end's numpy results to jax arrays on ``device``, and actions back
    (as :class:`~envhive.frontends._torch.TorchArrays` does for torch).

    Examples:
        >>> import jax, numpy as np
        >>> arrays = JaxArrays(jax.devices("cpu")[0])
        >>> a = np.arange(4, dtype=np.float32)
        >>> arrays.array(a).tolist(), arrays.array(np.zeros(2)).dtype == jax.numpy.zeros(2).dtype
        ([0.0, 1.0, 2.0, 3.0], True)
    """

    keep_tensor_actions = False

    def __init__(self, device: Any) -> None:
        import jax

        self.jax = jax
        self.device = device
        self.on_host = device.platform == "cpu"

    def _numeric(self, a: np.ndarray) -> Any:
        """One numeric array as a jax array on the device."""
        jax = self.jax
        want = jax.dtypes.canonicalize_dtype(a.dtype)
        if self.on_host and a.dtype == want and a.flags.c_contiguous and a.flags.writeable:
            try:  # no copy (jax copies an array whose alignment it cannot take)
                return jax.dlpack.from_dlpack(a)
            except (BufferError, TypeError, ValueError, RuntimeError):
                pass
        return jax.device_put(a.astype(want, copy=False), self.device)

    def actions(self, actions: Any) -> Any:
        """Actions as numpy: jax arrays (trees of them) are read on the host."""
        if isinstance(actions, self.jax.Array):
            return np.asarray(actions)
        if isinstance(actions, (dict, tuple)):
            return tree_map(self.actions, actions)
        return actions


class JaxVectorEnv(VectorEnv):
    """:class:`envhive.VectorEnv` with jax arrays (see the module docstring).

    Args:
        pool, name, chosen_by_auto, observation_mode: as for :class:`envhive.VectorEnv`.
        device: the jax device results are put on (``None``: the CPU).
    """

    def __init__(self, pool: Any, *, name: str, chosen_by_auto: bool = False, device: Any = None,
                 observation_mode: Any = "same") -> None:
        arrays = JaxArrays(jax_device(device if device is not None else "cpu"))
        super().__init__(pool, name=name, chosen_by_auto=chosen_by_auto, observation_mode=observation_mode,
                         arrays=arrays)

    def xla(self) -> tuple[Any, Any, Any, Any]:
        """EnvPool's ``(handle, recv, send, step)`` for any env: the FFI path where the pool can
        be lent to XLA (``VectorEnv.xla``), else an ordered ``io_callback`` over the pool's
        eager calls (slower: Python runs every call). Results are on the CPU.

        Examples:
            >>> import envhive, jax, numpy as np
            >>> env = envhive.make("CartPole-v1", num_envs=2, api="jax", seed=0)  # Python envs
            >>> handle, recv, send, step = env.xla()
            >>> _ = env.reset()
            >>> handle, (obs, reward, term, trunc, info) = jax.jit(step)(handle, np.zeros(2, np.int32))
            >>> reward.tolist(), info["env_id"].tolist()
            ([1.0, 1.0], [0, 1])
            >>> env.close()
        """
        from envhive.jax._callback import callback_functions
        from envhive.jax._lease import Lease

        try:
            Lease.of(self._pool, self._name)
        except ConfigError:
            return callback_functions(self._pool, self._name)
        return super().xla()
