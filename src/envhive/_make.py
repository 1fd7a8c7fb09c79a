"""``envhive.make``: resolve what to run, how to run it, and build the pool and its frontend."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

import gymnasium as gym
import numpy as np

from envhive._arguments import check_observation_mode
from envhive._autoreset import parse_autoreset
from envhive._memory import check_fits, size_text
from envhive._pool import Pool
from envhive._registry import EnvFactoryFromCallable, resolve_id
from envhive.engines import NativeFactory, TakesBatchSize, class_factory
from envhive.envs.multiagent._parallel import is_parallel_env
from envhive.errors import ConfigError
from envhive.executors import Executor, resolve_executor
from envhive.frontends._flat import FlatAgents
from envhive.frontends._gymnasium import VectorEnv
from envhive.frontends._registry import Wanted, front_end
from envhive.frontends._torch import torch_device

if TYPE_CHECKING:
    from envhive.frontends._dm_env import DmEnv
    from envhive.frontends._pettingzoo import PettingZooEnv
    from envhive.frontends._sb3 import SB3VecEnv
    from envhive.frontends._torchrl import TorchRLEnv

__all__ = ["make"]

#: How a multi-agent pool's agent axis reaches a single-agent front end.
_AGENT_LAYOUTS = (None, "flat")

_INSTANCE_HINT = (
    "got an environment instance ({name}); envhive builds envs itself, inside the executor's "
    "workers, so pass a factory instead: envhive.make(lambda: {name}(...), num_envs=...). "
    "That also lets process workers run envs that cannot be pickled."
)


def _is_env_instance(obj: Any) -> bool:
    """Whether ``obj`` is a built env: a ``gymnasium.Env``, a PettingZoo ``ParallelEnv``, a
    ``dm_env.Environment`` (MeltingPot's substrates) or a ``dmlab2d.Lab2d`` (which cannot even
    be pickled for a worker process)."""
    if isinstance(obj, gym.Env) or is_parallel_env(obj):
        return True
    kind = type(obj)
    if kind.__name__ == "Lab2d" and kind.__module__.startswith("dmlab2d"):
        return True
    return any(c.__module__.startswith("dm_env") and c.__name__ == "Environment" for c in kind.__mro__)


def _instance_name(obj: Any) -> str:
    return type(getattr(obj, "unwrapped", obj)).__name__


def _captured_env(fn: Any) -> tuple[str, gym.Env] | None:
    """A ``gymnasium.Env`` instance that factory ``fn`` closes over or reads from its globals.

    A factory like ``lambda: env`` or ``lambda: Wrapper(env)`` would give several slots the same
    env in one process, but an unpickled copy per worker process. Refusing it up front gives the
    same answer on every executor.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if _is_env_instance(value):
            return name, value
    scope = getattr(fn, "__globals__", {})
    for name in code.co_names:
        if name in scope and _is_env_instance(scope[name]):
            return name, scope[name]
    return None


#: What envhive keeps per env whatever the env: a factory slot, the smallest buffer row
#: (``BufferSpec.bytes_per_env``: 22 B with one-byte spaces) and the pool's per-env records.
_MIN_BYTES_PER_ENV = 48


def _check_factories(factories: Sequence[Any]) -> None:
    """Refuse env instances, non-callables, and one env instance behind two envs."""
    owners: dict[int, int] = {}
    for i, fn in enumerate(factories):
        if _is_env_instance(fn):
            raise ConfigError(f"env {i}: " + _INSTANCE_HINT.format(name=_instance_name(fn)))
        if not callable(fn):
            raise ConfigError(f"env {i}: expected a zero-argument factory, got {type(fn).__name__}")
        captured = _captured_env(fn)
        if captured is None:
            continue
        name, instance = captured
        first = owners.setdefault(id(instance), i)
        if first != i:
            raise ConfigError(
                f"env {i}: its factory uses the same env instance {name!r} as env {first}, so the "
                "envs would not be independent. Build the env inside the factory, "
                "e.g. lambda: MyEnv(...)"
            )


def _built(build: Callable[[], Any], pool: Any) -> Any:
    """``build()`` (a front end over ``pool``); the pool is closed if it refuses."""
    try:
        return build()
    except BaseException:
        pool.close()
        raise


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{what}: expected a positive int, got {value!r}")
    return int(value)


def _wrap(fn: Callable[..., gym.Env], kwargs: dict[str, Any] | None, steps: int | None) -> Callable[[], gym.Env]:
    if not kwargs and steps is None:
        return fn
    return EnvFactoryFromCallable(fn, dict(kwargs or {}), steps)


def _resolve_envs(
    env: Any, num_envs: int, env_kwargs: dict[str, Any] | None, max_episode_steps: int | None
) -> tuple[list[Callable[[], gym.Env]], str]:
    if isinstance(env, str):
        factory, name = resolve_id(env, env_kwargs, max_episode_steps)
        return [factory] * num_envs, name
    if _is_env_instance(env):
        raise ConfigError(_INSTANCE_HINT.format(name=_instance_name(env)))
    if isinstance(env, type) and (native := class_factory(env, env_kwargs, max_episode_steps)) is not None:
        # A family's env class (e.g. a torch batched env): the whole batch is one object on the
        # native executor, batches of one on the other executors.
        return [native] * num_envs, env.__name__
    if isinstance(env, Sequence):
        if not env:
            raise ConfigError("env: expected at least one factory, got an empty list")
        if num_envs not in (1, len(env)):
            raise ConfigError(f"num_envs={num_envs} but {len(env)} factories were given")
        _check_factories(env)
        first = getattr(env[0], "__name__", type(env[0]).__name__)
        name = f"{len(env)} factories" if first == "<lambda>" else f"[{first}, ...]"
        return [_wrap(fn, env_kwargs, max_episode_steps) for fn in env], name
    if callable(env):
        _check_factories([env] * num_envs)
        name = getattr(env, "__name__", type(env).__name__)
        return [_wrap(env, env_kwargs, max_episode_steps)] * num_envs, name
    raise ConfigError(
        f"env: expected a registered id, a zero-argument factory or a list of factories, "
        f"got {type(env).__name__}"
    )


@overload
def make(
    env: str | Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
    num_envs: int = 1,
    *,
    executor: str | Executor = "auto",
    num_workers: int | None = None,
    batch_size: int | None = None,
    autoreset: str | Any = None,
    seed: int | Sequence[int | None] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    copy: bool = True,
    api: Literal["gymnasium"] = ...,
    device: Any = None,
    observation_mode: str | tuple[gym.Space, gym.Space] = "same",
    agent_layout: str | None = None,
) -> VectorEnv: ...


@overload
def make(
    env: str | Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
    num_envs: int = 1,
    *,
    executor: str | Executor = "auto",
    num_workers: int | None = None,
    batch_size: int | None = None,
    autoreset: str | Any = None,
    seed: int | Sequence[int | None] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    copy: bool = True,
    api: Literal["dm_env"],
    device: None = None,
    agent_layout: str | None = None,
) -> DmEnv: ...


@overload
def make(
    env: str | Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
    num_envs: int = 1,
    *,
    executor: str | Executor = "auto",
    num_workers: int | None = None,
    batch_size: int | None = None,
    autoreset: None = None,
    seed: int | Sequence[int | None] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    copy: bool = True,
    api: Literal["torchrl"],
    device: Any = None,
    agent_layout: str | None = None,
) -> TorchRLEnv: ...


@overload
def make(
    env: str | Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
    num_envs: int = 1,
    *,
    executor: str | Executor = "auto",
    num_workers: int | None = None,
    batch_size: int | None = None,
    autoreset: None = None,
    seed: int | Sequence[int | None] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    copy: bool = True,
    api: Literal["sb3"],
    device: None = None,
    agent_layout: str | None = None,
) -> SB3VecEnv: ...


@overload
def make(
    env: str | Callable[[], Any] | Sequence[Callable[[], Any]],
    num_envs: int = 1,
    *,
    executor: str | Executor = "auto",
    num_workers: int | None = None,
    batch_size: int | None = None,
    autoreset: None = None,
    seed: int | Sequence[int | None] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    copy: bool = True,
    api: Literal["pettingzoo"],
    device: None = None,
) -> PettingZooEnv: ...


def make(
    env: str | Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
    num_envs: int = 1,
    *,
    executor: str | Executor = "auto",
    num_workers: int | None = None,
    batch_size: int | None = None,
    autoreset: str | Any = None,
    seed: int | Sequence[int | None] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    copy: bool = True,
    api: str = "gymnasium",
    device: Any = None,
    observation_mode: str | tuple[gym.Space, gym.Space] = "same",
    agent_layout: str | None = None,
) -> VectorEnv | DmEnv | TorchRLEnv | SB3VecEnv | PettingZooEnv | Pool:
    r"""Make a batch of ``num_envs`` envs, stepped as one.

    Args:
        env: an id registered with envhive or gymnasium (``"CartPole-v1"``, ``"Ant-v5"``), a
            zero-argument factory, a list of factories (one env each; spaces must match), or a
            :class:`envhive.engines.TorchBatchedEnv` subclass (built as
            ``cls(num_envs, **env_kwargs)``: the whole batch in tensors).
        num_envs: how many envs (ignored for a list of factories, except that it must match).
        executor: ``"auto"`` (the best available; ``repr`` says which), a registered name such
            as ``"serial"``, or an :class:`envhive.executors.Executor` instance.
        num_workers: workers for parallel executors (``None``: the executor decides).
        batch_size: envs per ``recv()`` in async use; ``None`` means ``num_envs``.
        autoreset: ``"next_step"`` (the default: gymnasium's), ``"same_step"`` or ``"disabled"``
            (or a ``gymnasium.vector.AutoresetMode``). See ``docs/semantics.md``.
        seed: seeds for the first reset: an int ``s`` gives env ``i`` the seed ``s + i``;
            a list gives one seed per env. An int also seeds ``action_space`` sampling.
        env_kwargs: keyword arguments for each env (``gymnasium.make`` kwargs for an id).
        max_episode_steps: a time limit (truncation) per episode.
        copy: ``True`` returns fresh arrays; ``False`` returns views into the pool's buffers,
            valid until the next call, so that no step allocates arrays.
        api: the front end: ``"gymnasium"`` (an :class:`envhive.VectorEnv`, the default),
            ``"torchrl"`` (a ``torchrl.envs.EnvBase``: ``envhive.frontends.TorchRLEnv``; the
            ``torchrl`` extra), ``"sb3"`` (a Stable-Baselines3 ``VecEnv``:
            ``envhive.frontends.SB3VecEnv``; the ``sb3`` extra; it manages resets itself, so
            ``autoreset`` stays unset), or
            ``"dm_env"`` (an :class:`envhive.frontends.DmEnv`: batched ``dm_env.TimeStep``\ s),
            or ``"pettingzoo"`` (multi-agent envs: the pool as one PettingZoo ``ParallelEnv``,
            ``envhive.frontends.PettingZooEnv``; autoreset stays unset: it is disabled), or
            ``"pool"`` (no front end: the :class:`envhive.frontends.Pool` itself, whose
            ``Batch`` has every layout, e.g. the agent axis in ``Batch.agents``).
        device: ``None`` (numpy arrays) or a torch device (``"cpu"``, ``"cuda:0"``, a
            ``torch.device``): observations, rewards, flags and numeric infos are then
            tensors there, zero-copy views of the pool's buffers on the CPU and one transfer
            per batch from pinned memory on an accelerator; actions may be tensors on any
            device. Needs the ``torch`` extra.
        observation_mode: gymnasium's: ``"same"`` (every env's observation space equal),
            ``"different"`` (spaces of one shape and dtype that differ in bounds, e.g.
            ``Box(0, 1)`` and ``Box(0, 2)``: ``observation_space`` is then gymnasium's
            ``batch_differing_spaces`` of them, ``single_observation_space`` env 0's) or a
            tuple ``(batched space, single space)`` that every env's space must match in shape
            and dtype. ``api="gymnasium"`` only.
        agent_layout: for multi-agent envs (a PettingZoo ``ParallelEnv`` or a dm_env of
            player lists from the factory, a ``dmlab2d/<level>`` id; docs/multiagent.md):
            ``"flat"`` folds the agents into the batch axis (rows are (env, agent) pairs,
            ``info["active"]`` masks padding rows) for the single-agent front ends; with
            ``api="pettingzoo"`` the pool is one ``ParallelEnv`` instead.

    Returns:
        An :class:`envhive.VectorEnv` (or the front end ``api`` names).

    Raises:
        envhive.UnknownEnvError: the id is not registered (close matches are suggested).
        envhive.ConfigError: any other argument is not acceptable.
        envhive.SpaceMismatchError: the envs' spaces differ.

    Examples:
        >>> import envhive
        >>> env = envhive.make("CartPole-v1", num_envs=8, seed=0)
        >>> env  # doctest: +ELLIPSIS
        envhive.VectorEnv('CartPole-v1', num_envs=8, executor='serial (auto)', why='cheap step (...)', autoreset='next_step')
        >>> obs, info = env.reset()
        >>> obs.shape
        (8, 4)
        >>> env.close()

        Envs whose observation spaces differ in bounds only (gymnasium's observation modes):

        >>> from gymnasium.spaces import Box, Discrete
        >>> from envhive.testing import ZooEnv
        >>> env = envhive.make([lambda: ZooEnv(Box(0, 1, (2,)), Discrete(2)),
        ...                     lambda: ZooEnv(Box(0, 5, (2,)), Discrete(2))],
        ...                    observation_mode="different")
        >>> env.observation_space.high.tolist()
        [[1.0, 1.0], [5.0, 5.0]]
        >>> env.close()
    """
    front = front_end(api)
    if agent_layout not in _AGENT_LAYOUTS:
        raise ConfigError(f"agent_layout: expected None or 'flat', got {agent_layout!r}")
    check_observation_mode(observation_mode)
    autoreset, device = front.settle(autoreset, copy, device, agent_layout, observation_mode)
    if device is not None:
        # A torch device, unless the front end hands out arrays of its own (api="jax"): then
        # the pool keeps numpy arrays and the front end moves them.
        device = torch_device(device) if front.device_of is None else front.device_of(device)
    pool_device = device if front.device_of is None else None
    mode = parse_autoreset("next_step" if autoreset is None else autoreset)
    num_envs = _positive_int(num_envs, "num_envs")
    # Refused before anything per env is made (the factories list first of all).
    check_fits(num_envs * _MIN_BYTES_PER_ENV, f"num_envs={num_envs:,} (at least "
               f"{_MIN_BYTES_PER_ENV} B per env for envhive's own records, before the envs)",
               _MIN_BYTES_PER_ENV)
    if num_workers is not None:
        num_workers = _positive_int(num_workers, "num_workers")
    if max_episode_steps is not None:
        max_episode_steps = _positive_int(max_episode_steps, "max_episode_steps")
    if env_kwargs is not None and not isinstance(env_kwargs, dict):
        raise ConfigError(f"env_kwargs: expected a dict, got {type(env_kwargs).__name__}")
    factories, name = _resolve_envs(env, num_envs, env_kwargs, max_episode_steps)
    if isinstance(factories[0], TakesBatchSize):
        # An engine built for the pool's batch size (EnvPool's async mode); before the memory
        # check, which counts what that engine holds.
        factories[0].engine_batch_size = batch_size
    if isinstance(factories[0], NativeFactory):
        # What a compiled id's envs take, wherever they run, checked before anything is built
        # or reserved (an engine's arrays, shared blocks, frame stacks): the one place for
        # every engine kind and executor.
        per_env = factories[0].bytes_per_env(len(factories))
        check_fits(len(factories) * per_env, f"{factories[0]!r} x {len(factories):,} "
                   f"({size_text(per_env)} per env: its state and its rows of the pool's buffers)", per_env)
    if pool_device is not None and isinstance(factories[0], NativeFactory):
        # A batch that can live on a device (a torch batched env) is built where its results
        # are wanted (unless env_kwargs say): on the native executor its buffers then live
        # there too (no copies per step). Engines of host arrays ignore it.
        factories[0].engine_device = pool_device
    runner, auto = resolve_executor(executor, len(factories), num_workers, factories)
    pool: Any = Pool(factories, runner, autoreset=mode, batch_size=batch_size, seed=seed, copy=copy,
                device=pool_device, observation_mode=observation_mode)
    if agent_layout == "flat":
        pool = _built(lambda: FlatAgents(pool), pool)
    return front.wrap(pool, Wanted(name, device, seed, auto, observation_mode, agent_layout))
