"""The scripts in examples/ run end to end and print what they promise."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"

pytestmark = pytest.mark.timeout(900)


def run(name: str, *args: str) -> str:
    out = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_replay_buffer_example_has_no_leaked_reset_rows():
    text = run("replay_buffer.py", "--steps", "300")
    assert "next_step:" in text and "same_step:" in text
    assert text.count(" 0 leaked reset rows") == 2


def test_async_workers_example_favours_fast_envs():
    text = run("async_workers.py", "--rounds", "60", "--num-envs", "4", "--batch-size", "2")
    assert "process, 4 workers" in text and "4 factories" in text
    counts = [int(x) for x in text.split("[")[-1].split("]")[0].split(",")]
    assert sum(counts) == 60 * 2  # one count per received row (reset rows included)
    assert min(counts[0::2]) > max(counts[1::2])  # the fast envs (even ids) come back more often


def test_cem_example_solves_cartpole_on_the_kernel_and_on_gymnasium():
    text = run("cem_cartpole.py", "--generations", "12")
    assert "native (auto)" in text
    assert "gymnasium CartPole-v1 with the mean policy: return 500" in text


def test_ars_example_replays_identically_on_gymnasium():
    pytest.importorskip("mujoco")
    text = run("ars_halfcheetah.py", "--iterations", "3", "--directions", "4", "--top", "2",
               "--horizon", "60")
    assert text.count("iteration ") == 3 and "executor='native" in text
    assert "(identical)" in text


def test_ppo_example_solves_cartpole():
    """examples/ppo.py trains until the mean return of the last 50 episodes reaches 475."""
    text = run("ppo.py", "--seed", "1", "--total-steps", "400000")
    assert "native (auto)" in text and "same_step" in text
    assert "solved: mean return" in text
    assert float(text.split("solved: mean return ")[1].split()[0]) >= 475


def test_ppo_jax_example_solves_cartpole_in_one_jit():
    """examples/ppo_jax.py: the whole PPO training in one jax.jit, stepping envhive/CartPole-v1
    through env.xla(), reaches a mean return of 475."""
    for module in ("jax", "flax", "optax"):
        pytest.importorskip(module, reason=f"examples/ppo_jax.py needs {module}")
    text = run("ppo_jax.py", "--no-gymnax")
    assert "solved (mean return >= 475)" in text, text


def test_multiagent_ppo_example_trains_on_the_flat_view():
    pytest.importorskip("mpe2")
    pytest.importorskip("torch")
    text = run("multiagent_ppo.py", "--total-steps", "900", "--num-envs", "4", "--num-steps", "25",
               "--executor", "serial")
    assert "12 agent rows" in text and "mean agent return" in text
