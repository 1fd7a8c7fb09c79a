"""One env's op in Python: the one definition every Python path runs.

``envhive._ops`` says what STEP, RESET and STEP_RESET mean; :func:`perform` is that sequence
for one ``gymnasium.Env`` in a row of the pool's buffers: step (or reset, seeded and with
options as the pool sent them), check what the env returned, and when the op resets the env
after its step (``_ops.resets_in_op``), keep the terminal observation in ``final_obs`` and the
step info as the final info, then reset. Every Python runner calls it: ``EnvRunner``'s loop
for every env its C loop does not finish (and for every env without the C loop), and the
multi-agent loop (``_agent_runner``), which adds its per-agent bookkeeping through
``after_step``. The compiled runner loop (``_runloop.c``) does what this function does for
the plain case only, and a differential test holds the two equal (tests/test_runloop.py).

Examples:
    >>> import gymnasium as gym
    >>> from envhive._buffers import Buffers, BufferSpec
    >>> from envhive._ops import RESET, STEP_RESET
    >>> from envhive._report import Completion
    >>> env = gym.make("CartPole-v1")
    >>> b = Buffers.allocate(BufferSpec(1, env.observation_space, env.action_space, with_final_obs=True))
    >>> out = Completion()
    >>> obs, reward, term, trunc = perform(env, 0, 0, RESET, b, None, out)
    >>> b.actions[0] = 1
    >>> obs, reward, term, trunc = perform(env, 0, 0, STEP_RESET, b, None, out)
    >>> reward, term, out.final_infos
    (1.0, False, {})
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from envhive._buffers import Buffers
from envhive._ops import RESET, RESET_REWARD, resets_in_op
from envhive._report import Completion, env_error
from envhive._results import check_info, flag_value, reset_pair, result_error, step_tuple
from envhive._spaces import ArrayCodec, Tree
from envhive.errors import EnvWorkerError

__all__ = ["perform", "reset_env", "write_obs", "NOT_CALLED", "RETURNED", "RAISED"]

#: What a caller already did with the env's step (``perform``'s ``kind``): nothing, it returned
#: ``got``, or it raised ``got`` (the C loop's codes, ``_runloop.c``).
NOT_CALLED, RETURNED, RAISED = 0, 1, 2

#: ``after_step(reward, terminated, truncated) -> reward``: what a caller adds after a step's
#: values are checked and before a reset the op may make (the multi-agent loop's per-agent
#: flags); raising makes it the env's error.
AfterStep = Callable[[Any, bool, bool], Any]


def reset_env(env: gym.Env, seed: int | None, options: dict[str, Any] | None) -> Any:
    """``env.reset``, given ``seed=`` only when there is a seed and ``options=`` only when
    there are options (a non-empty dict), as SB3's ``DummyVecEnv`` calls it: an env whose
    ``reset`` takes neither (older or hand-written envs) works until it is given one.

    Examples:
        >>> class Bare(gym.Env):
        ...     def reset(self):
        ...         return 0, {}
        >>> reset_env(Bare(), None, {})
        (0, {})
    """
    if seed is None:
        return env.reset(options=options) if options else env.reset()
    return env.reset(seed=seed, options=options) if options else env.reset(seed=seed)


def write_obs(b: Buffers, buf: Tree, row: int, obs: Any, where: str, env_id: int) -> None:
    """Write one observation into row ``row`` of ``buf`` (``b.obs`` or ``b.final_obs``);
    one that does not fit the observation space is that env's error."""
    try:
        b.obs_codec.write(buf, row, obs)
    except Exception as err:  # whatever the env returned, it is that env's error
        raise EnvWorkerError(
            f"{where}() returned an observation that does not fit the observation space "
            f"{b.obs_codec.space}: {err}",
            env_id=env_id,
            cause_type="ObservationError",
        ) from None


def step_flags(term: Any, trunc: Any, env_id: int) -> tuple[bool, bool]:
    """A step's flags as bools (off the fast path); a flag that is not one is the env's error."""
    flags = []
    for field, value in (("terminated", term), ("truncated", trunc)):
        flag = flag_value(value)
        if flag is None:
            raise result_error("step", field, value, "a bool (True/False, numpy.bool_, or 0/1)", env_id)
        flags.append(flag)
    return flags[0], flags[1]


def perform(
    env: gym.Env, i: int, r: int, op: int, b: Buffers, options: dict[str, Any] | None,
    out: Completion, kind: int = NOT_CALLED, got: Any = None, after_step: AfterStep | None = None,
) -> tuple[Any, Any, bool, bool] | None:
    """Env ``i``'s op ``op`` (its row ``r`` of ``b``), as ``envhive._ops`` defines it.

    ``kind`` and ``got`` say what a caller already did with the env's step (``NOT_CALLED``:
    nothing; ``RETURNED``: it returned ``got``; ``RAISED``: it raised ``got``). Returns the
    row's ``(obs, reward, terminated, truncated)`` for the caller to write, or ``None`` when
    the op failed: the env's error is then in ``out.errors``. The final observation (a STEP_RESET
    that ended the episode) is written here, into ``b.final_obs``; a non-empty info goes to
    ``out.infos``, the step's info of such a STEP_RESET to ``out.final_infos``. The reward is
    not checked here (the caller writes it, and refuses what does not fit) unless
    ``after_step`` does.
    """
    try:
        if op == RESET:
            obs, info = reset_pair(reset_env(env, b.seed_of(r), options), i)
            reward: Any = RESET_REWARD
            term = trunc = False
        else:
            if kind == NOT_CALLED:
                codec = b.act_codec
                result = env.step(b.actions[r] if type(codec) is ArrayCodec else codec.read(b.actions, r))
            elif kind == RAISED:
                raise got
            else:
                result = got
            obs, reward, term, trunc, info = step_tuple(result, "step", i)
            if type(term) is not bool or type(trunc) is not bool:
                term, trunc = step_flags(term, trunc, i)  # so that resets_in_op can read them
            if type(info) is not dict:
                check_info(info, "step", i)
            if after_step is not None:
                reward = after_step(reward, term, trunc)
            if resets_in_op(op, term, trunc):
                write_obs(b, b.final_obs, r, obs, "step", i)
                out.final_infos[i] = info
                obs, info = reset_pair(env.reset(), i)
    except EnvWorkerError as err:
        out.errors[i] = err
        return None
    except Exception as err:  # an env's bug must not take the pool down
        out.errors[i] = env_error("reset" if op == RESET else "step", err, i)
        return None
    finally:
        got = None  # do not keep an env's result (or exception) alive
    if info:
        out.infos[i] = info
    return obs, reward, term, trunc
