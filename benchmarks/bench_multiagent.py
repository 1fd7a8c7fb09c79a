"""Multi-agent envs: envhive's executors vs a plain loop and SuperSuit, all in one run.

Two cases, each runner measured ``--repeats`` times, interleaved (this machine's speed drifts),
medians reported; steps/s count env steps (one step of every agent of one env):

* ``dmlab2d/commons_harvest`` (MeltingPot's engine; ``--players`` players, RGB and vector
  observations) x ``--envs``: a plain Python loop over the same envs (envhive's
  ``PlayersAgents`` adapters, reset when done) vs envhive's serial, thread and process
  executors (``api="pool"``, ``copy=False``). Threads vs processes shows whether dmlab2d's
  ``advance`` holds the GIL.
* a PettingZoo env (``pistonball_v6``, 20 agents with image observations, discrete actions,
  needs ``pymunk``;
  ``--pz rps`` for rock-paper-scissors, a tiny step; ``--pz null``, a step that does next to
  nothing, where the vectorizers' own cost is all there is) x ``--envs``:
  SuperSuit's ``concat_vec_envs_v1(pettingzoo_env_to_vec_env_v1(env))`` serial and on
  ``--workers`` processes vs envhive's flattened view (``agent_layout="flat"``, the same
  layout: one row per agent) on the serial and process executors, and, when ``pufferlib``
  imports, PufferLib's ``PettingZooPufferEnv`` under ``pufferlib.vector.make`` with its
  ``Serial`` and ``Multiprocessing`` (``--workers`` workers, one synchronous batch) backends.

    python benchmarks/bench_multiagent.py --json benchmarks/results/multiagent.json
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

import envhive
from envhive._bench import run_interleaved, write_results

Runner = Callable[[], tuple]


def _substrate(players: int) -> Any:
    from envhive.envs.multiagent import Lab2dPlayers, PlayersAgents

    return PlayersAgents(Lab2dPlayers("commons_harvest", num_players=players))


def substrate_runners(n: int, players: int, workers: int) -> dict[str, Runner]:
    """name -> builder of (step, batched action space, close) for commons_harvest x n."""

    def pool(executor: str, **kw: Any) -> Runner:
        def build() -> tuple:
            p = envhive.make("dmlab2d/commons_harvest", n, executor=executor, seed=0, copy=False,
                             env_kwargs={"num_players": players}, api="pool", **kw)
            p.reset()
            return p.step, batch_space(p.action_space, n), p.close
        return build

    def loop() -> tuple:
        envs = [_substrate(players) for _ in range(n)]
        for i, env in enumerate(envs):
            env.reset(seed=i)

        def step(actions: Any) -> None:
            for env, a in zip(envs, actions):
                _, _, term, trunc, _ = env.step(a)
                if term or trunc:
                    env.reset()

        return step, batch_space(envs[0].action_space, n), lambda: [e.close() for e in envs]

    return {
        "plain loop": loop,
        "envhive serial": pool("serial"),
        f"envhive thread ({workers})": pool("thread", num_workers=workers),
        f"envhive process ({workers})": pool("process", num_workers=workers),
    }


try:  # SuperSuit takes only subclasses of PettingZoo's ParallelEnv
    from pettingzoo.utils.env import ParallelEnv as _ParallelBase
except ImportError:  # the dmlab2d case runs without pettingzoo
    _ParallelBase = object  # type: ignore[assignment,misc]


class NullParallel(_ParallelBase):  # type: ignore[misc,valid-type]
    """A PettingZoo-style parallel env whose step does next to nothing (2 agents, ``Discrete``
    observations and actions, 100-step episodes): what ``--pz null`` measures is each
    vectorizer's own cost per env step."""

    metadata: dict[str, Any] = {"render_modes": [], "name": "null_v0"}
    render_mode = None

    def __init__(self) -> None:
        self.possible_agents = ["a", "b"]
        self.agents: list[str] = []
        self.t = 0
        self._obs, self._act = gym.spaces.Discrete(4), gym.spaces.Discrete(3)

    def observation_space(self, agent: str) -> gym.Space:
        return self._obs

    def action_space(self, agent: str) -> gym.Space:
        return self._act

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple:
        self.agents, self.t = list(self.possible_agents), 0
        return {a: 0 for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple:
        self.t += 1
        end = self.t >= 100
        agents = self.agents
        out = ({a: 1 for a in agents}, {a: 0.0 for a in agents}, {a: False for a in agents},
               {a: end for a in agents}, {a: {} for a in agents})
        if end:
            self.agents = []
        return out

    def render(self) -> None:
        return None

    def close(self) -> None:
        pass


def _pz_factory(name: str) -> Callable[[], Any]:
    if name == "null":
        return NullParallel
    if name == "rps":
        from pettingzoo.classic import rps_v2

        return rps_v2.parallel_env
    from pettingzoo.butterfly import pistonball_v6

    # Discrete actions (each piston: down, stay, up): PufferLib 1.0.1 emulates only discrete
    # action spaces (a Box raises in emulate_action_space); the step costs the same.
    return functools.partial(pistonball_v6.parallel_env, continuous=False)


def pettingzoo_runners(name: str, n: int, workers: int) -> dict[str, Runner]:
    """name -> builder for a PettingZoo env x n, every agent a row (SuperSuit's layout)."""
    factory = _pz_factory(name)

    def supersuit(cpus: int) -> Runner:
        def build() -> tuple:
            import supersuit as ss

            env = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(factory()), num_vec_envs=n,
                                        num_cpus=cpus, base_class="gymnasium")
            env.reset(seed=0)
            return env.step, batch_space(env.action_space, env.num_envs), env.close
        return build

    def puffer(backend: str) -> Runner:
        def build() -> tuple:
            import pufferlib.vector

            kw: dict[str, Any] = {}
            if backend == "Multiprocessing":
                kw = {"num_workers": workers, "batch_size": n}
            env = pufferlib.vector.make(_PufferFactory(factory), num_envs=n,
                                        backend=getattr(pufferlib.vector, backend), **kw)
            env.reset(seed=0)
            return env.step, env.action_space, env.close
        return build

    def flat(executor: str, **kw: Any) -> Runner:
        def build() -> tuple:
            env = envhive.make(factory, n, executor=executor, seed=0, copy=False, agent_layout="flat", **kw)
            env.reset()
            return env.step, env.action_space, env.close
        return build

    runners = {
        "SuperSuit concat_vec_envs (serial)": supersuit(0),
        f"SuperSuit concat_vec_envs ({workers} procs)": supersuit(workers),
    }
    if _has_pufferlib():
        runners["PufferLib Serial"] = puffer("Serial")
        runners[f"PufferLib Multiprocessing ({workers})"] = puffer("Multiprocessing")
    runners["envhive flat serial"] = flat("serial")
    runners[f"envhive flat process ({workers})"] = flat("process", num_workers=workers)
    return runners


class _PufferFactory:
    """PufferLib's wrapper of one PettingZoo env, built where called (picklable for its workers)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import pufferlib.emulation

        return pufferlib.emulation.PettingZooPufferEnv(env=self.factory())


def _has_pufferlib() -> bool:
    """Whether PufferLib imports (3.0 does not build offline; 1.0.1 needs ``gym`` and ``psutil``)."""
    try:
        import pufferlib.emulation
        import pufferlib.vector  # noqa: F401
    except Exception as err:  # a broken install is reported, not fatal: the others still run
        print(f"PufferLib not measured: {type(err).__name__}: {err}")
        return False
    return True


def _ratios(rows: list[dict[str, Any]], base: str, best_of: list[str]) -> None:
    """Add each row's ratio to ``base`` and to the best of ``best_of`` (printed too)."""
    by = {r["runner"]: r["steps_per_s"] for r in rows}
    best = max(by[b] for b in best_of)
    for r in rows:
        r["vs_" + base.replace(" ", "_")] = r["steps_per_s"] / by[base]
        r["vs_best_peer"] = r["steps_per_s"] / best
        print(f"    {r['runner']:<38} {r['steps_per_s'] / by[base]:5.2f}x {base}, "
              f"{r['steps_per_s'] / best:5.2f}x best peer")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--players", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pz", choices=["pistonball", "rps", "null"], default="pistonball")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=["substrate", "pettingzoo"], default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    if args.only in (None, "substrate"):
        runners = substrate_runners(args.envs, args.players, args.workers)
        env = f"dmlab2d/commons_harvest ({args.players} players)"
        got, _ = run_interleaved(runners, env, args.envs, args.seconds, args.repeats, width=38)
        _ratios(got, "plain loop", ["plain loop"])
        rows += got
    if args.only in (None, "pettingzoo"):
        runners = pettingzoo_runners(args.pz, args.envs, args.workers)
        got, _ = run_interleaved(runners, args.pz, args.envs, args.seconds, args.repeats, width=38)
        peers = [k for k in runners if not k.startswith("envhive")]
        _ratios(got, peers[0], peers)
        rows += got
    if args.json:
        write_results(args.json, rows)


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
