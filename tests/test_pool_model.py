"""A model-based test of the pool API: random call sequences on every executor against the
serial executor as the model (Hypothesis ``RuleBasedStateMachine``).

Each example builds two pools of the same envs, seeds and autoreset mode: the model (serial)
and the pool under test (thread, process, native kernel, native MuJoCo, Ray), and applies the
same random calls to both: ``reset`` (seeded or not), partial resets (``reset_mask``),
``step``, ``send`` of some envs, ``async_reset``, ``recv``, ``wait`` and ``close``, valid and
invalid: actions of the wrong shape, dtype or value, env ids out of range or repeated, masks
of the wrong length or type, calls in the wrong state (a sync call with envs in flight, a
``recv`` with too few, a ``send`` to an env in flight, anything after ``close``). After each:

* both succeeded, with the same result, row for row (a ``recv``'s rows are compared by env
  id: which envs finish first is the executor's business; ``recv`` is called only when the
  envs in flight are exactly a batch, so which envs come back is not);
* or both raised the same ``EnvhiveError`` with the same message (so it names the problem
  the same way on every executor), and then the pool under test goes on matching the model:
  an error leaves it usable.

Examples stay few and short (``SETTINGS``): a few seconds per executor on an idle machine.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import envhive
from envhive._batch import NO_OP
from envhive._infos import Column
from envhive._ops import STEP
from envhive.errors import EnvhiveError
from envhive.executors import ProcessExecutor, ThreadExecutor
from envhive.testing import CountingEnv

N = 4
SETTINGS = settings(max_examples=10, stateful_step_count=30, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
MODES = ["next_step", "same_step", "disabled"]
#: Each env's episodes: lengths and how they end (short: episodes end within a sequence).
PATTERNS = [[(3, "term"), (2, "trunc")], [(2, "trunc"), (4, "term")], [(1, "term")], [(5, "trunc")]]
BAD_ACTIONS = ["shape", "dtype", "range", "not_an_array"]


def counting_envs() -> list[Any]:
    return [functools.partial(CountingEnv, pattern=PATTERNS[i], tag=i) for i in range(N)]


# ---------------------------------------------------------------------- comparing results
def _same(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    elif a is None:
        assert b is None, f"{where}: None != {b!r}"
    else:
        x, y = np.asarray(a), np.asarray(b)
        assert x.dtype == y.dtype, f"{where}: dtype {x.dtype} != {y.dtype}"
        assert x.shape == y.shape, f"{where}: shape {x.shape} != {y.shape}"
        if x.dtype == object:
            assert [repr(v) for v in x.ravel()] == [repr(v) for v in y.ravel()], where
        else:
            assert np.array_equal(x, y, equal_nan=True), f"{where}: {x!r} != {y!r}"


def _rows(tree: Any, order: np.ndarray) -> Any:
    if isinstance(tree, dict):
        return {k: _rows(v, order) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_rows(v, order) for v in tree)
    return None if tree is None else np.asarray(tree)[order]


def _columns(cols: dict[str, Column], order: np.ndarray) -> dict[str, Any]:
    """Info columns, rows in ``order``, values where reported (the rest of a slot is free)."""
    out: dict[str, Any] = {}
    for key, col in cols.items():
        mask = np.asarray(col.mask)[order]
        if isinstance(col.values, dict):
            out[key] = (mask, _columns(col.values, order))
        else:
            values = np.asarray(col.values)[order]
            out[key] = (mask, values[mask])
    return out


def same_batch(got: Any, want: Any, what: str) -> None:
    """Two ``Batch``es equal row for row, rows matched by env id."""
    g, w = np.argsort(got.env_ids, kind="stable"), np.argsort(want.env_ids, kind="stable")
    _same(got.env_ids[g], want.env_ids[w], f"{what}: env_ids")
    for name in ("obs", "reward", "terminated", "truncated", "op"):
        _same(_rows(getattr(got, name), g), _rows(getattr(want, name), w), f"{what}: {name}")
    assert (got.has_final is None) == (want.has_final is None) or not (
        np.any(got.has_final if got.has_final is not None else False)
        or np.any(want.has_final if want.has_final is not None else False)), f"{what}: has_final"
    if want.has_final is not None and np.any(want.has_final):
        _same(_rows(got.has_final, g), _rows(want.has_final, w), f"{what}: has_final")
        rows_g, rows_w = g[np.asarray(got.has_final)[g]], w[np.asarray(want.has_final)[w]]
        _same(_rows(got.final_obs, rows_g), _rows(want.final_obs, rows_w), f"{what}: final_obs")
    _same(_columns(got.infos, g), _columns(want.infos, w), f"{what}: infos")
    _same(_columns(got.final_infos, g), _columns(want.final_infos, w), f"{what}: final_infos")


# ---------------------------------------------------------------------- the machine
class PoolMachine(RuleBasedStateMachine):
    """The pool under test against the serial model (see the module docstring)."""

    executor: Any = "serial"
    env: Any = "counting"

    def _make(self, executor: Any, mode: str, batch_size: int, seed: int) -> Any:
        env = counting_envs() if self.env == "counting" else self.env
        return envhive.make(env, N, executor=executor, autoreset=mode, batch_size=batch_size,
                            seed=seed, api="pool", max_episode_steps=6)

    @initialize(mode=st.sampled_from(MODES), batch_size=st.sampled_from([2, N]),
                seed=st.integers(0, 2**31 - 1), first_reset=st.sampled_from([True, True, True, False]))
    def build(self, mode: str, batch_size: int, seed: int, first_reset: bool) -> None:
        self.model = self._make("serial", mode, batch_size, seed)
        self.sut = self._make(self._executor(), mode, batch_size, seed)
        self.space = self.model.action_space
        self.calls = 0
        self.in_flight: set[int] = set()  # envs sent and not received (the model's books)
        self.ended = np.zeros(N, np.bool_)  # envs whose last transition ended (as results said)
        if first_reset:  # most sequences start from a reset pool (else: ResetNeededError)
            self._both("reset", lambda p: p.reset())

    def _executor(self) -> Any:
        return self.executor() if callable(self.executor) else self.executor

    def teardown(self) -> None:
        model, sut = getattr(self, "model", None), getattr(self, "sut", None)
        try:
            if model is not None and sut is not None and not model.closed:
                # Usable after whatever happened: drain, reset, step, as the model does.
                if model.pending:
                    self._both("wait", lambda p: p.wait())
                self._both("reset", lambda p: p.reset(seed=7))
                for t in range(3):
                    actions = self._valid_actions(N, np.random.default_rng(t))
                    self._both("step", lambda p: p.step(actions))
        finally:
            for pool in (model, sut):
                if pool is not None:
                    pool.close()

    # ------------------------------------------------------------------ helpers
    def _both(self, what: str, call: Any, by_id: bool = False) -> Any:
        """``call`` on the model, then on the pool under test; the same result or error."""
        self.calls += 1
        try:
            want, want_err = call(self.model), None
        except EnvhiveError as err:
            want, want_err = None, err
        try:
            got, got_err = call(self.sut), None
        except EnvhiveError as err:
            got, got_err = None, err
        if want_err is not None or got_err is not None:
            assert type(got_err) is type(want_err), (
                f"{what}: the model raised {want_err!r}, the pool under test {got_err!r}")
            assert str(got_err) == str(want_err), f"{what}: messages differ:\n{got_err}\n{want_err}"
            assert str(got_err), f"{what}: an error that says nothing"
            return None
        if want is not None:
            same_batch(got, want, what)
            ids = np.asarray(want.env_ids)
            touched = np.asarray(want.op) != NO_OP
            ended = (np.asarray(want.terminated) | np.asarray(want.truncated)) & (np.asarray(want.op) == STEP)
            self.ended[ids[touched]] = ended[touched]
        else:
            assert got is None, f"{what}: the model returned None, the pool under test {got!r}"
        return want

    def _valid_actions(self, count: int, rng: np.random.Generator) -> np.ndarray:
        space = self.space
        if hasattr(space, "n"):
            return rng.integers(0, int(space.n), count).astype(np.int64)
        low, high = np.asarray(space.low), np.asarray(space.high)
        return rng.uniform(low, high, (count, *space.shape)).astype(space.dtype)

    def _actions(self, kind: str, count: int, rng: np.random.Generator) -> Any:
        good = self._valid_actions(count, rng)
        if kind == "valid":
            return good
        if kind == "shape":
            return np.concatenate([good, good[:1]]) if count else good[None]
        if kind == "dtype":
            return np.full(good.shape, "x")
        if kind == "range":
            bad = good.copy()
            bad[0] = (int(self.space.n) + 1) if hasattr(self.space, "n") else 10.0 * np.abs(self.space.high).max() + 1
            return bad
        return "not an array of actions"

    # ------------------------------------------------------------------ rules
    @invariant()
    def same_state(self) -> None:
        if hasattr(self, "model"):
            assert self.sut.closed == self.model.closed
            if not self.model.closed:
                assert self.model.pending == len(self.in_flight)
                assert self.sut.pending == self.model.pending
                assert self.sut.env_steps == self.model.env_steps

    @rule(seed=st.none() | st.integers(0, 2**63 - 1))
    def reset(self, seed: int | None) -> None:
        self._both(f"reset(seed={seed})", lambda p: p.reset(seed=seed))

    @rule(how=st.sampled_from(["ended", "ended", "random", "length", "ints"]),
          mask=st.lists(st.booleans(), min_size=N, max_size=N), seed=st.none() | st.integers(0, 99))
    def partial_reset(self, how: str, mask: list[bool], seed: int | None) -> None:
        """``reset_mask``: the envs that ended (disabled mode needs it), some envs, or a mask
        of the wrong length or dtype (an error)."""
        arr = np.array(mask, np.bool_)
        if how == "ended":
            arr |= self.ended
        elif how == "length":
            arr = np.append(arr, True)
        elif how == "ints":
            arr = arr.astype(np.int64)
        self._both(f"reset(reset_mask={arr.tolist()}, seed={seed})",
                   lambda p: p.reset(seed=seed, options={"reset_mask": arr}))

    @rule(kind=st.sampled_from(["valid"] * 6 + BAD_ACTIONS), seed=st.integers(0, 2**16))
    def step(self, kind: str, seed: int) -> None:
        actions = self._actions(kind, N, np.random.default_rng(seed))
        self._both(f"step({kind})", lambda p: p.step(actions))

    def _ids(self, data: st.DataObject) -> Any:
        """Env ids to send or reset: mostly idle envs (often just enough for a batch to be in
        flight, so that ``recv`` has one), sometimes any (some in flight: an error), sometimes
        ids that are no env ids at all (out of range, repeated, not ints, not 1-d)."""
        idle = [i for i in range(N) if i not in self.in_flight]
        how = data.draw(st.sampled_from(["fill", "fill", "fill", "idle", "idle", "any", "bad"]),
                        label="which envs")
        if how == "bad":
            return data.draw(st.sampled_from([[-1], [N], [0, 0], [[0, 1]], [0.5], ["a"], [True]]),
                             label="bad env ids")
        missing = self.model.batch_size - len(self.in_flight)
        if how == "fill" and 0 < missing <= len(idle):
            order = data.draw(st.permutations(idle), label="envs")
            return list(order[:missing])
        choose = idle if idle and how != "any" else list(range(N))
        return data.draw(st.lists(st.sampled_from(choose), min_size=1, max_size=len(choose), unique=True),
                         label="env ids")

    def _sent(self, ids: list[Any]) -> None:
        if not self.model.closed and self.model.pending == len(self.in_flight) + len(ids):  # it went out
            self.in_flight.update(ids)

    @rule(data=st.data(), kind=st.sampled_from(["valid"] * 6 + BAD_ACTIONS), seed=st.integers(0, 2**16))
    def send(self, data: st.DataObject, kind: str, seed: int) -> None:
        ids = self._ids(data)
        actions = self._actions(kind, len(ids), np.random.default_rng(seed))
        self._both(f"send({ids}, {kind})", lambda p: p.send(actions, np.array(ids)))
        self._sent(ids)

    @rule(data=st.data(), seed=st.none() | st.integers(0, 99))
    def async_reset(self, data: st.DataObject, seed: int | None) -> None:
        ids = self._ids(data)
        self._both(f"async_reset({ids}, seed={seed})", lambda p: p.async_reset(np.array(ids), seed=seed))
        self._sent(ids)

    @precondition(lambda self: hasattr(self, "model") and not self.model.closed
                  and 0 < self.model.batch_size - len(self.in_flight) <= N - len(self.in_flight))
    @rule(data=st.data(), reset=st.booleans(), seed=st.integers(0, 2**16))
    def async_round(self, data: st.DataObject, reset: bool, seed: int) -> None:
        """EnvPool's loop: send (or async_reset) just enough idle envs for a batch, recv it."""
        idle = [i for i in range(N) if i not in self.in_flight]
        ids = list(data.draw(st.permutations(idle), label="envs"))[:self.model.batch_size - len(self.in_flight)]
        if reset:
            self._both(f"async_reset({ids})", lambda p: p.async_reset(np.array(ids)))
        else:
            actions = self._valid_actions(len(ids), np.random.default_rng(seed))
            self._both(f"send({ids})", lambda p: p.send(actions, np.array(ids)))
        self._sent(ids)
        self.recv()

    @precondition(lambda self: hasattr(self, "model") and (self.model.closed or self.model.pending <= self.model.batch_size))
    @rule()
    def recv(self) -> None:
        got = self._both("recv", lambda p: p.recv())
        if got is not None:
            self.in_flight.difference_update(got.env_ids.tolist())

    @rule()
    def wait(self) -> None:
        if self._both("wait", lambda p: p.wait()) is not None:
            self.in_flight.clear()

    @precondition(lambda self: hasattr(self, "model") and self.calls >= 20 and not self.model.closed)
    @rule()
    def close(self) -> None:
        self.model.close()
        self.sut.close()
        self._both("step after close", lambda p: p.step(self._valid_actions(N, np.random.default_rng(0))))
        self._both("recv after close", lambda p: p.recv())


# ---------------------------------------------------------------------- one case per executor
def _ray_executor() -> Any:
    from envhive.executors import RayExecutor

    return RayExecutor(2)


CASES: dict[str, tuple[Any, Any, str | None, int]] = {
    # name: (executor, env, the module it needs, examples); Ray's pools take seconds to start
    "thread": (functools.partial(ThreadExecutor, 2), "counting", None, 10),
    "process": (functools.partial(ProcessExecutor, 2), "counting", None, 10),
    "native-kernel": ("native", "envhive/CartPole-v1", None, 10),
    "native-mujoco": ("native", "envhive/HalfCheetah-v5", "mujoco", 10),
    "ray": (_ray_executor, "counting", "ray", 3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pool_api_matches_the_serial_model(name: str) -> None:
    executor, env, needs, examples = CASES[name]
    if needs is not None and importlib.util.find_spec(needs) is None:
        pytest.skip(f"needs {needs}")
    machine = type(f"PoolMachine_{name}", (PoolMachine,),
                   {"executor": staticmethod(executor) if callable(executor) else executor, "env": env})
    machine.TestCase.settings = settings(SETTINGS, max_examples=examples)
    machine.TestCase().runTest()


def test_the_model_catches_a_wrong_pool() -> None:
    """The machine fails a pool that differs from the model (here: one whose steps repeat an
    action of their own): it can fail."""

    class Shifted(CountingEnv):
        def step(self, action: Any):
            return super().step((int(action) + 1) % 3)

    def shifted() -> list[Any]:
        return [functools.partial(Shifted, pattern=PATTERNS[i], tag=i) for i in range(N)]

    class Wrong(PoolMachine):
        def _make(self, executor: Any, mode: str, batch_size: int, seed: int) -> Any:
            envs = counting_envs() if executor == "serial" else shifted()
            return envhive.make(envs, N, executor=executor, autoreset=mode, batch_size=batch_size,
                                seed=seed, api="pool", max_episode_steps=6)

    Wrong.executor = "thread"
    Wrong.TestCase.settings = settings(SETTINGS, max_examples=20, phases=[Phase.generate])
    with pytest.raises(Exception) as info:
        Wrong.TestCase().runTest()
    # One failure, or several (an exception group): the machine's own assertions.
    errors = getattr(info.value, "exceptions", (info.value,))
    assert all(isinstance(e, AssertionError) for e in errors), errors
