"""The loops the JAX tests compare: eager ``recv``/``send`` rounds on one pool, the same rounds
inside one jitted ``lax.scan`` of ``env.xla()``'s functions on a twin, and the comparison of
their rows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode


def action_table(space, n: int, steps: int) -> np.ndarray:
    """Each env's actions, one per row it is sent (the same numbers in both loops)."""
    rng = np.random.default_rng(7)
    if isinstance(space, spaces.Discrete):
        return rng.integers(0, space.n, (n, steps)).astype(np.int32)
    return rng.uniform(space.low, space.high, (n, steps, *space.shape)).astype(space.dtype)


def _record(rows: list, obs, reward, term, trunc, ids, final, has_final) -> None:
    for j, i in enumerate(np.asarray(ids).tolist()):
        rows.append((i, np.asarray(obs[j]), np.float32(reward[j]), bool(term[j]), bool(trunc[j]),
                     bool(has_final[j]), None if not has_final[j] else np.asarray(final[j])))


def eager_async(env, table: np.ndarray, rounds: int, partial_reset: bool) -> list:
    """``rounds`` eager recv/send rounds; in disabled mode envs that ended are reset with
    ``async_reset`` (what ``send(..., reset=)`` does inside jit)."""
    env.async_reset()
    count = np.zeros(env.num_envs, np.int64)
    rows: list = []
    for _ in range(rounds):
        obs, reward, term, trunc, info = env.recv()
        ids = info["env_id"]
        has_final = info.get("_final_obs", np.zeros(len(ids), bool))
        final = info.get("final_obs", [None] * len(ids))
        _record(rows, obs, reward, term, trunc, ids, final, has_final)
        acts = table[ids, count[ids]]
        count[ids] += 1
        again = (term | trunc) if partial_reset else np.zeros(len(ids), bool)
        if again.any():
            env.async_reset(ids[again])
        if (~again).any():
            env.send(acts[~again], ids[~again])
    return rows


def xla_async(env, table: np.ndarray, rounds: int, partial_reset: bool) -> list:
    handle, recv, send, _ = env.xla()
    env.async_reset()
    acts = jnp.asarray(table)
    same_step = env.autoreset_mode is AutoresetMode.SAME_STEP

    @jax.jit
    def loop(handle):
        def body(carry, _):
            handle, count = carry
            handle, (obs, reward, term, trunc, info) = recv(handle)
            ids = info["env_id"]
            reset = (term | trunc) if partial_reset else None
            handle = send(handle, acts[ids, count[ids]], ids, reset)
            final = (info["final_obs"], info["_final_obs"]) if same_step else (obs, jnp.zeros_like(term))
            return (handle, count.at[ids].add(1)), (obs, reward, term, trunc, ids, *final)

        return jax.lax.scan(body, (handle, jnp.zeros(env.num_envs, jnp.int32)), None, length=rounds)

    (handle, _), ys = loop(handle)
    jax.block_until_ready(handle)
    rows: list = []
    for t in range(rounds):
        _record(rows, *(np.asarray(y[t]) for y in ys[:5]), np.asarray(ys[5][t]), np.asarray(ys[6][t]))
    return rows


def _same_row(w: tuple, g: tuple, where: str) -> None:
    assert w[0] == g[0], f"{where}: env {w[0]} eagerly, {g[0]} in jit"
    np.testing.assert_array_equal(w[1].astype(g[1].dtype), g[1], err_msg=f"{where} (env {w[0]}): obs")
    assert (w[2], w[3], w[4], w[5]) == (g[2], g[3], g[4], g[5]), f"{where} (env {w[0]})"
    if w[5]:
        np.testing.assert_array_equal(w[6].astype(g[6].dtype), g[6], err_msg=f"{where}: final obs")


def assert_same_rows(want: list, got: list, by_env: bool) -> None:
    """The same rows, in order; or (``by_env``: threads finish envs in any order, so which
    envs a ``recv`` returns varies) each env's rows in order, as far as both runs got."""
    assert len(want) == len(got)
    if not by_env:
        for t, (w, g) in enumerate(zip(want, got)):
            _same_row(w, g, f"row {t}")
        return
    envs = sorted({r[0] for r in want} | {r[0] for r in got})
    compared = 0
    for e in envs:
        mine_w = [r for r in want if r[0] == e]
        mine_g = [r for r in got if r[0] == e]
        # Which envs come back first is the threads' (and a busy machine's) affair: an env
        # may get few rows in one run, or none.
        common = min(len(mine_w), len(mine_g))
        for t in range(common):
            _same_row(mine_w[t], mine_g[t], f"env {e}'s row {t}")
        compared += common
    assert compared >= len(want) // 4, f"only {compared} of {len(want)} rows in both runs"
