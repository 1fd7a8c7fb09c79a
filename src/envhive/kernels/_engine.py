"""The native executor's engine for classic-control kernels (one kernel for the whole batch).

An *engine* is what the ``native`` executor drives: an object that owns a whole batch of envs
and performs the pool's ops on them in compiled code. :class:`KernelEngine` wraps a
:class:`~envhive.kernels.Kernel`; envhive's MuJoCo envs have their own engine
(``envhive.envs.mujoco._native``). Both implement :class:`envhive.engines.Engine`.

Examples:
    >>> from envhive.kernels import CartPoleKernel
    >>> engine = KernelEngine(CartPoleKernel(4))
    >>> engine.props.action_space
    Discrete(2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive._buffers import Buffers
from envhive._report import Completion, EnvProps
from envhive.engines import CEntry, StepAllResult

if TYPE_CHECKING:
    from envhive.engines import Engine, HasCEntry
from envhive.engines._batched import ended_rows, refuse_reset_options, reset_seeds, split_ops
from envhive.errors import ConfigError
from envhive.kernels._kernel import Binding, Kernel

__all__ = ["KernelEngine"]

# StepAllResult(...) without the NamedTuple's Python __new__ frame: this runs every step.
_result = tuple.__new__


def _nothing() -> None:
    """No discard to wait out: a kernel's ops finish inside each call."""


class KernelEngine:
    """Drives one :class:`~envhive.kernels.Kernel` for the native executor.

    Args:
        kernel: the batch (``kernel.num_envs`` envs).
    """

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = k = kernel
        self.props = EnvProps(k.observation_space, k.action_space, dict(k.metadata), None, None)
        self.num_envs = k.num_envs
        self.device = None  # host arrays
        self.num_threads = 1  # the calling thread
        self._drive = type(k).driver()
        self._all = np.arange(k.num_envs, dtype=np.int64)

    def bind(self, buffers: Buffers) -> None:
        """Bind the pool's buffers (once: the kernel keeps their addresses)."""
        self._buffers = b = buffers
        final = b.final_obs if b.final_obs is not None else b.obs
        self._binding: Binding | None = Binding(self.kernel, b.ops, b.obs, final, b.reward, b.terminated, b.truncated)
        self._table = self._binding.table

    def step_all(self, actions: np.ndarray) -> StepAllResult:
        """Run every env's op with ``actions`` (validated first: nothing runs if one is bad).
        Kernels have no infos."""
        bad, low, done = self._drive(self._all, actions, self._table, True)
        if low:
            self.kernel.restock()
        return _result(StepAllResult, (bad, done, None, None))

    def run(self, ids: np.ndarray, options: dict[str, Any] | None, out: Completion) -> None:
        """Run the ops of ``ids`` (actions from the bound buffers) and report them in ``out``.

        The compiled driver performs every op itself (``_ops``' rules, compiled); around it,
        the shared steps of ``engines._batched``: RESETs with options fail as their envs'
        errors, RESETs take the command block's seeds, and rows that reset after their step
        report the step's info (kernels have none) as their final info."""
        b, k = self._buffers, self.kernel
        ids = refuse_reset_options(ids, b.ops, options, out, "envhive kernels")
        _, reset_ids = split_ops(ids, b.ops)
        if reset_ids.size:
            k.seed_many(reset_ids, reset_seeds(b, reset_ids))  # all at once (compiled)
            k.restock(reset_ids.tolist())  # envs reset for the first time have no stock yet
        if ids.size:
            _, low, _ = self._drive(ids, b.actions, self._table, False)
            if low:
                k.restock()
            out.env_ids.extend(ids.tolist())
            if b.final_obs is not None:
                for i in ended_rows(ids, b.ops, b.terminated, b.truncated).tolist():
                    out.final_infos[i] = {}

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        """Read what a kernel has per env (spaces, metadata, generators, state rows), for the
        envs ``env_ids`` (``None``: all) in that order."""
        k = self.kernel
        ids = range(k.num_envs) if env_ids is None else [int(i) for i in env_ids]
        if name in ("observation_space", "action_space", "metadata", "max_episode_steps"):
            return [getattr(k, name)] * len(ids)
        if name == "render_mode":
            return [None] * len(ids)
        if name == "np_random":
            return [k.rng(i) for i in ids]
        if name in ("state", "elapsed"):
            rows = getattr(k, name)
            return [rows[i].copy() for i in ids]
        raise ConfigError(
            f"call({name!r}): a native kernel has no per-env objects; it exposes "
            "observation_space, action_space, metadata, max_episode_steps, render_mode, "
            "np_random, state and elapsed"
        )

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """Refused: a kernel's envs have no attributes."""
        raise ConfigError(
            f"set_attr({name!r}): a native kernel's envs have no attributes to set; pass "
            "keywords with make(..., env_kwargs=...) instead"
        )

    def c_entry(self) -> CEntry:
        """The C entry (``HasCEntry``): the family's op loop as an ``envhive_batch_api``'s
        ``run`` (``kernels._centry``); Python restocks reset draws when it asks (``-2``)."""
        from envhive.kernels._centry import kernel_api

        if self._binding is None:
            raise ConfigError("the kernel engine is closed")
        capsule, self._c_keep = kernel_api(self.kernel, self._table, self._buffers.actions)
        return CEntry(capsule, self._restock, None, 0, None, str, _nothing)

    def _restock(self, ids: np.ndarray) -> None:
        self.kernel.restock(ids.tolist())

    def close(self) -> None:
        """Nothing to release but references."""
        self._binding = None


if TYPE_CHECKING:

    def _implements_engine(engine: KernelEngine) -> Engine:
        return engine  # mypy checks KernelEngine against the Engine protocol here

    def _implements_c_entry(engine: KernelEngine) -> HasCEntry:
        return engine  # ... and against HasCEntry
