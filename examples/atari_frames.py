"""A seeded Pong episode as a PNG strip: the raw screen, and what the agent sees.

    python examples/atari_frames.py                       # writes atari_pong_strip.png
    python examples/atari_frames.py --frames 8 --out strip.png --seed 3

The env is ``envhive/Pong-v5`` with EnvPool's preprocessing (the defaults): each agent step
repeats the action 4 frames, max-pools the last two screens, converts to grayscale, resizes to
84x84 and stacks the last 4 such frames. The top row of the strip is the raw 210x160 RGB
screen (``render_mode="rgb_array"``); the bottom row is the newest frame of the stack, the
observation the policy gets, scaled up to the same height. The episode is played to its end
by seeded random actions; the same seed gives the same strip on every run and every executor.
"""

from __future__ import annotations

import argparse

import cv2
import numpy as np

import envhive


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--frames", type=int, default=6, help="frames in the strip")
    p.add_argument("--out", default="atari_pong_strip.png")
    p.add_argument("--max-steps", type=int, default=27000)
    args = p.parse_args()

    # serial: the game object is in this process, so env.call("render") reaches it (the
    # native Atari engine keeps its games in worker processes).
    env = envhive.make("envhive/Pong-v5", num_envs=1, seed=args.seed, autoreset="disabled",
                       env_kwargs={"render_mode": "rgb_array"}, executor="serial")
    obs, info = env.reset()
    policy = np.random.default_rng(args.seed)  # seeded random play: the same episode each run
    shots, ret, steps = [], 0.0, 0
    while steps < args.max_steps:
        obs, reward, term, trunc, info = env.step(policy.integers(0, 6, size=1))
        ret += float(info["reward"][0])
        steps += 1
        if steps % 150 == 1:  # keep a few candidates; the strip samples them evenly
            shots.append((env.call("render")[0], obs[0, -1].copy()))
        if term[0] or trunc[0]:
            break
    env.close()

    picks = [shots[int(k)] for k in np.linspace(0, len(shots) - 1, min(args.frames, len(shots)))]
    top = np.hstack([raw for raw, _ in picks])  # RGB, 210 x 160 each
    bottom = np.hstack([
        cv2.cvtColor(cv2.resize(seen, (160, 210), interpolation=cv2.INTER_NEAREST), cv2.COLOR_GRAY2RGB)
        for _, seen in picks
    ])
    strip = np.vstack([top, np.full((4, top.shape[1], 3), 255, np.uint8), bottom])
    cv2.imwrite(args.out, cv2.cvtColor(strip, cv2.COLOR_RGB2BGR))
    print(f"envhive/Pong-v5 seed {args.seed}: episode of {steps} steps, return {ret:+.0f}")
    print(f"wrote {args.out}: {len(picks)} frames, raw screen (top) and the agent's 84x84 view (bottom)")


if __name__ == "__main__":
    main()
