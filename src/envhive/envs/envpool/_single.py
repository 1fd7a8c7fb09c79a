"""One EnvPool env behind ``gymnasium.Env``: what the serial, thread, process and Ray executors
run for an ``envpool/<id>`` id.

It is an :class:`~envhive.envs.envpool._engine.EnvPoolEngine` of one env over buffers of its
own, so a single env and the native engine share every rule (the op mapping, seeds, infos):
the same seed gives the same episode on every executor. A multi-player id is an
:class:`~envhive._agents.AgentEnv` (the agent axis).

Examples:
    >>> env = EnvPoolEnv("CartPole-v1", {})  # doctest: +SKIP
    >>> obs, info = env.reset(seed=3)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envhive._agents import AgentEnv
from envhive._buffers import Buffers, BufferSpec
from envhive._ops import RESET, STEP
from envhive._report import Completion
from envhive.envs.envpool._engine import EnvPoolEngine
from envhive.errors import ConfigError

__all__ = ["EnvPoolEnv"]


def _zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.zeros(shape, dtype)


class EnvPoolEnv(AgentEnv):
    """One env of EnvPool id ``task_id`` with EnvPool ``make`` keywords ``kwargs``.

    ``reset(seed=s)`` builds EnvPool's pool of one env with seed ``s`` (EnvPool seeds an env
    when it is built); ``reset()`` continues its generator. Reset options are refused. A
    single-player env has no agent axis (``agent_ids == ()``).
    """

    def __init__(self, task_id: str, kwargs: dict[str, Any]) -> None:
        self.task_id = task_id
        self._engine = engine = EnvPoolEngine(task_id, kwargs, 1, 1)
        p = engine.props
        self.observation_space, self.action_space = p.observation_space, p.action_space
        self.metadata, self.render_mode = dict(p.metadata), p.render_mode
        if p.agents:
            self._init_agents(p.agents)
        self._b = Buffers.allocate(BufferSpec(1, p.observation_space, p.action_space, agents=p.agents),
                                   _zeros, check=False)
        engine.bind(self._b)
        self._ids = np.zeros(1, np.int64)

    def _op(self, op: int) -> tuple[Any, dict[str, Any]]:
        b = self._b
        b.ops[0] = op
        out = Completion()
        self._engine.run(self._ids, None, out)
        if out.errors:
            raise out.errors[0]
        if b.active is not None:
            self.active[:] = b.active[0]
            self.agent_terminated[:] = b.agent_terminated[0]  # type: ignore[index]
            self.agent_truncated[:] = b.agent_truncated[0]  # type: ignore[index]
        infos, _ = self._engine.info_rows([0])
        obs = self._b.obs_codec.read(b.obs, 0)
        return obs, infos[0]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start an episode (``seed``: rebuild EnvPool's pool with it)."""
        if options:
            raise ConfigError(f"envpool/{self.task_id}: reset options are not supported by EnvPool's "
                              f"envs, got {sorted(options)}")
        super().reset(seed=seed)
        self._b.put_seed(0, seed)
        return self._op(RESET)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """One step (an env whose episode ended is reset by EnvPool instead, as EnvPool does)."""
        b = self._b
        b.actions[0] = action
        obs, info = self._op(STEP)
        reward = b.reward[0].copy() if b.active is not None else float(b.reward[0])
        return obs, reward, bool(b.terminated[0]), bool(b.truncated[0]), info

    def render(self) -> Any:
        """EnvPool's frame of this env (``render_mode="rgb_array"`` at make)."""
        return self._engine.call("render", (), {}, [0])[0]

    def close(self) -> None:
        """Release EnvPool's pool."""
        self._engine.close()
