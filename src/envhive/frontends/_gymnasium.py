"""The gymnasium front end: ``envhive.VectorEnv``, gymnasium's vector API plus EnvPool-style async.

This is the only place that knows gymnasium's layout of a batch: infos as ``key`` plus a
``_key`` mask per column (nested dicts recurse), same_step's terminal observations as an object
array ``info["final_obs"]`` with the step infos in ``info["final_info"]``, and
``info["env_id"]`` on ``recv``. It reads nothing but the pool's neutral
:class:`~envhive._batch.Batch`.

Examples:
    >>> import envhive, numpy as np
    >>> env = envhive.make("CartPole-v1", num_envs=2, autoreset="same_step", seed=0)
    >>> _ = env.reset()
    >>> for _ in range(30):
    ...     obs, rew, term, trunc, info = env.step(np.zeros(2, np.int64))
    ...     if term.any():
    ...         break
    >>> sorted(info), info["final_obs"][int(np.argmax(term))].shape
    (['_final_info', '_final_obs', 'final_info', 'final_obs'], (4,))
    >>> env.close()
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector import VectorEnv as GymVectorEnv
from gymnasium.vector.utils import batch_differing_spaces, batch_space

from envhive._arguments import check_options, reset_mask_ids
from envhive._batch import Batch
from envhive._infos import Column, InfoColumns
from envhive._pool import Pool
from envhive._spaces import Codec, codec_for
from envhive.errors import (
    ClosedError,
    NothingPendingError,
    PendingCallError,
    SpaceMismatchError,
    WaitTimeoutError,
)
from envhive.frontends._flat import check_agent_axis
from envhive.frontends._torch import TorchArrays, torch_device

__all__ = ["VectorEnv", "gym_infos"]

#: What gymnasium's ``step``/``recv`` return: ``(obs, reward, terminated, truncated, infos)``.
Transition = tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


def _layout(columns: InfoColumns) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, col in columns.items():
        if not isinstance(col, Column):
            # A number reported under a key that an earlier env reported as a dict lands in
            # that dict, slot as key: nonsense, but exactly what gymnasium's vector envs do.
            out[key] = col
            continue
        values = col.values
        out[key] = _layout(values) if isinstance(values, dict) else values
        out[f"_{key}"] = col.mask
    return out


def gym_infos(batch: Batch, codec: Codec, env_ids: bool = False) -> dict[str, Any]:
    """A batch's infos in gymnasium's vector layout (``key`` + ``_key`` mask per column).

    Rows that were reset in the same op (same_step) get ``final_obs`` (an object array of
    single-env observations) and ``final_info``, each with its mask; ``env_ids`` adds
    ``info["env_id"]`` (int32) as EnvPool does.

    Examples:
        >>> from gymnasium import spaces
        >>> from envhive._infos import add_info
        >>> cols = add_info({}, {"lives": 3}, 1, 2)
        >>> b = Batch(np.arange(2), np.zeros((2, 1)), np.zeros(2), np.zeros(2, bool),
        ...           np.zeros(2, bool), np.zeros(2, np.int8), None, None, cols, {})
        >>> out = gym_infos(b, codec_for(spaces.Box(0, 1, (1,))))
        >>> out["lives"].tolist(), out["_lives"].tolist()
        ([0, 3], [False, True])
    """
    infos = _layout(batch.infos) if batch.infos else {}
    has_final = batch.has_final
    if has_final is not None:
        final_obs = np.full(has_final.shape[0], None, dtype=object)
        for row in np.flatnonzero(has_final).tolist():
            final_obs[row] = codec.single(batch.final_obs, row)
        infos["final_obs"] = final_obs
        infos["_final_obs"] = has_final
        infos["final_info"] = _layout(batch.final_infos)
        infos["_final_info"] = has_final.copy()
    if env_ids:
        infos["env_id"] = batch.env_ids.astype(np.int32)
    return infos

_MODE_NAMES = {
    AutoresetMode.NEXT_STEP: "next_step",
    AutoresetMode.SAME_STEP: "same_step",
    AutoresetMode.DISABLED: "disabled",
}


def _batched_observation_space(pool: Pool, observation_mode: Any) -> Any:
    """The vector env's ``observation_space`` for gymnasium's ``observation_mode``."""
    if isinstance(observation_mode, tuple):
        return observation_mode[0]
    if observation_mode == "same":
        return batch_space(pool.observation_space, pool.num_envs)
    try:
        return batch_differing_spaces(list(pool.observation_spaces))
    except (AssertionError, TypeError, ValueError) as err:
        raise SpaceMismatchError(
            f"observation_mode='different': the envs' observation spaces cannot be batched "
            f"together ({type(err).__name__}: {err})"
        ) from err


class VectorEnv(GymVectorEnv):
    """A batch of envs behind gymnasium's ``VectorEnv`` API, plus EnvPool-style async calls.

    Built by :func:`envhive.make`. Sync use is exactly gymnasium's (``reset``/``step``, infos
    with ``_key`` masks, ``metadata["autoreset_mode"]``). Async use is EnvPool's:
    ``async_reset()``, then ``recv()``/``send(actions, info["env_id"])`` in a loop; with
    ``batch_size < num_envs``, ``recv`` returns the first ``batch_size`` envs to finish.
    gymnasium's ``AsyncVectorEnv`` calls work too (``step_async(actions)`` then
    ``step_wait(timeout=None)``, ``reset_async(seed=, options=)`` then ``reset_wait()``), and
    ``make(observation_mode=...)`` takes gymnasium's observation modes.

    Examples:
        >>> import envhive, numpy as np
        >>> env = envhive.make("CartPole-v1", num_envs=3, seed=42)
        >>> obs, info = env.reset()
        >>> obs, rew, term, trunc, info = env.step(np.array([0, 1, 0]))
        >>> obs.shape, rew.tolist()
        ((3, 4), [1.0, 1.0, 1.0])
        >>> env.close()

        Async, two envs per batch:

        >>> env = envhive.make("CartPole-v1", num_envs=4, batch_size=2, seed=0)
        >>> env.async_reset()
        >>> for _ in range(3):
        ...     obs, rew, term, trunc, info = env.recv()
        ...     env.send(np.zeros(2, dtype=np.int64), info["env_id"])
        >>> sorted(env.recv()[4]["env_id"].tolist() + env.recv()[4]["env_id"].tolist())
        [0, 1, 2, 3]
        >>> env.close()
    """

    def __init__(
        self, pool: Pool, *, name: str, chosen_by_auto: bool = False, device: Any = None,
        observation_mode: Any = "same", arrays: Any = None,
    ) -> None:
        # A pool of one-agent envs comes as that agent's (OneAgent); several agents come
        # flattened (agent_layout="flat": FlatAgents) or are refused.
        pool = check_agent_axis(pool, "gymnasium")
        self._pool = pool
        # device=None: numpy arrays; a torch device: tensors there (frontends/_torch.py);
        # ``arrays``: another converter with TorchArrays' methods (api="jax": envhive.jax).
        self._arrays: Any = arrays
        if arrays is None and device is not None:
            self._arrays = TorchArrays(torch_device(device), keep_tensor_actions=pool.resident)
        self._name = name
        self._chosen_by_auto = chosen_by_auto
        self.num_envs = pool.num_envs
        self.single_observation_space = pool.observation_space
        self.single_action_space = pool.action_space
        self.observation_space = _batched_observation_space(pool, observation_mode)
        self.action_space = batch_space(pool.action_space, pool.num_envs)
        self.metadata = dict(pool.props.metadata)
        self.metadata["autoreset_mode"] = pool.autoreset
        # What gymnasium's own vector envs carry and third-party code reads (TorchRL's
        # GymWrapper reads autoreset_mode; gymnasium's vector wrappers, observation_mode).
        self.autoreset_mode = pool.autoreset
        self.observation_mode = observation_mode
        self.render_mode = pool.props.render_mode
        self.closed = False
        self._obs_codec = codec_for(pool.observation_space)
        self._waiting: str | None = None  # the pending gymnasium *_async call: "step", "reset"

    # -- gymnasium API ---------------------------------------------------------------
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env (or, with ``options={"reset_mask": mask}``, the masked ones).

        Args:
            seed: ``None``; an int ``s`` (env ``i`` gets ``s + i``); or one seed per env.
                Without a seed, the first reset uses ``make(seed=...)``.
            options: passed to each env's ``reset``; the key ``reset_mask`` (bool array of
                shape ``(num_envs,)``) selects which envs to reset.

        Returns:
            ``(obs, infos)`` for all envs (unreset envs keep their current observation).
        """
        b = self._pool.reset(seed=seed, options=options)
        infos = _layout(b.infos) if b.infos else {}
        if self._arrays is not None:
            return self._arrays.tree(b.obs), self._arrays.infos(infos)
        return b.obs, infos

    def step(self, actions: Any) -> Transition:
        """Step every env; autoreset as set by ``make(autoreset=...)``.

        Args:
            actions: a batch from ``action_space`` (one row per env).

        Returns:
            ``(obs, rewards, terminations, truncations, infos)``, batched over all envs.

        Raises:
            envhive.ActionError: the batch does not fit the action space (nothing stepped).
            envhive.ResetNeededError: an env must be reset first (nothing stepped).
            envhive.EnvWorkerError: an env raised; it names the env and carries its traceback.
        """
        if self._arrays is not None:
            return self._converted(self._pool.step(self._arrays.actions(actions)), False)
        b = self._pool.step(actions)
        # Unpacking is cheaper than five attribute reads, and this runs on every step.
        _, obs, reward, terminated, truncated, _, _, has_final, infos, _, _ = b
        if infos or has_final is not None:
            return obs, reward, terminated, truncated, gym_infos(b, self._obs_codec)
        return obs, reward, terminated, truncated, {}

    def _converted(self, b: Batch, env_ids: bool) -> Transition:
        t = self._arrays
        assert t is not None
        infos = gym_infos(b, self._obs_codec, env_ids) if (b.infos or b.has_final is not None or env_ids) else {}
        return (t.tree(b.obs), t.array(b.reward), t.array(b.terminated), t.array(b.truncated),
                t.infos(infos))

    def render(self) -> tuple[Any, ...]:
        """Each env's ``render()``, in env order."""
        return self._pool.call("render")

    def call(self, name: str, *args: Any, env_ids: Any = None, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` on each env (or read it, if it is not callable), with ``args``
        and ``kwargs``; ``env_ids`` (envhive's, as for :meth:`get_attr`, never passed to the
        method) calls only those envs, results in their order."""
        return self._pool.call(name, args, kwargs, env_ids=env_ids)

    def get_attr(self, name: str, env_ids: Any = None) -> tuple[Any, ...]:
        """Read attribute ``name`` from each env (or from ``env_ids``, in that order)."""
        return self._pool.call(name, env_ids=env_ids)

    def set_attr(self, name: str, values: Any, env_ids: Any = None) -> None:
        """Set attribute ``name`` on each env (or on ``env_ids``): a list/tuple gives one
        value per env, anything else is given to each."""
        self._pool.set_attr(name, values, env_ids)

    def close(self, **kwargs: Any) -> None:
        """Close every env and release the executor's workers and buffers. Idempotent."""
        if not self.closed and self._waiting is not None:
            warnings.warn(
                f"Calling `close` while waiting for a pending call to `{self._waiting}` to "
                "complete. Its results are dropped.", UserWarning, stacklevel=2,
            )
            self._waiting = None
        self.closed = True
        self._pool.close()  # always: it finishes a close that a Ctrl-C cut short

    def close_extras(self, **kwargs: Any) -> None:
        """Part of gymnasium's API; ``close`` does all the work."""
        self._pool.close()

    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """Each env's ``np_random_seed``, in env order, as gymnasium's vector envs give it.

        Examples:
            >>> import envhive
            >>> env = envhive.make("CartPole-v1", num_envs=3)
            >>> _ = env.reset(seed=42)
            >>> env.np_random_seed
            (42, 43, 44)
            >>> env.close()
        """
        return tuple(self._pool.call("np_random_seed"))

    @property  # type: ignore[override]
    def np_random(self) -> tuple[np.random.Generator, ...]:
        """Each env's ``np_random`` generator, in env order (copies, where envs run in
        other processes)."""
        return tuple(self._pool.call("np_random"))

    @np_random.setter
    def np_random(self, value: Any) -> None:
        raise AttributeError(
            "np_random: each env has its own generator; seed them with reset(seed=...), or "
            "set_attr('np_random', generators) with one per env"
        )

    # -- gymnasium's AsyncVectorEnv calls (on send/async_reset and Pool.wait) -------------
    def _start(self, call: str) -> None:
        """Refuse ``{call}_async`` while anything is pending (as ``AsyncVectorEnv`` does)."""
        if self._waiting is not None:
            self._check_open()
            raise PendingCallError(
                f"Calling `{call}_async` while waiting for a pending call to `{self._waiting}` "
                f"to complete: call {self._waiting}_wait() first", self._waiting,
            )
        if self._pool.pending:
            raise PendingCallError(
                f"Calling `{call}_async` while {self._pool.pending} env(s) sent with send() or "
                "async_reset() are not received: recv() them first"
            )

    def _finish(self, call: str, timeout: float | None) -> Batch:
        """``{call}_wait``: every env's row once the pending ``{call}_async`` has finished."""
        if self._waiting != call:
            self._check_open()
            also = f" (a call to `{self._waiting}` is pending)" if self._waiting else ""
            raise NothingPendingError(
                f"Calling `{call}_wait` without any prior call to `{call}_async`.{also}", call
            )
        try:
            batch = self._pool.wait(timeout, caller=f"{call}_wait")
        except WaitTimeoutError:
            raise  # still in flight: the call stays pending
        except BaseException:
            self._waiting = None  # an env raised (or Ctrl-C): nothing is in flight any more
            raise
        self._waiting = None
        return batch

    def reset_async(
        self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Start resetting every env (or, with ``options={"reset_mask": mask}``, the masked
        ones), as ``reset`` would; ``reset_wait`` returns the result.

        gymnasium's ``AsyncVectorEnv.reset_async``: the envs run meanwhile (on the thread and
        process executors; the serial one resets them here).

        Examples:
            >>> import envhive
            >>> env = envhive.make("CartPole-v1", num_envs=2, executor="thread")
            >>> env.reset_async(seed=0)
            >>> obs, info = env.reset_wait(timeout=10.0)
            >>> obs.shape
            (2, 4)
            >>> env.close()
        """
        self._start("reset")
        ids = None
        if options is not None and "reset_mask" in options:
            check_options(options)
            options = dict(options)
            ids = reset_mask_ids(options.pop("reset_mask"), self.num_envs)
        self._sent("reset", self._pool.async_reset, ids, seed=seed, options=options)

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        """The result of ``reset_async``: ``(obs, infos)`` for every env, as ``reset`` returns.

        Args:
            timeout: seconds to wait at most (``None``: until done). If the envs are not all
                reset by then, :class:`envhive.WaitTimeoutError` (also gymnasium's
                ``multiprocessing.TimeoutError``) is raised and the reset stays pending:
                ``reset_wait`` again returns it.

        Raises:
            envhive.NothingPendingError: no ``reset_async`` is pending.
        """
        b = self._finish("reset", timeout)
        infos = _layout(b.infos) if b.infos else {}
        if self._arrays is not None:
            return self._arrays.tree(b.obs), self._arrays.infos(infos)
        return b.obs, infos

    def step_async(self, actions: Any) -> None:
        """Start stepping every env, as ``step`` would; ``step_wait`` returns the result.

        gymnasium's ``AsyncVectorEnv.step_async``: the envs run meanwhile (on the thread and
        process executors; the serial one steps them here). The actions are checked here
        (``envhive.ActionError``; then nothing is sent).

        Examples:
            >>> import envhive, numpy as np
            >>> env = envhive.make("CartPole-v1", num_envs=2, executor="thread", seed=0)
            >>> _ = env.reset()
            >>> env.step_async(np.array([0, 1]))
            >>> obs, rew, term, trunc, info = env.step_wait()
            >>> rew.tolist()
            [1.0, 1.0]
            >>> env.close()
        """
        self._start("step")
        if self._arrays is not None:
            actions = self._arrays.actions(actions)
        self._sent("step", self._pool.send, actions)

    def _sent(self, call: str, dispatch: Any, *args: Any, **kwargs: Any) -> None:
        """``{call}_async``'s dispatch, and the call marked pending. A Ctrl-C on the way (in
        the pool, or in this frame as the pool's call returns) leaves nothing in flight and
        nothing pending (``Pool.raised_around``)."""
        try:
            dispatch(*args, **kwargs)
            self._waiting = call
        except BaseException as err:
            self._waiting = None
            self._pool.raised_around(err)
            raise

    def step_wait(self, timeout: float | None = None) -> Transition:
        """The result of ``step_async``: ``(obs, rewards, terminations, truncations, infos)``
        for every env, as ``step`` returns.

        Args:
            timeout: as for :meth:`reset_wait`.

        Raises:
            envhive.NothingPendingError: no ``step_async`` is pending.
            envhive.EnvWorkerError: an env raised (every env is idle again, as after ``step``).
        """
        b = self._finish("step", timeout)
        if self._arrays is not None:
            return self._converted(b, False)
        if b.infos or b.has_final is not None:
            return b.obs, b.reward, b.terminated, b.truncated, gym_infos(b, self._obs_codec)
        return b.obs, b.reward, b.terminated, b.truncated, {}

    # -- EnvPool-style async API --------------------------------------------------------
    def async_reset(
        self,
        env_id: Any = None,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        """Start resetting ``env_id`` (default: every env); collect the results with ``recv``.

        Also the way to reset single envs in disabled autoreset mode.
        """
        if self._waiting is not None:
            self._refuse_during_gym_call("async_reset")
        try:  # a Ctrl-C as the pool's call returns: see Pool.raised_around
            self._pool.async_reset(env_id, seed=seed, options=options)
        except BaseException as err:
            self._pool.raised_around(err)
            raise

    def send(self, actions: Any, env_id: Any = None) -> None:
        """Start stepping envs ``env_id`` (default: every env) with ``actions`` (one row each)."""
        if self._waiting is not None:
            self._refuse_during_gym_call("send")
        try:  # a Ctrl-C as the pool's call returns: see Pool.raised_around
            if self._arrays is not None:
                actions = self._arrays.actions(actions)
                if env_id is not None:
                    env_id = self._arrays.actions(env_id)
            self._pool.send(actions, env_id)
        except BaseException as err:
            self._pool.raised_around(err)
            raise

    def recv(self) -> Transition:
        """The first ``batch_size`` envs to finish: ``(obs, rew, term, trunc, info)``.

        ``info["env_id"]`` tells which env each row is.
        """
        if self._waiting is not None:
            self._refuse_during_gym_call("recv")
        received = False
        try:
            b = self._pool.recv()
            received = True
            if self._arrays is not None:
                return self._converted(b, True)
            return b.obs, b.reward, b.terminated, b.truncated, gym_infos(b, self._obs_codec, True)
        except BaseException as err:  # in the layout: as if it struck inside recv
            if received:
                self._pool.cut_short(err)
            else:
                self._pool.raised_around(err)
            raise

    def _check_open(self) -> None:
        """A closed pool says so first (before any complaint about the call's order)."""
        if self._pool.closed:
            raise ClosedError("the pool is closed (by close(), or after a worker failure): "
                              "make a new one with envhive.make()")

    def _refuse_during_gym_call(self, what: str) -> None:
        """EnvPool-style calls while a gymnasium ``*_async`` call is pending: refused."""
        if self._waiting is not None:
            self._check_open()
            raise PendingCallError(
                f"{what}() called while waiting for a pending call to `{self._waiting}` to "
                f"complete: call {self._waiting}_wait() first", self._waiting,
            )

    # -- extras -----------------------------------------------------------------------
    def xla(self) -> tuple[Any, Any, Any, Any]:
        """EnvPool's ``xla()``: ``(handle, recv, send, step)``, jax functions that step this
        pool inside ``jax.jit`` with no Python per call (envhive's compiled ids on the native
        executor; MuJoCo's envs run their ops in Python under the GIL). ``recv(handle)``
        returns ``(handle, (obs, reward, terminated, truncated, info))`` with
        ``info["env_id"]``; ``send(handle, action, env_id=None)`` returns the handle;
        ``step`` is both. Eager calls and XLA calls may alternate on the pool (block on the
        handle before an eager call). Needs ``pip install 'envhive[jax]'``; see docs/jax.md.

        Examples:
            >>> import envhive, jax, numpy as np
            >>> env = envhive.make("envhive/CartPole-v1", num_envs=2, seed=0)
            >>> handle, recv, send, step = env.xla()
            >>> _ = env.reset()
            >>> handle, (obs, reward, term, trunc, info) = jax.jit(step)(handle, np.zeros(2, np.int32))
            >>> obs.shape, reward.tolist(), info["env_id"].tolist()
            ((2, 4), [1.0, 1.0], [0, 1])
            >>> env.close()
        """
        from envhive.jax._ffi import xla_functions

        return xla_functions(self._pool, self._name)

    @property
    def pool(self) -> Pool:
        r"""The pool behind this front end; its calls return neutral :class:`envhive.Batch`\ es."""
        return self._pool

    @property
    def batch_size(self) -> int:
        """How many envs ``recv`` returns."""
        return self._pool.batch_size

    @property
    def executor(self) -> str:
        """The executor's name, e.g. ``"serial"``; when ``executor="auto"`` chose it, its
        ``why`` says why, with the measured figures (``None`` otherwise)."""
        return self._pool.executor_name

    @property
    def env_steps(self) -> int:
        """How many env transitions have been taken (resets excluded)."""
        return self._pool.env_steps

    @property
    def device(self) -> Any:
        """The device results live on (a ``torch.device``; with ``api="jax"``, a jax device),
        or ``None`` for numpy arrays."""
        return None if self._arrays is None else self._arrays.device

    @property
    def copy(self) -> bool:
        """Whether results are copies (True) or views into the pool's buffers (False)."""
        return self._pool.copy

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


    def __repr__(self) -> str:
        how = self._pool.describe() + (" (auto)" if self._chosen_by_auto else "")
        choice = self._pool.executor_name.choice
        # When auto measured the env, the figures behind its choice; when the env's own engine
        # could not run, why.
        shown = choice is not None and (choice.costs is not None or choice.fallback)
        why = f", why={choice.reason!r}" if self._chosen_by_auto and choice is not None and shown else ""
        mode = _MODE_NAMES[self._pool.autoreset]
        extra = "" if self.batch_size == self.num_envs else f", batch_size={self.batch_size}"
        closed = ", closed" if self.closed else ""
        return (
            f"envhive.VectorEnv({self._name!r}, num_envs={self.num_envs}, executor={how!r}{why}, "
            f"autoreset={mode!r}{extra}{closed})"
        )

