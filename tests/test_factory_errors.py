"""A factory's exception is an ``EnvWorkerError`` that is also of the factory's exception
class (``envhive.errors.worker_error_as``), on every executor: code written for the env's own
error (SB3's ``except gym.error.DeprecatedEnv:``) still catches it.
"""

from __future__ import annotations

import pickle
import threading

import cloudpickle
import pytest

import envhive
from envhive.errors import EnvWorkerError, worker_error_as
from envhive.executors import available_executors
from envhive.testing import CountingEnv

pytestmark = pytest.mark.timeout(300)

EXECUTORS = available_executors()


class LevelError(Exception):
    """An exception whose ``__init__`` takes other arguments than a message."""

    def __init__(self, level: int, hint: str) -> None:
        super().__init__(f"level {level} is locked ({hint})")
        self.level = level
        self.hint = hint


def locked_factory():
    raise LevelError(3, "finish level 2")


class LockError(Exception):
    """Keeps an attribute that does not pickle."""

    def __init__(self) -> None:
        super().__init__("holds a lock")
        self.lock = threading.Lock()


def lock_factory():
    raise LockError()


@pytest.mark.parametrize("name", EXECUTORS)
def test_factory_error_is_also_its_own_class(name):
    with pytest.raises(LevelError) as info:
        envhive.make([CountingEnv, locked_factory], executor=name)
    err = info.value
    assert isinstance(err, EnvWorkerError) and isinstance(err, envhive.EnvhiveError)
    assert type(err).__name__ == "EnvWorkerError[LevelError]"
    assert (err.env_id, err.cause_type, err.level, err.hint) == (1, "LevelError", 3, "finish level 2")
    assert str(err).startswith("env 1: the env factory raised LevelError: level 3 is locked")
    assert "locked_factory" in err.worker_traceback


@pytest.mark.parametrize("name", EXECUTORS)
def test_built_in_cause_classes_combine(name):
    def missing():
        raise FileNotFoundError(2, "no such map", "maps/level3.txt")

    with pytest.raises(OSError) as info:  # FileNotFoundError's base: what callers catch
        envhive.make([missing], executor=name)
    assert isinstance(info.value, (FileNotFoundError, EnvWorkerError))
    assert "no such map" in str(info.value) and info.value.env_id == 0


@pytest.mark.parametrize("name", EXECUTORS)
def test_an_error_that_does_not_pickle_arrives_plain(name):
    """In-process it keeps its class; from a worker process, where its attributes cannot be
    sent, it comes as a plain EnvWorkerError with the same message and traceback."""
    with pytest.raises(EnvWorkerError) as info:
        envhive.make([lock_factory], executor=name)
    err = info.value
    assert isinstance(err, LockError) == (name not in ("process", "ray"))  # out of process
    assert err.cause_type == "LockError" and "holds a lock" in str(err)
    assert "lock_factory" in err.worker_traceback


def test_it_pickles_and_keeps_one_class_per_cause():
    err = worker_error_as(LevelError(1, "x"), "the env factory raised LevelError", env_id=4)
    for dumps in (pickle.dumps, cloudpickle.dumps):
        back = pickle.loads(dumps(err))
        assert type(back) is type(err)
        assert (back.env_id, back.level, back.hint, str(back)) == (4, 1, "x", str(err))
    again = worker_error_as(LevelError(2, "y"), "m", env_id=0)
    assert type(again) is type(err)


def test_classes_that_cannot_combine_give_a_plain_error():
    for cause in (envhive.WorkerDiedError("died", env_ids=[0], exitcode=1), KeyboardInterrupt()):
        err = worker_error_as(cause, "m", env_id=0)
        assert type(err) is EnvWorkerError and err.cause_type == type(cause).__name__
