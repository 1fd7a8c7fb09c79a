"""Fixtures for the native executor's two Atari engines (see engines.py)."""

from __future__ import annotations

import pytest

from envhive.executors._atari_factory import ENGINE_VARIABLE


@pytest.fixture
def process_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker-process engine for the whole test."""
    monkeypatch.setenv(ENGINE_VARIABLE, "processes")


@pytest.fixture(params=["threads", "processes"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each native Atari engine in turn, for the whole test."""
    monkeypatch.setenv(ENGINE_VARIABLE, request.param)
    return str(request.param)
