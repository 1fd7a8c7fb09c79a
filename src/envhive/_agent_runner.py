"""The runner's loop for multi-agent envs: one row per env, one entry per agent.

:class:`~envhive._runner.EnvRunner` hands its ops to :class:`AgentOps` when the buffers carry
an agent axis (``BufferSpec.agents``); the single-agent loop (and its C fast path) never sees
them. The ops mean what ``envhive._ops`` says; what is added is per agent: after the step,
each agent's flags and ``active`` mask are copied from the env (an
:class:`~envhive._agents.AgentEnv`) into the row, the env's end is given to every agent still
in it (:func:`~envhive._agents.end_agents`), and under STEP_RESET the terminal observations of
every agent go to ``final_obs`` before the reset, whose ``active`` mask the row then gets.
The op itself is ``envhive._perform.perform``, the one Python definition every runner uses;
the per-agent part is its ``after_step``. Multi-agent steps are costly (dicts per agent), so
this loop is plain Python, env by env, writing each row as soon as its env is done.

While an op runs, the env's ``obs_out`` is its row of ``buffers.obs``, so the env writes
its agents' observations straight into the pool's buffers (``AgentEnv._stack_obs``) and the
loop has nothing left to copy. Only for an env the runner holds unwrapped: a wrapper may
keep the observation it is given, and the row changes with the next op.

Examples:
    >>> from envhive.testing import TagTeamEnv
    >>> from envhive._buffers import Buffers, BufferSpec
    >>> from envhive._report import Completion, env_error
    >>> from envhive._runner import EnvRunner, build_env
    >>> env = build_env(TagTeamEnv, 0)
    >>> runner = EnvRunner([env], first_id=0)
    >>> b = Buffers.allocate(BufferSpec(1, env.observation_space, env.action_space,
    ...                                 agents=env.agent_ids))
    >>> runner.bind(b)
    >>> b.ops[:] = 1  # RESET
    >>> runner.run([0], None, Completion())
    >>> b.active.tolist()
    [[True, True, False]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from envhive._agents import AgentEnv, end_agents
from envhive._ops import RESET
from envhive._perform import perform, write_obs
from envhive._report import Completion, env_error
from envhive._results import result_error, reward_value
from envhive._spaces import tree_map
from envhive.errors import EnvWorkerError

if TYPE_CHECKING:
    from envhive._runner import EnvRunner

__all__ = ["AgentOps"]


class AgentOps:
    """The ops of one runner's multi-agent envs (see the module docstring)."""

    def __init__(self, runner: EnvRunner) -> None:
        self.runner = runner
        self.cores: list[AgentEnv] = []
        for k, env in enumerate(runner.envs):
            core = env.unwrapped
            if not isinstance(core, AgentEnv):  # the pool laid out agents every env must have
                raise EnvWorkerError(
                    f"expected a multi-agent env (an envhive AgentEnv) like env 0, got "
                    f"{type(core).__name__}", env_id=runner.first_id + k,
                )
            self.cores.append(core)
        b = runner.buffers
        assert b is not None, "bind() before AgentOps"  # internal invariant
        assert b.agent_terminated is not None and b.agent_truncated is not None
        assert b.active is not None
        shift = runner.first_id - runner._row0  # env k's row
        #: Each env's rows of the per-agent arrays (views, made once: indexing costs per op).
        self.agent_rows = [(b.agent_terminated[r], b.agent_truncated[r], b.active[r])
                           for r in range(shift, shift + len(self.cores))]
        #: Each env's row of ``b.obs`` (views), where it writes its observations, or ``None``.
        self.obs_rows: list[Any] = [None] * len(self.cores)
        if not b.obs_codec.has_objects():  # an object leaf's row is its value, not a view
            for k, (env, core) in enumerate(zip(runner.envs, self.cores)):
                if env is core:
                    self.obs_rows[k] = tree_map(lambda a, r=k + shift: a[r], b.obs)
        self._reward_shape = b.reward.shape[1:]

    def run(self, env_ids: Sequence[int], options: dict[str, Any] | None, out: Completion) -> None:
        """Perform each env's op (from ``buffers.ops``) and write its row; errors per env."""
        runner = self.runner
        b = runner.buffers
        assert b is not None, "bind() must come before run()"  # internal invariant
        row0, first = runner._row0, runner.first_id
        envs, cores, obs_rows, ops = runner.envs, self.cores, self.obs_rows, b.ops
        for i in env_ids:
            i = int(i)
            r, k = i - row0, i - first
            core = cores[k]
            op = int(ops[r])
            core.obs_out = obs_rows[k]
            try:
                done = perform(envs[k], i, r, op, b, options, out, after_step=self._after_step(k, i))
                if done is not None:
                    self._write_row(k, i, r, op, done)
            except EnvWorkerError as err:
                out.errors[i] = err
            except Exception as err:  # writing the row: an env's bug must not take the pool down
                out.errors[i] = env_error("reset" if op == RESET else "step", err, i)
            finally:
                core.obs_out = None  # outside the runner's ops, the env makes new arrays
            if i not in out.errors:
                out.env_ids.append(i)

    def _after_step(self, k: int, i: int) -> Any:
        """Env ``k``'s (id ``i``) part of a step, before a reset its op may make: its reward
        checked (one per agent), its agents' flags copied into its row, the env's end given to
        every agent still in it."""

        def after_step(reward: Any, term: bool, trunc: bool) -> Any:
            shape = self._reward_shape
            if not (type(reward) is np.ndarray and reward.shape == shape and reward.dtype.kind in "biuf"):
                fixed = reward_value(reward, shape)
                if fixed is None:
                    raise result_error("step", "reward", reward, f"an array of shape {shape} "
                                       "(one reward per agent)", i)
                reward = fixed
            core = self.cores[k]
            aterm, atrunc, _ = self.agent_rows[k]
            aterm[:] = core.agent_terminated
            atrunc[:] = core.agent_truncated
            end_agents(term, trunc, aterm, atrunc, core.active)
            return reward

        return after_step

    def _write_row(self, k: int, i: int, r: int, op: int, done: tuple[Any, Any, bool, bool]) -> None:
        """Write env ``k``'s row ``r`` (its observation unless it wrote it there itself)."""
        b = self.runner.buffers
        assert b is not None
        obs, reward, term, trunc = done
        core = self.cores[k]
        aterm, atrunc, active = self.agent_rows[k]
        if op == RESET:
            aterm[:] = False
            atrunc[:] = False
        if obs is not core.obs_out:  # else the env wrote it into its row already
            write_obs(b, b.obs, r, obs, "reset" if op == RESET else "step", i)
        b.reward[r] = reward
        b.terminated[r] = term
        b.truncated[r] = trunc
        active[:] = core.active
