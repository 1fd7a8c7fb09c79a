"""A front end stepped through the pool's general path, by the public API alone.

``step_async`` + ``step_wait`` send every env (``Pool.send``) and wait for all of them
(``Pool.wait``): the executor's general send/recv path, with per-env infos, where ``step``
takes the fast paths an executor offers (an engine's inline ``step_all``, the fused
``run_all``). Tests that hold a fast path equal to the general one compare the two without
switching a private name off (a renamed name would make such a test compare the fast path
with itself).
"""

from __future__ import annotations

from typing import Any


class GeneralPath:
    """``env`` with ``step`` done as ``step_async`` + ``step_wait``; everything else is
    ``env``'s own."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def step(self, actions: Any) -> Any:
        self.env.step_async(actions)
        return self.env.step_wait()
