"""The ops: what STEP, RESET and STEP_RESET do to one env, written once.

The pool plans one op per env (``_autoreset.py`` turns the three autoreset modes into ops);
everything that *performs* ops follows the rules here: the Python runner (``_runner.py``), the
compiled classic kernels and MuJoCo engines (``envhive.engines``, which compile these same
functions with numba), and the process executor's restart substitution. Nothing else decides
which observation goes where.

* ``STEP``: ``env.step(action)``. Obs, reward, terminated, truncated go to the env's row; the
  step info is the row's info.
* ``RESET``: ``env.reset(seed=..., options=...)``. The reset obs goes to the row, with reward
  :data:`RESET_REWARD` and both flags False; the reset info is the row's info.
* ``STEP_RESET``: a step; if it ended the episode (:func:`resets_in_op`), the terminal obs goes
  to ``final_obs``, the step info becomes the row's *final info*, the env is reset (no seed,
  no options) and the reset obs and reset info become the row's obs and info. Reward and flags
  stay the step's.

Restart substitution (:func:`restart_outcome`): when a worker is rebuilt, the envs it owned
run a RESET instead of the op they were sent; the row then reports what :func:`restart_outcome`
says, so the episode the env lost is seen as truncated.

Examples:
    >>> resets_in_op(int(Op.STEP_RESET), False, True), resets_in_op(int(Op.STEP), True, False)
    (True, False)
    >>> restart_outcome(int(Op.STEP_RESET))
    RestartOutcome(reward=0.0, terminated=False, truncated=True, final_obs_is_reset_obs=True)
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

__all__ = [
    "Op",
    "resets_in_ops",
    "RESET_REWARD",
    "STEP",
    "RESET",
    "STEP_RESET",
    "resets_in_op",
    "RestartOutcome",
    "restart_outcome",
    "RESTART_INFO_KEY",
]


class Op(enum.IntEnum):
    """What an executor does to one env (see the module docstring)."""

    STEP = 0
    RESET = 1
    STEP_RESET = 2


# Plain ints for hot loops: comparing numpy/int values with IntEnum members is slow, and
# compiled code reads these as constants.
STEP, RESET, STEP_RESET = 0, 1, 2

#: The reward of a row whose op was RESET (its flags are both False).
RESET_REWARD = 0.0

#: The info key set on rows whose env was rebuilt with its worker.
RESTART_INFO_KEY = "worker_restarted"


def resets_in_op(op: int, terminated: bool, truncated: bool) -> bool:
    """Whether the env is reset inside this op, after its step: STEP_RESET that ended.

    Plain Python on purpose: compiled engines build their loops with ``numba.njit`` of this
    very function, so the rule exists once.
    """
    return op == STEP_RESET and (terminated or truncated)


def resets_in_ops(ops: Any, terminated: Any, truncated: Any) -> Any:
    """:func:`resets_in_op` over arrays (numpy or torch): a bool mask, row by row.

    The batched engines' Python side (``engines._batched``) asks this; a test holds it equal
    to :func:`resets_in_op` on every row.

    Examples:
        >>> import numpy as np
        >>> resets_in_ops(np.array([STEP_RESET, STEP, STEP_RESET]), np.array([True, True, False]),
        ...               np.zeros(3, bool)).tolist()
        [True, False, False]
    """
    return (ops == STEP_RESET) & (terminated | truncated)


class RestartOutcome(NamedTuple):
    """What a row reports when its env was rebuilt instead of running ``op``."""

    reward: float
    terminated: bool
    truncated: bool
    #: STEP_RESET rows: ``final_obs`` gets the new reset obs (the lost one is gone) and the
    #: final info is ``{RESTART_INFO_KEY: True}``.
    final_obs_is_reset_obs: bool


def restart_outcome(op: int) -> RestartOutcome | None:
    """The row of an env rebuilt instead of running ``op``; ``None``: a plain reset row.

    A RESET was a fresh episode anyway: nothing was lost. A STEP or STEP_RESET lost the
    episode: the row is truncated with reward 0 (and for STEP_RESET the reset obs is also the
    final obs, so ``final_obs`` never holds a stale row).
    """
    if op == RESET:
        return None
    return RestartOutcome(RESET_REWARD, False, True, op == STEP_RESET)
