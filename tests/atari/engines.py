"""Choosing the native executor's Atari engine in tests: C++ threads (the default) or worker
processes (the fallback), by ``ENVHIVE_ATARI_ENGINE`` (``executors._atari_factory.engine_kind``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from envhive.executors._atari_factory import ENGINE_VARIABLE

__all__ = ["atari_engine"]


@contextlib.contextmanager
def atari_engine(kind: str | None) -> Iterator[None]:
    """Pools made inside run the native Atari engine ``kind`` ("threads", "processes"; None:
    the default choice)."""
    before = os.environ.get(ENGINE_VARIABLE)
    if kind is None:
        os.environ.pop(ENGINE_VARIABLE, None)
    else:
        os.environ[ENGINE_VARIABLE] = kind
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENGINE_VARIABLE, None)
        else:
            os.environ[ENGINE_VARIABLE] = before
