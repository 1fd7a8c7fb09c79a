"""Every ROM ale-py ships, on every executor: the table of docs/atari.md.

For each ``envhive/<Game>-v5`` id: a pool of two envs on each executor (serial, thread, process,
native), a seeded reset and a few steps of fixed actions; every executor's frames, rewards,
flags and infos are compared with the serial executor's. The four ROMs ALE has no
single-player version of are listed as refused (envhive has no id for them: ALE's ``loadROM``
would end the process). ``.ci/run`` runs it; it writes a Markdown table and a JSON file.

    python tools/atari_roms.py --out benchmarks/results/atari_roms.json --markdown docs/atari_roms.md
    python tools/atari_roms.py --ids envhive/Pong-v5 envhive/AirRaid-v5   # a few

Exit status 1 when any id differs or fails on any executor.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

EXECUTORS = ["serial", "thread", "process", "native"]


def _record(env: Any, steps: int) -> list[Any]:
    from envhive.testing import transcript

    n = env.num_envs
    return transcript(env, steps, lambda t: np.array([(t * 5 + 3 * i) % env.single_action_space.n
                                                      for i in range(n)], np.int64), seed=[7, 8][:n])


def run_id(env_id: str, executors: list[str], steps: int = 5, num_envs: int = 2) -> dict[str, Any]:
    """One id on every executor: ``{"id", "status": {executor: "ok" | "same" | "DIFFERS: ..." |
    "FAILED: ..."}, "seconds", "screen"}`` (serial's status is ``"ok"`` when it ran)."""
    import envhive
    from envhive.envs.atari._ale import rom_facts
    from envhive.testing import assert_same_transcript

    status: dict[str, str] = {}
    reference = None
    start = time.perf_counter()
    for executor in executors:
        try:
            env = envhive.make(env_id, num_envs=num_envs, executor=executor, max_episode_steps=steps + 1)
            try:
                rec = _record(env, steps)
            finally:
                env.close()
        except Exception as err:  # a row of the table, not a crash
            status[executor] = f"FAILED: {type(err).__name__}: {err}".splitlines()[0][:200]
            continue
        if reference is None:
            reference = rec
            status[executor] = "ok"
            continue
        try:
            assert_same_transcript(reference, rec)
            status[executor] = "same"
        except AssertionError as err:
            status[executor] = f"DIFFERS: {str(err).splitlines()[0][:200]}"
    rom = dict(envhive.engines.compiled_env(env_id).kwargs)["game"]
    return {"id": env_id, "status": status, "seconds": round(time.perf_counter() - start, 2),
            "screen": list(rom_facts(rom).screen)}


def _markdown(rows: list[dict[str, Any]], refused: list[str], executors: list[str], took: float) -> str:
    head = "| id | screen | " + " | ".join(executors) + " |\n|---|---|" + "---|" * len(executors) + "\n"
    lines = [f"| `{r['id']}` | {r['screen'][0]}x{r['screen'][1]} | "
             + " | ".join(r["status"].get(e, "-") for e in executors) + " |" for r in rows]
    lines += [f"| `{i}` | - | no id: ALE has no single-player game of this ROM (its loadROM ends the process) |" + " - |" * (len(executors) - 1)
              for i in refused]
    bad = sum(any(s.startswith(("DIFFERS", "FAILED")) for s in r["status"].values()) for r in rows)
    return (head + "\n".join(lines) + f"\n\n{len(rows)} ids x {len(executors)} executors: {bad} with a difference "
            f"or a failure; {len(refused)} ROMs refused. {took:.0f} s.\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", nargs="*", help="ids to run (default: every Atari id)")
    parser.add_argument("--executors", nargs="*", default=EXECUTORS)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", help="write the rows as JSON here")
    parser.add_argument("--markdown", help="write the table as Markdown here")
    parser.add_argument("--from-json", help="only write the table of an earlier run's JSON")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            done = json.load(f)
        table = _markdown(done["rows"], done["refused"], args.executors, done["seconds"])
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(table)
        print(table)
        return 0

    from envhive.engines import compiled_ids
    from envhive.envs.atari._options import NO_SINGLE_PLAYER, game_name

    ids = args.ids or compiled_ids("atari")
    start = time.perf_counter()
    rows = []
    for k, env_id in enumerate(ids):
        row = run_id(env_id, args.executors, args.steps)
        rows.append(row)
        print(f"[{k + 1}/{len(ids)}] {env_id}: {row['status']} ({row['seconds']} s)", flush=True)
    took = time.perf_counter() - start
    refused = [] if args.ids else [f"envhive/{game_name(r)}-v5" for r in NO_SINGLE_PLAYER]
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "refused": refused, "seconds": round(took, 1)}, f, indent=1)
    table = _markdown(rows, refused, args.executors, took)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)
    print(table)
    failed = [r["id"] for r in rows if any(s.startswith(("DIFFERS", "FAILED")) for s in r["status"].values())]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
