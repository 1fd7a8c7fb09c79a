"""The worker side of the native Atari engine (``executors/_atari.py``): the shared block's
layout, and the loop a worker process runs over its games.

A worker owns some games (:class:`~envhive.envs.atari.AtariEnv`) and takes two kinds of work,
both from its command semaphore:

* **Rounds** (sync ``step``): the parent writes an op per env into the block's ``ops`` column
  (``_IDLE`` for envs not in the call), sets the worker's ``round`` flag and posts; the worker
  performs its envs' ops (step *or* reset: the parent's :class:`BatchedOps` sequence does the
  rest) and posts ``round_done`` once.
* **Queued commands** (async ``send``): the parent appends a command (env ids, the last one
  marked) to the worker's ring and posts; the worker performs each env's whole op as
  ``EnvRunner`` does for a Python env (``_ops``: STEP, RESET, STEP_RESET with its reset after
  an ended episode, keeping the terminal frame), publishing after each env how far it got in the ring
  (``q_head``) and posting ``async_done``. Commands of an older ``epoch`` (the parent discarded them) are skipped.

Results go to the block's columns (frames, rewards, flags, the four EnvPool infos of the step
and of the reset); an env that raises is marked ``failed`` and its error sent on the worker's
pipe *before* the command is counted, tagged with its kind (and a queued command's epoch), so
the parent reads it with the completion.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from typing import Any

import numpy as np

from envhive._ops import RESET, RESET_REWARD, resets_in_op
from envhive.errors import ActionError
from envhive.executors._worker import SpinPolicy, wait_command

__all__ = ["INFO_KEYS", "IDLE", "NO_WANT", "CLOSE", "ROUND", "ASYNC", "BUILD", "layout", "views", "size",
           "worker_main"]

#: EnvPool's Atari infos and their dtypes, in the order of ``AtariEnv.info_values``.
INFO_KEYS: tuple[tuple[str, type], ...] = (
    ("lives", np.int32), ("reward", np.float32), ("terminated", np.int32), ("elapsed_step", np.int32),
)
IDLE = 255  # an op code for "not in this round"
NO_WANT = 1 << 62  # the block's "want" while the parent waits for nothing
CLOSE = 1
ROUND, ASYNC, BUILD = 0, 1, 2  # what an error message belongs to (BUILD: making env i raised)

Layout = dict[str, tuple[np.dtype, tuple[int, ...]]]


def layout(n: int, workers: int, ring: int, obs_shape: tuple[int, ...]) -> Layout:
    """The shared block's arrays: name -> (dtype, shape). ``ring``: slots of each worker's
    command ring."""
    fields: Layout = {
        "cmd": (np.dtype(np.int64), (1,)),
        "num_actions": (np.dtype(np.int64), (1,)),  # the game's, written by the workers
        "epoch": (np.dtype(np.int64), (1,)),
        "round": (np.dtype(np.int64), (workers,)),
        "q_tail": (np.dtype(np.int64), (workers,)),
        "q_head": (np.dtype(np.int64), (workers,)),  # ring slots the worker is done with
        "want": (np.dtype(np.int64), (1,)),  # post when the sum of q_head reaches this
        "q_env": (np.dtype(np.int64), (workers, ring)),
        "q_tag": (np.dtype(np.int64), (workers, ring)),  # epoch * 2 + (last of its command)
        "ops": (np.dtype(np.uint8), (n,)),  # a round's ops
        "a_ops": (np.dtype(np.int8), (n,)),  # a queued env's op (the pool's ops buffer)
        "actions": (np.dtype(np.int64), (n,)),
        "seeds": (np.dtype(np.uint64), (n,)),
        "has_seed": (np.dtype(np.bool_), (n,)),
        "obs": (np.dtype(np.uint8), (n, *obs_shape)),
        "final_obs": (np.dtype(np.uint8), (n, *obs_shape)),
        "reward": (np.dtype(np.float64), (n,)),
        "terminated": (np.dtype(np.bool_), (n,)),
        "truncated": (np.dtype(np.bool_), (n,)),
        "reset_after": (np.dtype(np.bool_), (n,)),
        "failed": (np.dtype(np.bool_), (n,)),
    }
    for key, dtype in INFO_KEYS:
        fields[f"info_{key}"] = (np.dtype(dtype), (n,))  # a round's: the info of the env's last reset
        fields[f"step_{key}"] = (np.dtype(dtype), (n,))  # the info of its last step (a round's;
        # a queued op's, only if it ended in a reset: its final info)
        fields[f"rep_{key}"] = (np.dtype(dtype), (n,))  # a queued op's info, as it reports it
    return fields


def views(buf: Any, fields: Layout) -> dict[str, np.ndarray]:
    """Arrays over ``buf`` (each cache-line aligned), by name."""
    out, offset = {}, 0
    for name, (dtype, shape) in fields.items():
        offset = -(-offset // 64) * 64
        out[name] = np.ndarray(shape, dtype, buf, offset)
        offset += int(np.prod(shape)) * dtype.itemsize
    return out


def size(fields: Layout) -> int:
    """Bytes of the block."""
    offset = 0
    for dtype, shape in fields.values():
        offset = -(-offset // 64) * 64 + int(np.prod(shape)) * dtype.itemsize
    return max(offset, 1)


#: The block's info column names, per prefix, in ``INFO_KEYS`` order.
_INFO_NAMES = {prefix: [prefix + key for key, _ in INFO_KEYS] for prefix in ("info_", "step_", "rep_")}


def _write_info(v: dict[str, np.ndarray], prefix: str, i: int, values: tuple[Any, ...]) -> None:
    for name, value in zip(_INFO_NAMES[prefix], values):
        v[name][i] = value


def _reset(v: dict[str, np.ndarray], env: Any, i: int, seed: int | None, prefix: str = "info_") -> None:
    v["obs"][i], _ = env.reset(seed=seed)
    _write_info(v, prefix, i, env.info_values())


def serve_round(v: dict[str, np.ndarray], envs: list[Any], ids: list[int], report: Any) -> None:
    """A round: step or reset (the parent does the rest) each env of ``ids`` whose op is not
    ``IDLE``. An env that raises is marked ``failed`` and ``report(i, err, traceback)``."""
    ops, obs, acts = v["ops"], v["obs"], v["actions"]
    for i, env in zip(ids, envs):
        op = ops[i]
        if op == IDLE:
            continue
        try:
            if op == RESET:
                _reset(v, env, i, int(v["seeds"][i]) if v["has_seed"][i] else None)
            else:
                reward, term, trunc = env.advance(int(acts[i]))
                v["reward"][i], v["terminated"][i], v["truncated"][i] = reward, term, trunc
                obs[i] = env.frames
                _write_info(v, "step_", i, env.info_values())
        except Exception as err:  # reported per env; the worker carries on
            v["failed"][i] = True
            report(i, err, traceback.format_exc())


def perform(v: dict[str, np.ndarray], env: Any, i: int) -> None:
    """Env ``i``'s whole op (``a_ops``), as ``EnvRunner`` performs one for a Python env.

    Its info goes to the ``rep_`` columns (the reset's after a reset, else the step's) and,
    when the step ended in a reset, the step's info to ``step_`` (its final info): the
    parent's ``InfoTable`` over them reads no other column."""
    op = int(v["a_ops"][i])
    v["reset_after"][i] = False
    if op == RESET:
        _reset(v, env, i, int(v["seeds"][i]) if v["has_seed"][i] else None, "rep_")
        v["reward"][i], v["terminated"][i], v["truncated"][i] = RESET_REWARD, False, False
        return
    a = int(v["actions"][i])
    if not 0 <= a < len(env._actions):
        raise ActionError(f"{env.id}: action {a} is outside {env.action_space}")
    reward, term, trunc = env.advance(a)
    v["reward"][i], v["terminated"][i], v["truncated"][i] = reward, term, trunc
    if resets_in_op(op, term, trunc):
        _write_info(v, "step_", i, env.info_values())
        v["final_obs"][i] = env.frames
        v["reset_after"][i] = True
        _reset(v, env, i, None, "rep_")  # the reset's frames into obs
    else:
        v["obs"][i] = env.frames
        _write_info(v, "rep_", i, env.info_values())


class _Queue:
    """This worker's end of its command ring."""

    def __init__(self, v: dict[str, np.ndarray], w: int, envs: dict[int, Any], done_sem: Any,
                 report: Any) -> None:
        self.v, self.w, self.envs, self.done_sem, self.report = v, w, envs, done_sem, report
        self.head = 0
        self.slots = v["q_env"].shape[1]

    def drain(self) -> None:
        """Perform every queued env, publishing each as it ends (posting as explained below)."""
        v, w = self.v, self.w
        q_env, q_tag, epoch, heads, want = v["q_env"][w], v["q_tag"][w], v["epoch"], v["q_head"], v["want"]
        while self.head < int(v["q_tail"][w]):
            k = self.head % self.slots
            i, tag = int(q_env[k]), int(q_tag[k])
            if tag >> 1 == int(epoch[0]):  # else discarded by the parent: skip it
                v["failed"][i] = False
                try:
                    perform(v, self.envs[i], i)
                except Exception as err:
                    v["failed"][i] = True
                    self.report(ASYNC, tag >> 1, i, err, traceback.format_exc())
            self.head += 1
            # Publish each env as it ends: the parent takes the first finished envs whatever
            # their commands (a batch mixes workers, so each keeps work queued). Post when the
            # parent has enough (``want``; read after the publish, so one of two workers that
            # finish together sees the other's), or when going idle while the parent asks for
            # nothing: that read may be stale (the parent's request and this publish crossed,
            # each side reading the other's old value), and then this post is the one that
            # wakes it. A request seen and not met is met by the envs still running
            # elsewhere, whose workers check it after each env: no post, no wasted wake-up.
            v["q_head"][w] = self.head
            asked = int(want[0])
            if sum(heads.tolist()) >= asked or (asked == NO_WANT and self.head == int(v["q_tail"][w])):
                self.done_sem.release()


def _map_block(block: Any) -> Any:
    """The worker's mapping of the shared block: a :class:`~envhive.executors._fdsync.SharedBlock`
    (its descriptor closed once mapped) or, where there is no memfd, a segment's name."""
    if isinstance(block, str):
        from envhive.executors._shm import map_segment

        return map_segment(block)  # not through SharedMemory: that would register it again
    try:
        return block.map()
    finally:
        block.close()


def worker_main(w: int, ids: list[int], block: Any, fields: Layout, kwargs: dict[str, Any],
                cmd_sem: Any, round_done: Any, async_done: Any, conn: Any,
                spin: tuple[float, bool]) -> None:
    """Worker ``w``: build envs ``ids``, then serve rounds and queued commands until told to close."""
    from envhive.envs.atari._env import AtariEnv

    policy = SpinPolicy(*spin)
    parent = mp.parent_process()
    v = views(_map_block(block), fields)  # the arrays keep the mapping
    envs: list[AtariEnv] = []
    try:
        for _ in ids:
            envs.append(AtariEnv(**kwargs))
    except Exception as err:  # a bad mode for this game, a broken ROM: the pool fails
        i = ids[len(envs)]
        conn.send((BUILD, 0, i, type(err).__name__, str(err), traceback.format_exc()))
        round_done.release()
        return

    def report(kind: int, epoch: int, i: int, err: Exception, tb: str) -> None:
        conn.send((kind, epoch, i, type(err).__name__, str(err), tb))

    queue = _Queue(v, w, dict(zip(ids, envs)), async_done, report)
    v["num_actions"][0] = len(envs[0]._actions)  # every worker writes the same
    round_done.release()  # built
    while True:
        # Poll briefly, then block (the process executor's policy: a blocked process's
        # wake-up is slow on virtual machines, and the parent's next command comes soon).
        wait_command(cmd_sem, policy, parent)
        if v["cmd"][0] == CLOSE:
            break
        queue.drain()
        if v["round"][w]:
            v["round"][w] = 0
            serve_round(v, envs, ids, lambda i, err, tb: report(ROUND, 0, i, err, tb))
            round_done.release()
