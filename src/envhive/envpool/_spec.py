"""EnvPool's specs: ``make_spec``, ``env.spec``, per-family spec classes (``AtariEnvSpec``).

An EnvPool spec is a config (a namedtuple of the family's config keys, ``gen_config``) plus
the arrays of its state and action (``state_array_spec``, ``action_array_spec``), seen three
ways: EnvPool's own :class:`ArraySpec`\\ s, dm_env specs (``observation_spec()``,
``action_spec()``) and gymnasium spaces (``observation_space``, ``action_space``).

Here a spec also knows which envhive engine runs it (its :class:`~envhive.envpool._routes.Route`,
decided from the config) and takes its arrays from there: the engine's own spaces and info
keys for envhive's engines, EnvPool's spec for EnvPool's engine. Each family's spec class is a
subclass of :class:`EnvSpec` with the family's config keys and defaults.

Examples:
    >>> from envhive.envpool.classic_control import CartPoleEnvSpec
    >>> config = CartPoleEnvSpec.gen_config(num_envs=2, max_episode_steps=500)
    >>> spec = CartPoleEnvSpec(config)
    >>> spec.config.num_envs, spec.action_space
    (2, Discrete(2))
"""

from __future__ import annotations

import pprint
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from envhive.envpool._arrays import ArraySpec, dm_spec, gym_space, nest, space_arrays, to_namedtuple
from envhive.errors import ConfigError

__all__ = ["ArraySpec", "EnvSpec", "spec_class", "space_arrays", "dm_spec", "gym_space", "to_namedtuple"]

class EnvSpec:
    """Base of the spec classes: a config plus the arrays of its state and action.

    A family's class (``AtariEnvSpec``, ``DmcCheetahEnvSpec``, ...) is made by
    :func:`spec_class`; an instance is built from a config tuple (``cls.gen_config(...)``) as
    in EnvPool. ``_route`` decides which engine runs it; the arrays come from there.
    """

    _config_keys: list[str] = []
    _default_config_values: tuple[Any, ...] = ()
    gen_config: Any = None
    #: The family (``"atari"``, ``"mujoco.dmc"``); set by :func:`spec_class`.
    family: str = ""

    def __init__(self, config: Sequence[Any], *, _task_id: str | None = None,
                 _wrapper: dict[str, Any] | None = None, _executor: str | None = None,
                 _built: Any = None) -> None:
        # envhive's: the id it was made for, EnvPool's render keywords, the executor asked for,
        # a pool built already (api="envpool").
        self._task_id, self._wrapper, self._executor = _task_id, dict(_wrapper or {}), _executor
        self._built = _built
        values = tuple(config)
        if "batch_size" in self._config_keys and "num_envs" in self._config_keys:
            # EnvPool's spec reads batch_size 0 as num_envs (sync mode) and says so
            b, n = self._config_keys.index("batch_size"), self._config_keys.index("num_envs")
            if len(values) == len(self._config_keys) and values[b] == 0:
                values = (*values[:b], values[n], *values[b + 1:])
        if len(values) != len(self._config_keys):
            raise ConfigError(f"{type(self).__name__}: expected {len(self._config_keys)} config values, "
                              f"got {len(values)}")
        self._config_values = values
        c = self.config
        if int(c.num_envs) < 1:
            raise ConfigError(f"{type(self).__name__}: num_envs must be >= 1, got {c.num_envs}")
        if not 0 <= int(c.batch_size) <= int(c.num_envs):
            raise ConfigError(f"{type(self).__name__}: batch_size must be in [0, num_envs={c.num_envs}], "
                             f"got {c.batch_size}")
        from envhive.envpool._routes import route_of

        self._route = route_of(self)
        self._arrays = self._route.arrays()

    # -- EnvPool's spec API -----------------------------------------------------------------
    @property
    def config(self) -> Any:
        """The config this spec was made with (a namedtuple of the family's keys)."""
        return self.gen_config(*self._config_values)

    @property
    def reward_threshold(self) -> float | None:
        """The id's reward threshold, ``None`` if it has none."""
        return getattr(self.config, "reward_threshold", None)

    @property
    def _state_keys(self) -> list[str]:
        return [k for k, _ in self._arrays.state]

    @property
    def _action_keys(self) -> list[str]:
        return [k for k, _ in self._arrays.action]

    @property
    def state_array_spec(self) -> dict[str, ArraySpec]:
        """Every state array: ``name -> ArraySpec``."""
        return dict(self._arrays.state)

    @property
    def action_array_spec(self) -> dict[str, ArraySpec]:
        """Every action array: ``name -> ArraySpec`` (``env_id``, ``players.env_id``, ``action``)."""
        return dict(self._arrays.action)

    def observation_spec(self) -> Any:
        """dm_env specs of the observation and infos, as EnvPool's ``State`` namedtuple."""
        flat = {k.split(":", 1)[1] if ":" in k else k: dm_spec(k.replace(":", ".").split(".")[-1], v, False)
                for k, v in self._arrays.state if k.startswith(("obs", "info"))}
        return to_namedtuple("State", nest(flat))

    def action_spec(self) -> Any:
        """The dm_env spec of the action."""
        name, spec = self._arrays.action[-1]
        return dm_spec(name, spec, True)

    @property
    def observation_space(self) -> gym.Space:
        """One env's observation space (gymnasium)."""
        return self._arrays.observation_space

    @property
    def action_space(self) -> gym.Space:
        """One env's action space (gymnasium)."""
        return self._arrays.action_space

    gymnasium_observation_space = observation_space
    gymnasium_action_space = action_space

    def __repr__(self) -> str:
        return f"{type(self).__name__}{pprint.pformat(self.config)[6:]}"


def spec_class(name: str, family: str, keys: Sequence[str], defaults: Sequence[Any]) -> type[EnvSpec]:
    """A family's spec class: ``name`` with config ``keys`` and their ``defaults``.

    Examples:
        >>> cls = spec_class("XEnvSpec", "x", ["num_envs", "batch_size"], [1, 0])
        >>> cls.gen_config(num_envs=3)
        Config(num_envs=3, batch_size=0)
    """
    fields = [k.replace(".", "_") for k in keys]
    config = namedtuple("Config", fields, defaults=tuple(defaults))  # type: ignore[misc]
    return type(name, (EnvSpec,), {"_config_keys": list(keys), "_default_config_values": tuple(defaults),
                                   "gen_config": config, "family": family,
                                   "__module__": f"envhive.envpool.{family}"})
