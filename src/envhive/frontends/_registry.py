"""The front ends ``envhive.make(api=...)`` builds, each declaring what it needs of the pool.

A front end is one :class:`FrontEnd` entry: the autoreset mode it runs the pool in (the ones
that manage resets themselves), whether it takes ``copy=False``, a ``device``, an agent axis
(``agent_layout``) and observation spaces that differ between envs, the modules it needs,
and how it is built from the pool. ``make`` checks the call against the entry before anything
is built (:meth:`FrontEnd.settle`), builds the pool, then the front end (:meth:`FrontEnd.wrap`,
which closes the pool if the front end cannot be built). A new front end is one entry here.

Examples:
    >>> sorted(FRONT_ENDS)
    ['dm_env', 'envpool', 'envpool_dm', 'gymnasium', 'jax', 'pettingzoo', 'pool', 'sb3', 'torchrl']
    >>> FRONT_ENDS["sb3"].autoreset
    'same_step'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from envhive._extras import require
from envhive.errors import ConfigError

__all__ = ["FRONT_ENDS", "FrontEnd", "Wanted", "front_end"]


@dataclass(frozen=True)
class Wanted:
    """What the ``make`` call asked for, as the front end is built: the env's ``name``, the
    ``device`` (settled), the ``seed``, whether ``executor="auto"`` chose the executor
    (``auto``), the ``observation_mode`` and the ``agent_layout``."""

    name: str
    device: Any
    seed: Any
    auto: bool
    observation_mode: Any
    agent_layout: str | None


@dataclass(frozen=True)
class FrontEnd:
    """One front end: what it needs of the pool and how it is built from one.

    Attributes:
        name: the ``api=`` value.
        build: ``(pool, wanted) -> front end``.
        autoreset: the mode the front end runs the pool in (it manages resets itself);
            ``None``: the user's ``autoreset`` (default ``next_step``).
        autoreset_why: why a user's ``autoreset`` is refused (with ``autoreset`` set).
        copy_why: why ``copy=False`` is refused (``None``: accepted).
        device_why: why a ``device`` is refused (``None``: accepted).
        default_device: the device when none is given (``None``: numpy).
        agent_layouts: whether ``agent_layout="flat"`` may fold agents into the batch axis
            first (the front end then sees a pool without an agent axis).
        observation_modes: whether it batches observation spaces that differ between envs.
        requires: ``(module, extra)`` pairs imported before anything is built.
        seeds_action_space: ``make(seed=int)`` also seeds the front end's ``action_space``.
        device_of: the front end's own devices (``api="jax"``: jax devices): ``make(device=)``
            is settled with it instead of as a torch device, and the pool keeps numpy arrays;
            ``None``: torch devices.
    """

    name: str
    build: Callable[[Any, Wanted], Any]
    autoreset: str | None = None
    autoreset_why: str = ""
    copy_why: str | None = None
    device_why: str | None = None
    default_device: str | None = None
    agent_layouts: bool = True
    observation_modes: bool = False
    requires: tuple[tuple[str, str], ...] = ()
    seeds_action_space: bool = False
    device_of: Callable[[Any], Any] | None = None

    def settle(self, autoreset: Any, copy: bool, device: Any, agent_layout: Any,
               observation_mode: Any) -> tuple[Any, Any]:
        """Check a ``make`` call against this front end's needs (before anything is built);
        returns the ``(autoreset, device)`` the pool is built with."""
        api = f"api={self.name!r}"
        if self.autoreset is not None and autoreset is not None:
            raise ConfigError(f"autoreset: {self.autoreset_why}; leave autoreset unset, got {autoreset!r}")
        if not self.agent_layouts and agent_layout is not None:
            raise ConfigError(
                f"agent_layout: {api} lays out the agents itself; leave agent_layout unset, "
                f"got {agent_layout!r}"
            )
        if not self.observation_modes and observation_mode != "same":
            raise ConfigError(
                f"observation_mode: only api='gymnasium' and api='jax' batch observation spaces "
                f"that differ between envs (their observation_space); {api} describes one env's space, so "
                f"leave observation_mode='same', got {observation_mode!r}"
            )
        if device is not None and self.device_why is not None:
            raise ConfigError(f"device: {self.device_why}; leave device unset")
        if not copy and self.copy_why is not None:
            raise ConfigError(f"copy=False: {self.copy_why}; leave copy=True")
        for module, extra in self.requires:
            require(module, extra, api)
        return (autoreset if self.autoreset is None else self.autoreset,
                device if device is not None else self.default_device)

    def wrap(self, pool: Any, wanted: Wanted) -> Any:
        """The front end over ``pool``; the pool is closed if it cannot be built."""
        try:
            front = self.build(pool, wanted)
        except BaseException:
            pool.close()
            raise
        seed = wanted.seed
        if self.seeds_action_space and isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            front.action_space.seed(int(seed))
        return front


def _gymnasium(pool: Any, w: Wanted) -> Any:
    from envhive.frontends._gymnasium import VectorEnv

    return VectorEnv(pool, name=w.name, chosen_by_auto=w.auto, device=w.device,
                     observation_mode=w.observation_mode)


def _dm_env(pool: Any, w: Wanted) -> Any:
    from envhive.frontends._dm_env import DmEnv

    return DmEnv(pool, name=w.name)


def _torchrl(pool: Any, w: Wanted) -> Any:
    from envhive.frontends._torchrl import TorchRLEnv

    return TorchRLEnv(pool, device=w.device, name=w.name)


def _sb3(pool: Any, w: Wanted) -> Any:
    from envhive.frontends._sb3 import SB3VecEnv

    return SB3VecEnv(pool, name=w.name)


def _envpool_api(api: str) -> Callable[[Any, Wanted], Any]:
    """The builder of EnvPool's API (``api="envpool"`` or ``"envpool_dm"``): envhive.envpool's
    pool classes over the pool. envhive.envpool is named, not imported: it sits above
    ``make`` (its specs build pools with ``make``), so this registry, which ``make`` imports,
    must not import it."""

    def build(pool: Any, w: Wanted) -> Any:
        return importlib.import_module("envhive.envpool._pools").from_pool(pool, w.name, api)

    return build


def _jax(pool: Any, w: Wanted) -> Any:
    from envhive.jax._front import JaxVectorEnv

    return JaxVectorEnv(pool, name=w.name, chosen_by_auto=w.auto, device=w.device,
                        observation_mode=w.observation_mode)


def _jax_device(device: Any) -> Any:
    from envhive.jax._front import jax_device

    return jax_device(device)


def _pettingzoo(pool: Any, w: Wanted) -> Any:
    from envhive.frontends._pettingzoo import PettingZooEnv

    return PettingZooEnv(pool, name=w.name)


#: Every front end, by its ``api=`` name.
FRONT_ENDS: dict[str, FrontEnd] = {
    fe.name: fe
    for fe in (
        FrontEnd("gymnasium", _gymnasium, observation_modes=True, seeds_action_space=True),
        # gymnasium's layout with jax arrays (zero-copy on the CPU), and xla() for every env
        # (an ordered io_callback where the pool cannot be lent to XLA): envhive.jax.
        FrontEnd(
            "jax", _jax, observation_modes=True, seeds_action_space=True,
            copy_why="jax arrays are immutable, and views of the pool's buffers change with every step",
            default_device="cpu", device_of=_jax_device, requires=(("jax", "jax"),),
        ),
        # The pool's neutral Batch, in any layout (Batch.agents): no front end at all.
        FrontEnd("pool", lambda pool, w: pool),
        FrontEnd(
            "dm_env", _dm_env,
            device_why="dm_env time steps hold numpy arrays; use api='gymnasium' for tensors",
        ),
        # TorchRL's data contract (terminal obs under "next", reset obs at the root, one reset
        # per ended episode) is met by the front end itself, on a same_step pool.
        FrontEnd(
            "torchrl", _torchrl, autoreset="same_step",
            autoreset_why="the TorchRL front end manages resets itself (no transition crosses "
                          "an episode boundary)",
            copy_why="TorchRL rollouts keep every step's tensors", default_device="cpu",
            requires=(("torchrl", "torchrl"), ("tensordict", "torchrl")),
        ),
        # SB3's step contract (reset obs returned, terminal obs in
        # info["terminal_observation"]) is same_step's, laid out by the front end.
        FrontEnd(
            "sb3", _sb3, autoreset="same_step",
            autoreset_why="the SB3 front end resets ended envs itself, in the same step (the "
                          "reset observation is returned, the terminal one is in "
                          "info['terminal_observation'])",
            copy_why="SB3 algorithms keep observations across steps",
            device_why="SB3 VecEnvs hand out numpy arrays (SB3 moves them to its policy's "
                       "device itself)",
            requires=(("stable_baselines3", "sb3"),), seeds_action_space=True,
        ),
        # EnvPool's API (envhive.envpool's pool classes): an env is reset by its next send
        # after its episode ended, the next_step rule; numpy arrays; its own player rows.
        *(FrontEnd(
            name, build, autoreset="next_step",
            autoreset_why=f"api={name!r} is EnvPool's API, which resets an env on its next send "
                          "after its episode ended (next_step)",
            device_why=f"api={name!r} hands out numpy arrays, as EnvPool does", agent_layouts=False,
            requires=(("dm_env", "dm_env"),) if name == "envpool_dm" else (),
        ) for name, build in (("envpool", _envpool_api("envpool")), ("envpool_dm", _envpool_api("envpool_dm")))),
        # A ParallelEnv's agents never come back once done: the pool runs with autoreset
        # disabled, numpy arrays and its own agent layout.
        FrontEnd(
            "pettingzoo", _pettingzoo, autoreset="disabled",
            autoreset_why="api='pettingzoo': a ParallelEnv's agents never come back once done, "
                          "so the pool runs with autoreset disabled",
            device_why="api='pettingzoo' hands out numpy arrays", agent_layouts=False,
        ),
    )
}


def front_end(api: Any) -> FrontEnd:
    """The front end ``api`` names; a :class:`~envhive.errors.ConfigError` if none.

    Examples:
        >>> front_end("dm_env").device_why is not None
        True
    """
    fe = FRONT_ENDS.get(api) if isinstance(api, str) else None
    if fe is None:
        raise ConfigError(f"api: expected one of {sorted(FRONT_ENDS)}, got {api!r}")
    return fe
