"""A process forked from one that holds a pool (``os.fork``: a data loader's workers, a
daemon) must leave the parent's pool alone, whether it exits normally or tries to use it.

Each case runs in a fresh interpreter (a fork inside pytest's own process would run pytest in
the child): the script makes a pool, forks, the child does its part and exits with
``sys.exit(0)`` (multiprocessing's exit hook and the interpreter's ``atexit`` run there), and the
parent steps its pool afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from envhive.executors import available_executors

pytestmark = pytest.mark.timeout(120)

SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys, numpy as np, envhive
    from envhive.testing import CountingEnv

    name, part = sys.argv[1], sys.argv[2]
    if name == "ray":
        from envhive.executors import RayExecutor
        executor = RayExecutor(2)
    elif name == "process":
        from envhive.executors import ProcessExecutor
        executor = ProcessExecutor(2)
    else:
        executor = name
    env = envhive.make(CountingEnv, 4, executor=executor, batch_size=2)
    env.reset(seed=0)
    env.step(np.zeros(4, np.int64))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        signal.alarm(30)  # a use that hangs fails the test instead of hanging it
        seen = []
        if part == "use":
            calls = [
                lambda: env.step(np.zeros(4, np.int64)),
                lambda: env.reset(seed=1),
                lambda: env.send(np.zeros(2, np.int64), np.array([0, 1])),
                lambda: env.recv(),
                lambda: env.call("spec"),
                lambda: env.get_attr("t"),
            ]
            for call in calls:
                try:
                    call()
                    seen.append("no error")
                except envhive.ClosedError as err:
                    seen.append(str(err))
                except BaseException as err:
                    seen.append(f"{type(err).__name__}: {err}")
            env.close()  # a no-op here: the parent's workers are not this process's
        os.write(write, json.dumps(seen).encode())
        os.close(write)
        if name == "ray":
            os._exit(0)  # Ray's own exit hook hangs in a forked child (Ray does not support fork)
        sys.exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = json.loads(pipe.read() or "null")
    _, status = os.waitpid(pid, 0)
    steps = [env.step(np.zeros(4, np.int64))[0][:, 2].tolist() for _ in range(3)]
    env.send(np.zeros(2, np.int64), np.array([2, 3]))
    got = sorted(env.recv()[4]["env_id"].tolist())
    print("RESULT " + json.dumps({"child": child, "status": status, "steps": steps, "recv": got}))
    env.close()
    """
)


def run(tmp_path, name: str, part: str) -> tuple[dict, str]:
    script = tmp_path / "fork.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script), name, part], capture_output=True,
                         text=True, timeout=100)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert out.returncode == 0 and lines, out.stderr
    return json.loads(lines[-1][len("RESULT "):]), out.stderr


@pytest.mark.parametrize("name", ["process", "thread"])
def test_a_child_that_exits_leaves_the_parents_pool_running(tmp_path, name):
    """The process executor's workers are multiprocessing daemons: a child's exit hook used to
    SIGTERM them (and fail on ``is_alive`` of a process that is not its child), and the
    parent's next step raised ``WorkerDiedError``."""
    result, stderr = run(tmp_path, name, "exit")
    assert result["status"] == 0 and result["child"] == []
    assert result["steps"] == [[2] * 4, [3] * 4, [4] * 4]  # the parent's pool goes on
    assert result["recv"] == [2, 3]
    assert "Traceback" not in stderr and "AssertionError" not in stderr, stderr


@pytest.mark.parametrize("name", ["process", "thread"])
def test_a_child_using_the_parents_pool_gets_a_clear_error(tmp_path, name):
    """Every call of the child's copy of the pool raises ``ClosedError`` naming the fork,
    before anything touches the buffers or the workers it shares with the parent (the process
    executor used to post commands to the parent's workers, and fail on ``is_alive``; the
    thread executor's copy waited for threads the child does not have); the parent's pool is
    untouched."""
    check_child_use(tmp_path, name)


@pytest.mark.skipif("ray" not in available_executors(), reason="needs ray")
def test_a_child_using_the_parents_ray_pool_gets_a_clear_error(tmp_path):
    """The same on the Ray executor (the child used to hang in Ray's client)."""
    check_child_use(tmp_path, "ray")


def check_child_use(tmp_path, name: str) -> None:
    result, stderr = run(tmp_path, name, "use")
    assert result["status"] == 0
    assert len(result["child"]) == 6
    for message in result["child"]:
        assert "was forked" in message and "Make a new pool" in message, message
    assert result["steps"] == [[2] * 4, [3] * 4, [4] * 4]
    assert result["recv"] == [2, 3]
    assert "Traceback" not in stderr, stderr
