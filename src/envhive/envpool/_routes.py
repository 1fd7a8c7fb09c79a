"""Which envhive engine runs an EnvPool spec, decided from its config: a :class:`Route`.

* envhive's own engine (:data:`~envhive.envpool._families.OWN`) when it has the id with the
  same meaning and every config value the spec was given has a counterpart there: Atari
  ``envhive/<Game>-v5`` (EnvPool's options under their own names), the classic-control kernels,
  the MuJoCo gym v5 envs (gymnasium's keyword names; a non-default value of an option envhive's
  env lacks, e.g. ``frame_stack`` or EnvPool's own ``xml_file``, goes to EnvPool's engine).
  Atari gets EnvPool's ``ram`` info (``ram_info``) and renders on whichever executor runs it
  (the native engine included). ``render_mode`` runs the other families' env classes on the
  thread executor, which render (the compiled kernels do not): classic control as gymnasium's
  own envs (bit-identical to the kernels), MuJoCo as envhive's ``MujocoEnv``.
* otherwise EnvPool's own engine, ``envpool/<id>`` (needs the ``envpool`` extra).

A route also builds the pool (:meth:`Route.pool`) and describes its arrays (:meth:`Route.arrays`):
envhive's engines are probed once per configuration (one env built, reset and stepped: its
spaces and info keys), EnvPool's from EnvPool's own spec.

Examples:
    >>> from envhive.envpool.classic_control import CartPoleEnvSpec
    >>> route_of(CartPoleEnvSpec(CartPoleEnvSpec.gen_config(max_episode_steps=500))).engine_id
    'envhive/CartPole-v1'
"""

from __future__ import annotations

import functools
import importlib.util
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from envhive.envpool._arrays import ArraySpec, gym_space, space_arrays
from envhive.envpool._families import COMMON, OWN
from envhive.envs.envpool._engine import WRAPPER_KEYS
from envhive.errors import ConfigError

if TYPE_CHECKING:
    from envhive.envpool._spec import EnvSpec

__all__ = ["Route", "Arrays", "route_of", "WRAPPER_KEYS"]

#: Config values envhive sets itself for an engine.
_POOL_KEYS = ("num_envs", "batch_size", "num_threads", "seed", "env_seed")
_INT32 = (-(2**31), 2**31 - 1)


@dataclass
class Arrays:
    """A spec's arrays: EnvPool's state and action keys with their specs, the spaces of one
    env (of one player), the info names the front ends lay out, and the players per env."""

    state: list[tuple[str, ArraySpec]]
    action: list[tuple[str, ArraySpec]]
    observation_space: gym.Space
    action_space: gym.Space
    info_names: list[str]
    players: int = 1


@dataclass
class Route:
    """How one spec runs (see the module docstring).

    Attributes:
        engine_id: the id given to ``envhive.make``.
        env_kwargs: its keyword arguments.
        max_episode_steps: the time limit given to ``envhive.make`` (``None``: in env_kwargs).
        executor: ``"auto"`` or the executor a render route needs.
        envpool: EnvPool's engine (seeds go in ``env_kwargs``; its ``discount`` info is the
            dm discount).
        elapsed: the front end counts ``elapsed_step`` (the engine has no such info).
        life_loss: Atari's ``zero_discount_on_life_loss`` (the dm discount is 0 when the
            ``lives`` info changes).
        acrobot: the front end adds Acrobot's ``state`` info (its two angles).
        render: a render route (``render(env_ids)`` works).
        task_id: EnvPool's id (EnvPool's engine).
    """

    engine_id: str
    env_kwargs: dict[str, Any]
    max_episode_steps: int | None
    executor: str = "auto"
    envpool: bool = False
    elapsed: bool = False
    life_loss: bool = False
    acrobot: bool = False
    render: bool = False
    task_id: str | None = None
    wrapper: dict[str, Any] = field(default_factory=dict)
    #: A pool built already (``envhive.make(..., api="envpool")``): the route only lays it out.
    built: Any = None

    def arrays(self) -> Arrays:
        """The spec's arrays on this route."""
        if self.built is not None:
            return _pool_arrays(self.built)
        if self.envpool:
            return _envpool_arrays(self.task_id or "", _freeze(self.env_kwargs))
        return _own_arrays(self.engine_id, _freeze(self.env_kwargs), self.max_episode_steps, self.acrobot)

    def pool(self, num_envs: int, batch_size: int, seeds: list[int], num_threads: int, executor: str | None) -> Any:
        """The envhive pool of this route (next_step autoreset, EnvPool's)."""
        from envhive._make import make as envhive_make

        make: Any = envhive_make  # api="pool": the pool itself (no overload names it)
        if self.built is not None:
            return self.built

        kwargs = dict(self.env_kwargs)
        seed: Any = None
        if self.envpool:
            kwargs["env_seed"] = list(seeds)
        else:
            if any(s < 0 for s in seeds):
                raise ConfigError(f"{self.engine_id}: envhive's engines take seeds >= 0 (gymnasium's), "
                                  f"got {min(seeds)}")
            seed = list(seeds)
        return make(
            self.engine_id, num_envs, executor=executor or self.executor, batch_size=batch_size,
            num_workers=num_threads or None, seed=seed, env_kwargs=kwargs or None,
            max_episode_steps=self.max_episode_steps, api="pool",
        )


class _FrozenDict(tuple):  # type: ignore[type-arg]
    """A dict config value (ViZDoom's, e.g.) as a hashable tuple of its sorted items."""


def _freeze(kwargs: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """``kwargs`` hashable (for the per-configuration caches): lists as tuples, dicts as
    :class:`_FrozenDict`; :func:`_thaw` gives them back."""

    def frozen(v: Any) -> Any:
        if isinstance(v, dict):
            return _FrozenDict(sorted((k, frozen(x)) for k, x in v.items()))
        return tuple(frozen(x) for x in v) if isinstance(v, list) else v

    return tuple(sorted((k, frozen(v)) for k, v in kwargs.items()))


def _thaw(v: Any) -> Any:
    """A frozen value as EnvPool takes it: dicts back, tuples as lists."""
    if isinstance(v, _FrozenDict):
        return {k: _thaw(x) for k, x in v}
    return [_thaw(x) for x in v] if isinstance(v, tuple) else v


def _envpool_installed() -> bool:
    return importlib.util.find_spec("envpool") is not None


# ---------------------------------------------------------------------------- arrays
_FIXED = [
    ("info:env_id", ArraySpec(np.int32, [], _INT32)),
    ("info:players.env_id", ArraySpec(np.int32, [-1], _INT32)),
    ("elapsed_step", ArraySpec(np.int32, [], _INT32)),
    ("done", ArraySpec(np.bool_, [], (False, True))),
    ("reward", ArraySpec(np.float32, [-1], (-math.inf, math.inf))),
    ("discount", ArraySpec(np.float32, [-1], (0.0, 1.0))),
    ("step_type", ArraySpec(np.int32, [], (0, 2))),
    ("trunc", ArraySpec(np.bool_, [], (False, True))),
]


def _action_arrays(space: gym.Space) -> list[tuple[str, ArraySpec]]:
    (_, spec), = space_arrays(space, "action")
    if isinstance(space, gym.spaces.Discrete):  # EnvPool's discrete actions are int32
        spec = ArraySpec(np.int32, [-1], (spec.minimum, spec.maximum), ([], []), True)
    else:
        spec.shape = [-1, *spec.shape]
    return [("env_id", ArraySpec(np.int32, [], _INT32)), ("players.env_id", ArraySpec(np.int32, [-1], _INT32)),
            ("action", spec)]


def _info_spec(value: Any) -> ArraySpec:
    """A scalar info is one value per player (EnvPool's shape ``[-1]``), an array its shape."""
    arr = np.asarray(value)
    shape = list(arr.shape) or [-1]
    if arr.dtype.kind in "iu":
        info = np.iinfo(arr.dtype)
        return ArraySpec(arr.dtype, shape, (int(info.min), int(info.max)))
    if arr.dtype.kind == "b":
        return ArraySpec(arr.dtype, shape, (False, True))
    return ArraySpec(arr.dtype, shape, (-math.inf, math.inf))


@functools.lru_cache(maxsize=64)
def _own_arrays(engine_id: str, kwargs: tuple[tuple[str, Any], ...], max_steps: int | None,
                acrobot: bool) -> Arrays:
    """Probe envhive's engine: one env built, reset and stepped (spaces, info keys)."""
    from envhive._registry import resolve_id

    factory, _ = resolve_id(engine_id, {k: v for k, v in kwargs}, max_steps)
    env = factory()
    try:
        _, reset_info = env.reset(seed=0)
        space: Any = env.action_space
        zero = np.zeros(space.shape, space.dtype)
        *_, step_info = env.step(zero if env.action_space.contains(zero) else env.action_space.sample())
        obs_space, act_space = env.observation_space, env.action_space
    finally:
        env.close()
    infos = {k: v for k, v in {**reset_info, **step_info}.items() if k != "elapsed_step"}
    state = list(_FIXED) + space_arrays(obs_space, "obs")
    state += [(f"info:{k}", _info_spec(v)) for k, v in infos.items()]
    if acrobot:
        state.append(("info:state", ArraySpec(np.float32, [2], (-math.inf, math.inf))))
    names = [k.removeprefix("info:") for k, _ in state if k.startswith("info:")][2:]
    return Arrays(state, _action_arrays(act_space), obs_space, act_space, names)


def _pool_arrays(pool: Any) -> Arrays:
    """The arrays of a pool built elsewhere: its spaces; its infos as they come."""
    state = list(_FIXED) + space_arrays(pool.observation_space, "obs")
    return Arrays(state, _action_arrays(pool.action_space), pool.observation_space, pool.action_space, [])


@functools.lru_cache(maxsize=64)
def _envpool_arrays(task_id: str, kwargs: tuple[tuple[str, Any], ...]) -> Arrays:
    """EnvPool's own spec of ``task_id`` with config values ``kwargs``."""
    from envhive.envs.envpool._engine import spec_config
    from envhive.envs.envpool._real import envpool_module, real_envpool

    config = spec_config({k: _thaw(v) for k, v in kwargs})
    ep = envpool_module()
    with real_envpool():
        real = ep.make_spec(task_id, **config)

    def convert(items: Any) -> list[tuple[str, ArraySpec]]:
        out = []
        for key, s in items:
            low, high = np.asarray(s.minimum), np.asarray(s.maximum)
            bounds = (s.minimum, s.maximum) if low.ndim == 0 and high.ndim == 0 else (0, 0)
            element = (low.tolist(), high.tolist()) if low.ndim or high.ndim else ([], [])
            out.append((key, ArraySpec(s.dtype, list(s.shape), bounds, element, bool(s.is_discrete))))
        return out

    state = convert(real.state_array_spec.items())
    action = convert(real.action_array_spec.items())
    names = [k.removeprefix("info:") for k, _ in state if k.startswith("info:")][2:]
    players = int(getattr(real.config, "max_num_players", 1))
    act_space = gym_space(action[-1][1], True) if len(action) == 3 else real.action_space
    return Arrays(state, action, real.observation_space, act_space, names, players)


# ---------------------------------------------------------------------------- routing
def _changed(config: Any, family: dict[str, Any], registered: dict[str, Any]) -> dict[str, Any]:
    """The config values that differ from the id's registration (its defaults otherwise)."""
    expect = {**COMMON, **family, **registered}
    return {k: getattr(config, k) for k in family if getattr(config, k) != expect.get(k)}


def _envpool_route(spec: EnvSpec, task_id: str, config: Any, why: str) -> Route:
    if not _envpool_installed():
        raise ConfigError(f"envhive.envpool: {why}, which only EnvPool's engine runs: pip install "
                          "'envhive[envpool]'")
    kwargs = {k.replace(".", "_"): v for k, v in zip(spec._config_keys, config) if k not in _POOL_KEYS}
    kwargs = {k: v for k, v in kwargs.items() if k != "max_num_players" or v != 1}
    kwargs.update(getattr(spec, "_wrapper", {}))
    if type(spec).__name__.endswith("PixelEnvSpec"):  # EnvPool's pixel observations
        kwargs["from_pixels"] = True
    return Route(f"envpool/{task_id}", kwargs, None, envpool=True, task_id=task_id,
                 render=bool(getattr(spec, "_wrapper", {}).get("render_mode")))


def route_of(spec: EnvSpec) -> Route:
    """The route of ``spec`` (see the module docstring)."""
    config = spec.config
    built = getattr(spec, "_built", None)
    if built is not None:
        return Route(getattr(spec, "_task_id", None) or "pool", {}, None, elapsed=True, built=built)
    cls = type(spec).__name__
    task_id = getattr(spec, "_task_id", None) or _task_of(cls, config)
    fam = OWN.get(cls)
    if fam is None:
        return _envpool_route(spec, task_id, config, f"{task_id} has no envhive engine")
    wrapper = dict(getattr(spec, "_wrapper", {}))
    render = wrapper.get("render_mode")
    steps = int(config.max_episode_steps)
    if fam.family == "atari":
        return _atari_route(spec, task_id, config, steps, render)
    if fam.family == "classic_control":
        return _classic_route(spec, cls, task_id, config, steps, render)
    return _mujoco_route(spec, cls, task_id, config, steps, render)


def _task_of(cls: str, config: Any) -> str:
    """EnvPool's id for a spec made from a config tuple (``AtariEnvSpec(config)``): the
    registered id of that class whose registered values the config has."""
    from envhive.envpool.registration import registry

    best = None
    for task, (_, spec_cls, kwargs) in registry.specs.items():
        if spec_cls != cls:
            continue
        best = best or task
        if all(getattr(config, k.replace(".", "_"), v) == v for k, v in kwargs.items() if k != "base_path"):
            return task
    if best is None:
        raise ConfigError(f"envhive.envpool: no registered id uses {cls}")
    return best


def _atari_route(spec: EnvSpec, task_id: str, config: Any, steps: int, render: Any) -> Route:
    from envhive.envs.atari._options import game_name, rom_ids

    if config.task not in rom_ids():
        return _envpool_route(spec, task_id, config, f"the ROM {config.task!r} is not shipped by ale-py")
    options = {k: getattr(config, k) for k in OWN["AtariEnvSpec"].config if k != "task"}
    options["game"] = config.task
    options["max_episode_steps"] = steps
    options["envpool_crop"] = True  # EnvPool resizes the top 210 lines of taller screens
    options["envpool_seeding"] = True  # a seed gives EnvPool's episodes
    options["ram_info"] = True  # EnvPool's info["ram"]
    if render:
        options["render_mode"] = render
    return Route(f"envhive/{game_name(config.task)}-v5", options, None, "auto", elapsed=False,
                 life_loss=bool(config.zero_discount_on_life_loss), render=bool(render), task_id=task_id)


_CLASSIC = {"CartPoleEnvSpec": "CartPole-v1", "PendulumEnvSpec": "Pendulum-v1",
            "MountainCarEnvSpec": "MountainCar-v0", "MountainCarContinuousEnvSpec": "MountainCarContinuous-v0",
            "AcrobotEnvSpec": "Acrobot-v1"}


def _classic_route(spec: EnvSpec, cls: str, task_id: str, config: Any, steps: int, render: Any) -> Route:
    if cls == "PendulumEnvSpec" and config.version != 1:
        return _envpool_route(spec, task_id, config, "Pendulum-v0 (EnvPool's version 0 dynamics)")
    gym_id = _CLASSIC[cls]
    acrobot = cls == "AcrobotEnvSpec"
    if render:  # gymnasium's own env renders; the kernel is bit-identical to it
        return Route(gym_id, {"render_mode": render}, steps, "thread", elapsed=True, acrobot=acrobot,
                     render=True, task_id=task_id)
    return Route(f"envhive/{gym_id}", {}, steps, elapsed=True, acrobot=acrobot, task_id=task_id)


#: MuJoCo config keys with the same name and meaning in envhive's (gymnasium's v5) envs.
_MUJOCO_SAME = ("frame_skip", "forward_reward_weight", "ctrl_cost_weight", "contact_cost_weight",
                "healthy_reward", "terminate_when_unhealthy", "exclude_current_positions_from_observation",
                "reset_noise_scale")
#: What has no effect on the dynamics (a render camera) or is the threshold.
_MUJOCO_FREE = ("gymnasium_v5_render_camera", "reward_threshold", "max_episode_steps")


def _mujoco_route(spec: EnvSpec, cls: str, task_id: str, config: Any, steps: int, render: Any) -> Route:
    fam = OWN[cls]
    v5_id, registered = next(iter(fam.ids.items()))
    changed = _changed(config, fam.config, registered)
    other = sorted(k for k in changed if k not in _MUJOCO_SAME and k not in _MUJOCO_FREE)
    if other:
        return _envpool_route(spec, task_id, config, f"{task_id} with {', '.join(other)} set")
    if task_id != v5_id and not task_id.endswith("-v5"):
        return _envpool_route(spec, task_id, config, f"{task_id} (envhive compiles the v5 envs)")
    kwargs = {k: v for k, v in changed.items() if k in _MUJOCO_SAME}
    executor = "auto"
    if render:
        kwargs["render_mode"], executor = render, "thread"
        for key, name in (("render_width", "width"), ("render_height", "height")):
            if key in spec._wrapper:  # type: ignore[attr-defined]
                kwargs[name] = spec._wrapper[key]  # type: ignore[attr-defined]
    return Route(f"envhive/{v5_id}", kwargs, steps, executor, elapsed=True, render=bool(render), task_id=task_id)
