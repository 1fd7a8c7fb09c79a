"""``api="jax"``: gymnasium's layout with jax arrays (zero-copy on the CPU), for any env and
executor; its ``xla()`` runs Python envs inside ``jit`` through an ordered ``io_callback``,
row for row what the eager calls give."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the jax extra is not installed (pip install 'envhive[jax]')")

import envhive  # noqa: E402
from envhive.errors import ConfigError  # noqa: E402
from envhive.jax._front import JaxArrays, JaxVectorEnv  # noqa: E402
from tests.with_jax.loops import action_table, assert_same_rows, eager_async, xla_async  # noqa: E402

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("executor", ["serial", "thread", "process", "native"])
def test_results_are_jax_arrays_equal_to_numpy_ones(executor):
    env_id = "envhive/Pendulum-v1" if executor == "native" else "Pendulum-v1"
    ref = envhive.make(env_id, num_envs=3, executor=executor, seed=1)
    env = envhive.make(env_id, num_envs=3, executor=executor, seed=1, api="jax")
    assert isinstance(env, JaxVectorEnv) and env.device == jax.devices("cpu")[0]
    want, _ = ref.reset()
    got, _ = env.reset()
    assert isinstance(got, jax.Array) and got.dtype == np.float32
    np.testing.assert_array_equal(want, np.asarray(got))
    acts = np.linspace(-1, 1, 3, dtype=np.float32)[:, None]
    for _ in range(5):
        w = ref.step(acts)
        g = env.step(jax.numpy.asarray(acts))  # jax actions
        assert all(isinstance(x, jax.Array) for x in g[:4])
        np.testing.assert_array_equal(w[0], np.asarray(g[0]))
        np.testing.assert_array_equal(w[1].astype(np.float32), np.asarray(g[1]))
        np.testing.assert_array_equal(w[2], np.asarray(g[2]))
    ref.close()
    env.close()


def _aligned(shape: tuple[int, ...], dtype, align: int = 64) -> np.ndarray:
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(size + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + size].view(dtype).reshape(shape)


def test_arrays_of_dtypes_jax_keeps_are_not_copied_where_jax_can_take_them():
    arrays = JaxArrays(jax.devices("cpu")[0])
    for dtype in (np.float32, np.uint8, np.bool_, np.int32):
        a = _aligned((64, 84), dtype)
        a.flat[7] = 1
        got = arrays.array(a)
        assert got.unsafe_buffer_pointer() == a.ctypes.data, dtype  # a view (dlpack)
        unaligned = _aligned((64, 84), dtype)[1:]  # jax copies what it cannot align
        np.testing.assert_array_equal(np.asarray(arrays.array(unaligned)), unaligned)
    wide = arrays.array(np.ones(4))  # float64: a cast, unless x64 is on
    assert wide.dtype == jax.numpy.zeros(1).dtype
    info = arrays.infos({"lives": np.array([3, 2]), "_lives": np.array([True, True]), "name": np.array(["a", "b"])})
    assert isinstance(info["lives"], jax.Array) and isinstance(info["name"], np.ndarray)


def test_devices_are_jax_devices():
    cpu = jax.devices("cpu")[0]
    env = envhive.make("CartPole-v1", num_envs=2, api="jax", device=cpu)
    assert env.reset(seed=0)[0].devices() == {cpu}
    env.close()
    with pytest.raises(ConfigError, match="not available to jax"):
        envhive.make("CartPole-v1", num_envs=2, api="jax", device="tpu")
    with pytest.raises(ConfigError, match="jax Device or a platform name"):
        envhive.make("CartPole-v1", num_envs=2, api="jax", device=3)


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
# Async on threads: which envs come back first is the scheduler's affair (one env may get no
# row at all in a run), so threads are compared in sync rounds, each env's rows in order.
@pytest.mark.parametrize("executor,batch", [("serial", None), ("serial", 2), ("thread", None)])
def test_python_envs_inside_jit_equal_eager(executor, batch, mode):
    kwargs = dict(num_envs=4, batch_size=batch, autoreset=mode, executor=executor, seed=5)
    ref = envhive.make("CartPole-v1", **kwargs)
    env = envhive.make("CartPole-v1", api="jax", **kwargs)
    table = action_table(ref.single_action_space, 4, 221)
    want = eager_async(ref, table, 200, mode == "disabled")
    got = xla_async(env, table, 200, mode == "disabled")
    assert_same_rows(want, got, by_env=executor == "thread")
    ref.close()
    env.close()


def test_compiled_ids_take_the_ffi_path():
    env = envhive.make("envhive/CartPole-v1", num_envs=2, api="jax", seed=0)
    handle, *_ = env.xla()
    assert env.pool._lease is not None and int.from_bytes(handle.tobytes(), "little") == env.pool._lease.address
    env.close()
