"""The TorchRL front end: any envhive pool as a batch-locked ``torchrl.envs.EnvBase``.

``envhive.make(env, num_envs, api="torchrl")`` (any env, any executor) gives a
:class:`TorchRLEnv` with ``batch_size=[num_envs]``, specs derived from the spaces (a
``Composite`` for Dict/Tuple observations) and tensors on its ``device``.

Clean data without choosing a mode: the pool runs in same_step mode, so one round trip steps
every env and resets those that ended. ``_step`` reports the *true* terminal observation of an
ended env (TorchRL puts it under ``"next"``) and keeps its reset observation aside; the
``reset`` that TorchRL then asks for with the ``"_reset"`` mask (``step_and_maybe_reset``,
collectors) is served from there, without another call to the envs. So no transition crosses
an episode boundary, every step is counted once (``StepCounter`` counts exactly), and an ended
episode costs no extra round trip. A ``"_reset"`` of an env that has not ended resets it for
real, through the pool.

Examples:
    >>> import envhive
    >>> env = envhive.make("CartPole-v1", num_envs=4, api="torchrl", seed=0)
    >>> td = env.rollout(3)
    >>> td.batch_size, td["next", "observation"].shape
    (torch.Size([4, 3]), torch.Size([4, 3, 4]))
    >>> env.close()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envhive._buffers import clone_tree, is_tensor
from envhive._extras import require
from envhive._pool import Pool
from envhive._spaces import tree_map
from envhive.errors import ConfigError
from envhive.frontends._flat import check_agent_axis
from envhive.frontends._torch import TorchArrays

require("torchrl", "torchrl", "api='torchrl'")
require("tensordict", "torchrl", "api='torchrl'")

import torch  # noqa: E402
from tensordict import TensorDict, TensorDictBase  # noqa: E402
from torchrl.data import (  # noqa: E402
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    Unbounded,
)
from torchrl.envs import EnvBase  # noqa: E402

__all__ = ["TorchRLEnv", "spec_for"]


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


def spec_for(space: spaces.Space, n: int, device: Any, action: bool = False) -> Any:
    """The TorchRL spec of ``n`` stacked values of ``space``.

    Discrete actions are ``Categorical`` (integer actions; a ``start`` is added back when the
    action is sent), MultiDiscrete actions ``MultiCategorical``; as observations both are
    ``Bounded`` integers. Dict and Tuple become ``Composite`` (Tuple entries are named
    ``"0"``, ``"1"``, ...).

    Examples:
        >>> from gymnasium import spaces
        >>> spec_for(spaces.Discrete(3), 4, "cpu", action=True).shape
        torch.Size([4])
    """
    if isinstance(space, spaces.Box):
        dtype = _torch_dtype(space.dtype)
        shape = (n, *space.shape)
        if np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)):
            low = torch.as_tensor(np.broadcast_to(space.low, shape).copy(), dtype=dtype)
            high = torch.as_tensor(np.broadcast_to(space.high, shape).copy(), dtype=dtype)
            return Bounded(low, high, shape=shape, dtype=dtype, device=device)
        return Unbounded(shape=shape, dtype=dtype, device=device)
    if isinstance(space, spaces.Discrete):
        dtype = _torch_dtype(space.dtype)
        if action:
            return Categorical(int(space.n), shape=(n,), dtype=dtype, device=device)
        lo, hi = int(space.start), int(space.start + space.n - 1)
        return Bounded(lo, hi, shape=(n,), dtype=dtype, device=device)
    if isinstance(space, spaces.MultiDiscrete):
        dtype = _torch_dtype(space.dtype)
        nvec = np.asarray(space.nvec)
        if action and nvec.ndim == 1 and not np.any(space.start):
            return MultiCategorical(nvec.tolist(), shape=(n, len(nvec)), dtype=dtype, device=device)
        low = np.broadcast_to(space.start, (n, *nvec.shape)).copy()
        high = low + np.broadcast_to(nvec - 1, (n, *nvec.shape))
        return Bounded(torch.as_tensor(low, dtype=dtype), torch.as_tensor(high, dtype=dtype),
                       shape=(n, *nvec.shape), dtype=dtype, device=device)
    if isinstance(space, spaces.MultiBinary):
        shape = (n, *np.atleast_1d(space.n))
        return Binary(n=int(np.prod(space.n)), shape=shape, dtype=_torch_dtype(space.dtype), device=device)
    if isinstance(space, spaces.Dict):
        return Composite({k: spec_for(s, n, device, action) for k, s in space.spaces.items()},
                         shape=(n,), device=device)
    if isinstance(space, spaces.Tuple):
        return Composite({str(i): spec_for(s, n, device, action) for i, s in enumerate(space.spaces)},
                         shape=(n,), device=device)
    raise ConfigError(
        f"api='torchrl': a {type(space).__name__} space has no tensor form; TorchRL specs "
        "exist for Box, Discrete, MultiDiscrete, MultiBinary and Dict/Tuple of those"
    )


def _as_entries(tree: Any) -> Any:
    """Dict/Tuple trees of tensors as nested dicts (Tuple entries "0", "1", ...)."""
    if isinstance(tree, dict):
        return {k: _as_entries(v) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return {str(i): _as_entries(v) for i, v in enumerate(tree)}
    return tree


def _from_entries(value: Any, space: spaces.Space) -> Any:
    """An action read from a tensordict, in the action space's tree shape."""
    if isinstance(space, spaces.Dict):
        return {k: _from_entries(value[k], s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_from_entries(value[str(i)], s) for i, s in enumerate(space.spaces))
    return value


class _Carry:
    """What one call leaves for the next (the rows the last step reset and their reset
    observations, the last observations handed out). A plain object: ``EnvBase`` is a
    ``torch.nn.Module``, whose ``__setattr__`` costs microseconds per attribute, and these
    change on every step."""

    __slots__ = ("last_obs", "rows", "stash")

    def __init__(self) -> None:
        # Rows whose env ended on the last step and was already reset (same_step), with
        # their reset observations: what the next "_reset" of those rows returns.
        self.rows = np.zeros(0, np.int64)
        self.stash: Any = None
        self.last_obs: Any = None  # the last observations handed out (numpy tree)


class TorchRLEnv(EnvBase):
    """A batch-locked TorchRL env over an envhive pool (see the module docstring).

    Built by ``envhive.make(..., api="torchrl", device=None)``. Observations are under
    ``"observation"`` (a Dict space's keys at the root instead), the action under
    ``"action"``, and reward, done, terminated and truncated have a trailing dimension of 1,
    as TorchRL's own envs have them.

    Args:
        pool: a pool in same_step autoreset mode, ``copy=True`` (rollouts keep every step's
            tensors, so they must not be views of buffers the next step overwrites).
        device: the ``torch.device`` of the tensors.
        name: for ``repr``.
    """

    batch_locked = True

    def __init__(self, pool: Pool, device: Any, name: str = "") -> None:
        # A pool of one-agent envs comes as that agent's (OneAgent); several agents come
        # flattened (agent_layout="flat": FlatAgents) or are refused.
        pool = check_agent_axis(pool, "torchrl")
        if pool.autoreset.name != "SAME_STEP" or not pool.copy:
            raise ConfigError("TorchRLEnv needs a pool in same_step mode with copy=True (use make(api='torchrl'))")
        n = pool.num_envs
        super().__init__(device=device, batch_size=torch.Size([n]))
        self.pool = pool
        self._name = name
        # A resident pool (a torch env on this device) hands out tensors already there.
        self._arrays = TorchArrays(torch.device(device), keep_tensor_actions=pool.resident)
        self._dict_obs = isinstance(pool.observation_space, spaces.Dict)
        obs_spec = spec_for(pool.observation_space, n, device)
        self.observation_spec = (
            obs_spec if self._dict_obs else Composite(observation=obs_spec, shape=(n,), device=device)
        )
        act_spec = spec_for(pool.action_space, n, device, action=True)
        if isinstance(act_spec, Composite):  # a Dict/Tuple action lives under "action" too
            act_spec = Composite(action=act_spec, shape=(n,), device=device)
        self.action_spec = act_spec
        self.reward_spec = Unbounded(shape=(n, 1), dtype=torch.float32, device=device)
        self.done_spec = Composite(
            done=Categorical(2, shape=(n, 1), dtype=torch.bool, device=device),
            terminated=Categorical(2, shape=(n, 1), dtype=torch.bool, device=device),
            truncated=Categorical(2, shape=(n, 1), dtype=torch.bool, device=device),
            shape=(n,), device=device,
        )
        self._action_start = self._discrete_start(pool.action_space)
        self._carry = _Carry()

    @staticmethod
    def _discrete_start(space: spaces.Space) -> int:
        return int(space.start) if isinstance(space, spaces.Discrete) else 0

    # -- EnvBase ---------------------------------------------------------------------
    def _set_seed(self, seed: int | None) -> None:
        """Reset every env now, env ``i`` with ``seed + i`` (as ``make(seed=)``, and as
        TorchRL's GymWrapper seeds a gymnasium vector env); later resets continue each env's
        own generator."""
        self.pool.reset(seed=seed)
        c = self._carry
        c.rows, c.stash = c.rows[:0], None

    def _td(self, source: dict[str, Any]) -> TensorDict:
        """A tensordict of this env's batch size and device from tensors already there
        (nested dicts become nested tensordicts), without re-validating every entry."""
        for key, value in source.items():
            if isinstance(value, dict):
                source[key] = self._td(value)
        return TensorDict._new_unsafe(source, batch_size=self.batch_size, device=self.device)

    def _obs_entries(self, obs: Any, out: dict[str, Any]) -> dict[str, Any]:
        entries = _as_entries(self._arrays.tree(obs))
        if self._dict_obs:
            out.update(entries)
        else:
            out["observation"] = entries
        return out

    def _flags(self, terminated: np.ndarray, truncated: np.ndarray) -> dict[str, Any]:
        to = self._arrays.array
        n = self.pool.num_envs
        return {"done": to((terminated | truncated).reshape(n, 1)),
                "terminated": to(terminated.reshape(n, 1)), "truncated": to(truncated.reshape(n, 1))}

    def _no_flags(self) -> dict[str, Any]:
        """Every flag clear (a reset), made on the device (three views of one allocation)."""
        n = self.pool.num_envs
        done, terminated, truncated = torch.zeros((3, n, 1), dtype=torch.bool, device=self.device)
        return {"done": done, "terminated": terminated, "truncated": truncated}

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = _from_entries(tensordict.get("action"), self.pool.action_space)
        actions = self._arrays.actions(action)
        if self._action_start:
            actions = actions + self._action_start
        b = self.pool.step(actions)
        obs, c = b.obs, self._carry
        if b.has_final is not None:
            # Same_step reset these envs already: keep their reset observations for the
            # "_reset" TorchRL asks for next, and report the true terminal observations.
            rows = np.flatnonzero(b.has_final)
            c.rows = rows
            c.stash = clone_tree(tree_map(lambda o: o[rows], obs))
            tree_map(lambda o, f: o.__setitem__(rows, f[rows]), obs, b.final_obs)
        else:
            c.rows, c.stash = c.rows[:0], None
        # Handed out as zero-copy tensors: never written again (later changes copy first).
        c.last_obs = obs
        n = self.pool.num_envs
        out = self._flags(b.terminated, b.truncated)
        reward: Any = b.reward  # a tensor when the pool is resident
        reward = reward.to(torch.float32) if is_tensor(reward) else reward.astype(np.float32)
        out["reward"] = self._arrays.array(reward.reshape(n, 1))
        return self._td(self._obs_entries(obs, out))

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        n, c = self.pool.num_envs, self._carry
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None or (bool(mask.all()) and not c.rows.size):
            obs = self.pool.reset().obs
            c.rows, c.stash = c.rows[:0], None
        else:
            want = mask.reshape(n).cpu().numpy()
            stashed = np.zeros(n, np.bool_)
            stashed[c.rows] = True
            fresh = want & ~stashed
            if fresh.any():  # envs that had not ended: a real reset
                obs = self.pool.reset(options={"reset_mask": fresh}).obs
            else:
                obs = clone_tree(c.last_obs)
            use = want[c.rows]
            if use.any():
                rows, stash = c.rows[use], c.stash
                tree_map(lambda o, s: o.__setitem__(rows, s[use]), obs, stash)
            keep = ~use
            c.rows = c.rows[keep]
            c.stash = None if not keep.any() else tree_map(lambda s: s[keep], c.stash)
        c.last_obs = obs
        return self._td(self._obs_entries(obs, self._no_flags()))

    def maybe_reset(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Reset the envs that are done, as ``EnvBase.maybe_reset`` does, in one step when
        they are exactly the envs the last step already reset (same_step): their reset
        observations replace the terminal ones at the root and their done flags clear, with
        no call to the envs and none of the generic reset's bookkeeping. Anything else (a
        done env the last step did not end, transforms' own resets) takes the generic path.
        """
        done = tensordict.get("done", None)
        c = self._carry
        if done is None or not c.rows.size:
            return super().maybe_reset(tensordict)
        n = self.pool.num_envs
        rows = np.flatnonzero(done.reshape(n).cpu().numpy())
        if not np.array_equal(rows, c.rows):
            return super().maybe_reset(tensordict)
        # The envs' current observations: the last ones with the reset rows put in, as new
        # arrays (the last ones are the "next" tensors a rollout or collector already holds).
        current = clone_tree(c.last_obs)
        stash = c.stash
        tree_map(lambda o, s: o.__setitem__(rows, s), current, stash)
        c.last_obs = current
        c.rows, c.stash = c.rows[:0], None
        # Every done env was reset, and only done envs can have a flag set: all flags clear.
        entries = self._obs_entries(current, self._no_flags())
        # A plain TensorDict takes entries made here (this env's batch size and device)
        # without set()'s checks, which cost several microseconds per key per step.
        put = tensordict._set_str if type(tensordict) is TensorDict else None
        for key, value in entries.items():
            value = self._td(value) if isinstance(value, dict) else value
            if put is not None:
                put(key, value, inplace=False, validated=True)
            else:
                tensordict.set(key, value)
        return tensordict

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Close the pool (its envs, workers and buffers). Idempotent."""
        self.pool.close()
        super().close(raise_if_closed=False)

    def __repr__(self) -> str:
        return (f"envhive.TorchRLEnv({self._name!r}, num_envs={self.pool.num_envs}, "
                f"executor={self.pool.describe()!r}, device={self.device})")
