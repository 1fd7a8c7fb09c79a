"""The Python runner of ops: one slice of gymnasium envs, stepped into the pool's buffers.

Serial, thread and process executors (and Ray actors) run Python envs through
:class:`EnvRunner`. Each env's op is ``envhive._perform.perform`` (the one Python definition
of what ``envhive._ops`` says); the runner's loop over a call's envs is one loop for every
call, whose common case runs in C (``envhive._runloop.step_rows``, an optional extension built
at install) and hands every other env to ``perform``. Without the extension the same loop runs
in Python (:func:`step_rows_py`), handing every env to ``perform``; a differential test holds
the two equal (tests/test_runloop.py).

Examples:
    >>> import gymnasium as gym
    >>> from envhive._buffers import Buffers, BufferSpec
    >>> from envhive._report import Completion
    >>> envs = build_envs([lambda: gym.make("CartPole-v1")] * 2, first_id=0)
    >>> runner = EnvRunner(envs, first_id=0)
    >>> b = Buffers.allocate(BufferSpec(2, envs[0].observation_space, envs[0].action_space))
    >>> runner.bind(b)
    >>> b.ops[:] = 1  # RESET
    >>> out = Completion()
    >>> runner.run([0, 1], None, out)
    >>> out.env_ids
    [0, 1]
    >>> runner.close()
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from envhive._agent_runner import AgentOps
from envhive._buffers import Buffers, as_index
from envhive._memory import check_fits, resident_bytes, size_text
from envhive._ops import RESET
from envhive._perform import NOT_CALLED, RAISED, RETURNED, perform, reset_env, write_obs
from envhive._report import Completion, EnvFactory, env_error, safe_str
from envhive._results import batch_fits, flag_value, result_error, reward_value
from envhive._spaces import ArrayCodec
from envhive.errors import ConfigError, EnvWorkerError, worker_error_as

__all__ = ["EnvRunner", "build_env", "build_envs", "compiled_runner", "reset_env", "step_rows_py"]

# Observations up to this size (bytes per env) are written to the buffers as one batch.
_STACK_OBS_BYTES = 4096

try:
    _runloop: Any = importlib.import_module("envhive._runloop")
except ImportError:  # built without a C compiler: every env takes the Python path
    _runloop = None
#: ``step_rows(envs, ops, actions, read, rows, ids, stepped, obs_list, reward, terminated,
#: truncated, infos, env_ids, finish) -> ended``: the loop (see _runloop.c and step_rows_py).
_step_rows: Callable[..., int] | None = getattr(_runloop, "step_rows", None)
_write_obs_rows: Callable[..., bool] | None = getattr(_runloop, "write_obs_rows", None)


def compiled_runner() -> bool:
    """Whether envs are stepped by envhive's compiled loop (else by the same loop in Python).

    The loop is a small C extension built at install time; without a C compiler the install
    still succeeds and the Python loop, which behaves the same, is used.

    Examples:
        >>> isinstance(compiled_runner(), bool)
        True
    """
    return _step_rows is not None


def _nth(seq: int | list[int], k: int) -> int:
    """Entry ``k`` of a call's rows or ids: ``seq + k`` for a contiguous run (an int), else
    ``seq[k]``."""
    return seq + k if isinstance(seq, int) else seq[k]


def step_rows_py(
    envs: list[gym.Env], ops: np.ndarray, actions: Any, read: Any, rows: int | list[int],
    ids: int | list[int], stepped: list[Any] | None, obs_list: list[Any], reward: Any,
    terminated: Any, truncated: Any, infos: dict[int, Any], env_ids: list[int],
    finish: Callable[[int, int, Any], int],
) -> int:
    """The runner's loop, in Python: what ``_runloop.step_rows`` does, with every env handed
    to ``finish`` (which runs ``perform``). The C loop finishes the plain case itself, exactly
    as ``finish`` would; this is what runs without it.

    For env ``k`` of ``envs``: its row is ``rows + k`` (an int) or ``rows[k]``, its id
    ``ids + k`` or ``ids[k]``; a step result computed beforehand (``stepped[k]``: a result or
    the exception the step raised) is passed on for a step op. ``finish(k, kind, got)`` returns
    1 (the episode ended), 0, or -1 (the env failed); the ids of the envs that did not fail
    are appended to ``env_ids``. Returns how many of them ended. (``actions``, ``read``,
    ``obs_list``, the buffers and ``infos`` are ``finish``'s to use; they are here so that both
    loops take the same arguments.)
    """
    ended = 0
    for k in range(len(envs)):
        r = _nth(rows, k)
        kind, got = NOT_CALLED, None
        if stepped is not None and ops[r] != RESET:
            got = stepped[k]
            kind = RAISED if isinstance(got, BaseException) else RETURNED
        done = finish(k, kind, got)
        got = None  # do not keep an env's result (or exception) alive
        if done >= 0:
            ended += done
            env_ids.append(_nth(ids, k))
    return ended


def build_env(factory: EnvFactory, env_id: int) -> gym.Env:
    """Call a factory and check that it gave an env; errors name the env."""
    try:
        env = factory()
    except Exception as err:
        # Also an instance of err's class (see worker_error_as): a caller's `except` for the
        # factory's own error (SB3's DeprecatedEnv fallback) still catches it.
        raise worker_error_as(
            err, f"the env factory raised {type(err).__name__}: {safe_str(err)}",
            env_id=env_id, worker_traceback=traceback.format_exc(),
        ) from err
    if not isinstance(env, gym.Env):
        # A multi-agent env (a PettingZoo ParallelEnv, a dm_env of player lists) gets its
        # agent axis here, where it is built.
        from envhive.envs.multiagent import as_agent_env

        agents = as_agent_env(env)
        if agents is None:
            raise ConfigError(
                f"env {env_id}: the factory must return a gymnasium.Env, a PettingZoo ParallelEnv "
                f"or a dm_env of player lists (as MeltingPot's substrates), got {type(env).__name__}"
            )
        return agents
    return env


def build_envs(factories: Sequence[EnvFactory], first_id: int) -> list[gym.Env]:
    """Build one env per factory (ids from ``first_id``); close them all if any fails.

    A factory that hands out one shared instance (``lambda: env``) would make several slots
    step the same env: that is refused with an error naming both envs.
    """
    envs: list[gym.Env] = []
    seen: dict[int, int] = {}
    probe = len(factories) >= _PROBE_FROM  # large slices: does the rest fit in memory?
    rss = 0
    try:
        for k, factory in enumerate(factories):
            if probe and k in (_PROBE_START, _PROBE_START + _PROBE_ENVS):
                rss = _check_rest_fits(k, rss, len(factories), first_id)
            env = build_env(factory, first_id + k)
            if id(env) in seen:
                raise ConfigError(
                    f"env {first_id + k}: the factory returned the same env object as for env "
                    f"{seen[id(env)]}; a factory must build a new env on every call "
                    "(e.g. lambda: MyEnv(...), not lambda: env)"
                )
            seen[id(env)] = first_id + k
            envs.append(env)
    except BaseException:
        for env in envs:
            try:
                env.close()
            except Exception:
                pass
        raise
    return envs


# Python envs show their size only once built: a large slice measures the memory its envs
# take between the _PROBE_START-th and the next _PROBE_ENVS (after the first envs, which pay
# for imports and caches) and refuses to build the rest if it cannot fit.
_PROBE_START, _PROBE_ENVS = 64, 1024
_PROBE_FROM = 8 * _PROBE_ENVS


def _check_rest_fits(k: int, rss: int, total: int, first_id: int) -> int:
    """At env ``k`` of ``total``: the resident memory now; at the probe's end, a
    :class:`~envhive.errors.ResourceError` if the envs still to build would not fit."""
    now = resident_bytes()
    if now is None or k == _PROBE_START:
        return now or 0
    per_env = max(0, now - rss) / _PROBE_ENVS
    if per_env:
        check_fits(per_env * (total - k), f"building envs {first_id}..{first_id + total - 1} "
                   f"(about {size_text(per_env)} per env, measured on {_PROBE_ENVS} of them; "
                   f"{total - k:,} still to build)", per_env)
    return now


class EnvRunner:
    """The one worker loop: runs ops for a contiguous slice of envs, writing into buffers.

    Serial, thread and process executors (and Ray actors) all run envs through this class, so
    ops mean exactly the same thing everywhere.

    Args:
        envs: the envs of the slice.
        first_id: the pool-wide id of ``envs[0]``.
    """

    def __init__(self, envs: Sequence[gym.Env], first_id: int) -> None:
        self.envs = list(envs)
        self.first_id = first_id
        self.buffers: Buffers | None = None
        self._stack_obs = False
        self._obs_shape: tuple[int, ...] | None = None
        self._row0 = 0  # env id minus buffer row: first_id when bound to slice-local buffers
        # The call plan of the last id list run (see _plan), kept for the next call with it.
        self._planned: list[int] | None = None
        self._plan: tuple[list[gym.Env], int | list[int], int | list[int], slice | list[int]] = ([], 0, 0, [])
        self._loop: Callable[..., int] = step_rows_py  # set by bind
        self._obs_rows: Callable[..., bool] | None = None  # write_obs_rows, where it applies
        # What _finish_row needs during a loop: options, out, obs_list, envs, rows, ids.
        self._call: tuple[Any, ...] | None = None
        # Envs whose class can step several instances in one call (``Cls.step_many(envs,
        # actions)``, e.g. envhive's MuJoCo envs: one GIL release for the physics of a whole
        # slice instead of one per env) are stepped that way when the slice has more than one.
        kind = type(self.envs[0]) if self.envs else None
        many = getattr(kind, "step_many", None)
        same = all(type(env) is kind for env in self.envs)
        self._step_many: Callable[..., list[Any]] | None = many if same and len(self.envs) > 1 else None
        #: The loop :meth:`run` calls: :meth:`_run`, or the multi-agent one (set by ``bind``).
        self._run_ops: Callable[[Sequence[int], dict[str, Any] | None, Completion], None] = self._run
        self._agents = False  # the buffers have an agent axis: _run_ops is the multi-agent loop
        self._whole: tuple[int, slice] = (0, slice(0, 0))  # the whole slice's first row, index

    def bind(self, buffers: Buffers, local: bool = False) -> None:
        """Attach the (possibly shared-memory) buffers the runner writes into.

        Args:
            buffers: pool-size buffers (row ``i`` is env ``i``), or, with ``local``, buffers
                of this slice only (row ``i - first_id`` is env ``i``): a remote worker then
                holds and ships only its own rows. Env ids in commands, infos and errors stay
                pool-wide either way.
            local: index ``buffers`` by slice-local rows.
        """
        if local and buffers.spec.num_envs != len(self.envs):
            raise ValueError(
                f"slice-local buffers: expected {len(self.envs)} rows, got {buffers.spec.num_envs}"
            )
        self.buffers = buffers
        self._row0 = self.first_id if local else 0
        self._planned = None
        row = self.first_id - self._row0
        self._whole = (row, slice(row, row + len(self.envs)))
        # Small array observations are written as one stacked batch; larger ones (images)
        # row by row, where stacking would add a copy of every observation.
        codec = buffers.obs_codec
        self._obs_shape = codec.shape if isinstance(codec, ArrayCodec) else None
        self._stack_obs = self._obs_shape is not None and buffers.obs[:1].nbytes <= _STACK_OBS_BYTES
        self._obs_rows = _write_obs_rows if self._obs_shape is not None else None
        # The C loop writes rewards and flags itself: one float64 reward and bool flags per row.
        in_c = _step_rows is not None and buffers.reward.ndim == 1 and all(
            type(a) is np.ndarray for a in (buffers.ops, buffers.reward, buffers.terminated, buffers.truncated))
        self._loop = _step_rows if in_c and _step_rows is not None else step_rows_py
        # Multi-agent envs (an agent axis in the buffers) take their own loop, chosen here
        # once: the single-agent loop pays nothing for them.
        self._run_ops = self._run
        self._agents = bool(buffers.spec.agents)
        if self._agents:
            self._run_ops = AgentOps(self).run

    def run(self, env_ids: Sequence[int], options: dict[str, Any] | None, out: Completion) -> None:
        """Perform each env's op (read from ``buffers.ops``) and record the results in ``out``.

        Each env's op is ``envhive._perform.perform``; the loop's common case (a step returning
        a plain 5-tuple, no episode end to reset) runs in C when envhive was built with its
        compiled loop (:func:`compiled_runner`), which writes that env's reward and flags at
        once. The observations are written after every env of the call stepped, with one
        compiled call for a contiguous run of plain arrays, else with numpy (stacked when they
        stack into exactly the buffer's rows and dtype, else env by env, where one that does
        not fit becomes that env's error). ``out.ended`` counts the envs whose episode ended.

        A list passed as ``env_ids`` must not be changed afterwards: the runner keeps the
        plan it made from the last list it was given, to reuse when given it again.

        Nothing an env returns makes this raise: should a returned value defeat the checks
        (it raises where envhive reads it), every env of the call not yet reported gets an
        :class:`~envhive.errors.EnvWorkerError` instead, so a worker process never dies of it.
        """
        try:
            self._run_ops(env_ids, options, out)
        except Exception as err:
            self._failed(env_ids, out, err)

    def run_whole(self, env_ids: list[int], options: dict[str, Any] | None, out: Completion) -> None:
        """:meth:`run` of the whole slice: ``env_ids`` must be its ids in order (the same
        list every call), so the call needs no plan."""
        if self._agents:
            self.run(env_ids, options, out)
            return
        try:
            row, where = self._whole
            self._perform_all(self.envs, row, self.first_id, where, options, out)
        except Exception as err:
            self._failed(env_ids, out, err)

    def _failed(self, env_ids: Sequence[int], out: Completion, err: Exception) -> None:
        """``run``'s safety net: every env of the call not yet reported fails with ``err``."""
        for i in env_ids:
            out.errors.setdefault(int(i), EnvWorkerError(
                f"envhive could not record the result of this env's op: "
                f"{type(err).__name__}: {safe_str(err)}",
                env_id=int(i), worker_traceback=traceback.format_exc(),
                cause_type=type(err).__name__,
            ))

    def _run(self, env_ids: Sequence[int], options: dict[str, Any] | None, out: Completion) -> None:
        """:meth:`run` without its safety net."""
        ids = env_ids if type(env_ids) is list else list(env_ids)
        if ids is not self._planned:  # executors pass the same (unchanging) list each step
            self._planned = ids
            self._plan = self._plan_of(ids)
        envs, rows, id_arg, where = self._plan
        self._perform_all(envs, rows, id_arg, where, options, out)

    def _plan_of(self, ids: list[int]) -> tuple[list[gym.Env], int | list[int], int | list[int], slice | list[int]]:
        """``(envs, rows, ids, index)`` of a call on ``ids``: a contiguous run is an int (its
        first row, its first id), any other list the list; ``index`` indexes its rows."""
        row0, first = self._row0, self.first_id
        rows = ids if not row0 else [i - row0 for i in ids]
        index = as_index(rows)
        whole = index == slice(first - row0, first - row0 + len(self.envs))
        envs = self.envs if whole else [self.envs[i - first] for i in ids]
        if type(index) is slice:
            return envs, index.start, ids[0], index
        return envs, rows, ids, index

    def _perform_all(
        self, envs: list[gym.Env], rows: int | list[int], ids: int | list[int],
        where: slice | list[int], options: dict[str, Any] | None, out: Completion,
    ) -> None:
        """The ops of ``envs`` (rows and ids as :func:`step_rows_py` takes them; ``where``
        indexes the rows): the loop, then the observations."""
        b = self.buffers
        assert b is not None, "bind() must come before run()"  # internal invariant
        first, start = not (out.env_ids or out.errors), len(out.env_ids)
        codec = b.act_codec
        read = None if type(codec) is ArrayCodec else codec.read
        obs_list: list[Any] = []  # one entry per env (None: it has no observation)
        stepped = self._stepped(envs, rows, read) if self._step_many is not None else None
        self._call = (options, out, obs_list, envs, rows, ids)
        try:
            ended = self._loop(envs, b.ops, b.actions, read, rows, ids, stepped, obs_list, b.reward,
                               b.terminated, b.truncated, out.infos, out.env_ids, self._finish_row)
        finally:
            self._call = None
        obs_rows = self._obs_rows
        if obs_rows is None or type(where) is not slice or not obs_rows(where.start, b.obs, obs_list, np.ndarray):
            # Not all plain arrays of the row's shape and dtype: checked (and blamed) by numpy.
            ks = [k for k, obs in enumerate(obs_list) if obs is not None]
            if ks:
                done_rows = [_nth(rows, k) for k in ks]
                done_ids = [_nth(ids, k) for k in ks]
                self._write_obs(as_index(done_rows), done_ids, done_rows, [obs_list[k] for k in ks], out)
        if out.errors:
            mine = out.env_ids[start:]
            kept = [i for i in mine if i not in out.errors]
            if len(kept) != len(mine):
                out.env_ids[start:] = kept
        # The count covers ``out``'s envs when every earlier one was counted too (a sync call
        # running several slices into one completion); else the pool reads the flags.
        if out.errors:
            out.ended = None
        elif first:
            out.ended = ended
        elif out.ended is not None:
            out.ended += ended

    def _stepped(self, envs: list[gym.Env], rows: int | list[int], read: Any) -> list[Any] | None:
        """The step results of the call's stepping envs, from one ``step_many`` call (one
        entry per env: its result, or the exception its step raised; ``None`` for a RESET),
        when more than one env steps; else ``None`` (the loop steps them)."""
        b = self.buffers
        assert b is not None and self._step_many is not None
        ops, actions = b.ops, b.actions
        ks = [k for k in range(len(envs)) if ops[_nth(rows, k)] != RESET]
        if len(ks) < 2:
            return None
        rs = [_nth(rows, k) for k in ks]
        acts = [actions[r] if read is None else read(actions, r) for r in rs]
        stepped: list[Any] = [None] * len(envs)
        for k, result in zip(ks, self._step_many([envs[k] for k in ks], acts)):
            stepped[k] = result
        return stepped

    def _finish_row(self, k: int, kind: int, got: Any) -> int:
        """The loop's callback for env ``k`` of the call: its op through ``perform``, its
        reward and flags written, its observation appended for :meth:`_perform_all` to write.
        Returns 1 if its episode ended, 0 if not, -1 if it failed (its error recorded)."""
        b = self.buffers
        assert b is not None and self._call is not None
        options, out, obs_list, envs, rows, ids = self._call
        r, i = _nth(rows, k), _nth(ids, k)
        done = perform(envs[k], i, r, int(b.ops[r]), b, options, out, kind, got)
        got = None
        if done is None:
            obs_list.append(None)
            return -1
        obs, reward, term, trunc = done
        obs_list.append(obs)  # written even if its reward fails, as numpy would write it
        if type(reward) is float and b.reward.ndim == 1:
            b.reward[r] = reward
        else:
            batch = batch_fits([reward], b.reward)
            b.reward[r:r + 1] = batch if batch is not None else self._checked("reward", b.reward, [i], [reward], out)
        b.terminated[r] = term  # bools: perform checked them
        b.truncated[r] = trunc
        if i in out.errors:
            return -1
        return 1 if term or trunc else 0

    def _checked(
        self, field: str, buf: np.ndarray, ids: list[int], values: list[Any], out: Completion
    ) -> list[Any]:
        """``values`` with each env's checked on its own; a bad one becomes that env's error
        (naming ``field``) and is written as 0/False, a row the pool will not hand out."""
        flags = buf.dtype == np.bool_
        shape = buf.shape[1:]
        good: list[Any] = []
        for i, value in zip(ids, values):
            fixed = flag_value(value) if flags else reward_value(value, shape)
            if fixed is None:
                fixed = False if flags else np.zeros(shape)
                expected = ("a bool (True/False, numpy.bool_, or 0/1)" if flags
                            else f"a real number of shape {shape}" if shape else "a real number")
                out.errors.setdefault(i, result_error("step", field, value, expected, i))
            good.append(fixed)
        return good

    def _write_obs(
        self, where: Any, ids: list[int], rows: list[int], obs_list: list[Any], out: Completion
    ) -> None:
        """Write the observations of ``ids``; one that does not fit becomes its env's error."""
        b = self.buffers
        assert b is not None
        buf, shape = b.obs, self._obs_shape
        if len(ids) > 1 and self._stack_obs and shape is not None:
            # One write for the batch when it stacks into exactly the buffer's rows and dtype
            # (the same values the per-env writes would store); anything else goes per env.
            try:
                batch = np.asarray(obs_list)
            except Exception:  # ragged or unreadable: written (and blamed) env by env
                batch = None
            if batch is not None and batch.dtype == buf.dtype and batch.shape == (len(ids), *shape):
                buf[where] = batch
                return
        for i, r, obs in zip(ids, rows, obs_list):
            try:
                write_obs(b, buf, r, obs, "reset" if b.ops[r] == RESET else "step", i)
            except EnvWorkerError as err:
                out.errors.setdefault(i, err)

    def _envs_of(self, env_ids: Sequence[int] | None) -> list[gym.Env]:
        """The envs of pool-wide ``env_ids`` (all of this slice's for ``None``)."""
        if env_ids is None:
            return self.envs
        first = self.first_id
        return [self.envs[i - first] for i in env_ids]

    def call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        env_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        """``env.get_wrapper_attr(name)`` on each env (or ``env_ids``, pool-wide ids, in that
        order), called if callable. An env that raises makes the call raise an
        :class:`~envhive.errors.EnvWorkerError` naming that env (the env's exception is its
        ``__cause__``), on every executor."""
        results = []
        ids = range(self.first_id, self.first_id + len(self.envs)) if env_ids is None else env_ids
        for i, env in zip(ids, self._envs_of(env_ids)):
            try:
                attr = env.get_wrapper_attr(name)
                results.append(attr(*args, **kwargs) if callable(attr) else attr)
            except Exception as err:
                raise env_error(f"call({name!r})", err, int(i)) from err
        return results

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """``env.set_wrapper_attr(name, value)`` on each env of the slice (or ``env_ids``);
        an env that raises: as :meth:`call`."""
        ids = range(self.first_id, self.first_id + len(self.envs)) if env_ids is None else env_ids
        for i, env, value in zip(ids, self._envs_of(env_ids), values):
            try:
                env.set_wrapper_attr(name, value)
            except Exception as err:
                raise env_error(f"set_attr({name!r})", err, int(i)) from err

    def close(self) -> None:
        """Close every env; keep going past envs whose close raises."""
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass
        self.envs = []

