"""``env.xla()`` on ``envhive.envpool``'s pools: EnvPool's ``(handle, recv, send, step)``.

The functions return exactly what the pool's eager calls return, in EnvPool's layout (gym:
``(obs, reward, terminated, truncated, info)`` with ``env_id``, ``players.env_id``,
``elapsed_step`` and the family's infos; dm: the ``TimeStep`` with EnvPool's ``State``), so an
eager ``reset()``'s result can seed a jitted ``fori_loop`` carried through ``step``, as
EnvPool's examples do. Each call is an ordered ``jax.experimental.io_callback`` into the pool's
own ``send``/``recv``: every route (envhive's engines and EnvPool's) and every executor, the
same values as the eager calls. It leaves the compiled program once per call; for envhive's
compiled ids, ``envhive.make(id, api="jax").xla()`` runs the pool from XLA's own thread (FFI
custom calls, no Python), with ``env_id`` as its only info.

The shapes are fixed when ``xla()`` is called: ``batch_size`` rows per ``recv`` (sync mode:
every env; a ``send`` of fewer envs then fails its ``recv``). Multi-player ids (a row per
player present, a number that changes from call to call) have no ``xla()``.

Examples:
    >>> import envhive.envpool as envpool, jax, numpy as np
    >>> env = envpool.make_gym("CartPole-v1", num_envs=2, seed=0)
    >>> handle, recv, send, step = env.xla()
    >>> obs, _ = env.reset()
    >>> @jax.jit
    ... def run(handle, obs):
    ...     def body(_, carry):
    ...         handle, obs = carry
    ...         handle, (obs, reward, term, trunc, info) = step(handle, (obs[:, 2] > 0).astype(np.int32))
    ...         return handle, obs
    ...     return jax.lax.fori_loop(0, 5, body, (handle, obs))
    >>> handle, obs = run(handle, obs)
    >>> obs.shape, obs.dtype
    ((2, 4), dtype('float32'))
    >>> env.close()
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from envhive._batch import Batch
from envhive._extras import require
from envhive._ops import RESET
from envhive._spaces import tree_map
from envhive.envpool._layouts import Layouter
from envhive.errors import ConfigError

__all__ = ["xla_functions"]


def _template(env: Any) -> Any:
    """What the pool's ``recv`` returns for ``batch_size`` rows, zeros: its structure and
    dtypes (a fresh layouter, so the pool's own counters are untouched)."""
    k = env._batch
    buffers = env._pool.buffers
    obs = tree_map(lambda a: np.zeros((k, *a.shape[1:]), a.dtype), buffers.obs)
    batch = Batch(np.arange(k, dtype=np.int64), obs, np.zeros((k, *buffers.spec.reward_shape)),
                  np.zeros(k, np.bool_), np.zeros(k, np.bool_), np.full(k, RESET, np.int8), None, None, {}, {})
    return env._out_layout(Layouter(env.spec._arrays, env._route, env._n), batch, False)


def _fit(template: Any, value: Any, into: list[np.ndarray], where: str) -> None:
    """``value``'s leaves in ``template``'s order and dtypes, appended to ``into``: an info
    the template has and the batch lacks reads 0, one the template lacks is left out."""
    if isinstance(template, dict):
        for key, sub in template.items():
            _fit(sub, value.get(key) if isinstance(value, dict) else None, into, f"{where}[{key!r}]")
    elif isinstance(template, tuple):
        for i, sub in enumerate(template):
            field = template._fields[i] if hasattr(template, "_fields") else i
            _fit(sub, value[i] if value is not None else None, into, f"{where}.{field}")
    else:
        if value is None:
            into.append(np.zeros_like(template))
            return
        arr = np.asarray(value)
        if arr.shape != template.shape:
            raise ConfigError(f"xla(): {where} has shape {arr.shape}, expected {template.shape}: the shapes "
                              f"are fixed at xla() (batch_size rows per recv; in sync mode send every env)")
        into.append(arr.astype(template.dtype, copy=False))


def xla_functions(env: Any) -> tuple[np.ndarray, Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """``(handle, recv, send, step)`` over ``env``'s eager calls (see the module docstring).

    * ``recv(handle) -> (handle, states)``: ``env.recv()``.
    * ``send(handle, action, env_id=None) -> handle``: ``env.send(action, env_id)``.
    * ``step(handle, action, env_id=None) -> (handle, states)``: ``env.step(action, env_id)``.

    Raises:
        envhive.ConfigError: jax is missing, or the id is multi-player.
    """
    jax = require("jax", "jax", "env.xla()")
    from jax.experimental import io_callback

    if env._players > 1:
        raise ConfigError(f"xla(): {env.spec._task_id} has {env._players} players per env: recv returns a row per "
                          "player present, a number XLA's fixed shapes cannot hold; use the eager calls")
    canon = jax.dtypes.canonicalize_dtype
    # Rebuilt by jax's tree_map: its dicts in jax's key order, so that _fit, walking the
    # template, appends the leaves in the order tree_flatten lists them.
    template = jax.tree_util.tree_map(lambda a: a.astype(canon(a.dtype)), _template(env))
    leaves, treedef = jax.tree_util.tree_flatten(template)
    handle_struct = jax.ShapeDtypeStruct((8,), np.uint8)
    results = [handle_struct, *(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in leaves)]

    def rows(handle: np.ndarray, states: Any) -> tuple[np.ndarray, ...]:
        out: list[np.ndarray] = [np.asarray(handle)]
        _fit(template, states, out, "recv()")
        return tuple(out)

    def host_recv(handle: np.ndarray) -> tuple[np.ndarray, ...]:
        return rows(handle, env.recv())

    def host_send(handle: np.ndarray, action: Any, env_id: Any = None) -> np.ndarray:
        env.send(tree_map(np.asarray, action), None if env_id is None else np.asarray(env_id))
        return np.asarray(handle)

    def host_step(handle: np.ndarray, action: Any, env_id: Any = None) -> tuple[np.ndarray, ...]:
        return rows(handle, env.step(tree_map(np.asarray, action), None if env_id is None else np.asarray(env_id)))

    def unpack(out: Any) -> tuple[Any, Any]:
        return out[0], jax.tree_util.tree_unflatten(treedef, out[1:])

    def recv(handle: Any) -> tuple[Any, Any]:
        """The envs ``env.recv()`` returns, in EnvPool's layout."""
        return unpack(io_callback(host_recv, results, handle, ordered=True))

    def send(handle: Any, action: Any, env_id: Any = None) -> Any:
        """``env.send(action, env_id)``; the handle."""
        args = (handle, action) if env_id is None else (handle, action, env_id)
        return io_callback(host_send, handle_struct, *args, ordered=True)

    def step(handle: Any, action: Any, env_id: Any = None) -> tuple[Any, Any]:
        """``env.step(action, env_id)``, one call."""
        args = (handle, action) if env_id is None else (handle, action, env_id)
        return unpack(io_callback(host_step, results, *args, ordered=True))

    handle = np.frombuffer(id(env).to_bytes(8, sys.byteorder), np.uint8).copy()
    return handle, recv, send, step
