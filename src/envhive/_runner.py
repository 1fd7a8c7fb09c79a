"""The Python runner of ops: one slice of gymnasium envs, stepped into the pool's buffers.

Serial, thread and process executors (and any future remote worker) run Python envs through
:class:`EnvRunner`, which performs each env's op exactly as ``envhive._ops`` defines it. Its
common case runs in C (``envhive._runloop``, an optional extension built at install); every
other case in Python, so an op means the same either way.

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

from envhive._buffers import Buffers, as_index
from envhive._memory import check_fits, resident_bytes, size_text
from envhive._ops import RESET, RESET_REWARD, STEP_RESET, resets_in_op
from envhive._report import Completion, EnvFactory, env_error, safe_str
from envhive._results import (
    batch_fits,
    check_info,
    flag_value,
    reset_pair,
    result_error,
    reward_value,
    step_tuple,
)
from envhive._spaces import ArrayCodec, Tree
from envhive.errors import ConfigError, EnvWorkerError, worker_error_as

__all__ = ["EnvRunner", "build_env", "build_envs", "compiled_runner", "reset_env"]

_RESET, _STEP_RESET = RESET, STEP_RESET
# Observations up to this size (bytes per env) are written to the buffers as one batch.
_STACK_OBS_BYTES = 4096

# What the C fast path did with the env it stopped at (see _runloop.c).
_NOT_CALLED, _RETURNED, _RAISED = 0, 1, 2
try:
    _runloop: Any = importlib.import_module("envhive._runloop")
except ImportError:  # built without a C compiler: every env takes the Python path
    _runloop = None
_step_slice: Callable[..., tuple[int, int, Any]] | None = getattr(_runloop, "step_slice", None)
_write_rows: Callable[..., int] | None = getattr(_runloop, "write_rows", None)
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
    return _step_slice is not None



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
        self._index_of: list[int] | None = None
        self._row0 = 0  # env id minus buffer row: first_id when bound to slice-local buffers
        self._rows: list[int] = []  # the buffer rows of the ids in _index_of
        self._index: slice | list[int] = []
        self._index_envs: list[gym.Env] = []  # the envs of the ids in _index_of, in order
        self._obs_shape: tuple[int, ...] | None = None
        self._write_rows: Callable[..., int] | None = None
        self._whole_in_c = False  # set by bind
        self._call: tuple[dict[str, Any] | None, Completion, list[Any]] | None = None  # _run_rows's
        # Envs whose class can step several instances in one call (``Cls.step_many(envs,
        # actions)``, e.g. envhive's MuJoCo envs: one GIL release for the physics of a whole
        # slice instead of one per env) are stepped that way when the slice has more than one.
        kind = type(self.envs[0]) if self.envs else None
        many = getattr(kind, "step_many", None)
        same = all(type(env) is kind for env in self.envs)
        self._step_many: Callable[..., list[Any]] | None = many if same and len(self.envs) > 1 else None
        #: The loop :meth:`run` calls: :meth:`_run`, or the multi-agent one (set by ``bind``).
        self._run_ops: Callable[[Sequence[int], dict[str, Any] | None, Completion], None] = self._run

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
        self._index_of = None
        # Small array observations are written as one stacked batch; larger ones (images)
        # row by row, where stacking would add a copy of every observation.
        codec = buffers.obs_codec
        self._obs_shape = codec.shape if isinstance(codec, ArrayCodec) else None
        self._stack_obs = self._obs_shape is not None and buffers.obs[:1].nbytes <= _STACK_OBS_BYTES
        self._write_rows = _write_rows if self._obs_shape is not None else None
        # Whole-slice calls run in C (_run_rows) when every row is one plain array row.
        self._whole_in_c = (
            _step_rows is not None and _write_obs_rows is not None and self._obs_shape is not None
            and self._step_many is None
            and not buffers.spec.agents and buffers.reward.ndim == 1
            and all(type(a) is np.ndarray for a in (buffers.obs, buffers.reward, buffers.ops))
        )
        # Multi-agent envs (an agent axis in the buffers) take their own loop, chosen here
        # once: the single-agent loop pays nothing for them.
        self._run_ops = self._run
        if buffers.spec.agents:
            from envhive._agent_runner import AgentOps

            self._run_ops = AgentOps(self).run

    def run(self, env_ids: Sequence[int], options: dict[str, Any] | None, out: Completion) -> None:
        """Perform each env's op (read from ``buffers.ops``) and record the results in ``out``.

        The loop only calls the envs and gathers their results in lists; its common case (a
        step returning a plain 5-tuple, no episode end to reset) runs in C when envhive was
        built with its compiled loop (:func:`compiled_runner`), and every other case in
        Python, so an op means the same either way. Observations, rewards and flags are then
        written with one compiled call for a contiguous slice (or one numpy call each): per-slot
        numpy writes cost about as much as a simple env's whole step. If the batched write cannot be made exactly (an
        observation of the wrong shape or dtype), each env's observation is written on its
        own, and the ones that do not fit become that env's error.

        A list passed as ``env_ids`` must not be changed afterwards: the runner keeps the
        index it made from the last list it was given, to reuse when given it again.

        Nothing an env returns makes this raise: should a returned value defeat the checks
        (it raises where envhive reads it), every env of the call not yet reported gets an
        :class:`~envhive.errors.EnvWorkerError` instead, so a worker process never dies of it.
        """
        try:
            self._run_ops(env_ids, options, out)
        except Exception as err:
            self._failed(env_ids, out, err)

    def run_whole(self, env_ids: list[int], options: dict[str, Any] | None, out: Completion) -> None:
        """:meth:`run` of the whole slice: ``env_ids`` must be its ids in order, the same list
        every call. Its common case (the C loop) skips the general loop's indexing."""
        if not self._whole_in_c:
            self.run(env_ids, options, out)
            return
        try:
            self._run_rows(options, out)
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
        b = self.buffers
        assert b is not None, "bind() must come before run()"  # internal invariant
        ids = env_ids if type(env_ids) is list else list(env_ids)
        row0 = self._row0
        if ids is not self._index_of:  # executors pass the same (unchanging) list each step
            self._index_of = ids
            self._rows = ids if not row0 else [i - row0 for i in ids]
            self._index = as_index(self._rows)
            first = self.first_id
            whole = self._index == slice(first - row0, first - row0 + len(self.envs))
            self._index_envs = self.envs if whole else [self.envs[i - first] for i in ids]
        index, envs, rows = self._index, self._index_envs, self._rows
        if envs is self.envs and self._whole_in_c:
            self._run_rows(options, out)
            return
        out.ended = None  # not counted here: the pool reads the flags
        ops = b.ops[index].tolist()
        read, actions = b.act_codec.read, b.actions
        act_array = type(b.act_codec) is ArrayCodec  # index the buffer directly, no codec call
        obs_list: list[Any] = []
        rewards: list[Any] = []
        terms: list[Any] = []
        truncs: list[Any] = []
        got: Any
        infos, errors = out.infos, out.errors
        # The C loop keys infos by the index it reads actions with (the buffer row): with
        # slice-local buffers it fills a scratch dict, re-keyed by env id below.
        row_infos = infos if not row0 else {}
        stepped: dict[int, Any] | None = None
        if self._step_many is not None:
            step_rows = [r for r, op in zip(rows, ops) if op != _RESET]
            if len(step_rows) > 1:
                acts = [actions[r] if act_array else read(actions, r) for r in step_rows]
                # One entry per env: its step() result, or the exception its step() raised.
                results = self._step_many([env for env, op in zip(envs, ops) if op != _RESET], acts)
                stepped = dict(zip(step_rows, results))
        fast = _step_slice if stepped is None else None
        kind, got = _NOT_CALLED, None
        n, k = len(ids), 0
        while k < n:
            if fast is not None:
                # The common case runs in C; it stops at the first env it does not finish and
                # says what it did with it (see _runloop.c). Python finishes that env below.
                k, kind, got = fast(envs, ops, rows, actions, None if act_array else read, k,
                                    obs_list, rewards, terms, truncs, row_infos)
                if k == n:
                    break
            i, r, op, env = ids[k], rows[k], ops[k], envs[k]
            k += 1
            if stepped is not None and op != _RESET:
                got = stepped[r]
                kind = _RAISED if isinstance(got, BaseException) else _RETURNED
            done = self._one(i, r, op, env, kind, got, options, out)
            got = None  # do not keep an env's result (or exception) alive
            if done is not None:
                obs_list.append(done[0])
                rewards.append(done[1])
                terms.append(done[2])
                truncs.append(done[3])
        if row_infos is not infos:
            for r, info in row_infos.items():
                infos[r + row0] = info
        # The envs whose results were gathered, in order: all but the ones that raised.
        done_ids, done_rows = ids, rows
        if errors:
            kept = [k for k, i in enumerate(ids) if i not in errors]
            done_ids, done_rows = [ids[k] for k in kept], [rows[k] for k in kept]
        if not done_ids:
            pass
        elif len(done_ids) == len(ids) and self._write_rows is not None and type(index) is slice:
            # All envs of a contiguous slice: one C call copies the rows when nothing needs
            # converting (stage 2); numpy does whatever it did not.
            stages = self._write_rows(index.start, b.obs, obs_list, b.reward, rewards,
                                      b.terminated, terms, b.truncated, truncs, np.ndarray)
            if stages < 2:
                self._write_batch(index, done_ids, done_rows, obs_list, rewards, terms, truncs,
                                  out, stages == 0)
        else:
            where = index if len(done_ids) == len(ids) else as_index(done_rows)
            self._write_batch(where, done_ids, done_rows, obs_list, rewards, terms, truncs, out, True)
        if errors:
            done_ids = [i for i in done_ids if i not in errors]
        out.env_ids.extend(done_ids)

    def _one(
        self, i: int, r: int, op: int, env: gym.Env, kind: int, got: Any,
        options: dict[str, Any] | None, out: Completion,
    ) -> tuple[Any, Any, Any, Any] | None:
        """Env ``i``'s op (buffer row ``r``) in Python: the definition the C loops follow.

        ``kind`` and ``got`` say what a C loop already did for it (as ``step_slice`` reports:
        ``env.step`` not called, returned ``got``, or raised ``got``). Returns ``(obs,
        reward, terminated, truncated)`` to write, or ``None`` when the op failed: the env's
        error is then in ``out.errors``. A non-empty info goes to ``out.infos`` (and, for a
        STEP_RESET that ended the episode, the step's info to ``out.final_infos``).
        """
        b = self.buffers
        assert b is not None
        try:
            if op == _RESET:
                obs, info = reset_pair(reset_env(env, b.seed_of(r), options), i)
                reward, term, trunc = RESET_REWARD, False, False
            else:
                if kind == _NOT_CALLED:
                    codec = b.act_codec
                    act = b.actions[r] if type(codec) is ArrayCodec else codec.read(b.actions, r)
                    result = env.step(act)
                elif kind == _RAISED:
                    raise got
                else:
                    result = got
                obs, reward, term, trunc, info = step_tuple(result, "step", i)
                if type(term) is not bool or type(trunc) is not bool:
                    term, trunc = self._flags(term, trunc, i)  # so that resets_in_op can read them
                if type(info) is not dict:
                    check_info(info, "step", i)
                if op == _STEP_RESET and resets_in_op(op, term, trunc):
                    self._write(b.final_obs, r, obs, "step", i)
                    out.final_infos[i] = info
                    obs, info = reset_pair(env.reset(), i)
        except EnvWorkerError as err:
            out.errors[i] = err
            return None
        except Exception as err:  # an env's bug must not take the pool down
            out.errors[i] = env_error("reset" if op == _RESET else "step", err, i)
            return None
        finally:
            got = None  # do not keep an env's result (or exception) alive
        if info:
            out.infos[i] = info
        return obs, reward, term, trunc

    def _run_rows(self, options: dict[str, Any] | None, out: Completion) -> None:
        """``_run`` for the whole slice in order, in C (``step_rows``): each env's reward and
        flags are written as soon as it has stepped, and envs the C loop does not finish
        (resets, episode ends under STEP_RESET, values it does not take as they are) go
        through :meth:`_one` one at a time (:meth:`_finish_row`). The observations are written
        after the loop, as ``_run`` writes them. Counts the envs that ended."""
        b = self.buffers
        assert b is not None and _step_rows is not None and _write_obs_rows is not None
        first, start = not (out.env_ids or out.errors), len(out.env_ids)
        codec, row0 = b.act_codec, self.first_id - self._row0
        obs_list: list[Any] = []  # one entry per env (None: it has no observation)
        self._call = (options, out, obs_list)
        try:
            ended = _step_rows(
                self.envs, b.ops, b.actions, None if type(codec) is ArrayCodec else codec.read,
                row0, self.first_id, obs_list, b.reward, b.terminated, b.truncated, out.infos,
                out.env_ids, self._finish_row,
            )
        finally:
            self._call = None
        if not _write_obs_rows(row0, b.obs, obs_list, np.ndarray):
            # Not all plain arrays of the row's shape and dtype: checked (and blamed) by numpy.
            ks = [k for k, obs in enumerate(obs_list) if obs is not None]
            ids, rows = [self.first_id + k for k in ks], [row0 + k for k in ks]
            if ids:
                self._write_obs(as_index(rows), ids, rows, [obs_list[k] for k in ks], out)
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

    def _finish_row(self, k: int, kind: int, got: Any) -> int:
        """``step_rows``'s callback for env ``k`` of the slice: its op through :meth:`_one`,
        its reward and flags written as ``_write_batch`` writes one env's, its observation
        appended for ``_run_rows`` to write. Returns 1 if its episode ended, 0 if not, -1 if it
        failed (its error recorded)."""
        b = self.buffers
        assert b is not None and self._call is not None
        options, out, obs_list = self._call
        r, i = self.first_id - self._row0 + k, self.first_id + k
        done = self._one(i, r, int(b.ops[r]), self.envs[k], kind, got, options, out)
        got = None
        if done is None:
            obs_list.append(None)
            return -1
        obs, reward, term, trunc = done
        obs_list.append(obs)  # written even if its reward or flags fail, as _run writes it
        self._write_batch(slice(r, r + 1), [i], [r], [obs], [reward], [term], [trunc], out, False)
        if i in out.errors:
            return -1
        return 1 if b.terminated[r] or b.truncated[r] else 0

    def _write_batch(
        self, where: Any, ids: list[int], rows: list[int], obs_list: list[Any], rewards: list[Any],
        terms: list[Any], truncs: list[Any], out: Completion, with_obs: bool,
    ) -> None:
        """Write the gathered results of ``ids`` (buffer ``rows``, indexed as ``where``) with numpy.

        A value that does not fit (a flag that is an array, a reward that is ``None``, an
        observation of the wrong shape) becomes its env's error; the others are written.
        """
        b = self.buffers
        assert b is not None
        if len(ids) == 1:
            # One env (the latency case): scalar writes skip the list-to-array conversion.
            r, obs = rows[0], obs_list[0]
            where = slice(r, r + 1)
            if not with_obs:
                pass
            elif type(obs) is np.ndarray and obs.shape == self._obs_shape and obs.dtype == b.obs.dtype:
                b.obs[r] = obs
            else:
                self._write_obs(r, ids, rows, obs_list, out)
            reward, term, trunc = rewards[0], terms[0], truncs[0]
            if type(term) is bool and type(trunc) is bool and type(reward) is float and b.reward.ndim == 1:
                b.reward[r], b.terminated[r], b.truncated[r] = reward, term, trunc
                return
        elif with_obs:
            self._write_obs(where, ids, rows, obs_list, out)
        for field, buf, values in (("reward", b.reward, rewards), ("terminated", b.terminated, terms),
                                   ("truncated", b.truncated, truncs)):
            batch = batch_fits(values, buf)
            buf[where] = batch if batch is not None else self._checked(field, buf, ids, values, out)

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

    def _flags(self, term: Any, trunc: Any, env_id: int) -> tuple[bool, bool]:
        """A step's flags as bools (off the fast path); a flag that is not one is the env's error."""
        flags = []
        for field, value in (("terminated", term), ("truncated", trunc)):
            flag = flag_value(value)
            if flag is None:
                raise result_error("step", field, value, "a bool (True/False, numpy.bool_, or 0/1)", env_id)
            flags.append(flag)
        return flags[0], flags[1]

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
                self._write(buf, r, obs, "reset" if b.ops[r] == _RESET else "step", i)
            except EnvWorkerError as err:
                out.errors.setdefault(i, err)

    def _write(self, buf: Tree, row: int, obs: Any, where: str, env_id: int) -> None:
        b = self.buffers
        assert b is not None
        try:
            b.obs_codec.write(buf, row, obs)
        except Exception as err:  # whatever the env returned, it is that env's error
            raise EnvWorkerError(
                f"{where}() returned an observation that does not fit the observation space "
                f"{b.obs_codec.space}: {err}",
                env_id=env_id,
                cause_type="ObservationError",
            ) from None

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

