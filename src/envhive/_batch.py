"""The pool's result: a neutral batch that says what happened, in named arrays.

Every pool call that returns transitions (``step``, ``reset``, ``recv``) returns a
:class:`Batch`: one row per env it covers, in the layout of no particular API. Front ends
(gymnasium, dm_env, TorchRL, SB3, EnvPool's API) build their own layout from it and from nothing
else: gymnasium's ``_key`` masks, its object array of ``final_obs`` and ``info["env_id"]``
exist only in the gymnasium front end; dm_env's step types and discounts only in the dm_env
one.

What a row says, from ``op`` (the op the env ran, see ``envhive._ops``) and the flags:

* ``op == RESET``: ``obs`` is a reset observation (the first of an episode); reward 0, flags
  False; the row's info is the reset info.
* ``op == STEP``: a plain step; ``terminated``/``truncated`` say whether the episode ended.
* ``op == STEP_RESET`` and the episode ended (``has_final``): the env was reset in the same
  op; ``obs`` is the reset observation and ``final_obs`` the terminal one, ``infos`` the reset
  info and ``final_infos`` the step's info.
* ``op == NO_OP`` (``reset`` with a ``reset_mask``): the env was not touched; its row repeats
  its current observation, and its reward and flags are those of its last transition.

Arrays are the pool's buffers (valid until the pool's next call) or copies, as the pool's
``copy`` setting says; a front end never needs to copy again.

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("CartPole-v1", num_envs=2, seed=0)
    >>> batch = env.pool.reset()
    >>> batch.env_ids.tolist(), batch.is_reset.tolist()
    ([0, 1], [True, True])
    >>> batch = env.pool.step(np.array([0, 1]))
    >>> batch.step_type.tolist()  # MID: neither first nor last
    [1, 1]
    >>> env.close()
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from envhive._agents import AgentRows
from envhive._infos import InfoColumns
from envhive._ops import RESET, STEP_RESET

try:  # the compiled step_type (an optional extension built at install)
    from envhive._runloop import step_kinds as _step_kinds
except ImportError:  # pragma: no cover - built without a compiler
    _step_kinds = None

__all__ = ["Batch", "NO_OP", "FIRST", "MID", "LAST"]

#: ``Batch.op`` of a row the call did not touch (``reset`` with a ``reset_mask``).
NO_OP = -1
#: Step types, as dm_env and EnvPool's core number them.
FIRST, MID, LAST = 0, 1, 2


class Batch(NamedTuple):
    """What a pool call did to the envs it covers, one row per env (see the module docstring).

    A ``NamedTuple``: built on every step, so it must cost next to nothing.

    Examples:
        >>> import envhive, numpy as np
        >>> pool = envhive.make("CartPole-v1", num_envs=2, seed=0, max_episode_steps=1).pool
        >>> _ = pool.reset()
        >>> b = pool.step(np.array([0, 1]))
        >>> b.truncated.tolist(), b.step_type.tolist()
        ([True, True], [2, 2])
        >>> pool.step(np.array([0, 1])).is_reset.tolist()  # next_step: reset rows
        [True, True]
        >>> pool.close()
    """

    #: ``(rows,)`` int64: the pool's id of the env of each row.
    env_ids: np.ndarray
    #: The observations, one row per env (a tree of arrays for Dict/Tuple spaces).
    obs: Any
    #: ``(rows, *reward_shape)`` float64.
    reward: np.ndarray
    #: ``(rows,)`` bool.
    terminated: np.ndarray
    #: ``(rows,)`` bool.
    truncated: np.ndarray
    #: ``(rows,)`` int8: the op each env ran (``envhive._ops``), or :data:`NO_OP`.
    op: np.ndarray
    #: Terminal observations (same layout as ``obs``), meaningful where ``has_final``;
    #: ``None`` when no row can have one (the pool never plans STEP_RESET).
    final_obs: Any
    #: ``(rows,)`` bool: rows whose ``final_obs`` and ``final_infos`` are set; ``None`` as above.
    has_final: np.ndarray | None
    #: The rows' infos, in columns (``envhive._infos``).
    infos: InfoColumns
    #: The step infos of rows that were reset in the same op (``has_final``), in columns.
    final_infos: InfoColumns
    #: Multi-agent envs only (else ``None``): each agent's ``terminated``, ``truncated`` and
    #: ``active`` flags, ``(rows, num_agents)`` bools (``envhive._agents``). Then ``obs`` and
    #: ``final_obs`` carry the agent axis after the row axis and ``reward`` is
    #: ``(rows, num_agents)``; ``terminated``/``truncated`` say whether the env's episode ended.
    agents: AgentRows | None = None

    @property
    def is_reset(self) -> np.ndarray:
        """``(rows,)`` bool: the row's ``obs`` is the first of an episode."""
        op = self.op
        first = op == RESET
        if self.has_final is not None:
            first |= (op == STEP_RESET) & self.has_final
        return first

    @property
    def step_type(self) -> np.ndarray:
        """``(rows,)`` int8: :data:`FIRST` for reset rows, :data:`LAST` for rows whose
        episode ended in this op (and were not reset in it), :data:`MID` otherwise.

        A same_step row that ended and was reset in one op is FIRST (its ``obs`` is the reset
        one); its ending is in ``has_final``.
        """
        return self.step_types_and_discounts(False)[0]

    def step_types_and_discounts(self, discounts: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """:attr:`step_type`, and (with ``discounts``) each row's discount as dm_env and
        EnvPool's dm API give it: ``0.0`` on LAST rows that terminated (nothing beyond them),
        ``1.0`` on every other row (truncated ones included). Fresh arrays.

        The definition is the numpy below; ``_runloop.step_kinds`` computes the same in one
        compiled pass when envhive has its C loop (a few numpy calls on a small batch cost
        microseconds, a dm_env step's main cost over the pool).

        Examples:
            >>> b = Batch(np.arange(3), None, None, np.array([True, False, False]),
            ...           np.array([False, True, False]), np.zeros(3, np.int8), None, None, {}, {})
            >>> kinds, disc = b.step_types_and_discounts()
            >>> kinds.tolist(), disc.tolist()
            ([2, 2, 1], [0.0, 1.0, 1.0])
        """
        rows = self.op.shape
        if _step_kinds is not None:
            kind, disc = np.empty(rows, np.int8), np.empty(rows, np.float64) if discounts else None
            if _step_kinds(self.terminated, self.truncated, self.op, self.has_final, kind, disc):
                return kind, disc
        kind = np.full(rows, MID, np.int8)
        kind[self.terminated | self.truncated] = LAST
        kind[self.is_reset] = FIRST
        if not discounts:
            return kind, None
        return kind, np.where(self.terminated & (kind == LAST), 0.0, 1.0)
