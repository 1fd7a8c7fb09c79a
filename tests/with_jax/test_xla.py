"""``env.xla()``: a jitted loop of ``recv``/``send`` (or ``step``) equals the same calls made
eagerly on a twin pool, row for row, in every autoreset mode, sync and async, on each native
engine kind: the classic-control kernels (C entry: the compiled op loop), the threaded C++
engine (Atari, C entry: the batch core) and MuJoCo (no C entry: its ops run in Python under
the GIL). Eager and XLA calls alternate on one pool (each takes the books over from the
other); misuse is refused with envhive's error's name and loses nothing.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the jax extra is not installed (pip install 'envhive[jax]')")
pytest.importorskip("envhive.jax._xla", reason="the envhive.jax._xla extension is not built")

import jax.numpy as jnp  # noqa: E402

import envhive  # noqa: E402
from envhive.errors import ClosedError, ConfigError  # noqa: E402
from tests.with_jax.loops import action_table, assert_same_rows, eager_async, xla_async  # noqa: E402

pytestmark = pytest.mark.timeout(600)
MODES = ["next_step", "same_step", "disabled"]
T = 220  # rounds of each loop


def _pong_or_skip() -> dict:
    pytest.importorskip("ale_py")
    from envhive.envs.atari._engine import _alethreads

    if _alethreads is None:
        pytest.skip("the Atari engine is not built")
    return {"num_threads": 2}


CASES = {
    "cartpole": ("envhive/CartPole-v1", 8, {}),
    "pong": ("envhive/Pong-v5", 4, None),
    "hopper": ("envhive/Hopper-v5", 4, {}),
    "torch": ("envhive/TorchCartPole-v1", 4, {}),  # a torch engine on host buffers: run under the GIL
}


def make_pair(case: str, mode: str, batch_size: int | None, seed: int = 3):
    env_id, n, extra = CASES[case]
    if extra is None:
        extra = _pong_or_skip()
    if case == "hopper":
        pytest.importorskip("mujoco")
    if case == "torch":
        pytest.importorskip("torch")
    threads = extra.get("num_threads")
    kwargs = dict(num_envs=n, batch_size=batch_size, autoreset=mode, seed=seed)
    if threads:
        kwargs["executor"] = envhive.executors.NativeExecutor(threads)
    a = envhive.make(env_id, **kwargs)
    if threads:
        kwargs["executor"] = envhive.executors.NativeExecutor(threads)
    b = envhive.make(env_id, **kwargs)
    assert a.executor == "native"
    return a, b


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case,batch", [("cartpole", None), ("cartpole", 3), ("pong", None), ("pong", 2),
                                        ("hopper", None), ("hopper", 2)])
def test_jitted_send_recv_equals_eager(case, batch, mode):
    eager, lent = make_pair(case, mode, batch)
    table = action_table(eager.single_action_space, eager.num_envs, T + 1)
    partial = mode == "disabled"
    want = eager_async(eager, table, T, partial)
    got = xla_async(lent, table, T, partial)
    by_env = case == "pong"  # two C++ threads finish envs in any order
    assert_same_rows(want, got, by_env)
    assert sum(r[3] or r[4] for r in want) > 0 or case == "pong", "no episode ended: the test shows too little"
    # The pool is Python's again: what XLA left in flight comes back with an eager recv.
    a, b = eager.recv(), lent.recv()
    assert len(b[4]["env_id"]) == lent.batch_size
    if not by_env:
        np.testing.assert_array_equal(a[4]["env_id"], b[4]["env_id"])
        np.testing.assert_array_equal(a[0], b[0])
        assert eager.env_steps == lent.env_steps
    eager.close()
    lent.close()


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
@pytest.mark.parametrize("case", ["cartpole", "pong", "hopper", "torch"])
def test_jitted_step_equals_eager_step(case, mode):
    eager, lent = make_pair(case, mode, None)
    table = action_table(eager.single_action_space, eager.num_envs, T)
    handle, _, _, step = lent.xla()
    want = [eager.reset()[0]]
    got0, _ = lent.reset()
    for t in range(T):
        obs, reward, term, trunc, info = eager.step(table[:, t])
        want.append((obs, reward, term, trunc, info))
    acts = jnp.asarray(table)

    @jax.jit
    def loop(handle):
        def body(handle, t):
            handle, (obs, reward, term, trunc, info) = step(handle, acts[:, t])
            return handle, (obs, reward, term, trunc, info["env_id"])

        return jax.lax.scan(body, handle, jnp.arange(T))

    handle, (obs, reward, term, trunc, ids) = loop(handle)
    jax.block_until_ready(handle)
    np.testing.assert_array_equal(want[0], got0)
    for t in range(T):
        order = np.argsort(np.asarray(ids[t]))  # recv's order: the order the envs finished
        w = want[t + 1]
        np.testing.assert_array_equal(w[0].astype(obs.dtype), np.asarray(obs[t])[order], err_msg=f"step {t}")
        np.testing.assert_array_equal(w[1].astype(np.float32), np.asarray(reward[t])[order])
        np.testing.assert_array_equal(w[2], np.asarray(term[t])[order])
        np.testing.assert_array_equal(w[3], np.asarray(trunc[t])[order])
    # Then eagerly again, on both.
    a = eager.step(table[:, 0])
    b = lent.step(table[:, 0])
    np.testing.assert_array_equal(a[0], b[0])
    assert eager.env_steps == lent.env_steps
    eager.close()
    lent.close()


@pytest.mark.parametrize("case", ["cartpole", "pong"])
def test_draws_that_python_keeps_are_refilled_inside_jit(case):
    """Python's work between ops: a kernel env whose generator lives in Python (after
    ``call("np_random")``) runs out of reset draws (the C entry asks, ``-2``), an Atari env of
    5-step episodes uses up its 32 no-op counts (the watched column); a long jitted loop
    equals the eager one through both."""
    if case == "pong":
        _pong_or_skip()
    env_id, n = ("envhive/CartPole-v1", 2) if case == "cartpole" else ("envhive/Pong-v5", 2)
    kwargs = dict(num_envs=n, autoreset="next_step", seed=11,
                  max_episode_steps=3 if case == "cartpole" else 5)
    eager, lent = envhive.make(env_id, **kwargs), envhive.make(env_id, **kwargs)
    rounds = 260
    table = action_table(eager.single_action_space, n, rounds + 1)
    if case == "cartpole":
        eager.reset(), lent.reset()
        eager.call("np_random"), lent.call("np_random")  # the generators move to Python
    want = eager_async(eager, table, rounds, False)
    got = xla_async(lent, table, rounds, False)
    assert sum(r[4] for r in want) > 32 * n  # more resets than a stock holds
    assert_same_rows(want, got, by_env=case == "pong")
    eager.close()
    lent.close()


def test_xla_and_eager_calls_alternate_on_one_pool():
    env = envhive.make("envhive/CartPole-v1", num_envs=4, batch_size=2, seed=0)
    ref = envhive.make("envhive/CartPole-v1", num_envs=4, batch_size=2, seed=0)
    handle, recv, send, _ = env.xla()
    recv_j, send_j = jax.jit(recv), jax.jit(send)
    env.async_reset()
    ref.async_reset()
    acts = np.array([1, 0], np.int32)
    for t in range(40):
        if t % 3:
            handle, (obs, reward, term, trunc, info) = recv_j(handle)
            ids = np.asarray(info["env_id"])
        else:
            jax.block_until_ready(handle)
            obs, reward, term, trunc, info = env.recv()
            ids = info["env_id"]
        w = ref.recv()
        np.testing.assert_array_equal(w[4]["env_id"], ids)
        np.testing.assert_array_equal(w[0], np.asarray(obs))
        if t % 2:
            handle = send_j(handle, acts, ids)
        else:
            jax.block_until_ready(handle)
            env.send(acts, ids)
        ref.send(acts, ids)
    jax.block_until_ready(handle)
    assert env.pool.pending == ref.pool.pending == 4
    env.close()
    ref.close()


def test_bad_calls_are_refused_with_the_reason_and_lose_nothing():
    env = envhive.make("envhive/CartPole-v1", num_envs=2, seed=0)
    handle, recv, send, step = env.xla()
    with pytest.raises(Exception, match="ResetNeededError: env 0 has not been reset"):
        jax.block_until_ready(jax.jit(step)(handle, np.zeros(2, np.int32)))
    env.reset()
    with pytest.raises(Exception, match=r"ActionError: invalid actions \(env 1\): value 5 is outside Discrete\(2\)"):
        jax.block_until_ready(jax.jit(step)(handle, np.array([0, 5], np.int32)))
    with pytest.raises(envhive.ActionError, match="integer actions"):
        step(handle, np.zeros(2, np.float32))
    with pytest.raises(Exception, match="NothingPendingError"):
        jax.block_until_ready(recv(handle)[0])
    handle = send(handle, np.zeros(1, np.int32), np.array([1]))
    with pytest.raises(Exception, match="PendingCallError: send: env 1 is pending"):
        jax.block_until_ready(send(handle, np.zeros(1, np.int32), np.array([1])))
    with pytest.raises(Exception, match="NothingPendingError"):  # batch_size 2, one pending
        jax.block_until_ready(recv(handle)[0])
    handle = send(handle, np.zeros(1, np.int32), np.array([0]))
    handle, (obs, reward, *_rest) = recv(handle)
    assert reward.tolist() == [1.0, 1.0]  # nothing was lost
    assert env.env_steps == 2
    env.close()
    with pytest.raises(Exception, match="closed"):
        jax.block_until_ready(recv(handle)[0])


def test_pools_that_cannot_be_lent_say_what_to_use():
    env = envhive.make("CartPole-v1", num_envs=2, executor="serial")
    with pytest.raises(ConfigError, match="api='jax'"):
        env.xla()
    env.close()
    env = envhive.make("envhive/CartPole-v1", num_envs=2)
    env.close()
    with pytest.raises(ClosedError):
        env.xla()
    if importlib.util.find_spec("envpool") is not None:  # EnvPool's engines: no C entry
        env = envhive.make("envpool/CartPole-v1", num_envs=2, executor="native")
        with pytest.raises(ConfigError, match="has no C entry.*api='jax'"):
            env.xla()
        env.close()


def test_without_jax_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax raises ImportError
    env = envhive.make("envhive/CartPole-v1", num_envs=2)
    with pytest.raises(ConfigError, match=r"pip install 'envhive\[jax\]'"):
        env.xla()
    env.close()


def test_importing_envhive_imports_no_jax():
    code = ("import sys, envhive, envhive.jax, envhive.jax._lease; env = envhive.make('envhive/CartPole-v1', 2);"
            "env.reset(); print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "False"
