"""One id of every EnvPool family through ``envhive.make("envpool/<id>")`` (the whole registry
is ``benchmarks/envpool_sweep.py``'s, run by ``.ci/run``)."""

from __future__ import annotations

import numpy as np
import pytest

import envhive

pytest.importorskip("envpool")

#: One cheap id of each family of EnvPool 1.2.5.
SAMPLE = {
    "atari": "Pong-v5", "box2d": "BipedalWalker-v3", "classic_control": "Acrobot-v1",
    "gfootball": "gfootball/academy_3_vs_1_with_keeper-v1", "highway": "IntersectionMultiAgent-v0",
    "jumanji": "BinPack-v2", "minigrid": "BabyAI-GoToObj-v0", "mujoco.dmc": "CheetahRun-v1",
    "mujoco.gym": "Pusher-v5", "mujoco.metaworld": "MetaWorld/Reach-v3",
    "mujoco.myosuite": "myoFingerReachFixed-v0", "mujoco.playground": "PandaPickCube-v1",
    "mujoco.robotics": "FetchReach-v4", "pgx": "Chess-v1", "procgen": "CoinrunEasy-v0",
    "toy_text": "FrozenLake-v1",
}
# ViZDoom is left to the sweep: EnvPool's ViZDoom game process once never answered EnvPool's
# make inside a test worker (EnvPool's side, blocked in C++ where no test timeout can reach it);
# the sweep runs each id in a process of its own and bounds a hung one.


def _envpool_cannot(task):
    """EnvPool's own error where it cannot run ``task`` here (Procgen without Qt 5), else None."""
    from envhive.envs.envpool._real import envpool_module, real_envpool

    ep = envpool_module()
    try:
        with real_envpool():
            ep.make_spec(task)
    except ImportError as err:
        return str(err)
    return None


@pytest.mark.parametrize("family", sorted(SAMPLE))
def test_one_id_of_every_family(family, tmp_path, monkeypatch):
    from envhive.envs.envpool._ids import registrations

    task = SAMPLE[family]
    reg = registrations().get(task)
    if reg is None:
        pytest.skip(f"{task} is not registered by this EnvPool")
    assert reg.import_path == f"envpool.{family}"
    why = _envpool_cannot(task)
    if why:
        pytest.skip(f"EnvPool cannot make {task} here: {why}")
    monkeypatch.chdir(tmp_path)  # ViZDoom writes its ini where it runs
    pool = envhive.make(f"envpool/{task}", 2, seed=0, api="pool")
    try:
        b = pool.reset()
        assert b.is_reset.all()
        pool.action_space.seed(0)
        for _ in range(3):
            b = pool.step(np.stack([pool.action_space.sample() for _ in range(2)]))
        assert b.env_ids.tolist() == [0, 1] and np.isfinite(b.reward).all()
        assert "elapsed_step" in b.infos
    finally:
        pool.close()
