"""dmlab2d substrates (MeltingPot's engine) as MeltingPot-style player lists, built by id.

The ``dmlab2d`` wheel ships levels (``commons_harvest``, ``clean_up``, ``chase_eat``, ...).
:class:`Lab2dPlayers` builds one level's ``dmlab2d.Lab2d`` and serves it as a ``dm_env`` with
MeltingPot's layout: ``observation_spec()``, ``action_spec()`` and each time step's observation
are lists with one entry per player, rewards a per-player array. A player's observation is a
dict of the level's ``"<player>.<NAME>"`` observations (``RGB``, ``POSITION``, ``LAYER``, ...,
minus ``REWARD``, which is the player's reward; ``world_obs=True`` adds the ``WORLD.*``
arrays), its action a vector of the level's ``"<player>.<name>"`` discrete actions (a
``MultiDiscrete``). A level with no per-player names (``chase_eat``) has one player, who sees
the ``WORLD.*`` arrays and gets the level's reward.

``Lab2d`` objects cannot be pickled: build them where they run, from a factory or an id
(``envhive.make("dmlab2d/commons_harvest", env_kwargs={"num_players": 7})``); the ids'
factories do. A MeltingPot substrate plugs in the same way: a factory returning
``meltingpot.substrate.build(name, roles=...)`` (a dm_env of player lists) is wrapped by
:class:`~envhive.envs.multiagent._players.PlayersAgents`, as ``Lab2dPlayers`` is.

Examples:
    >>> env = Lab2dPlayers("commons_harvest", num_players=2)
    >>> len(env.action_spec()), sorted(env.observation_spec()[0])
    (2, ['LAYER', 'POSITION', 'RGB'])
    >>> ts = env.reset()
    >>> ts.observation[1]["RGB"].shape, ts.reward.tolist()
    ((88, 88, 3), [0.0, 0.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envhive._extras import require

__all__ = ["Lab2dPlayers", "LEVELS", "dmlab2d_substrate"]

#: The levels of the dmlab2d wheel registered as ``dmlab2d/<level>`` ids.
LEVELS = ("commons_harvest", "clean_up", "chase_eat", "running_with_scissors", "pushbox")

_SKIP = ("REWARD",)


class Lab2dPlayers:
    """One dmlab2d level as a dm_env of player lists (see the module docstring).

    Args:
        level: the level's name in the dmlab2d wheel.
        num_players: players (levels that take ``numPlayers``; ``None``: the level's default).
        settings: more level settings (strings), as ``dmlab2d.Lab2d`` takes them.
        world_obs: add the level's ``WORLD.*`` arrays to every player's observation.
    """

    def __init__(self, level: str, num_players: int | None = None,
                 settings: dict[str, Any] | None = None, world_obs: bool = False) -> None:
        dmlab2d = require("dmlab2d", "dmlab2d", "dmlab2d substrates")
        import dm_env
        from dmlab2d import runfiles_helper

        self._dm_env = dm_env
        config = {"levelName": level, **{k: str(v) for k, v in (settings or {}).items()}}
        if num_players is not None:
            config["numPlayers"] = str(num_players)
        self.level = level
        self._lab = dmlab2d.Lab2d(runfiles_helper.find(), config)
        lab = self._lab
        names = list(lab.observation_names())
        prefixes = sorted({n.split(".", 1)[0] for n in names if n.split(".", 1)[0].isdigit()}, key=int)
        world = [n for n in names if n.startswith("WORLD.")]
        self._numeric = {n: np.dtype(lab.observation_spec(n)["dtype"]) for n in names}
        self._numeric = {n: d for n, d in self._numeric.items() if d.kind in "biuf"}
        if prefixes:
            self._players = prefixes
            self._obs_names = [
                {n.split(".", 1)[1]: n for n in names
                 if n.startswith(p + ".") and n.split(".", 1)[1] not in _SKIP and n in self._numeric}
                for p in prefixes
            ]
            self._reward_names: list[str] | None = [f"{p}.REWARD" for p in prefixes]
            actions = list(lab.action_discrete_names())
            self._act_index = [[actions.index(a) for a in actions if a.startswith(p + ".")] for p in prefixes]
        else:  # one player who sees the world
            self._players = ["1"]
            self._obs_names = [{n.split(".", 1)[1]: n for n in world if n in self._numeric}]
            self._reward_names = None
            self._act_index = [list(range(len(lab.action_discrete_names())))]
            world = []
        if world_obs:
            for table in self._obs_names:
                table.update({n: n for n in world if n in self._numeric})
        self._actions = np.zeros(len(lab.action_discrete_names()), np.int32)
        self._rng = np.random.RandomState()
        self._episode = 0

    def seed(self, seed: int) -> None:
        """Seed the episodes that follow (each reset draws its episode's seed from it)."""
        self._rng = np.random.RandomState(seed % 2**32)

    def observation_spec(self) -> list[dict[str, Any]]:
        specs = self._dm_env.specs
        return [
            {k: specs.Array(tuple(self._lab.observation_spec(n)["shape"]), self._numeric[n], name=k)
             for k, n in table.items()}
            for table in self._obs_names
        ]

    def action_spec(self) -> list[Any]:
        lab, specs = self._lab, self._dm_env.specs
        names = list(lab.action_discrete_names())
        out = []
        for index in self._act_index:
            bounds = [lab.action_discrete_spec(names[j]) for j in index]
            out.append(specs.BoundedArray((len(index),), np.int32, [b["min"] for b in bounds],
                                          [b["max"] for b in bounds], name="actions"))
        return out

    def _timestep(self, kind: Any, reward: float, discount: float | None) -> Any:
        lab = self._lab
        obs = [{k: np.asarray(lab.observation(n)) for k, n in table.items()} for table in self._obs_names]
        if self._reward_names is None:
            rewards = np.array([reward], np.float64)
        else:
            rewards = np.array([float(lab.observation(n)) for n in self._reward_names])
        return self._dm_env.TimeStep(kind, rewards, discount, obs)

    def reset(self) -> Any:
        self._lab.start(episode=self._episode, seed=int(self._rng.randint(0, 2**31)))
        self._episode += 1
        return self._timestep(self._dm_env.StepType.FIRST, 0.0, None)

    def step(self, actions: list[Any]) -> Any:
        for index, act in zip(self._act_index, actions):
            self._actions[index] = act
        self._lab.act_discrete(self._actions)
        status, reward = self._lab.advance()
        import dmlab2d

        if status != dmlab2d.RUNNING:
            return self._timestep(self._dm_env.StepType.LAST, reward, 0.0)
        return self._timestep(self._dm_env.StepType.MID, reward, 1.0)

    def close(self) -> None:
        self._lab = None  # type: ignore[assignment]


def dmlab2d_substrate(level: str, num_players: int | None = None,
                      settings: dict[str, Any] | None = None, world_obs: bool = False) -> Any:
    """The factory of the ``dmlab2d/<level>`` ids: a :class:`Lab2dPlayers` with an agent axis."""
    from envhive.envs.multiagent._players import PlayersAgents

    return PlayersAgents(Lab2dPlayers(level, num_players, settings, world_obs))
