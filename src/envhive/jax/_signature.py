"""The shapes, dtypes and layout of ``xla()``'s functions for one pool, written once for both
ways of running them (the FFI handlers of ``_ffi.py``, the ``io_callback``\\ s of
``_callback.py``).

``recv`` and ``step`` return ``(handle, (obs, reward, terminated, truncated, info))`` with
``info["env_id"]`` (int32) and, in same_step mode, ``info["final_obs"]`` (zeros where
``info["_final_obs"]`` is False); ``send`` and ``step`` take ``(handle, action, env_id=None,
reset=None)``. Arrays have the dtypes jax gives them (float64 as float32 unless
``jax_enable_x64``).

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envhive/CartPole-v1", num_envs=3, batch_size=2)
    >>> sig = Signature(env.pool)
    >>> [s.shape for s in sig.results]
    [(8,), (2, 4), (2,), (2,), (2,), (2,)]
    >>> env.close()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from envhive._extras import require
from envhive._pool import Pool
from envhive._spaces import ArrayCodec
from envhive.errors import ActionError, ConfigError

__all__ = ["Signature"]


class Signature:
    """``xla()``'s shapes and argument handling for ``pool`` (see the module).

    Args:
        pool: the pool (one array observation, one array action, no agent axis).
        name: the id, for messages.
    """

    def __init__(self, pool: Pool, name: str = "") -> None:
        self.jax = jax = require("jax", "jax", "env.xla()")
        self.name = name or "the pool"
        obs, act = pool.buffers.obs_codec, pool._act_codec
        for what, codec in (("observation", obs), ("action", act)):
            if not isinstance(codec, ArrayCodec) or pool.agents:
                raise ConfigError(f"xla(): {self.name}'s {what} space is {codec.space}: xla() lays out one "
                                  "array per result; use the eager calls of api='jax' instead")
        assert isinstance(obs, ArrayCodec) and isinstance(act, ArrayCodec)
        canon = jax.dtypes.canonicalize_dtype
        self.obs_shape, self.obs_dtype = obs.shape, np.dtype(canon(obs.dtype))
        self.act_dtype = np.dtype(canon(act.dtype))
        self.reward_dtype = np.dtype(canon(np.dtype(np.float64)))
        self.integer = act.dtype.kind in "iub"
        self.space = pool.action_space
        self.same_step = pool.autoreset is AutoresetMode.SAME_STEP
        k = pool.batch_size
        struct = jax.ShapeDtypeStruct
        self.handle = struct((8,), np.uint8)
        self.results = [self.handle, struct((k, *obs.shape), self.obs_dtype),
                        struct((k, *pool.buffers.spec.reward_shape), self.reward_dtype),
                        struct((k,), np.bool_), struct((k,), np.bool_), struct((k,), np.int32)]
        if self.same_step:
            self.results += [struct((k, *obs.shape), self.obs_dtype), struct((k,), np.bool_)]
        self._every = np.arange(pool.num_envs, dtype=np.int32)

    def arguments(self, action: Any, env_id: Any, reset: Any) -> tuple[Any, Any, Any]:
        """``send``'s arguments as the call takes them: actions in the pool's dtype, int32 env
        ids (``None``: every env), one bool reset flag per id (``None``: none)."""
        jnp = self.jax.numpy
        action = jnp.asarray(action)
        if self.integer and action.dtype.kind not in "iub":
            raise ActionError(f"{self.name}: expected integer actions for {self.space}, got dtype {action.dtype}")
        ids = self._every if env_id is None else jnp.asarray(env_id).astype(np.int32)
        flags = jnp.zeros(ids.shape, np.bool_) if reset is None else jnp.asarray(reset).astype(np.bool_)
        return action.astype(self.act_dtype), ids, flags

    def layout(self, out: Any) -> tuple[Any, tuple[Any, ...]]:
        """A call's results (``results``' order) as ``(handle, (obs, reward, terminated,
        truncated, info))``."""
        info = {"env_id": out[5]}
        if self.same_step:
            info["final_obs"], info["_final_obs"] = out[6], out[7]
        return out[0], (out[1], out[2], out[3], out[4], info)
