"""EnvPool's registry and ``make`` functions, over envhive's pools (``envpool.registration``).

Every id the installed EnvPool registers is here (read from EnvPool's registration modules
without importing envpool), plus the ids envhive runs itself (Atari ``<Game>-v5`` for every
ROM ale-py ships, classic control, MuJoCo gym v5), so the latter work without envpool.
``make_gym``/``make_gymnasium``/``make_dm``/``make(env_type=...)`` take EnvPool's keywords
(config values; ``render_mode``, ``render_width``, ... ; ``from_pixels``) and one of envhive's:
``executor`` (``"auto"``: the engine's own choice; ``"thread"``, ``"process"``, ``"ray"``...).

Examples:
    >>> "CartPole-v1" in list_all_envs()
    True
    >>> make_spec("CartPole-v1").config.max_episode_steps
    500
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Literal, overload

import numpy as np

from envhive.envpool._errors import EnvPoolAssertionError
from envhive.envpool._families import own_ids
from envhive.envpool.python.protocol import DMEnvPool, EnvSpec, GymnasiumEnvPool
from envhive.envs.envpool._ids import asset_base_path, envpool_dir, registrations

__all__ = ["EnvRegistry", "registry", "register", "make", "make_dm", "make_gym", "make_gymnasium",
           "make_spec", "list_all_envs", "base_path", "package_base_path"]

#: EnvPool's package directory and asset root ("" without envpool).
package_base_path = envpool_dir() or ""
base_path = asset_base_path()
_INT32 = 2**31


def _module(import_path: str) -> Any:
    """``envpool.<family>`` -> envhive's module of that family."""
    name = import_path if import_path.startswith("envhive.") else "envhive." + import_path
    return importlib.import_module(name)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise EnvPoolAssertionError(message)


class EnvRegistry:
    """The ids ``make`` accepts: ``specs[id] = (import_path, spec class, kwargs)`` and
    ``envpools[id] = {"dm": (import_path, class), "gymnasium": (import_path, class)}``, as in
    EnvPool."""

    def __init__(self) -> None:
        self.specs: dict[str, tuple[str, str, dict[str, Any]]] = {}
        self.envpools: dict[str, dict[str, tuple[str, str]]] = {}

    def register(self, task_id: str, import_path: str, spec_cls: str, dm_cls: str, gymnasium_cls: str,
                 aliases: Sequence[str] = (), **kwargs: Any) -> None:
        """Register an id (and its aliases) with its family module and classes."""
        kwargs.setdefault("base_path", base_path)
        for alias in (task_id, *aliases):
            _check(alias not in self.specs, f"{alias} is already registered")
            self.specs[alias] = (import_path, spec_cls, dict(kwargs))
            self.envpools[alias] = {"dm": (import_path, dm_cls), "gymnasium": (import_path, gymnasium_cls)}

    @staticmethod
    def _options(kwargs: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        from_pixels = bool(kwargs.pop("from_pixels", False))
        wrapper: dict[str, Any] = {k: kwargs.pop(k) for k in ("render_mode", "render_env_id") if k in kwargs}
        mode = wrapper.get("render_mode")
        if mode not in (None, "rgb_array", "human"):
            raise ValueError("render_mode must be one of None, 'rgb_array', or 'human'")
        if mode == "human":
            raise EnvPoolAssertionError("envhive.envpool renders rgb_array frames only (render_mode='rgb_array')")
        for key in ("render_width", "render_height", "render_camera_id"):
            if key in kwargs and (not from_pixels or mode is not None):
                wrapper[key] = kwargs[key] if from_pixels else kwargs.pop(key)
        if from_pixels:
            kwargs.setdefault("render_width", 84)
            kwargs.setdefault("render_height", 84)
        return from_pixels, wrapper

    def _make_env_spec(self, task_id: str, from_pixels: bool = False, wrapper: dict[str, Any] | None = None,
                       executor: str | None = None, **make_kwargs: Any) -> EnvSpec:
        _check(task_id in self.specs, f"{task_id} is not supported, `envpool.list_all_envs()` may help.")
        import_path, spec_cls, kwargs = self.specs[task_id]
        if from_pixels:
            _check(import_path.startswith("envpool.mujoco."), "from_pixels=True is only supported for MuJoCo tasks.")
            spec_cls = spec_cls.removesuffix("EnvSpec") + "PixelEnvSpec"
        kwargs = {**kwargs, **make_kwargs}
        if (wrapper or {}).get("render_mode") is not None or from_pixels:
            for key in ("render", "enable_render"):
                if key in kwargs and key not in make_kwargs:
                    kwargs[key] = True
        n = kwargs.get("num_envs", 1)
        if "seed" in kwargs:
            seed = kwargs["seed"]
            if isinstance(seed, (Sequence, np.ndarray)) and not isinstance(seed, (str, bytes)):
                _check("env_seed" not in kwargs, "Pass either `seed` as an int or seed list, or `env_seed`, but not both.")
                kwargs["env_seed"], kwargs["seed"] = self._env_seeds(seed, n), 0
            else:
                _check(-_INT32 <= seed < _INT32, f"Seed should be in range of int32, got {seed}")
        if "env_seed" in kwargs:
            kwargs["env_seed"] = self._env_seeds(kwargs["env_seed"], n)
        _check(n >= 1, f"num_envs must be >= 1, got {n}")
        if "batch_size" in kwargs:
            _check(0 <= kwargs["batch_size"] <= n, f"batch_size must be in [0, num_envs={n}], got {kwargs['batch_size']}")
        cls = getattr(_module(import_path), spec_cls)
        config = cls.gen_config(**{k.replace(".", "_"): v for k, v in kwargs.items()})
        return cls(config, _task_id=task_id, _wrapper=wrapper or {}, _executor=executor)  # type: ignore[no-any-return]

    def _env_seeds(self, seed: Any, n: int) -> list[int]:
        values = np.asarray(seed).reshape(-1).tolist() if isinstance(seed, np.ndarray) else list(seed)
        _check(len(values) == n, "When `seed` is a sequence, its length must match `num_envs`, got "
                                 f"len(seed) = {len(values)} and num_envs = {n}")
        for s in values:
            _check(-_INT32 <= int(s) < _INT32, f"Seed should be in range of int32, got {s}")
        return [int(s) for s in values]

    def make(self, task_id: str, env_type: str, **kwargs: Any) -> DMEnvPool | GymnasiumEnvPool:
        """A pool of ``task_id`` with EnvPool's ``env_type`` (``"dm"`` or ``"gymnasium"``)."""
        executor = kwargs.pop("executor", None)
        from_pixels, wrapper = self._options(kwargs)
        kwargs.setdefault("gym_reset_return_info", True)
        if not kwargs["gym_reset_return_info"]:
            raise ValueError("EnvPool's gym API now follows gymnasium reset semantics and always returns "
                             "an info dictionary after resets.")
        _check(task_id in self.specs, f"{task_id} is not supported, `envpool.list_all_envs()` may help.")
        _check(env_type in ("dm", "gymnasium"), f"env_type: expected 'dm' or 'gymnasium', got {env_type!r}")
        spec = self._make_env_spec(task_id, from_pixels, wrapper, executor, **kwargs)
        import_path, cls = self.envpools[task_id][env_type]
        if from_pixels:
            suffix = "DMEnvPool" if env_type == "dm" else "GymnasiumEnvPool"
            cls = cls.removesuffix(suffix) + "Pixel" + suffix
        return getattr(_module(import_path), cls)(spec)  # type: ignore[no-any-return]

    def make_dm(self, task_id: str, **kwargs: Any) -> DMEnvPool:
        """A dm_env pool."""
        return self.make(task_id, "dm", **kwargs)  # type: ignore[return-value]

    def make_gymnasium(self, task_id: str, **kwargs: Any) -> GymnasiumEnvPool:
        """A gymnasium pool."""
        return self.make(task_id, "gymnasium", **kwargs)  # type: ignore[return-value]

    def make_spec(self, task_id: str, **make_kwargs: Any) -> EnvSpec:
        """The spec ``make`` would build the pool from."""
        executor = make_kwargs.pop("executor", None)
        from_pixels, wrapper = self._options(make_kwargs)
        return self._make_env_spec(task_id, from_pixels, wrapper, executor, **make_kwargs)

    def list_all_envs(self) -> list[str]:
        """Every registered id."""
        return list(self.specs)


def _fill(reg: EnvRegistry) -> None:
    """EnvPool's ids when it is installed (its Atari list leaves out ROMs whose bins ALE cannot
    load), else the ids envhive runs itself."""
    for task, r in registrations().items():
        reg.register(task, r.import_path, r.spec_cls, r.dm_cls, r.gymnasium_cls, **dict(r.kwargs))
    if reg.specs:
        return
    for task, (spec_cls, kwargs) in own_ids().items():
        family = "atari" if spec_cls == "AtariEnvSpec" else "classic_control" if spec_cls in (
            "CartPoleEnvSpec", "PendulumEnvSpec", "MountainCarEnvSpec", "MountainCarContinuousEnvSpec",
            "AcrobotEnvSpec") else "mujoco.gym"
        stem = spec_cls.removesuffix("EnvSpec")
        reg.register(task, f"envpool.{family}", spec_cls, f"{stem}DMEnvPool", f"{stem}GymnasiumEnvPool", **kwargs)


registry = EnvRegistry()
register = registry.register
_fill(registry)


@overload
def make(task_id: str, env_type: Literal["dm"], **kwargs: Any) -> DMEnvPool: ...
@overload
def make(task_id: str, env_type: Literal["gym", "gymnasium"], **kwargs: Any) -> GymnasiumEnvPool: ...
@overload
def make(task_id: str, env_type: str, **kwargs: Any) -> DMEnvPool | GymnasiumEnvPool: ...


def make(task_id: str, env_type: str, **kwargs: Any) -> DMEnvPool | GymnasiumEnvPool:
    """EnvPool's ``make``: ``env_type`` is ``"dm"``, ``"gym"`` or ``"gymnasium"``.

    Examples:
        >>> env = make("CartPole-v1", env_type="gym", num_envs=2)
        >>> env.reset()[0].shape
        (2, 4)
        >>> env.close()
    """
    if env_type == "dm":
        return registry.make(task_id, "dm", **kwargs)
    if env_type in ("gym", "gymnasium"):
        return registry.make(task_id, "gymnasium", **kwargs)
    raise EnvPoolAssertionError("env_type should be one of 'dm', 'gym', or 'gymnasium'.")


def make_dm(task_id: str, **kwargs: Any) -> DMEnvPool:
    """A dm_env pool of ``task_id`` (EnvPool's ``make_dm``).

    Examples:
        >>> env = make_dm("CartPole-v1", num_envs=2)
        >>> env.reset().step_type.tolist()
        [0, 0]
        >>> env.close()
    """
    return registry.make_dm(task_id, **kwargs)


def make_gym(task_id: str, **kwargs: Any) -> GymnasiumEnvPool:
    """A gymnasium pool of ``task_id`` (EnvPool's ``make_gym``, the same as ``make_gymnasium``).

    Examples:
        >>> env = make_gym("CartPole-v1", num_envs=2)
        >>> env.action_space
        Discrete(2)
        >>> env.close()
    """
    return make_gymnasium(task_id, **kwargs)


def make_gymnasium(task_id: str, **kwargs: Any) -> GymnasiumEnvPool:
    """A gymnasium pool of ``task_id`` (EnvPool's ``make_gymnasium``).

    Examples:
        >>> env = make_gymnasium("CartPole-v1", num_envs=3, seed=0)
        >>> len(env), env.is_async
        (3, False)
        >>> env.close()
    """
    return registry.make_gymnasium(task_id, **kwargs)


def make_spec(task_id: str, **kwargs: Any) -> EnvSpec:
    """The spec of ``task_id`` with ``kwargs`` (EnvPool's ``make_spec``).

    Examples:
        >>> make_spec("Acrobot-v1").reward_threshold
        -100.0
    """
    return registry.make_spec(task_id, **kwargs)


def list_all_envs() -> list[str]:
    """Every id ``make`` accepts (EnvPool's ``list_all_envs``).

    Examples:
        >>> "Acrobot-v1" in list_all_envs()
        True
    """
    return registry.list_all_envs()


