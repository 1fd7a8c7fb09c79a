"""The threaded Atari engine checked against ``AtariEnv`` on this ale-py, in its own process.

``python -m envhive.envs.atari._selfcheck`` prints one JSON line, ``{"problem": null}`` when the
engine (C++ calling ALE through ale-py's exported symbols) gives, op for op, the very frames,
rewards, flags and infos that :class:`~envhive.envs.atari.AtariEnv` (ale-py's own Python
binding) gives, else ``{"problem": "..."}``. ``_ale.binding_problem`` runs it in a subprocess
once per ale-py library and engine build: an ale-py whose C++ changed a type or an object's
size may crash here, never in the user's process.

The cases cover what the engine calls ALE for: grayscale and RGB screens, the minimal and the
full action set, sticky actions (ALE's seed), a mode and a difficulty, episodic life (lives),
the FIRE reset, time limits and autoresets (STEP_RESET, the terminal frame), a screen taller
than 210 lines, the RAM (``ram_info``: ALE's ``getRAM``, every step) and the rendered screen
(``render``, at the end of each case).

Examples:
    >>> [c[0] for c in CASES][:2]
    ['pong', 'breakout']
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

__all__ = ["CASES", "check_case", "run_checks", "main"]

#: ``(rom, options, agent steps)``, each run on two envs with distinct seeds.
_SHOW = {"ram_info": True, "render_mode": "rgb_array"}
CASES: list[tuple[str, dict[str, Any], int]] = [
    ("pong", {"repeat_action_probability": 0.25, "max_episode_steps": 30, **_SHOW}, 40),
    ("breakout", {"gray_scale": False, "stack_num": 2, "full_action_space": True, "episodic_life": True,
                  "noop_max": 3, "max_episode_steps": 40, **_SHOW}, 50),
    ("pong", {"mode": 1, "difficulty": 1, "max_episode_steps": 25, **_SHOW}, 30),
    ("pooyan", {"max_episode_steps": 20, **_SHOW}, 25),
]


def check_case(rom: str, options: dict[str, Any], steps: int) -> str | None:
    """Run ``steps`` STEP_RESET ops of two envs on the engine and on ``AtariEnv``; what differs
    first, or ``None``."""
    from envhive._buffers import Buffers, BufferSpec
    from envhive._ops import RESET, STEP_RESET
    from envhive.envs.atari._engine import AtariThreadEngine
    from envhive.envs.atari._env import AtariEnv

    kwargs = {"game": rom, **options}
    engine = AtariThreadEngine(2, kwargs, 2)
    envs = [AtariEnv(**kwargs) for _ in range(2)]
    try:
        p = engine.props
        num_actions = int(p.action_space.n)  # type: ignore[attr-defined]
        b = Buffers.allocate(BufferSpec(2, p.observation_space, p.action_space, with_final_obs=True))
        engine.bind(b)
        ids = np.arange(2, dtype=np.int64)
        b.ops[:] = RESET
        b.put_seeds([0, 1], [7, 8])
        _run(engine, ids)
        for i, env in enumerate(envs):
            want, _ = env.reset(seed=7 + i)
            if not np.array_equal(b.obs[i], want):
                return f"{rom} {options}: env {i}'s first frames differ from AtariEnv's"
        b.has_seed[:] = False
        info = engine._info["rep"]
        for t in range(steps):
            actions = [(t * 7 + 3 * i) % num_actions for i in range(2)]
            b.ops[:], b.actions[:] = STEP_RESET, actions
            _run(engine, ids)
            for i, env in enumerate(envs):
                obs, reward, term, trunc, step_info = env.step(actions[i])
                got = (float(b.reward[i]), bool(b.terminated[i]), bool(b.truncated[i]))
                if got != (reward, term, trunc):
                    return f"{rom} {options}: step {t} of env {i}: {got} != AtariEnv's {(reward, term, trunc)}"
                final = b.final_obs if b.final_obs is not None else b.obs  # allocated with_final_obs
                frames = final[i] if term or trunc else b.obs[i]
                if not np.array_equal(frames, obs):
                    return f"{rom} {options}: step {t} of env {i}: the frames differ from AtariEnv's"
                if term or trunc:
                    obs, step_info = env.reset()
                    if not np.array_equal(b.obs[i], obs):
                        return f"{rom} {options}: the reset after step {t} of env {i} differs from AtariEnv's"
                for key, value in step_info.items():
                    if not np.array_equal(info[key][i], value):
                        return f"{rom} {options}: step {t} of env {i}: info {key} {info[key][i]} != {value}"
        for i, (shown, screen) in enumerate(zip(engine.call("render", (), {}), (env.render() for env in envs))):
            if screen is None or not np.array_equal(shown, screen):
                return f"{rom} {options}: env {i}'s rendered screen differs from AtariEnv's"
        return None
    finally:
        engine.close()
        for env in envs:
            env.close()


def _run(engine: Any, ids: np.ndarray) -> None:
    from envhive._report import Completion

    out = Completion()
    engine.run(ids, None, out)
    if out.errors:
        raise next(iter(out.errors.values()))


def run_checks() -> str | None:
    """Every case of :data:`CASES` (``None``: all agree)."""
    from envhive.envs.atari import _ale
    from envhive.envs.atari._options import rom_ids

    _ale.trust_for_self_check()  # the engine under check, in this process only
    for rom, options, steps in CASES:
        if rom not in rom_ids():
            continue
        problem = check_case(rom, options, steps)
        if problem is not None:
            return problem
    return None


def main() -> None:
    """Print the verdict as one JSON line."""
    try:
        problem = run_checks()
    except Exception as err:  # any failure means: do not use the engine with this ale-py
        problem = f"{type(err).__name__}: {err}"
    print(json.dumps({"problem": problem}), flush=True)


if __name__ == "__main__":
    main()
