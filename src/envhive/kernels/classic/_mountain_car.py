"""MountainCar-v0 and MountainCarContinuous-v0 as kernels: gymnasium's dynamics, compiled.

``MountainCar-v0`` computes in float64 throughout, like gymnasium's ``MountainCarEnv``.

``MountainCarContinuous-v0`` reproduces the precision of gymnasium's
``Continuous_MountainCarEnv``: its state is stored as float32 after every step, so from the
second step of an episode on, numpy computes in float32 (Python constants are cast to
float32, comparisons included), while the first step after a reset works on the float64
state that reset drew. The kernel keeps a third state entry, ``fresh`` (1.0 after a reset, 0.0
after a step), to tell the two apart.

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("envhive/MountainCar-v0", num_envs=2, seed=0)
    >>> obs, info = env.reset()
    >>> obs, rew, term, trunc, info = env.step(np.array([0, 2]))
    >>> obs.shape, rew.tolist()
    ((2, 2), [-1.0, -1.0])
    >>> env.close()
    >>> env = envhive.make("envhive/MountainCarContinuous-v0", num_envs=2, seed=0)
    >>> obs, info = env.reset()
    >>> obs, rew, term, trunc, info = env.step(np.full((2, 1), 0.5, dtype=np.float32))
    >>> rew.round(6).tolist(), env.single_action_space
    ([-0.025, -0.025], Box(-1.0, 1.0, (1,), float32))
    >>> env.close()
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from envhive.engines._columns import column_index
from envhive.engines._jit import jit
from envhive.kernels._kernel import Kernel

__all__ = ["MountainCarKernel", "MountainCarContinuousKernel"]

_MIN_POSITION = -1.2
_MAX_POSITION = 0.6
_MAX_SPEED = 0.07
_FORCE = 0.001
_GRAVITY = 0.0025
_GOAL_POSITION = 0.5
# The continuous version.
_MIN_ACTION = -1.0
_MAX_ACTION = 1.0
_POWER = 0.0015
_GOAL_POSITION_CONT = 0.45
_RESET_LOW = -0.6
_RESET_HIGH = -0.4

#: The columns of ``params`` (both variants).
PARAMS = ("goal_velocity",)
_GOAL_VELOCITY = column_index(PARAMS)["goal_velocity"]


def _observation_space() -> gym.spaces.Box:
    low = np.array([_MIN_POSITION, -_MAX_SPEED], dtype=np.float32)
    high = np.array([_MAX_POSITION, _MAX_SPEED], dtype=np.float32)
    return gym.spaces.Box(low, high, dtype=np.float32)


# ---------------------------------------------------------------- MountainCar-v0 (float64)
@jit(nogil=True, inline="always")
def _step_discrete(params, state, actions, i, obs):  # pragma: no cover - compiled
    goal_velocity = params[_GOAL_VELOCITY]
    position, velocity = state[0], state[1]
    a = np.int64(actions[i])
    velocity += (a - 1) * _FORCE + math.cos(3 * position) * (-_GRAVITY)
    if velocity < -_MAX_SPEED:  # np.clip
        velocity = -_MAX_SPEED
    elif velocity > _MAX_SPEED:
        velocity = _MAX_SPEED
    position += velocity
    if position < _MIN_POSITION:
        position = _MIN_POSITION
    elif position > _MAX_POSITION:
        position = _MAX_POSITION
    if position == _MIN_POSITION and velocity < 0:
        velocity = 0.0
    terminated = position >= _GOAL_POSITION and velocity >= goal_velocity
    state[0], state[1] = position, velocity
    obs[0], obs[1] = position, velocity
    return -1.0, terminated


@jit(nogil=True, inline="always")
def _reset_discrete(params, state, noise, obs):  # pragma: no cover - compiled
    state[0], state[1] = noise[0], 0.0
    obs[0], obs[1] = noise[0], 0.0


@jit(nogil=True, inline="always")
def _valid_discrete(params, actions, i):  # pragma: no cover - compiled
    a = actions[i]
    return a >= 0 and a <= 2


class MountainCarKernel(Kernel):
    """gymnasium's ``MountainCar-v0`` (actions 0: push left, 1: none, 2: push right), batched.

    Keywords: ``goal_velocity`` (as gymnasium's). Reset options (``low``, ``high``) are not
    supported.

    Examples:
        >>> k = MountainCarKernel(3)
        >>> k.action_space, k.max_episode_steps, k.observation_space.shape
        (Discrete(3), 200, (2,))
    """

    id = "envhive/MountainCar-v0"
    gym_id = "MountainCar-v0"
    state_dim = 2
    noise_dim = 1
    uniform_bounds = ((_RESET_LOW,), (_RESET_HIGH,), False)  # draw() below, compiled
    default_max_episode_steps = 200
    defaults = {"goal_velocity": 0}
    param_names = PARAMS

    @classmethod
    def spaces(cls, config: dict[str, Any]) -> tuple[gym.Space, gym.Space]:
        return _observation_space(), gym.spaces.Discrete(3)

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return rng.uniform(low=_RESET_LOW, high=_RESET_HIGH, size=(count, 1))

    @classmethod
    def compiled(cls) -> tuple[Any, Any, Any]:
        return _step_discrete, _reset_discrete, _valid_discrete


# ---------------------------------------------------------------- MountainCarContinuous-v0
@jit(nogil=True, inline="always")
def _at_least(x, is32, bound):  # pragma: no cover - compiled
    """``x >= bound`` as numpy compares: in float32 when ``x`` is a numpy float32."""
    if is32:
        return x >= np.float64(np.float32(bound))
    return x >= bound


@jit(nogil=True, inline="always")
def _above(x, is32, bound):  # pragma: no cover - compiled
    if is32:
        return x > np.float64(np.float32(bound))
    return x > bound


@jit(nogil=True, inline="always")
def _below(x, is32, bound):  # pragma: no cover - compiled
    if is32:
        return x < np.float64(np.float32(bound))
    return x < bound


@jit(nogil=True, inline="always")
def _step_continuous(params, state, actions, i, obs):  # pragma: no cover - compiled
    # Values are held as float64; ``*32`` flags say which are numpy float32 in gymnasium's
    # step (then arithmetic and comparisons with Python floats happen in float32).
    goal_velocity = params[_GOAL_VELOCITY]
    fresh = state[2] != 0.0
    position, velocity = state[0], state[1]
    pos32 = vel32 = not fresh
    u = np.float32(actions[i, 0])
    force = u  # min(max(action[0], min_action), max_action): u itself when in bounds
    if force < np.float32(_MIN_ACTION):
        force = np.float32(_MIN_ACTION)
    if force > np.float32(_MAX_ACTION):
        force = np.float32(_MAX_ACTION)
    # force * power - 0.0025 * math.cos(3 * position): float32 (force is float32)
    if pos32:
        angle = np.float64(np.float32(3) * np.float32(position))
    else:
        angle = 3 * position
    push = np.float32(force * np.float32(_POWER)) - np.float32(_GRAVITY * math.cos(angle))
    if vel32:
        velocity = np.float64(np.float32(velocity) + push)
    else:
        velocity = velocity + np.float64(push)
    if _above(velocity, vel32, _MAX_SPEED):
        velocity, vel32 = _MAX_SPEED, False
    if _below(velocity, vel32, -_MAX_SPEED):
        velocity, vel32 = -_MAX_SPEED, False
    if pos32:
        position = np.float64(np.float32(position) + np.float32(velocity))
    else:
        position = position + velocity
    if _above(position, pos32, _MAX_POSITION):
        position, pos32 = _MAX_POSITION, False
    if _below(position, pos32, _MIN_POSITION):
        position, pos32 = _MIN_POSITION, False
    at_wall = (np.float32(position) == np.float32(_MIN_POSITION)) if pos32 else position == _MIN_POSITION
    if at_wall and velocity < 0:
        velocity, vel32 = 0.0, False
    terminated = _at_least(position, pos32, _GOAL_POSITION_CONT) and _at_least(
        velocity, vel32, goal_velocity
    )
    reward = 100.0 if terminated else 0.0
    a = np.float64(u)
    reward -= (a * a) * 0.1  # math.pow(action[0], 2) * 0.1: exact for a float32 action
    # self.state = np.array([position, velocity], dtype=np.float32)
    p32, v32 = np.float32(position), np.float32(velocity)
    state[0], state[1], state[2] = p32, v32, 0.0
    obs[0], obs[1] = p32, v32
    return reward, terminated


@jit(nogil=True, inline="always")
def _reset_continuous(params, state, noise, obs):  # pragma: no cover - compiled
    state[0], state[1], state[2] = noise[0], 0.0, 1.0
    obs[0], obs[1] = noise[0], 0.0


@jit(nogil=True, inline="always")
def _valid_continuous(params, actions, i):  # pragma: no cover - compiled
    a = actions[i, 0]  # NaN fails both comparisons
    return a >= _MIN_ACTION and a <= _MAX_ACTION


class MountainCarContinuousKernel(Kernel):
    """gymnasium's ``MountainCarContinuous-v0``, batched.

    State: ``(position, velocity, fresh)`` (see the module docstring). Keywords:
    ``goal_velocity`` (as gymnasium's). Reset options are not supported. The action is used as
    float32 (the action space's dtype), whatever the caller's dtype.

    Examples:
        >>> k = MountainCarContinuousKernel(2)
        >>> k.action_space, k.max_episode_steps
        (Box(-1.0, 1.0, (1,), float32), 999)
    """

    id = "envhive/MountainCarContinuous-v0"
    gym_id = "MountainCarContinuous-v0"
    state_dim = 3
    noise_dim = 1
    uniform_bounds = ((_RESET_LOW,), (_RESET_HIGH,), False)  # draw() below, compiled
    default_max_episode_steps = 999
    defaults = {"goal_velocity": 0}
    param_names = PARAMS

    @classmethod
    def spaces(cls, config: dict[str, Any]) -> tuple[gym.Space, gym.Space]:
        act = gym.spaces.Box(low=_MIN_ACTION, high=_MAX_ACTION, shape=(1,), dtype=np.float32)
        return _observation_space(), act

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return rng.uniform(low=_RESET_LOW, high=_RESET_HIGH, size=(count, 1))

    @classmethod
    def compiled(cls) -> tuple[Any, Any, Any]:
        return _step_continuous, _reset_continuous, _valid_continuous
