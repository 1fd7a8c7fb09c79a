"""Randomized async traffic on the process executor, checked env by env against serial.

Random subsets are sent, random batch sizes are received, and envs have random step
latencies, so completions arrive out of order and workers queue commands. Whatever the
interleaving, each env's own sequence of (obs, reward, flags, final_obs) must be exactly the
serial executor's for the same per-env actions.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import envhive
from envhive.executors import ProcessExecutor
from envhive.testing import CountingEnv

pytestmark = pytest.mark.timeout(300)


class JitterEnv(CountingEnv):
    """CountingEnv whose steps take a random 0-2 ms (seeded per env), to scramble completions."""

    def __init__(self, tag: int) -> None:
        super().__init__(pattern=[(3 + tag % 4, "term"), (2 + tag % 3, "trunc")], tag=tag)
        self._jitter = np.random.default_rng(tag)

    def step(self, action):
        time.sleep(float(self._jitter.uniform(0, 0.002)))
        return super().step(action)


def factories(n: int):
    return [lambda i=i: JitterEnv(i) for i in range(n)]


def per_env_trace(env: envhive.VectorEnv, rounds: int, seed: int) -> dict[int, list]:
    """Drive random async traffic; return each env's received rows in order."""
    n, k = env.num_envs, env.batch_size
    rng = np.random.default_rng(seed)
    actions = {i: iter(np.random.default_rng(100 + i).integers(0, 3, 10_000)) for i in range(n)}
    trace: dict[int, list] = {i: [] for i in range(n)}
    idle = list(range(n))
    env.async_reset(np.array(idle))
    idle = []
    for _ in range(rounds):
        obs, rew, term, trunc, info = env.recv()
        for row, i in enumerate(info["env_id"].tolist()):
            final = None
            if "_final_obs" in info and info["_final_obs"][row]:
                final = info["final_obs"][row].tolist()
            step_info = int(info["step"][row]) if info.get("_step", np.zeros(k, bool))[row] else None
            trace[i].append((obs[row].tolist(), float(rew[row]), bool(term[row]), bool(trunc[row]), final, step_info))
            idle.append(i)
        # Send a random subset of the idle envs (at least enough to keep a batch in flight).
        rng.shuffle(idle)
        keep = max(0, len(idle) - max(k, int(rng.integers(0, len(idle) + 1))))
        go, idle = idle[keep:], idle[:keep]
        if go:
            env.send(np.array([next(actions[i]) for i in go]), np.array(go))
    return trace


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
@pytest.mark.parametrize(("num_envs", "workers", "batch"), [(6, 3, 2), (7, 2, 3), (8, 4, 1)])
def test_random_async_traffic_matches_serial_per_env(mode, num_envs, workers, batch):
    rounds = 60
    proc = envhive.make(factories(num_envs), executor=ProcessExecutor(workers), batch_size=batch, autoreset=mode)
    ser = envhive.make(factories(num_envs), executor="serial", batch_size=batch, autoreset=mode)
    got = per_env_trace(proc, rounds, seed=num_envs)
    proc.close()
    # Replay the same per-env action streams on serial, one env at a time, as many steps each.
    want = per_env_trace(ser, rounds * 4, seed=num_envs)
    ser.close()
    assert sum(len(v) for v in got.values()) == rounds * batch
    for i, rows in got.items():
        assert len(want[i]) >= len(rows), f"serial replay too short for env {i}"
        assert rows == want[i][: len(rows)], f"env {i} diverged from serial"
    assert all(len(rows) >= 3 for rows in got.values())  # every env really took part
