"""``envhive.envpool``'s ``xla()``: EnvPool's ``(handle, recv, send, step)`` return inside
``jax.jit`` exactly what the eager calls return on a twin pool (same id, seed and actions),
in EnvPool's layout with every info, gym and dm, sync and async, for 200+ steps; an eager
``reset()`` seeds a jitted ``fori_loop`` (EnvPool's examples); misuse is a clear error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the jax extra is not installed (pip install 'envhive[jax]')")

import jax.numpy as jnp  # noqa: E402

import envhive.envpool as envpool  # noqa: E402
from envhive.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.timeout(600)
STEPS = 210


def _ids(case: str) -> tuple[str, dict]:
    if case == "pong":
        pytest.importorskip("ale_py")
        return "Pong-v5", {"episodic_life": True, "zero_discount_on_life_loss": True, "stack_num": 2}
    return "CartPole-v1", {}


@contextlib.contextmanager
def _twins(make: Any, task: str, n: int, seed: int, **kw: Any) -> Iterator[tuple[Any, Any]]:
    """Two pools of one id and seed: one stepped through ``xla()``, one eagerly."""
    env, twin = make(task, num_envs=n, seed=seed, **kw), make(task, num_envs=n, seed=seed, **kw)
    try:
        yield env, twin
    finally:
        env.close()
        twin.close()


def _policy_np(obs: np.ndarray, t: int) -> np.ndarray:
    """A deterministic action per row from the observation and the step (the same on both
    sides: eager in numpy, jitted in jax)."""
    flat = obs.reshape(obs.shape[0], -1)
    return ((flat[:, 0].astype(np.int64) + t) % 2).astype(np.int32)


def _policy_jnp(obs: jax.Array, t: jax.Array) -> jax.Array:
    flat = obs.reshape(obs.shape[0], -1)
    return ((flat[:, 0].astype(jnp.int32) + t) % 2).astype(jnp.int32)


def _assert_tree_equal(got: object, want: object, where: str) -> None:
    got_leaves, got_def = jax.tree_util.tree_flatten(got)
    want_leaves, want_def = jax.tree_util.tree_flatten(want)
    assert got_def == want_def, f"{where}: {got_def} != {want_def}"
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=f"{where}, leaf {i}")


@pytest.mark.parametrize("case", ["cartpole", "pong"])
def test_jitted_gym_steps_carried_from_an_eager_reset_equal_eager_steps(case: str) -> None:
    task, kw = _ids(case)
    with _twins(envpool.make_gym, task, 4, 7, **kw) as (env, twin):
        handle, _, _, step = env.xla()
        obs, info = env.reset()
        obs2, info2 = twin.reset()
        _assert_tree_equal((obs, info), (obs2, info2), "reset")

        @jax.jit
        def run(handle: jax.Array, obs: jax.Array, t0: jax.Array) -> tuple:
            def body(t: jax.Array, carry: tuple) -> tuple:
                handle, obs, _ = carry
                handle, states = step(handle, _policy_jnp(obs, t))
                return handle, states[0], states

            first = step(handle, _policy_jnp(obs, t0))
            return jax.lax.fori_loop(t0 + 1, t0 + 10, body, (first[0], first[1][0], first[1]))

        want = None
        for start in range(0, STEPS, 10):
            handle, obs_j, states = run(handle, obs, jnp.int32(start))
            for t in range(start, start + 10):
                want = twin.step(_policy_np(obs2, t))
                obs2 = want[0]
            _assert_tree_equal(states, want, f"{task} steps {start}..{start + 9}")
            obs = obs_j
        assert int(np.max(want[-1]["elapsed_step"])) > 0


@pytest.mark.parametrize("case", ["cartpole", "pong"])
def test_jitted_dm_timesteps_carried_from_an_eager_reset_equal_eager_ones(case: str) -> None:
    task, kw = _ids(case)
    with _twins(envpool.make_dm, task, 3, 11, **kw) as (env, twin):
        handle, _, _, step = env.xla()
        ts, ts2 = env.reset(), twin.reset()

        @jax.jit
        def one(handle: jax.Array, ts: object, t: jax.Array) -> tuple:
            return step(handle, _policy_jnp(ts.observation.obs, t))  # type: ignore[attr-defined]

        @jax.jit
        def loop(handle: jax.Array, ts: object) -> tuple:
            # EnvPool's dm example: the TimeStep of an eager reset() is the loop's carry.
            def body(t: jax.Array, carry: tuple) -> tuple:
                return one(*carry, t)

            return jax.lax.fori_loop(0, 3, body, (handle, ts))

        handle, ts_loop = loop(handle, ts)
        for t in range(3):
            ts2 = twin.step(_policy_np(np.asarray(ts2.observation.obs), t))
        _assert_tree_equal(ts_loop, ts2, f"{task} fori_loop")
        ts = ts_loop
        lost_life = False
        for t in range(3, STEPS):
            handle, ts = one(handle, ts, jnp.int32(t))
            ts2 = twin.step(_policy_np(np.asarray(ts2.observation.obs), t))
            _assert_tree_equal(ts, ts2, f"{task} step {t}")
            lost_life |= bool(np.any(np.asarray(ts.discount) == 0.0))
        if case == "cartpole":
            assert lost_life  # episodes ended inside the jitted calls (discount 0 there)


def test_jitted_async_recv_send_equal_eager_ones_and_every_row_is_a_live_env() -> None:
    n, k = 6, 3
    with _twins(envpool.make_gym, "CartPole-v1", n, 5, batch_size=k) as (env, twin):
        handle, recv, send, _ = env.xla()
        env.async_reset()
        twin.async_reset()

        @jax.jit
        def turn(handle: jax.Array, t: jax.Array) -> tuple:
            handle, states = recv(handle)
            obs, info = states[0], states[-1]
            handle = send(handle, _policy_jnp(obs, t), info["env_id"])
            return handle, states

        seen = np.zeros(n, np.int64)
        for t in range(STEPS):
            handle, states = turn(handle, jnp.int32(t))
            want = twin.recv()
            twin.send(_policy_np(want[0], t), want[-1]["env_id"])
            _assert_tree_equal(states, want, f"async turn {t}")
            ids = np.asarray(states[-1]["env_id"])
            assert len(set(ids.tolist())) == k
            seen[ids] += 1
        assert (seen > 0).all()


def test_a_sync_send_of_fewer_envs_is_refused_at_its_recv_with_the_shapes_named() -> None:
    env = envpool.make_gym("CartPole-v1", num_envs=4, seed=0)
    try:
        handle, recv, send, _ = env.xla()
        env.reset()
        handle = send(handle, jnp.zeros(2, jnp.int32), jnp.array([0, 1], jnp.int32))
        with pytest.raises(Exception, match=r"shape \(2, 4\), expected \(4, 4\).*batch_size rows"):
            jax.block_until_ready(recv(handle))
    finally:
        env.close()


def test_multi_player_ids_have_no_xla_and_say_why() -> None:
    pytest.importorskip("envpool")
    try:
        env = envpool.make_gym("TicTacToe-v1", num_envs=2)
    except Exception as err:  # pragma: no cover - the pgx family is EnvPool's engine
        pytest.skip(f"EnvPool's pgx ids are not available here: {err}")
    try:
        if env._players == 1:
            pytest.skip("tic_tac_toe reports one player here")
        with pytest.raises(ConfigError, match="players per env"):
            env.xla()
    finally:
        env.close()


def test_the_namedtuples_of_the_layout_are_one_type_per_name_and_fields() -> None:
    """jax's pytrees match namedtuples by type: a class per call would break a jitted loop's
    carry (and cost more than the call's arrays)."""
    env = envpool.make_dm("CartPole-v1", num_envs=2, seed=0)
    try:
        a = env.reset()
        b = env.step(np.zeros(2, np.int32))
        assert type(a.observation) is type(b.observation)
    finally:
        env.close()
