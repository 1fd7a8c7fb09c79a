"""How an EnvPool pool's arrays map onto envhive's buffers, read from EnvPool's spec.

An EnvPool pool speaks in flat named arrays: ``_recv()`` returns one array per state key
(``obs`` or ``obs:<path>``, ``info:<name>``, ``reward``, ``done``, ``trunc``, ``discount``,
``elapsed_step``, ...), one row per env of the call (per player for keys whose spec shape
starts with ``-1`` in multi-player envs), and ``_send`` takes one array per action key
(``env_id``, ``players.env_id``, ``action``). :class:`Layout` says which array goes where:

* observation keys become the leaves of the observation space (EnvPool's own
  ``observation_space``: one key is the space itself, several a ``Dict`` by their dotted
  paths), written into the pool's observation buffers by env id;
* ``terminated = done & ~trunc``, ``truncated = trunc`` (EnvPool's gymnasium API);
* every ``info:`` key except ``env_id`` and ``players.env_id`` (which the pool's front ends
  give themselves), plus ``elapsed_step`` and ``discount`` (EnvPool's dm_env discount, which
  its families define differently), becomes an info column;
* the action is EnvPool's single action key (every EnvPool 1.2 family has exactly one).

Multi-player envs (``max_num_players > 1``) run on envhive's agent axis: agents
``player_0 ... player_{P-1}``, each player row placed at its env and ``players.id``.

Examples:
    >>> Layout.obs_path("obs:ems.x1"), Layout.obs_path("obs")
    (('ems', 'x1'), ())
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from envhive.errors import ConfigError

__all__ = ["Layout", "POOL_KEYS"]

#: State keys every EnvPool spec has that are not infos.
POOL_KEYS = ("done", "trunc", "reward", "discount", "step_type", "elapsed_step")
#: Info keys the pool's front ends give themselves (envhive's env id is EnvPool's).
_ID_KEYS = ("info:env_id", "info:players.env_id")


def _leaf(tree: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        tree = tree[part]
    return tree


class Layout:
    """The mapping between one EnvPool spec's arrays and envhive's buffers (module docstring).

    Args:
        spec: an EnvPool ``EnvSpec`` (``envpool.make_spec(...)``), or any object with its
            ``_state_keys``, ``state_array_spec``, ``_action_keys``, ``action_array_spec``,
            ``observation_space``, ``action_space`` and ``config``.
    """

    def __init__(self, spec: Any) -> None:
        keys = list(spec._state_keys)
        arrays = spec.state_array_spec
        self.index = {k: j for j, k in enumerate(keys)}
        self.players = int(getattr(spec.config, "max_num_players", 1))
        #: State keys whose rows are players (spec shape starting with -1).
        self.per_player = {k for k in keys if list(arrays[k].shape[:1]) == [-1]} if self.players > 1 else set()
        self.obs_keys = [(self.index[k], self.obs_path(k), k in self.per_player)
                         for k in keys if k == "obs" or k.startswith("obs:")]
        self.info_keys = [(self.index[k], k.removeprefix("info:"), k in self.per_player) for k in keys
                          if k.startswith("info:") and k not in _ID_KEYS]
        self.info_keys += [(self.index[k], k, False) for k in ("elapsed_step", "discount")]
        self.info_specs = {name: arrays[keys[j]] for j, name, _ in self.info_keys}
        for k in ("done", "trunc", "reward"):
            if k not in self.index:
                raise ConfigError(f"EnvPool spec {type(spec).__name__}: no {k!r} state key")
        self.done, self.trunc, self.reward = self.index["done"], self.index["trunc"], self.index["reward"]
        self.env_id = self.index["info:env_id"]
        self.player_env = self.index.get("info:players.env_id")
        self.player_id = self.index.get("info:players.id")
        #: Turn-based games (pgx): one action per env, the current player's (EnvPool's pgx envs
        #: read the env's first action row; Go refuses more than one).
        self.turn_based = self.players > 1 and "info:current_player" in self.index
        actions = list(spec._action_keys)
        if len(actions) != 3 or actions[:2] != ["env_id", "players.env_id"]:
            raise ConfigError(f"EnvPool spec {type(spec).__name__}: expected the action keys env_id, "
                              f"players.env_id and one action, got {actions}")
        self.action_dtype = np.dtype(spec.action_array_spec[actions[2]].dtype)
        #: One player's spaces (EnvPool's own).
        self.player_observation_space: gym.Space = spec.observation_space
        self.player_action_space: gym.Space = spec.action_space
        self.agents = tuple(f"player_{k}" for k in range(self.players)) if self.players > 1 else ()
        if self.agents:
            self.observation_space = batch_space(self.player_observation_space, self.players)
            self.action_space = batch_space(self.player_action_space, self.players)
        else:
            self.observation_space, self.action_space = self.player_observation_space, self.player_action_space

    @staticmethod
    def obs_path(key: str) -> tuple[str, ...]:
        """Where an observation key's array lives in the observation tree.

        Examples:
            >>> Layout.obs_path("obs:position")
            ('position',)
        """
        # EnvPool's rule for its observation space: the "obs:" prefix goes, ":" and "." nest.
        return () if key == "obs" else tuple(key.replace("obs:", "").replace(":", ".").split("."))

    def obs_leaves(self, obs: Any) -> list[tuple[int, Any, bool]]:
        """``(state index, buffer leaf, per player)`` for each observation key, given the
        pool's observation buffers ``obs`` (a single key is the whole buffer)."""
        if len(self.obs_keys) == 1:
            j, _, player = self.obs_keys[0]
            return [(j, obs, player)]
        return [(j, _leaf(obs, path), player) for j, path, player in self.obs_keys]

    def info_arrays(self, n: int) -> dict[str, np.ndarray]:
        """Zeroed info columns for ``n`` envs (per-player infos get an agent axis)."""
        out: dict[str, np.ndarray] = {}
        for _, name, player in self.info_keys:
            spec = self.info_specs[name]
            shape = [s for s in spec.shape if s != -1]
            lead = (n, self.players) if player else (n,)
            out[name] = np.zeros((*lead, *shape), np.dtype(spec.dtype))
        return out
