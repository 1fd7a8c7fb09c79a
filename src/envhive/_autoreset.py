"""Autoreset policy: the only place the three modes are written down.

Executors report raw transitions; these pure functions decide which op each env gets next and
how a finished transition is presented. See ``docs/semantics.md`` for the table of modes.

* ``next_step`` (gymnasium's default): an env whose episode ended is reset on the *next*
  ``step``; that step returns the reset observation with reward 0 and both flags False, and
  ignores the action.
* ``same_step``: an env whose episode ends is reset in the *same* step; the step returns the
  reset observation, and the terminal one is in ``info["final_obs"]`` (with ``final_info``).
* ``disabled``: envs are never reset behind your back; stepping an ended env is an error until
  you reset it with ``reset(options={"reset_mask": mask})`` (or ``async_reset(env_ids)``).

Examples:
    >>> parse_autoreset("same_step")
    <AutoresetMode.SAME_STEP: 'SameStep'>
    >>> plan_ops(AutoresetMode.NEXT_STEP, np.array([False, True])).tolist()
    [0, 1]
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from envhive._ops import Op
from envhive.errors import ConfigError

__all__ = ["AutoresetMode", "parse_autoreset", "plan_ops", "keeps_ended_state"]

_BY_NAME = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}


def parse_autoreset(mode: Any) -> AutoresetMode:
    """Accept ``"next_step"``/``"same_step"``/``"disabled"``, gymnasium's names or the enum.

    Examples:
        >>> parse_autoreset(AutoresetMode.DISABLED) is parse_autoreset("Disabled")
        True
    """
    if isinstance(mode, AutoresetMode):
        return mode
    if isinstance(mode, str):
        if mode in _BY_NAME:
            return _BY_NAME[mode]
        for member in AutoresetMode:
            if mode == member.value:
                return member
    raise ConfigError(
        f"unknown autoreset mode {mode!r}: expected one of {sorted(_BY_NAME)} "
        "or a gymnasium.vector.AutoresetMode"
    )


_STEP = np.int8(Op.STEP)
_RESET = np.int8(Op.RESET)
# Enum attribute access is slow on Python 3.11 (a descriptor lookup each time); planning runs
# on every step, so it compares against module-level aliases of the members.
_STEP_INT, _STEP_RESET_INT = int(Op.STEP), int(Op.STEP_RESET)
_SAME_STEP, _NEXT_STEP = AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP


def plan_ops(mode: AutoresetMode, ended: np.ndarray | None) -> np.ndarray | int:
    """The op for each env about to be stepped, given whether its episode has ended.

    ``ended`` may be ``None`` when no env has ended. It only matters in next_step mode:
    same_step never leaves an env in an ended state, and disabled mode refuses to step ended
    envs before planning.
    """
    if mode is _SAME_STEP:
        return _STEP_RESET_INT
    if mode is _NEXT_STEP and ended is not None and np.count_nonzero(ended):
        return np.where(ended, _RESET, _STEP)
    return _STEP_INT


def keeps_ended_state(mode: AutoresetMode) -> bool:
    """Whether an env whose episode ended stays in that state until the next op.

    False for same_step, where the executor already reset it within the same op.
    """
    return mode is not AutoresetMode.SAME_STEP


def plan_ops_into(mode: AutoresetMode, ended: np.ndarray, num_ended: int, out: np.ndarray) -> int:
    """:func:`plan_ops` for every env, written into ``out``; returns how many RESET ops.

    The pool's sync steps use this (no temporary arrays). ``ended`` is the ended mask as
    int8 0/1 (the pool keeps an int8 view of its bool mask: the same bytes), and
    ``num_ended`` its number of ones (the pool keeps it, so nothing is counted here).

    Examples:
        >>> out = np.zeros(3, np.int8)
        >>> plan_ops_into(AutoresetMode.NEXT_STEP, np.array([0, 1, 0], np.int8), 1, out)
        1
        >>> out.tolist()
        [0, 1, 0]
    """
    if mode is _SAME_STEP:
        out.fill(_STEP_RESET_INT)
        return 0
    if mode is _NEXT_STEP and num_ended:
        # ended -> RESET (1), else STEP (0): a plain copy of the 0/1 bytes (no casting loop, no
        # np.where temporary). tests/test_rules.py holds this equal to plan_ops for every mode.
        np.copyto(out, ended)
        return num_ended
    out.fill(_STEP_INT)
    return 0
