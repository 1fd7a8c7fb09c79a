"""What runners and engines report to the pool: env properties and finished ops.

Kept apart from executors and engines (both import it; it imports neither), so a compiled
engine, a worker core and the pool can all speak it without import cycles.

Examples:
    >>> done = Completion(env_ids=[0, 1], infos={1: {"lives": 3}})
    >>> more = Completion(env_ids=[2])
    >>> done.extend(more)
    >>> done.env_ids
    [0, 1, 2]
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from envhive._agents import agent_ids_of
from envhive.errors import EnvWorkerError

__all__ = ["EnvFactory", "EnvProps", "Completion", "env_error", "env_props", "safe_str"]

EnvFactory = Callable[[], gym.Env]


@dataclass
class EnvProps:
    """What the pool needs to know about one built env."""

    observation_space: gym.Space
    action_space: gym.Space
    metadata: dict[str, Any]
    render_mode: str | None
    spec: Any = None
    #: The possible agents of a multi-agent env (``envhive._agents``); ``()``: no agent axis.
    agents: tuple[str, ...] = ()



@dataclass
class Completion:
    """What ``Executor.recv`` reports: which envs finished their op, and their side data.

    Attributes:
        env_ids: envs whose op finished, in completion order.
        infos: the non-empty info dicts (the reset info after a RESET, or after a STEP_RESET
            that ended an episode; the step info otherwise).
        final_infos: for STEP_RESET ops that ended an episode: the step's info (maybe empty).
        errors: envs whose op raised; their slots hold no valid transition.
        ended: how many of the envs stepped ended their episode (``terminated`` or
            ``truncated`` set), when the executor counted them (``None``: the pool reads
            the flags).
    """

    env_ids: list[int] = field(default_factory=list)
    infos: dict[int, dict[str, Any]] = field(default_factory=dict)
    final_infos: dict[int, dict[str, Any]] = field(default_factory=dict)
    errors: dict[int, EnvWorkerError] = field(default_factory=dict)
    ended: int | None = None
    #: An engine's per-env info columns (``_infos.InfoTable``) holding the infos of
    #: ``table_ids`` instead of ``infos``/``final_infos`` (the engine keeps those rows until
    #: they are handed out).
    info_table: Any = None
    table_ids: list[int] = field(default_factory=list)

    def add_tabled(self, ids: list[int], ended: int, table: Any) -> None:
        """Report envs ``ids`` finished, ``ended`` of them ending their episode, their infos in
        ``table`` (an engine's ``InfoTable``, read when their rows are handed out)."""
        if not self.env_ids:
            self.ended = ended
        elif self.ended is not None:
            self.ended += ended
        self.env_ids.extend(ids)
        self.info_table = table
        self.table_ids.extend(ids)

    def extend(self, other: Completion) -> None:
        """Append another completion's results to this one."""
        if self.env_ids or self.errors:
            self.ended = None if self.ended is None or other.ended is None else self.ended + other.ended
        else:
            self.ended = other.ended
        self.env_ids.extend(other.env_ids)
        if other.table_ids:
            self.info_table = other.info_table
            self.table_ids.extend(other.table_ids)
        self.infos.update(other.infos)
        self.final_infos.update(other.final_infos)
        self.errors.update(other.errors)



def safe_str(err: BaseException) -> str:
    """``str(err)``, even for an exception whose ``__str__`` raises.

    Examples:
        >>> class Odd(Exception):
        ...     def __str__(self):
        ...         raise RuntimeError
        >>> safe_str(Odd())
        '<Odd whose str() raised>'
    """
    try:
        return str(err)
    except Exception:
        return f"<{type(err).__name__} whose str() raised>"


def env_error(call: str, err: Exception, env_id: int) -> EnvWorkerError:
    """The error reported for env ``env_id`` whose ``call`` (``"step"``, ``"reset"``, or a
    text ending in ``)``) raised ``err``; call it inside the ``except`` block (it records the
    traceback)."""
    what = call if call.endswith(")") else f"{call}()"
    return EnvWorkerError(
        f"{what} raised {type(err).__name__}: {safe_str(err)}",
        env_id=env_id,
        worker_traceback=traceback.format_exc(),
        cause_type=type(err).__name__,
    )



def env_props(env: gym.Env) -> EnvProps:
    """Read what the pool needs from a built env."""
    return EnvProps(
        observation_space=env.observation_space,
        action_space=env.action_space,
        metadata=dict(env.metadata),
        render_mode=env.render_mode,
        spec=env.spec,
        agents=agent_ids_of(env),
    )
