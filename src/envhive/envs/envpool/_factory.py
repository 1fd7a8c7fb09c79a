"""The ``"envpool"`` engine kind's factory: ``envpool/<id>`` for every EnvPool id.

Called, it builds one :class:`~envhive.envs.envpool._single.EnvPoolEnv` (serial, thread,
process and Ray executors); ``native_engine`` builds an
:class:`~envhive.envs.envpool._engine.EnvPoolEngine` of the whole batch in one EnvPool pool,
which ``executor="auto"`` picks. ``env_kwargs`` are EnvPool's ``make`` keywords (its config
values, ``render_mode`` ...); ``num_envs``, ``batch_size`` and ``num_threads`` are envhive's
to decide (``make(num_envs=, num_workers=)``), ``max_episode_steps`` is EnvPool's config value.

Examples:
    >>> from envhive.engines import compiled_env
    >>> f = envpool_factory(compiled_env("envpool/CartPole-v1"), {}, 50)  # doctest: +SKIP
    >>> f.kwargs  # doctest: +SKIP
    {'max_episode_steps': 50}
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive.engines._registry import CompiledEnv
from envhive.envs.envpool._engine import WRAPPER_KEYS, spec_config
from envhive.envs.envpool._real import envpool_module, real_envpool
from envhive.errors import ConfigError, UnexpectedKeywordError

if TYPE_CHECKING:
    from envhive.engines import Engine, NativeFactory
    from envhive.envs.envpool._single import EnvPoolEnv

__all__ = ["EnvPoolFactory", "envpool_factory", "bench_peers", "check_kwargs"]

#: What envhive decides for an EnvPool engine (``make(num_envs=, batch_size=, num_workers=)``).
_ENVHIVE_KEYS = ("num_envs", "batch_size", "num_threads")


def check_kwargs(task_id: str, kwargs: dict[str, Any]) -> Any:
    """Refuse keywords EnvPool's spec for ``task_id`` does not take (with close matches), and
    those envhive decides, before anything is built; returns the id's default config."""
    for key in _ENVHIVE_KEYS:
        if key in kwargs:
            raise ConfigError(f"envpool/{task_id}: {key} is envhive's to decide "
                              "(make(num_envs=..., batch_size=..., num_workers=...)), not an env keyword")
    ep = envpool_module()
    with real_envpool():
        config = ep.make_spec(task_id).config
    known = set(config._fields) | set(WRAPPER_KEYS) | {"from_pixels"}
    for key in kwargs:
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=3)
            raise UnexpectedKeywordError(
                f"envpool/{task_id}: unexpected keyword {key!r}" + (f"; did you mean {', '.join(near)}?" if near else "")
            )
    return config


class EnvPoolFactory:
    """A picklable factory of one EnvPool id with its ``make`` keywords (see the module
    docstring)."""

    preferred_executor = "native"
    preferred_min_envs = 1
    engine_device: Any = None  # host arrays only
    #: The pool's ``batch_size`` (``make`` sets it): below ``num_envs``, a single-player id's
    #: engine runs EnvPool's pool in its async mode (``_stream``).
    engine_batch_size: int | None = None

    def __init__(self, task_id: str, kwargs: dict[str, Any]) -> None:
        config = check_kwargs(task_id, kwargs)
        self.task_id = task_id
        self.kwargs = dict(kwargs)
        self._players = int(getattr(config, "max_num_players", 1))

    def __call__(self) -> EnvPoolEnv:
        from envhive.envs.envpool._single import EnvPoolEnv

        return EnvPoolEnv(self.task_id, self.kwargs)

    def _stream_batch(self, num_envs: int) -> int | None:
        """EnvPool's async batch size for ``num_envs`` envs (``None``: its sync mode)."""
        k = self.engine_batch_size
        return k if self._players == 1 and isinstance(k, int) and 1 <= k < num_envs else None

    def native_engine(self, num_envs: int, num_threads: int | None = None) -> Engine:
        """The whole batch in one EnvPool pool (``num_threads``: EnvPool's threads): in its
        async mode when the pool's ``recv`` returns fewer than ``num_envs`` envs."""
        from envhive.envs.envpool._engine import EnvPoolEngine
        from envhive.envs.envpool._stream import StreamEngine

        k = self._stream_batch(num_envs)
        if k is not None:
            return StreamEngine(self.task_id, self.kwargs, num_envs, num_threads, k)
        return EnvPoolEngine(self.task_id, self.kwargs, num_envs, num_threads)

    def native_problem(self) -> None:
        """EnvPool's engine runs wherever EnvPool imports (``make`` checked that already)."""
        return None

    def bytes_per_env(self, num_envs: int) -> int:
        """Memory one env takes, estimated from EnvPool's spec: its rows of the pool's buffers
        (observations, terminal observations, actions, flags) and EnvPool's own state arrays,
        counted twice (its queue holds the batch being read and the one being written). The
        simulator's own state (a physics model, a game) is not in the spec and not counted.
        In EnvPool's async mode the spare envs' state is shared out over the batch."""
        from envhive._buffers import BufferSpec
        from envhive.envs.envpool._layout import Layout

        ep = envpool_module()
        with real_envpool():
            config = {k: v for k, v in spec_config(self.kwargs).items() if k not in ("seed", "env_seed")}
            spec = ep.make_spec(self.task_id, **config)
        layout = Layout(spec)
        rows = BufferSpec(1, layout.observation_space, layout.action_space, with_final_obs=True).bytes_per_env()
        state = 0
        for key in spec._state_keys:
            a = spec.state_array_spec[key]
            shape = [layout.players if d == -1 else int(d) for d in a.shape]
            state += int(np.prod(shape, dtype=np.int64)) * np.dtype(a.dtype).itemsize
        k = self._stream_batch(num_envs)
        spares = (k - 1) / num_envs if k is not None else 0.0
        return int(rows + 2 * state * (1 + spares))

    def key(self) -> tuple[Any, ...]:
        """What must be equal for two factories to share one engine."""
        return ("envpool", self.task_id, sorted((k, repr(v)) for k, v in self.kwargs.items()))

    def __repr__(self) -> str:
        return f"envpool/{self.task_id}"


def envpool_factory(entry: CompiledEnv, kwargs: dict[str, Any], max_episode_steps: int | None) -> NativeFactory:
    """The ``"envpool"`` kind's factory builder: the time limit is EnvPool's config value."""
    if max_episode_steps is not None:
        kwargs = {**kwargs, "max_episode_steps": max_episode_steps}
    assert entry.family is not None
    return EnvPoolFactory(entry.family, kwargs)


def bench_peers(entry: CompiledEnv, num_envs: int) -> list[tuple[str, str, Callable[[], Any]]]:
    """``envhive bench``'s peer for an ``envpool/<id>`` id: EnvPool itself."""
    task = entry.family
    assert task is not None

    def build() -> Any:
        from gymnasium.vector.utils import batch_space

        from envhive.engines._peers import EnvPoolPeer

        ep = envpool_module()
        with real_envpool():
            env = ep.make_gymnasium(task, num_envs=num_envs, seed=0)
            return EnvPoolPeer(env, batch_space(env.action_space, num_envs))

    return [("EnvPool", task, build)]


if TYPE_CHECKING:

    def _implements_factory(factory: EnvPoolFactory) -> NativeFactory:
        return factory  # mypy checks EnvPoolFactory against the NativeFactory protocol here
