"""The Ray executor's actor side: one slice of envs and a worker core, inside a Ray actor.

:class:`SliceHost` is a plain class (Ray wraps it with ``ray.remote`` in the parent,
``_ray.py``), so this module imports without Ray. It builds its slice from the cloudpickled
factories inside the actor, holds *slice-local* buffers (row ``i - lo`` is env ``i``) and runs
the same :class:`~envhive.executors._core.WorkerCore` as a worker process. Per command it
receives the command's rows of the pool's input buffers as numpy arrays, and returns its
output rows as numpy arrays, plus the core's typed reply pickled exactly as the process
transport pickles it (only when there is side data: infos, errors, object observations).

Examples:
    >>> import cloudpickle, gymnasium as gym, numpy as np
    >>> from envhive._buffers import Buffers, BufferSpec
    >>> host = SliceHost(cloudpickle.dumps([lambda: gym.make("CartPole-v1")] * 2), 4, 6)
    >>> props = cloudpickle.loads(host.props())
    >>> pool = Buffers.allocate(BufferSpec(6, props[0].observation_space, props[0].action_space))
    >>> host.bind(pool.slice_spec(2))
    >>> pool.ops[4:6] = 1  # RESET
    >>> outputs, finals, reply, _ = host.run(None, [4, 5], [leaf[4:6] for leaf in input_leaves(pool)])
    >>> outputs[0].shape, reply is None
    ((2, 4), True)
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import cloudpickle
import numpy as np

from envhive._buffers import INPUT_FIELDS, Buffers, BufferSpec
from envhive._report import env_props
from envhive._runner import EnvRunner, build_envs
from envhive._spaces import tree_leaves
from envhive.executors._core import Close, Run, RunReply, WorkerCore, portable_error
from envhive.executors._wire import (
    decode_command,
    decode_run,
    encode_call_reply,
    encode_error,
    encode_run_reply,
)

__all__ = ["SliceHost", "input_leaves", "output_leaves", "final_leaves"]

#: The output buffers sent back after every RUN (``final_obs`` only for envs whose episode ended).
_OUTPUTS = ("obs", "reward", "terminated", "truncated")


def _numeric(buffers: Buffers, fields: tuple[str, ...]) -> list[np.ndarray]:
    # Object-typed leaves cannot travel as plain arrays: the Run command and the RunReply
    # carry their values (Run.object_actions, RunReply.object_obs), as on the process executor.
    return [
        leaf for name in fields if getattr(buffers, name) is not None
        for leaf in tree_leaves(getattr(buffers, name)) if leaf.dtype != object
    ]


def input_leaves(buffers: Buffers) -> list[np.ndarray]:
    """The numeric leaves a RUN needs from the parent (ops, seeds, actions), in wire order."""
    return _numeric(buffers, INPUT_FIELDS)


def output_leaves(buffers: Buffers) -> list[np.ndarray]:
    """The numeric leaves a RUN sends back for every env it ran, in wire order."""
    return _numeric(buffers, _OUTPUTS)


def final_leaves(buffers: Buffers) -> list[np.ndarray]:
    """The numeric ``final_obs`` leaves, sent back only for the envs whose episode ended."""
    return _numeric(buffers, ("final_obs",))


class SliceHost:
    """Envs ``[lo, hi)`` and a worker core over slice-local buffers (see the module).

    Args:
        blob: the slice's factories, cloudpickled.
        lo: the pool-wide id of the slice's first env.
        hi: one past its last env.
        paths: the caller's ``sys.path``.
    """

    def __init__(self, blob: bytes, lo: int, hi: int, paths: list[str] | None = None) -> None:
        self.lo, self.hi = lo, hi
        # The caller's import paths that exist here too: factories cloudpickled by reference
        # to a module of the caller's (a script's directory, a test directory) import as they
        # do in a worker process. On other machines, ship code with Ray's runtime_env.
        for path in paths or []:
            if path not in sys.path and os.path.isdir(path):
                sys.path.append(path)
        self.core: WorkerCore | None = None
        self._error: bytes | None = None
        self._runner: EnvRunner | None = None
        try:
            envs = build_envs(cloudpickle.loads(blob), first_id=lo)
            self._props = cloudpickle.dumps([env_props(e) for e in envs])
        except BaseException as err:  # reported by props(): the parent raises it
            self._error = encode_error(portable_error(err, lo))
            return
        self._runner = EnvRunner(envs, first_id=lo)

    def props(self) -> bytes:
        """The envs' properties (a pickled list of ``EnvProps``), or the ``ErrorReply`` of a
        build that failed."""
        return self._error if self._error is not None else self._props

    def bind(self, spec: BufferSpec) -> None:
        """Allocate the slice-local buffers (``spec``: the pool's layout with this slice's rows)."""
        assert self._runner is not None
        local = Buffers.allocate(spec)
        self.core = WorkerCore(self._runner, local, local=True)
        self._inputs = input_leaves(local)
        self._outputs = output_leaves(local)
        self._finals = final_leaves(local)

    def run(
        self, message: bytes | None, ids: list[int], inputs: list[np.ndarray]
    ) -> tuple[list[np.ndarray], list[np.ndarray] | None, bytes | None, float]:
        """Run ``ids`` (their rows of the input leaves in ``inputs``; ``message``: a pickled
        :class:`Run` when it has options, object actions or big seeds). Returns the output
        rows, the ``final_obs`` rows of the envs with a final info (in ``ids`` order, or
        ``None``), the pickled :class:`RunReply` (``None``: no side data) and when it finished
        (``time.time()``, for first-finished ordering across machines)."""
        assert self.core is not None
        rows = np.asarray(ids, np.int64) - self.lo
        for leaf, values in zip(self._inputs, inputs):
            leaf[rows] = values
        reply = self.core.handle(Run(ids) if message is None else decode_run(message, ids))
        assert isinstance(reply, RunReply)
        outputs = [leaf[rows] for leaf in self._outputs]
        finals = None
        if reply.final_infos and self._finals:
            ended = np.asarray([i for i in ids if i in reply.final_infos], np.int64) - self.lo
            finals = [leaf[ended] for leaf in self._finals]
        return outputs, finals, None if reply.empty else encode_run_reply(reply, ids), time.time()

    def call(self, kind: int, message: bytes) -> bytes:
        """Handle a pickled :class:`Call` or :class:`SetAttr`; the pickled reply."""
        assert self.core is not None
        return encode_call_reply(self.core.handle(decode_command(kind, message)), self.lo)

    def close(self) -> None:
        """Close every env of the slice."""
        if self.core is not None:
            self.core.handle(Close())
        elif self._runner is not None:
            self._runner.close()

    def where(self) -> tuple[str, int]:
        """This actor's Ray node id and process id (for monitoring and tests)."""
        import ray  # only ever called inside a Ray actor

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def ping(self) -> Any:
        """Nothing: a round trip, to measure the per-call cost (benchmarks)."""
        return None
