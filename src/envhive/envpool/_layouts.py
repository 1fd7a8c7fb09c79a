"""How ``envhive.envpool`` lays out a pool's :class:`~envhive._batch.Batch` as EnvPool does.

* infos (both APIs): ``env_id`` and ``players.env_id`` (int32) first, then the spec's info keys
  in its order, nested at their dots (``info["players"]["env_id"]``), then ``elapsed_step``;
  no gymnasium ``_key`` masks. Values are the engine's info columns in the spec's dtypes
  (a key an op did not report reads 0); ``elapsed_step`` is counted here for engines that do
  not report it (the kernels, MuJoCo), and Acrobot's ``state`` (its two joint angles) is read
  from the observation's cosines and sines.
* gym: ``(obs, reward (float32), terminated, truncated, info)``; ``(obs, info)`` for resets.
* dm: ``TimeStep(step_type (int32), reward (float32), discount (float32), observation)``,
  the observation EnvPool's ``State`` namedtuple of the observation and the infos. The
  discount is EnvPool's: its engine's own value; else ``0.0`` at the end of an episode
  (termination or time limit, as EnvPool's gym-style families give it) and, with Atari's
  ``zero_discount_on_life_loss``, also where the ``lives`` info changed.
* multi-player envs: one row per player present (the agent axis' active rows, env by env),
  ``info["players"]["env_id"]`` saying whose.

Examples:
    >>> Counters(2, elapsed=True).elapsed is not None
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envhive._batch import Batch
from envhive._infos import Column
from envhive._ops import RESET
from envhive._spaces import tree_map
from envhive.envpool._arrays import nest, to_namedtuple
from envhive.envpool._routes import Arrays, Route

__all__ = ["Counters", "Layouter"]


class Counters:
    """What the front end keeps per env: ``elapsed_step`` (when it counts it) and the last
    ``lives`` (for ``zero_discount_on_life_loss``)."""

    def __init__(self, n: int, elapsed: bool, lives: bool = False) -> None:
        self.elapsed = np.zeros(n, np.int32) if elapsed else None
        self.lives = np.zeros(n, np.int64) if lives else None
        self._uniform: Any = None  # the last read-only (uniform) op array seen

    def update(self, b: Batch, lives: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Advance for batch ``b``; returns its rows' ``(elapsed_step, life lost)``."""
        ids, op = b.env_ids, b.op
        elapsed = lost = None
        counted = self.elapsed
        # Rows that all ran one op share a read-only op array (Batch.op): no mask to build.
        if op is not self._uniform:
            if op.flags.writeable:
                uniform = False
            else:
                self._uniform, uniform = op, True
        else:
            uniform = True
        uniform = uniform and b.has_final is None
        first = None if uniform else b.is_reset
        if counted is not None:
            if ids.size == counted.size:  # every env, in env order (step, reset, wait)
                if first is None:
                    if op[0] == RESET:
                        counted.fill(0)
                    else:
                        np.add(counted, 1, out=counted)
                else:
                    counted += 1
                    counted[first] = 0
                elapsed = counted.copy()
            else:
                if first is None:
                    first = b.is_reset
                elapsed = np.where(first, 0, counted[ids] + 1).astype(np.int32)
                counted[ids] = elapsed
        if self.lives is not None and lives is not None:
            if first is None:
                first = b.is_reset
            lost = ~first & (self.lives[ids] != lives)
            self.lives[ids] = lives
        return elapsed, lost


class Layouter:
    """Lays out batches of one spec's pool (see the module docstring)."""

    def __init__(self, arrays: Arrays, route: Route, n: int) -> None:
        self.arrays, self.route = arrays, route
        self.specs = dict(arrays.state)
        self.players = arrays.players
        self.counters = Counters(n, route.elapsed, route.life_loss)
        self._ids32 = np.arange(n, dtype=np.int32)
        self.obs_names = [k.split(":", 1)[1] if ":" in k else k for k, _ in arrays.state
                          if k == "obs" or k.startswith("obs:")]
        # Dotted info names other than players.env_id (multi-player ids): nest() every call.
        self._nested = any("." in name for name in arrays.info_names) or route.built is not None
        self._n = n
        # Per info name: its dtype and the shape of one row (a key an op did not report is 0).
        self._plan = []
        for name in arrays.info_names:
            spec = self.specs[f"info:{name}"]
            self._plan.append((name, np.dtype(spec.dtype), tuple(s for s in spec.shape if s != -1)))

    # -- infos ---------------------------------------------------------------------------------
    def infos(self, b: Batch) -> tuple[dict[str, Any], np.ndarray | None]:
        """The batch's infos, flat (dotted keys, in the spec's order, ``elapsed_step`` last),
        and which rows lost a life (Atari with ``zero_discount_on_life_loss``)."""
        ids = b.env_ids
        rows = ids.size
        env_id = self._ids32.copy() if rows == self._n else ids.astype(np.int32)
        flat: dict[str, Any] = {"env_id": env_id, "players.env_id": env_id.copy()}
        cols = b.infos
        route = self.route
        if route.built is not None:  # a pool built elsewhere: its infos as they come
            flat.update({k: c.values for k, c in cols.items() if isinstance(c, Column) and k != "elapsed_step"})
        for name, dtype, shape in self._plan:
            col = cols.get(name)
            if col is not None and type(col.values) is np.ndarray:
                values = col.values
                flat[name] = values if values.dtype == dtype else values.astype(dtype)
            elif name == "state" and route.acrobot:  # Acrobot's joint angles, from the observation
                obs = b.obs
                flat[name] = np.stack([np.arctan2(obs[:, 1], obs[:, 0]), np.arctan2(obs[:, 3], obs[:, 2])],
                                      axis=1).astype(np.float32)
            else:
                flat[name] = np.zeros((rows, *shape), dtype)
        elapsed, lost = self.counters.update(b, flat.get("lives") if route.life_loss else None)
        if elapsed is None:
            col = cols.get("elapsed_step")
            elapsed = (col.values.astype(np.int32) if col is not None and type(col.values) is np.ndarray
                       else np.zeros(rows, np.int32))
        flat["elapsed_step"] = elapsed
        return flat, lost

    # -- multi-player rows -----------------------------------------------------------------------
    def player_rows(self, b: Batch, flat: dict[str, Any]) -> tuple[Any, np.ndarray, dict[str, Any]]:
        """A multi-player batch as EnvPool's player rows: ``(obs, reward, infos)``."""
        assert b.agents is not None
        er, pr = np.nonzero(np.asarray(b.agents.active))
        obs = tree_map(lambda a: a[er, pr], b.obs)
        reward = b.reward[er, pr]
        rows = dict(flat)
        rows["players.env_id"] = b.env_ids[er].astype(np.int32)
        for key, value in flat.items():
            if key.startswith("players.") and key != "players.env_id" and np.ndim(value) >= 2:
                rows[key] = value[er, pr]
        return obs, reward, rows

    # -- gym -----------------------------------------------------------------------------------
    def gym(self, b: Batch, reset: bool) -> Any:
        """``(obs, info)`` or ``(obs, reward, terminated, truncated, info)``."""
        flat, _ = self.infos(b)
        obs, reward = b.obs, b.reward
        if self.players > 1:
            obs, reward, flat = self.player_rows(b, flat)
        elapsed = flat.pop("elapsed_step")
        info = nest(flat) if self._nested else {"env_id": flat.pop("env_id"),
                                                "players": {"env_id": flat.pop("players.env_id")}, **flat}
        info["elapsed_step"] = elapsed
        if reset:
            return obs, info
        # The pool hands out copies (copy=True): the flags are the caller's already.
        return obs, reward.astype(np.float32), b.terminated, b.truncated, info

    # -- dm --------------------------------------------------------------------------------------
    def _state(self, obs: Any, flat: dict[str, Any]) -> Any:
        values: dict[str, Any] = {}
        for key, _ in self.arrays.state:
            if key == "obs":
                values["obs"] = obs
            elif key.startswith("obs:"):
                path = key.replace("obs:", "").replace(":", ".")
                node = obs
                for part in path.split("."):
                    node = node[part]
                values[path] = node
            elif key.startswith("info:"):
                values[key[5:]] = flat[key[5:]]
        return to_namedtuple("State", nest(values))

    def dm(self, b: Batch) -> Any:
        """EnvPool's ``TimeStep``."""
        import dm_env

        flat, lost = self.infos(b)
        obs, reward = b.obs, b.reward
        step_type = b.step_type.astype(np.int32)
        if self.route.envpool:
            col = b.infos.get("discount")
            discount = (col.values.astype(np.float32) if isinstance(col, Column) and isinstance(col.values, np.ndarray)
                        else np.ones(b.env_ids.size, np.float32))
        else:
            discount = np.where(b.terminated | b.truncated, 0.0, 1.0).astype(np.float32)
            if lost is not None:
                discount[lost] = 0.0
        if self.players > 1:
            er, _ = np.nonzero(np.asarray(b.agents.active))  # type: ignore[union-attr]
            obs, reward, flat = self.player_rows(b, flat)
            discount = discount[er]
        return dm_env.TimeStep(step_type=step_type, reward=reward.astype(np.float32), discount=discount,
                               observation=self._state(obs, flat))
