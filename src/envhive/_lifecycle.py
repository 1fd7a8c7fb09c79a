"""Where each env of a pool is in its life (started, ended, broken, blocked), and its step count.

:class:`Lifecycle` keeps, for one :class:`~envhive._pool.Pool` (which owns it as ``pool._life``,
by composition, as it owns its books):

* ``started``: reset at least once. Until then its reset takes ``make(seed=...)``'s seed for it
  (``first_seeds``, used up once a reset succeeded: one that fails or is cut short leaves it for
  the retry); later resets continue the env's own RNG.
* ``ended``: its last transition ended the episode and it has not been reset since (next_step
  and disabled only: same_step resets in the same op). next_step plans its reset from it.
* ``broken``: its last op raised, or a call it was in was cut short: it must be reset before
  it is stepped again. The books mark it as the error comes back (``Books.absorb``).
* ``blocked = ~started | broken | (ended & disabled)``: it cannot be stepped now. It is kept up
  to date whenever one of its inputs changes (:meth:`Lifecycle.refresh`), so the per-step check
  is one Python bool (``any_blocked``) instead of three array operations.
* ``steps``: how many ``env.step`` calls were made (resets are not steps): ``Pool.env_steps``.

Whichever way ops ran (the general ``send``/``recv``, a fused ``run_all``, an engine's inline
``step_all``, the lean ``take_finished``), the pool books their end here once, with
:meth:`Lifecycle.finish`.

Examples:
    >>> import numpy as np, gymnasium as gym
    >>> from gymnasium.vector import AutoresetMode
    >>> from envhive._buffers import Buffers, BufferSpec
    >>> b = Buffers.allocate(BufferSpec(3, gym.spaces.Discrete(2), gym.spaces.Discrete(2)))
    >>> life = Lifecycle(b, AutoresetMode.NEXT_STEP, [None] * 3)
    >>> life.any_blocked  # nothing reset yet
    True
    >>> life.finish(slice(None), 3, resets=3, done=0)  # every env reset
    >>> b.terminated[1] = True
    >>> life.finish(slice(None), 3, resets=0, done=1)  # a step: env 1 ended
    >>> life.steps, life.ended.tolist(), life.any_blocked
    (3, [False, True, False], False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from envhive._arguments import normalize_seeds
from envhive._autoreset import keeps_ended_state
from envhive._buffers import Buffers
from envhive.errors import ResetNeededError

__all__ = ["Lifecycle"]

Where = slice | list[int] | np.ndarray  # env ids, or slice(None) for every env


class Lifecycle:
    """Each env's place in its life, for one pool (see the module).

    Args:
        buffers: the pool's buffers (the flags a finished step wrote).
        autoreset: the pool's autoreset mode.
        first_seeds: ``make(seed=...)``'s seed of each env's first reset (``None``: unseeded).
    """

    def __init__(self, buffers: Buffers, autoreset: AutoresetMode, first_seeds: Sequence[Any]) -> None:
        n = len(first_seeds)
        self.num_envs = n
        self._buffers = buffers
        self.first_seeds = np.empty(n, dtype=object)
        self.first_seeds[:] = first_seeds
        self.started = np.zeros(n, np.bool_)
        self.ended = np.zeros(n, np.bool_)
        self.broken = np.zeros(n, np.bool_)
        self.blocked = np.ones(n, np.bool_)
        self.any_blocked = True
        self.any_ended = False
        self.num_ended = 0  # np.count_nonzero(self.ended), kept by finish
        self.ended_i8 = self.ended.view(np.int8)  # the same bytes: what planning copies
        self.keeps_ended = keeps_ended_state(autoreset)
        self.disabled = autoreset is AutoresetMode.DISABLED
        self.steps = 0

    def finish(self, ids: Where, count: int, resets: int, done: int | None, failed: bool = False) -> None:
        """Book ``count`` finished ops on ``ids``, ``resets`` of them RESET.

        ``done``: how many of the stepped envs ended their episode, when the caller knows
        (``None``: read the flags). ``failed``: some env of the call raised (the books marked
        it broken). Counts steps, records which envs ended and which are now started and
        unbroken, and refreshes ``blocked`` when any of that changed it.
        """
        if done == 0 and not resets and not self.any_ended:
            # The common step: nothing was reset, nothing ended now or before.
            self.steps += count
            if failed:
                self.refresh()
            return
        self.steps += count - resets
        refresh = failed
        if resets and self.any_blocked:
            # Only RESET reaches an unstarted or broken env, so these hold for all ids. With
            # no env blocked, every env is started and unbroken.
            self.started[ids] = True
            self.broken[ids] = False
            self.first_seeds[ids] = None  # used up: the env is started
            refresh = True
        if self.keeps_ended and self._track_ended(ids, count, done):
            refresh = refresh or self.disabled
        if refresh:
            self.refresh()

    def _track_ended(self, ids: Where, count: int, done: int | None) -> bool:
        """Record which of ``ids`` ended (next_step and disabled); whether some did now."""
        every = count == self.num_envs
        b = self._buffers
        if done:
            if every:
                np.logical_or(b.terminated, b.truncated, out=self.ended)
                self.num_ended = done
                self.any_ended = True
                return True
        elif done == 0:
            # Nothing ended: an env that had ended was reset by this call (or, in disabled
            # mode, cannot have been stepped), so no blocked env changes.
            if self.any_ended:
                if every:
                    self.ended.fill(False)
                    self.num_ended = 0
                else:
                    self.ended[ids] = False
                    self.num_ended = int(np.count_nonzero(self.ended))
                self.any_ended = self.num_ended > 0
            return False
        if every:
            np.logical_or(b.terminated, b.truncated, out=self.ended)
        else:
            self.ended[ids] = b.terminated[ids] | b.truncated[ids]
        # count_nonzero, not .any(): several times cheaper on small arrays.
        self.num_ended = int(np.count_nonzero(self.ended))
        self.any_ended = self.num_ended > 0
        return True

    def refresh(self) -> None:
        """Recompute ``blocked`` from its inputs."""
        np.logical_or(~self.started, self.broken, out=self.blocked)
        if self.disabled:
            self.blocked |= self.ended
        self.any_blocked = bool(np.count_nonzero(self.blocked))

    def break_envs(self, lost: np.ndarray) -> None:
        """Mark the envs in the mask ``lost`` broken (a call cut short gave them up)."""
        self.broken |= lost
        self.refresh()

    def check_steppable(self, ids: np.ndarray, where: Where) -> None:
        """Refuse to step ``ids`` (``where``: the same as an index) if one is blocked, naming
        the first and why."""
        if not self.any_blocked:
            return
        bad = self.blocked[where]
        if not np.count_nonzero(bad):
            return
        i = int(ids[np.argmax(bad)])
        if not self.started[i]:
            why = "has not been reset yet: call reset() (or async_reset()) first"
        elif self.broken[i]:
            why = "raised during its last call: reset it before stepping it again"
        else:
            flag = "terminated" if self._buffers.terminated[i] else "truncated"
            why = (
                f"ended its episode ({flag}) and autoreset is disabled: reset it with "
                "reset(options={'reset_mask': mask}) or async_reset(env_ids) before stepping it"
            )
        raise ResetNeededError(f"env {i} {why}; nothing was stepped")

    def seeds_for(self, seed: Any, ids: np.ndarray) -> list[int | None]:
        """Seeds for resetting ``ids``: the given ones (see :func:`normalize_seeds`), else each
        env's unused ``make()`` seed."""
        if seed is None:
            return self.first_seeds[ids].tolist()  # type: ignore[no-any-return]
        every = normalize_seeds(seed, self.num_envs)
        return [every[i] for i in ids.tolist()]
