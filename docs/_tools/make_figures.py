"""The site's figures, drawn from what envhive returns and from benchmarks/results/.

    python docs/_tools/make_figures.py            # every figure into docs/assets/
    python docs/_tools/make_figures.py --out DIR  # elsewhere (tests/test_docs.py does)

* ``autoreset-<mode>.svg``: what each autoreset mode returns call by call, for one env whose
  first episode terminates after 2 steps. The rows are recorded from a real pool
  (``envhive.testing.CountingEnv``), not drawn by hand.
* ``bench-native.svg``: envhive's compiled envs against EnvPool at 64 envs
  (``benchmarks/results/native*.json``).
* ``bench-atari.svg``: Atari steps/s against EnvPool and ale-py's ``AtariVectorEnv``
  (``benchmarks/results/atari.json``).

The headline plot, ``docs/assets/bench.png``, is the one ``envhive bench`` draws itself.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyBboxPatch

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
EPISODE_COLOURS = ["#4c72b0", "#dd8452", "#55a868"]
ENVHIVE, PEER, PEER2 = "#4c72b0", "#bbbbbb", "#8c8c8c"

plt.rcParams.update({
    "svg.fonttype": "none",  # text stays text: small files, the page's font
    "svg.hashsalt": "envhive-docs",  # stable ids: a figure redrawn from the same data is the same file
    "font.size": 10,
    "font.family": "sans-serif",
})


# --------------------------------------------------------------------------- autoreset


@dataclass
class Call:
    """One call on the pool and what it returned for the one env."""

    label: str
    obs: list[int] | None = None  # [tag, episode, step, last action]
    reward: float | None = None
    terminated: bool = False
    truncated: bool = False
    final_obs: list[int] | None = None
    note: str = ""
    error: str = ""
    flags: list[str] = field(default_factory=list)


def record(mode: str) -> list[Call]:
    """Run the worked example of docs/semantics.md in ``mode`` and record every call."""
    import envhive
    from envhive.testing import CountingEnv

    env = envhive.make(lambda: CountingEnv(pattern=[(2, "term"), (3, "trunc")], with_info=False),
                       1, autoreset=mode)
    calls = []
    obs, _ = env.reset(seed=0)
    calls.append(Call("reset()", obs[0].tolist()))
    for action in (1, 1, 2, 1):
        try:
            obs, rew, term, trunc, info = env.step(np.array([action]))
        except envhive.ResetNeededError:
            calls.append(Call(f"step([{action}])", error="ResetNeeded-\nError:\nnothing\nstepped"))
            obs, _ = env.reset(options={"reset_mask": np.array([True])})
            calls.append(Call("reset(options=\n{'reset_mask': [True]})", obs[0].tolist()))
            continue
        final = info["final_obs"][0].tolist() if "final_obs" in info else None
        calls.append(Call(f"step([{action}])", obs[0].tolist(), float(rew[0]), bool(term[0]),
                          bool(trunc[0]), final))
    env.close()
    previous_done = False
    for call in calls:  # what a reader should notice
        if call.obs is None:
            continue
        if mode == "next_step" and previous_done and call.label.startswith("step"):
            call.note = "action ignored:\nthe reset step"
        if call.final_obs is not None:
            call.note = "reset obs returned,\nterminal obs in info"
        previous_done = call.terminated or call.truncated
    return calls


def _box(ax: Any, x: float, y: float, text: str, colour: str, *, edge: str = "none",
         width: float = 0.92, height: float = 0.66, lw: float = 0.0) -> None:
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=colour, edgecolor=edge, linewidth=lw))
    ax.text(x, y, text, ha="center", va="center", color="white", fontsize=9, fontweight="bold")


def _obs_box(ax: Any, x: float, y: float, obs: list[int], terminal: bool) -> None:
    episode, step = obs[1], obs[2]
    text = f"episode {episode}\nstep {step}"
    _box(ax, x, y, text, EPISODE_COLOURS[episode % 3],
         edge="#c44e52" if terminal else "none", lw=3.0 if terminal else 0.0)


def draw_autoreset(mode: str, path: pathlib.Path) -> None:
    calls = record(mode)
    rows = ["returned obs", "reward", "terminated", "info['final_obs']"]
    fig, ax = plt.subplots(figsize=(1.55 * len(calls) + 1.6, 3.7))
    ax.set_xlim(-1.4, len(calls) - 0.4)
    ax.set_ylim(-len(rows) - 0.55, 1.0)
    ax.axis("off")
    for r, name in enumerate(rows):
        ax.text(-1.35, -r - 0.6, name, ha="left", va="center", fontsize=9, color="#444444",
                family="monospace")
    ax.annotate("", xy=(len(calls) - 0.45, 0.85), xytext=(-0.45, 0.85),
                arrowprops={"arrowstyle": "->", "color": "#888888"})
    ax.text(len(calls) - 0.45, 0.95, "calls, in order", ha="right", va="bottom", fontsize=8,
            color="#888888")
    for c, call in enumerate(calls):
        ax.text(c, 0.45, call.label, ha="center", va="center", fontsize=8.5, family="monospace")
        if call.error:
            _box(ax, c, -2.1, call.error, "#c44e52", width=0.92, height=1.5)
            continue
        terminal = call.terminated or call.truncated
        if call.obs is not None:
            # In same_step the row of an ended episode holds the next episode's reset obs.
            _obs_box(ax, c, -0.6, call.obs, terminal and call.final_obs is None)
        if call.reward is not None:
            ax.text(c, -1.6, f"{call.reward:g}", ha="center", va="center", fontsize=10)
            flag = "True" if call.terminated else "False"
            ax.text(c, -2.6, flag, ha="center", va="center", fontsize=10,
                    color="#c44e52" if call.terminated else "#444444",
                    fontweight="bold" if call.terminated else "normal")
        if call.final_obs is not None:
            _obs_box(ax, c, -3.6, call.final_obs, True)
        if call.note:
            ax.text(c, -4.25, call.note, ha="center", va="top", fontsize=7.5, color="#555555",
                    style="italic")
    ax.text(-1.35, -4.45 if mode != "same_step" else -4.95,
            "red outline: a terminal observation", ha="left", va="top", fontsize=7.5,
            color="#c44e52")
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


# --------------------------------------------------------------------------- benchmarks


def _load(name: str) -> Any:
    return json.loads((RESULTS / name).read_text())


def draw_native(path: pathlib.Path) -> None:
    """envhive's compiled ids at 64 envs, steps/s relative to EnvPool (log scale)."""
    ratios: dict[str, float] = {}
    for name in ("native.json", "native_mujoco.json", "native_mujoco_more.json",
                 "native_mujoco_idp.json"):
        for row in _load(name)["results"]:
            if row["runner"] == "envhive" and row["num_envs"] == 64:
                ratios[row["env"]] = row["ratio_vs"]["EnvPool sync"]  # later files win: newer code
    names = sorted(ratios, key=lambda k: ratios[k])
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(names) + 1.1))
    y = np.arange(len(names))
    ax.barh(y, [ratios[n] for n in names], color=ENVHIVE)
    ax.axvline(1.0, color="#c44e52", lw=1.2)
    ax.set_xscale("log")
    ax.set_yticks(y, [f"envhive/{n}" for n in names], fontsize=9)
    ax.set_xlabel("steps/s at 64 envs, relative to EnvPool (1 = EnvPool; log scale)")
    for yi, n in zip(y, names):
        ax.text(ratios[n] * 1.06, yi, f"{ratios[n]:.2f}x", va="center", fontsize=8)
    ax.set_xlim(0.5, 120)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def draw_atari(path: pathlib.Path) -> None:
    """Atari steps/s of envhive, EnvPool and AtariVectorEnv for every measured configuration."""
    rows = _load("atari.json")["results"]
    labels = [f"{r['game']}\n{r['num_envs']} {r['mode']}" for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(9, 3.4))
    for k, (key, name, colour) in enumerate((("envhive", "envhive", ENVHIVE),
                                             ("envpool", "EnvPool", PEER),
                                             ("ale_vector", "ale-py AtariVectorEnv", PEER2))):
        ax.bar(x + (k - 1) * 0.27, [r[key] for r in rows], 0.27, label=name, color=colour)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("env steps/s")
    ax.legend(frameon=False, fontsize=8, ncols=3, loc="upper left")
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_ylim(0, max(r["envhive"] for r in rows) * 1.18)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[pathlib.Path]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "assets")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    written = []
    for mode in ("next_step", "same_step", "disabled"):
        written.append(args.out / f"autoreset-{mode}.svg")
        draw_autoreset(mode, written[-1])
    written.append(args.out / "bench-native.svg")
    draw_native(written[-1])
    written.append(args.out / "bench-atari.svg")
    draw_atari(written[-1])
    for path in written:
        print(path)
    return written


if __name__ == "__main__":
    main()
