"""The engine protocol: what the ``native`` executor drives, and what ``step_all`` returns.

An *engine* owns a whole batch of compiled envs and performs the pool's ops on them
(``envhive._ops``), writing straight into the pool's buffers. envhive has two:
``envhive.kernels.KernelEngine`` (classic-control kernels) and
``envhive.envs.mujoco._native.MujocoEngine`` (MuJoCo families). Both are checked against
:class:`Engine` by mypy; nothing inherits from it.

Examples:
    >>> import numpy as np
    >>> r = StepAllResult(bad=-1, done=0, step_infos={"x": np.zeros(2)}, reset_infos=None)
    >>> r.bad, list(r.step_infos)
    (-1, ['x'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from envhive._buffers import Buffers
from envhive._report import Completion, EnvProps

__all__ = ["Engine", "StepAllResult"]


class StepAllResult(NamedTuple):
    """What :meth:`Engine.step_all` returns (a NamedTuple: built every step, so it must be cheap).

    Attributes:
        bad: ``-1``, or the first env whose action is outside the action space (then nothing
            ran).
        done: how many stepped envs ended their episode (terminated or truncated).
        step_infos: neutral columns: key -> array of shape ``(num_envs, ...)``, one value per
            env, dtype as gymnasium would batch it; no ``"_key"`` mask entries (the rows of
            envs this call reset are ignored by the pool). ``None``: the envs have no step
            infos.
        reset_infos: env id -> non-empty reset info, for the envs this call reset; ``None``:
            none.

    Examples:
        >>> bad, done, step_infos, reset_infos = StepAllResult(-1, 2, None, {3: {"seeded": 1}})
        >>> done, reset_infos
        (2, {3: {'seeded': 1}})
    """

    bad: int
    done: int
    step_infos: dict[str, np.ndarray] | None
    reset_infos: dict[int, dict[str, Any]] | None


@runtime_checkable
class Engine(Protocol):
    """A batch of ``num_envs`` compiled envs that performs the pool's ops (``envhive._ops``).

    Life cycle: built by the id's factory (``factory.native_engine(num_envs, num_threads)``),
    ``bind`` once, then any number of ``step_all`` / ``run`` / ``call`` / ``set_attr``, then
    ``close``.

    Attributes:
        props: the envs' properties (one object for all of them).
        num_envs: batch size.

    Examples:
        >>> from envhive.kernels import CartPoleKernel, KernelEngine
        >>> isinstance(KernelEngine(CartPoleKernel(2)), Engine)
        True
    """

    props: EnvProps
    num_envs: int

    def bind(self, buffers: Buffers) -> None:
        """Attach the pool's buffers (once)."""
        ...

    def step_all(self, actions: np.ndarray) -> StepAllResult:
        """Run the op in ``buffers.ops`` of every env, env ``i``'s action from ``actions[i]``
        (the caller's batch: dtype and shape checked by the pool, values not). All ops finish
        inside the call; with a bad action nothing runs."""
        ...

    def run(self, ids: np.ndarray, options: dict[str, Any] | None, out: Completion) -> None:
        """The general path: the ops of ``ids`` (int64), actions from the bound buffers;
        report every env of ``ids`` in ``out`` (``env_ids`` or ``errors``)."""
        ...

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        """Call (or read) ``name`` on the envs ``env_ids`` (``None``: all); results in that order."""
        ...

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """Set ``name`` on the envs ``env_ids`` (``None``: all): ``values[k]`` to ``env_ids[k]``."""
        ...

    def close(self) -> None:
        """Release the envs."""
        ...
