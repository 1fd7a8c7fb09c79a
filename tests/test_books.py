"""The pool's books (``envhive._books.Books``) on their own: scripted completions, no executor."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st

import envhive
from envhive._books import IDLE, PENDING, READY, Books
from envhive._buffers import Buffers, BufferSpec
from envhive._ops import Op
from envhive._pool import Pool
from envhive._report import Completion
from envhive.errors import EnvWorkerError, NothingPendingError, PendingCallError, WaitTimeoutError
from envhive.executors import SerialExecutor
from envhive.testing import CountingEnv

N = 5


def _books(batch_size: int = 2, copy: bool = True) -> tuple[Books, Buffers, np.ndarray]:
    b = Buffers.allocate(BufferSpec(N, spaces.Box(-1, 1, (2,)), spaces.Discrete(2)))
    every = np.arange(N)
    broken = np.zeros(N, np.bool_)
    return Books(b, every, batch_size, copy, broken), b, broken


def _send(books: Books, b: Buffers, ids: list[int], op: Op = Op.STEP) -> None:
    """What ``Pool._dispatch`` books for an async send of ``ids``."""
    b.ops[ids] = op
    books.sent(np.array(ids), len(ids), len(ids) if op == Op.RESET else 0, sync=False)


def _script(books: Books, *completions: Completion, sync: bool = False
            ) -> tuple[Callable[[int, bool], int], list[int]]:
    """A ``pull`` that books the next scripted completion (an empty one once they run out),
    and the ``min_count`` of each call."""
    queue, asked = list(completions), []

    def pull(min_count: int, is_sync: bool) -> int:
        asked.append(min_count)
        assert is_sync == sync
        return books.absorb(queue.pop(0) if queue else Completion(), is_sync)[1]

    return pull, asked


def _err(i: int) -> EnvWorkerError:
    return EnvWorkerError(f"env {i} failed", env_id=i)


def test_recv_takes_first_come_first_served_and_only_hand_out_marks_them_idle():
    books, b, _ = _books(batch_size=2)
    _send(books, b, [0, 1, 2, 3])
    assert books.status.tolist() == [PENDING] * 4 + [IDLE]
    b.obs[:] = np.arange(N)[:, None]
    pull, asked = _script(books, Completion(env_ids=[3], infos={3: {"x": 3}}),
                          Completion(env_ids=[1, 0]))
    ids = books.take(2, pull)
    assert ids.tolist() == [3, 1]  # in the order they finished
    assert asked == [2, 1]  # asks only for what is still missing
    assert list(books.ready) == [0] and books.in_flight == 1 and books.pending == 2
    # Taken, not handed out: still READY, so a call cut short here loses them (give_up).
    assert books.status[[3, 1]].tolist() == [READY, READY]
    batch = books.hand_out(ids, 2)
    assert books.status.tolist() == [READY, IDLE, PENDING, IDLE, IDLE]
    assert batch.env_ids.tolist() == [3, 1] and batch.obs[:, 0].tolist() == [3.0, 1.0]
    assert batch.infos["x"].values.tolist()[0] == 3 and books.infos == {}


def test_an_error_is_raised_after_the_bookkeeping_lowest_env_first():
    books, b, broken = _books(batch_size=3)
    _send(books, b, [0, 1, 2, 3], Op.RESET)
    pull, _ = _script(books, Completion(env_ids=[0], errors={3: _err(3), 1: _err(1)}))
    with pytest.raises(EnvWorkerError) as caught:
        books.take(3, pull)
    assert caught.value.env_id == 1  # the lowest env id, not the first reported
    # Booked before it was raised: the failed envs idle and broken, the others where they were.
    assert broken.tolist() == [False, True, False, True, False]
    assert books.status.tolist() == [READY, IDLE, PENDING, IDLE, IDLE]
    assert list(books.ready) == [0] and books.in_flight == 1 and books.resets_in_flight == 1
    assert books.errors == {}  # env 3's error went with env 1's


def test_absorb_counts_the_resets_among_what_came_back():
    books, b, _ = _books()
    _send(books, b, [0, 1], Op.RESET)
    _send(books, b, [2, 3], Op.STEP)
    assert books.resets_in_flight == 2
    ids, count, resets, failed = books.absorb(Completion(env_ids=[1, 2]), sync=False)
    assert (count, resets, failed) == (2, 1, False) and ids == slice(1, 3)
    _, count, resets, _ = books.absorb(Completion(env_ids=[3, 0]), sync=False)
    assert (count, resets) == (2, 1) and books.resets_in_flight == 0 and books.in_flight == 0


def test_drain_of_a_sync_call_drops_every_info_with_the_error_and_leaves_all_idle():
    books, b, _ = _books()
    b.ops[:] = Op.STEP
    books.sent(slice(None), N, 0, sync=True)
    assert books.status.tolist() == [IDLE] * N  # sync calls leave the status alone
    pull, asked = _script(books, Completion(env_ids=[0, 1], infos={0: {"a": 1}}),
                          Completion(env_ids=[2, 4], infos={4: {"a": 2}}, errors={3: _err(3)}),
                          sync=True)
    with pytest.raises(EnvWorkerError, match="env 3"):
        books.drain(pull)
    assert asked == [5, 3]
    assert books.in_flight == 0 and books.infos == {} and not books.ready
    assert books.status.tolist() == [IDLE] * N


def test_wait_all_times_out_leaving_the_envs_in_flight_then_takes_every_env_sent():
    books, b, _ = _books()
    _send(books, b, [1, 3], Op.RESET)
    pull, asked = _script(books, Completion(env_ids=[3]))
    with pytest.raises(WaitTimeoutError, match="1 of the envs sent are still running"):
        books.wait_all(pull, 0.01, "step_wait")
    assert set(asked) == {0}  # polled without waiting
    assert books.status.tolist() == [IDLE, PENDING, IDLE, READY, IDLE] and books.in_flight == 1
    pull, _ = _script(books, Completion(env_ids=[1]))
    op = books.wait_all(pull, None, "wait")
    assert op.tolist() == [-1, int(Op.RESET), -1, int(Op.RESET), -1]  # NO_OP if not sent
    assert books.status.tolist() == [IDLE] * N and not books.ready and books.pending == 0
    with pytest.raises(NothingPendingError, match="wait"):
        books.wait_all(pull, None, "wait")


def test_recv_with_too_few_sent_changes_nothing():
    books, b, _ = _books(batch_size=3)
    _send(books, b, [0, 1])
    pull, asked = _script(books)
    with pytest.raises(NothingPendingError, match="batches of 3 envs but only 2 are pending"):
        books.take(3, pull)
    assert asked == [] and books.in_flight == 2


def test_give_up_reports_every_env_not_idle_and_empties_the_books():
    books, b, _ = _books()
    _send(books, b, [0, 2, 4], Op.RESET)
    books.absorb(Completion(env_ids=[2], infos={2: {}}, errors={4: _err(4)}), sync=False)
    lost = books.give_up()
    assert lost.tolist() == [True, False, True, False, False]  # 4 failed: idle already
    assert books.status.tolist() == [IDLE] * N and books.pending == 0
    assert books.resets_in_flight == 0 and books.errors == {} and books.infos == {}


def test_every_env_rows_are_views_or_copies_with_the_given_ops():
    for copy in (True, False):
        books, b, _ = _books(copy=copy)
        b.ops[:] = Op.STEP
        rows = books.all_rows({}, {}, None)
        assert rows.env_ids.tolist() == list(range(N))
        assert np.shares_memory(rows.obs, b.obs) is not copy
        assert np.shares_memory(rows.op, b.ops) is not copy
        same = np.full(N, int(Op.RESET), np.int8)
        assert books.all_rows({}, {}, None, same).op is same


def test_a_pool_dropped_alone_is_freed_without_the_cyclic_collector():
    """The books hold no reference to the pool (``pull`` is passed per call), so no cycle
    keeps a dropped pool, and its executor, alive until the cyclic collector runs."""
    gc.disable()
    try:
        pool = Pool([CountingEnv] * 3, SerialExecutor(), autoreset=AutoresetMode.NEXT_STEP,
                    batch_size=2)
        pool.reset()
        pool.async_reset()
        pool.recv()
        ref = weakref.ref(pool)
        del pool
        assert ref() is None  # freed now, so Pool.__del__ closed its executor now
    finally:
        gc.enable()


def _same_columns(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for key in want:
        g, w = got[key], want[key]
        assert g.values.dtype == w.values.dtype, key
        assert np.array_equal(g.values, w.values) and np.array_equal(g.mask, w.mask), key


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_infos_kept_in_an_engine_table_come_out_as_the_dicts_would(data):
    """An engine's InfoTable (the native Atari engine's async path) gives the books exactly
    the columns the per-env dicts of the same infos give: recv's batches, wait's every-env
    rows and reset's by-env rows, ended envs' final infos, and mixes with dict infos."""
    from envhive._infos import InfoTable

    n = N
    ints = data.draw(st.lists(st.integers(-3, 9), min_size=n, max_size=n))
    floats = data.draw(st.lists(st.floats(-5, 5, width=32), min_size=n, max_size=n))
    ended = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    table = InfoTable({"lives": np.array(ints, np.int32), "reward": np.array(floats, np.float32)},
                      {"lives": np.array(ints, np.int32)[::-1].copy(), "reward": np.array(floats, np.float32) * 2},
                      ended)
    sent = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    as_dicts = data.draw(st.sets(st.sampled_from(sent)))  # these come back as dicts in both
    a, _, _ = _books()
    b, _, _ = _books()
    for i in sent:  # one completion per env, in the drawn order
        dicts = table.as_dicts([i])
        b.absorb(Completion(env_ids=[i], infos=dicts[0], final_infos=dicts[1]), False)
        if i in as_dicts:
            a.absorb(Completion(env_ids=[i], infos=dicts[0], final_infos=dicts[1]), False)
        else:
            a.absorb(Completion(env_ids=[i], info_table=table, table_ids=[i]), False)
    how = data.draw(st.sampled_from(["recv", "wait", "by_env"]))
    if how == "recv":
        k = data.draw(st.integers(1, len(sent)))
        calls = [(np.array(sent[j:j + k]), min(k, len(sent) - j), False) for j in range(0, len(sent), k)]
    elif how == "wait":
        calls = [(np.arange(n), n, False)]
    else:
        calls = [(np.array(sorted(sent)), n, True)]
    for ids, rows, by_env in calls:
        got = a.take_infos(ids, rows, by_env)
        want = b.take_infos(ids.tolist(), rows, by_env)
        _same_columns(got[0], want[0])
        _same_columns(got[1], want[1])
        assert (got[2] is None) == (want[2] is None)
        if want[2] is not None:
            assert np.array_equal(got[2], want[2])
    assert not a.infos and not a.final_infos and not a._num_tabled  # everything taken


def test_sync_calls_and_second_sends_are_refused_with_what_is_outstanding():
    """The books' rules on misuse, word for word: a sync call says how many sent envs are
    pending and how many are ready; a second send names the env and its state. The serial
    executor runs a send's ops inside the next recv, so the states here are exact."""
    env = envhive.make(CountingEnv, 3, executor="serial", batch_size=1)
    try:
        env.reset(seed=0)
        env.send(np.array([1, 1]), np.array([0, 1]))
        sync = ("{}() called while {} sent env(s) are pending and {} are ready but not received: "
                "call recv() until every sent env is received before using synchronous calls")
        with pytest.raises(PendingCallError) as info:
            env.step(np.ones(3, np.int64))
        assert str(info.value) == sync.format("step", 2, 0)
        with pytest.raises(PendingCallError) as info:
            env.send(np.array([1]), np.array([1]))
        assert str(info.value) == "send: env 1 is pending; recv() it before sending it again"
        assert env.recv()[4]["env_id"].tolist() == [0]  # both ran; env 1's result waits
        with pytest.raises(PendingCallError) as info:
            env.reset()
        assert str(info.value) == sync.format("reset", 0, 1)
        with pytest.raises(PendingCallError) as info:
            env.send(np.array([0, 1]), np.array([0, 1]))
        assert str(info.value) == "send: env 1 is ready but not received; recv() it before sending it again"
        env.send(np.array([1]), np.array([0]))  # env 0 was received: it may go again
        assert sorted(env.recv()[4]["env_id"].tolist() + env.recv()[4]["env_id"].tolist()) == [0, 1]
        env.step(np.ones(3, np.int64))  # nothing outstanding: sync calls work again
    finally:
        env.close()


@pytest.mark.parametrize("copy", [True, False])
def test_recv_rows_equal_the_sync_rows_with_or_without_copies(copy):
    """recv() of one env at a time (gathered into preallocated arrays when ``copy=False``)
    hands out the same observation, reward, flags as a sync step of the same env."""
    ref = envhive.make(CountingEnv, 3, executor="serial")
    env = envhive.make(CountingEnv, 3, executor="serial", batch_size=1, copy=copy)
    try:
        ref.reset(seed=0)
        env.reset(seed=0)
        for t in range(6):
            acts = np.array([t % 3, (t + 1) % 3, 2])
            want = ref.step(acts)
            env.send(acts, np.arange(3))
            seen = []
            for _ in range(3):  # compared at once: with copy=False the next recv reuses the arrays
                row = env.recv()
                i = int(row[4]["env_id"][0])
                seen.append(i)
                np.testing.assert_array_equal(row[0][0], want[0][i])
                assert row[1][0] == want[1][i] and row[2][0] == want[2][i] and row[3][0] == want[3][i]
                assert row[1].dtype == np.float64 and row[2].dtype == np.bool_ and row[3].dtype == np.bool_
            assert sorted(seen) == [0, 1, 2]
    finally:
        ref.close()
        env.close()


@pytest.mark.parametrize("executor", ["serial", "thread"])
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_env_steps_count_the_real_steps_of_async_calls(executor, mode):
    """``env_steps`` counts the envs' real ``step`` calls on the async path too: the books
    count the RESET ops that come back (async_reset's, next_step's resets of ended envs),
    also while other envs are still in flight, and those are not steps."""
    import functools

    pattern = [[(1, "term")], [(2, "trunc")], [(3, "term")], [(1, "trunc"), (2, "term")]]
    fns = [functools.partial(CountingEnv, pattern=p, tag=i) for i, p in enumerate(pattern)]
    pool = envhive.make(fns, executor=executor, batch_size=2, autoreset=mode, api="pool")
    try:
        pool.async_reset(seed=0)
        real, seen = 0, set()

        def count(b) -> int:
            """The real steps among ``b``'s rows: not an env's first row (async_reset's); then
            next_step: a row past step 0 (else the env was reset); same_step: every row."""
            steps = 0
            for k, i in enumerate(b.env_ids.tolist()):
                if i in seen:
                    steps += 1 if mode == "same_step" else int(b.obs[k, 2] > 0)
                seen.add(i)
            return steps

        for t in range(24):
            b = pool.recv()
            real += count(b)
            pool.send(np.full(2, t % 3), b.env_ids)
        real += count(pool.wait())  # the 4 envs in flight
        assert pool.env_steps == real
    finally:
        pool.close()


def test_misuse_of_recv_and_wait_is_refused_word_for_word():
    """What recv() with too few envs sent and a wait with nothing sent say, exactly, and the
    gymnasium call a ``*_wait`` names (``step_wait`` -> ``step``)."""
    books, b, _ = _books(batch_size=3)
    _send(books, b, [0, 1])
    pull, _ = _script(books)
    with pytest.raises(NothingPendingError) as info:
        books.take(3, pull)
    assert str(info.value) == ("recv() returns batches of 3 envs but only 2 are pending and 0 ready: "
                               "send() actions or async_reset() first")
    books, _, _ = _books()
    with pytest.raises(NothingPendingError) as info:
        books.wait_all(pull, None, "step_wait")
    assert str(info.value) == "step_wait() called with no env in flight: send() actions or async_reset() first"
    assert info.value.name == "step"


def test_wait_all_with_a_timeout_returns_once_every_env_is_back():
    """A timeout is a bound: envs that come back before it (here on the third look) are
    returned, and the message of one that runs out says how many are still running."""
    books, b, _ = _books()
    _send(books, b, [1, 3])
    pull, asked = _script(books, Completion(), Completion(env_ids=[3]), Completion(env_ids=[1]))
    op = books.wait_all(pull, 0.9, "step_wait")  # ~1 ms of polls: 0.9 s is a generous bound
    assert op.tolist() == [-1, int(Op.STEP), -1, int(Op.STEP), -1] and asked == [0, 0, 0]
    assert books.status.tolist() == [IDLE] * N and books.pending == 0
    _send(books, b, [2])
    pull, _ = _script(books)
    with pytest.raises(WaitTimeoutError) as info:
        books.wait_all(pull, 0.02, "step_wait")
    assert str(info.value) == ("The call to `step_wait` has timed out after 0.02 second(s): 1 of the envs "
                               "sent are still running. They stay in flight: call step_wait() again for "
                               "their results, or close the pool")


def test_give_up_forgets_the_rows_kept_in_an_engine_table():
    """Given up, the rows an engine's table held are forgotten: the books hold nothing but
    envs in flight again, and the next infos of those envs are what comes back next."""
    from envhive._infos import InfoTable

    books, b, _ = _books()
    table = InfoTable({"lives": np.arange(N, dtype=np.int32)}, {"lives": np.zeros(N, np.int32)},
                      np.zeros(N, np.bool_))
    _send(books, b, [0, 1])
    books.absorb(Completion(env_ids=[0, 1], info_table=table, table_ids=[0, 1]), sync=False)
    assert not books.only_in_flight
    assert books.give_up().tolist() == [True, True, False, False, False]
    assert books.only_in_flight
    _send(books, b, [0, 1])
    books.absorb(Completion(env_ids=[0], infos={0: {"x": 5}}), sync=False)
    books.absorb(Completion(env_ids=[1], info_table=table, table_ids=[1]), sync=False)
    infos, finals, has_final = books.take_infos([0, 1], 2)
    assert infos["x"].mask.tolist() == [True, False] and infos["x"].values.tolist() == [5, 0]
    assert infos["lives"].mask.tolist() == [False, True] and infos["lives"].values.tolist() == [0, 1]
    assert finals == {} and has_final is None
    assert books.infos == {}  # everything taken
