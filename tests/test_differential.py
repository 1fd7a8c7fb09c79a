"""Differential tests: envhive's VectorEnv against gymnasium's SyncVectorEnv, step by step.

For the same seeded envs and the same per-step actions, every output of envhive must be
IDENTICAL to ``gymnasium.vector.SyncVectorEnv(env_fns, autoreset_mode=...)``: observations
(values, dtypes, shapes, containers), rewards (float64), terminated/truncated, and infos
(keys, ``_key`` masks, nested dicts, numpy-array infos, ``final_obs``/``final_info`` and their
masks in same_step mode). Covered for each autoreset mode, for every executor that
``envhive.executors.available_executors()`` reports, with copy=True and copy=False, through
the sync API (``reset``/``step``, partial resets with ``reset_mask``, seeds as int / list /
list with ``None`` / via ``make(seed=...)``, reset options) and the EnvPool-style async API
(``async_reset``, ``send``/``recv`` with ``batch_size == num_envs``; next_step and same_step).

Envs: CartPole-v1, Pendulum-v1 (TimeLimit truncation at 200, float32 Box actions), CartPole
truncated every 17 steps (via ``make(max_episode_steps=...)`` and via a list of factories), and
``DictObsEnv`` below (Dict obs with Box, Discrete and a nested Tuple; infos with nested dicts,
numpy arrays, numpy scalars, strings; episodes end terminated, truncated or both on a seeded
schedule), also under ``make(max_episode_steps=...)``.
"""

from __future__ import annotations

import copy as copy_module
from collections.abc import Callable
from contextlib import closing
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import envhive
from envhive.executors import available_executors

EXECUTORS = available_executors()
MODES = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}


# --------------------------------------------------------------------------------------- env
class DictObsEnv(gym.Env):
    """Deterministic (given its seed) env with a Dict observation space and rich infos.

    * obs: ``{"mode": Discrete(4), "nested": Tuple(Discrete(3, start=-1), Box(0, 1, (2,), f64)),
      "pos": Box(-5, 5, (3,), f32)}``; ``pos[0]`` is the last action (-1 after a reset) and
      ``mode`` mixes in the step count, so a misrouted action or a lost step shows up.
    * Episode length (1..max_len) and its end (terminated, truncated or both) are drawn from the
      env's seeded RNG at each reset; ``self.episode`` counts resets, so an extra or missing
      reset shows up in every later info.
    * infos: reset infos always (ints, a bool, a string describing the options it got, sometimes
      an int32 array and the ``tag`` option); step
      infos on some steps only: float32 arrays, nested dicts with arrays / bools / np.float32,
      strings (object arrays), and an ``episode`` dict at the last step of each episode.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, max_len: int = 9) -> None:
        self.observation_space = spaces.Dict(
            {
                "pos": spaces.Box(-5.0, 5.0, (3,), np.float32),
                "mode": spaces.Discrete(4),
                "nested": spaces.Tuple(
                    (spaces.Discrete(3, start=-1), spaces.Box(0.0, 1.0, (2,), np.float64))
                ),
            }
        )
        self.action_space = spaces.Discrete(3)
        self.max_len = max_len
        self.episode = -1
        self._t = 0
        self._len = 0
        self._end = 0
        self._return = 0.0
        self._ended = True

    def _obs(self, action: int) -> dict[str, Any]:
        r = self.np_random
        pos = r.uniform(-4.0, 4.0, 3).astype(np.float32)
        pos[0] = action
        return {
            "pos": pos,
            "mode": np.int64((self._t + 3 * self.episode + max(action, 0)) % 4),
            "nested": (np.int64(r.integers(-1, 2)), r.uniform(0.0, 1.0, 2)),
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.episode += 1
        self._t = 0
        self._len = int(self.np_random.integers(1, self.max_len + 1))
        self._end = int(self.np_random.integers(3))  # 0: terminated, 1: truncated, 2: both
        self._return = 0.0
        self._ended = False
        # "options": the options the env got must be the same. SyncVectorEnv passes a
        # reset_mask-only dict on as {}, where envhive passes options only when there are some
        # (as SB3's DummyVecEnv; tests/test_reset_arguments.py): no options and {} read alike.
        info: dict[str, Any] = {
            "episode_no": self.episode,
            "seeded": seed is not None,
            "options": ",".join(sorted(options)) if options else "none",
        }
        if self.episode % 2 == 0:
            info["reset_arr"] = np.full(2, self.episode, np.int32)
        if options and "tag" in options:
            info["tag"] = options["tag"]
        return self._obs(-1), info

    def step(self, action: Any):
        if self._ended:
            raise RuntimeError("DictObsEnv.step() after the episode ended, without reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} not in {self.action_space}")
        action = int(action)
        self._t += 1
        reward = float(np.round(self.np_random.normal(), 6)) + action
        self._return += reward
        ended = self._t >= self._len
        self._ended = ended
        info: dict[str, Any] = {}
        if self._t % 2 == 0:
            info["vec"] = np.array([self._t, action], np.float32)
        if self._t % 3 == 0:
            info["stats"] = {
                "t": self._t,
                "arr": np.arange(3, dtype=np.int64) * self._t,
                "inner": {"flag": action == 1, "scale": np.float32(0.5 * self._t)},
            }
        if action == 2:
            info["label"] = f"a{self._t}"
        if ended:
            info["episode"] = {"r": self._return, "l": self._t, "no": self.episode}
        term = ended and self._end in (0, 2)
        trunc = ended and self._end in (1, 2)
        return self._obs(action), reward, term, trunc, info


# --------------------------------------------------------------------------------------- cases
def _discrete_actions(k: int) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, n: rng.integers(0, k, size=n, dtype=np.int64)


def _pendulum_actions(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(-2.0, 2.0, size=(n, 1)).astype(np.float32)


def _cartpole17() -> gym.Env:
    return gym.make("CartPole-v1", max_episode_steps=17)


def _dict_limited() -> gym.Env:
    return gym.wrappers.TimeLimit(DictObsEnv(), 4)


# name -> (envhive env arg, envhive make kwargs, gymnasium factory, num_envs, steps, actions)
CASES: dict[str, tuple[Any, dict[str, Any], Callable[[], gym.Env], int, int, Any]] = {
    "CartPole": ("CartPole-v1", {}, lambda: gym.make("CartPole-v1"), 5, 300, _discrete_actions(2)),
    # Episodes end only by the 200-step TimeLimit: see LONG_EPISODES.
    "Pendulum": ("Pendulum-v1", {}, lambda: gym.make("Pendulum-v1"), 4, 450, _pendulum_actions),
    "CartPole-trunc17": (
        "CartPole-v1",
        {"max_episode_steps": 17},
        _cartpole17,
        5,
        250,
        _discrete_actions(2),
    ),
    "CartPole-trunc17-factories": (
        [_cartpole17] * 4,
        {},
        _cartpole17,
        4,
        200,
        _discrete_actions(2),
    ),
    "DictObs": (DictObsEnv, {}, DictObsEnv, 5, 300, _discrete_actions(3)),
    "DictObs-limit4": (
        DictObsEnv,
        {"max_episode_steps": 4},
        _dict_limited,
        4,
        150,
        _discrete_actions(3),
    ),
}


# Cases whose episodes must not be cut short by the driver's extra resets (Pendulum only ends
# by truncation at 200 steps): no random partial resets, and full resets only after step 400.
LONG_EPISODES = {"Pendulum"}
# copy=False runs (views into envhive's buffers, snapshot at once) for these cases only: each
# pool costs a worker start-up on process executors, and copy only touches the pool layer.
NOCOPY_CASES = {"DictObs", "CartPole-trunc17"}


def _make_pair(
    case: str, mode: str, executor: str, *, copy: bool = True, seed: Any = None, **extra
):
    env_arg, kwargs, ref_fn, n, steps, actions = CASES[case]
    hive = envhive.make(
        env_arg,
        num_envs=n,
        executor=executor,
        autoreset=mode,
        copy=copy,
        seed=seed,
        **kwargs,
        **extra,
    )
    ref = SyncVectorEnv([ref_fn] * n, autoreset_mode=MODES[mode])
    return hive, ref, n, steps, actions


# --------------------------------------------------------------------------------------- comparison
def _same(h: Any, g: Any, where: str) -> None:
    """Assert envhive's value ``h`` is identical to gymnasium's ``g`` (types, dtypes, values)."""
    if isinstance(g, dict):
        assert isinstance(h, dict), f"{where}: envhive gave {type(h).__name__}, gymnasium a dict"
        assert set(h) == set(g), f"{where}: keys {sorted(h)} (envhive) != {sorted(g)} (gymnasium)"
        for k in g:
            _same(h[k], g[k], f"{where}[{k!r}]")
    elif isinstance(g, (tuple, list)):
        assert type(h) is type(g), (
            f"{where}: envhive gave {type(h).__name__}, gymnasium {type(g).__name__}"
        )
        assert len(h) == len(g), f"{where}: length {len(h)} != {len(g)}"
        for j, (x, y) in enumerate(zip(h, g)):
            _same(x, y, f"{where}[{j}]")
    elif isinstance(g, np.ndarray):
        assert isinstance(h, np.ndarray), (
            f"{where}: envhive gave {type(h).__name__}, gymnasium an ndarray"
        )
        assert h.shape == g.shape, f"{where}: shape {h.shape} (envhive) != {g.shape} (gymnasium)"
        assert h.dtype == g.dtype, f"{where}: dtype {h.dtype} (envhive) != {g.dtype} (gymnasium)"
        if g.dtype == object:
            for idx in np.ndindex(g.shape):
                _same(h[idx], g[idx], f"{where}[{idx}]")
        else:
            assert np.array_equal(h, g, equal_nan=g.dtype.kind in "fc"), (
                f"{where}: envhive {h!r} != gymnasium {g!r}"
            )
    else:
        assert type(h) is type(g), (
            f"{where}: envhive gave {type(h).__name__} {h!r}, gymnasium {type(g).__name__} {g!r}"
        )
        both_nan = isinstance(g, (float, np.floating)) and np.isnan(g) and np.isnan(h)
        assert both_nan or h == g, f"{where}: envhive {h!r} != gymnasium {g!r}"


_STEP_NAMES = ("obs", "reward", "terminated", "truncated", "info")
_RESET_NAMES = ("obs", "info")


def _same_out(h: tuple, g: tuple, where: str) -> None:
    names = _STEP_NAMES if len(g) == 5 else _RESET_NAMES
    assert isinstance(h, tuple) and len(h) == len(g), f"{where}: envhive returned {len(h)} items"
    for name, x, y in zip(names, h, g):
        _same(x, y, f"{where} {name}")


def _snapshot(value: Any) -> Any:
    return copy_module.deepcopy(value)


def _take(tree: Any, idx: np.ndarray) -> Any:
    """Reorder every batch array (obs leaves, info arrays and masks) by ``idx``."""
    if isinstance(tree, dict):
        return {k: _take(v, idx) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_take(v, idx) for v in tree)
    return tree[idx]


# --------------------------------------------------------------------------------------- driver
class Differ:
    """Runs envhive and gymnasium side by side and compares every output at once.

    With ``copy=True`` envhive's outputs are kept as returned (not copied), so the final
    re-check also proves later steps never overwrite arrays handed out earlier. With
    ``copy=False`` they are snapshot as soon as they are returned (they are views).
    """

    def __init__(self, hive: envhive.VectorEnv, ref: SyncVectorEnv) -> None:
        self.hive, self.ref = hive, ref
        self.records: list[tuple[str, Any, Any]] = []
        self.steps = 0
        self.resets = 0
        self.ended = 0

    def _record(self, where: str, h: tuple, g: tuple) -> None:
        if not self.hive.copy:
            h = _snapshot(h)
        _same_out(h, g, where)
        self.records.append((where, h, _snapshot(g)))

    def reset(
        self,
        where: str,
        hive_seed: Any,
        ref_seed: Any,
        mask: np.ndarray | None = None,
        extra: dict[str, Any] | None = None,
    ) -> tuple:
        def options() -> dict[str, Any] | None:
            # Fresh dicts: gymnasium pops "reset_mask" from the dict it is given.
            if extra is None and mask is None:
                return None
            out = dict(extra or {})
            if mask is not None:
                out["reset_mask"] = mask.copy()
            return out

        h = self.hive.reset(seed=copy_module.copy(hive_seed), options=options())
        g = self.ref.reset(seed=copy_module.copy(ref_seed), options=options())
        self._record(where, h, g)
        self.resets += 1
        return g

    def step(self, where: str, actions: np.ndarray) -> tuple:
        h = self.hive.step(actions.copy())
        g = self.ref.step(actions.copy())
        self._record(where, h, g)
        self.steps += 1
        self.ended += int(np.count_nonzero(g[2] | g[3]))
        return g

    def recheck(self) -> None:
        for where, h, g in self.records:
            _same_out(h, g, f"re-check of {where}")


def _random_seed(rng: np.random.Generator, n: int) -> Any:
    """None, an int, a list of ints, or a list of ints and Nones (never at the first reset)."""
    kind = rng.integers(4)
    if kind == 0:
        return None
    if kind == 1:
        return int(rng.integers(10_000))
    seeds = [int(s) for s in rng.integers(10_000, size=n)]
    if kind == 3:
        seeds = [s if rng.random() < 0.5 else None for s in seeds]
    return seeds


def _drive(
    d: Differ,
    *,
    n: int,
    steps: int,
    actions: Any,
    mode: str,
    rng: np.random.Generator,
    long_episodes: bool = False,
) -> None:
    """Step both sides ``steps`` times with identical actions; reset as the mode requires.

    * disabled: after every step with an ended env, a reset with ``reset_mask = term | trunc``
      (sometimes widened to envs that did not end, sometimes seeded, sometimes with options).
    * every mode: random partial resets (``reset_mask``) with random seeds (None, int, list,
      list with Nones) and options, and four scripted full resets: ``seed=list`` with Nones,
      ``seed=int``, ``options={}``, and no seed with an option.
    * ``long_episodes``: no random partial resets, and the full resets only in the last 30
      steps (so 200-step time limits are reached first).
    """
    partial_reset_p = 0.0 if long_episodes else 0.04
    at = (
        [steps - 30, steps - 22, steps - 15, steps - 8]
        if long_episodes
        else [steps * k // 5 for k in range(1, 5)]
    )
    with_nones = [4000 + i if i % 2 == 0 else None for i in range(n)]
    scripted = {
        at[0]: ("full reset(seed=list with None)", with_nones, None),
        at[1]: ("full reset(seed=int)", 4242, None),
        at[2]: ("full reset(options={})", None, {}),
        at[3]: ("full reset(options={'tag'})", None, {"tag": 77}),
    }
    for t in range(steps):
        if t in scripted:
            what, seed, extra = scripted[t]
            d.reset(f"{what} before step {t}", seed, seed, extra=extra)
        elif mode != "disabled" and rng.random() < partial_reset_p:
            mask = rng.random(n) < 0.4
            mask[rng.integers(n)] = True
            seed = _random_seed(rng, n)
            extra = {"tag": t} if rng.random() < 0.5 else None
            d.reset(
                f"partial reset {mask.tolist()} seed={seed} before step {t}",
                seed,
                seed,
                mask,
                extra,
            )
        g = d.step(f"step {t}", actions(rng, n))
        if mode == "disabled":
            mask = g[2] | g[3]
            if mask.any():
                if rng.random() < 0.2:
                    mask = mask | (rng.random(n) < 0.3)
                seed = _random_seed(rng, n) if rng.random() < 0.3 else None
                extra = {"tag": -t} if rng.random() < 0.3 else None
                d.reset(
                    f"reset_mask {mask.tolist()} seed={seed} after step {t}",
                    seed,
                    seed,
                    mask,
                    extra,
                )


# --------------------------------------------------------------------------------------- tests
# How the first reset is seeded. Each must equal gymnasium's reset(seed=...):
# make_int: make(seed=s) + reset();  reset_int: reset(seed=s);  make_list / reset_list: the
# same with one seed per env;  make_then_reset: make(seed=7) + reset(seed=s), where the
# reset's seed wins (and make's seed is never used later: reset() continues each env's RNG).
SEED_STYLES = ["make_int", "reset_int", "make_list", "reset_list", "make_then_reset"]


def _first_seeds(style: str, n: int, base: int) -> tuple[Any, Any, Any]:
    """(make seed, envhive first-reset seed, gymnasium first-reset seed)."""
    listed = [base + 7 * i + 3 for i in range(n)]
    return {
        "make_int": (base, None, base),
        "reset_int": (None, base, base),
        "make_list": (listed, None, listed),
        "reset_list": (None, listed, listed),
        "make_then_reset": (7, base, base),
    }[style]


# Every (case, mode), copy=True; plus copy=False for NOCOPY_CASES. The seed style of the first
# reset cycles through SEED_STYLES so that every style meets several envs and modes.
SYNC_RUNS = [
    pytest.param(
        case,
        mode,
        copy,
        SEED_STYLES[k % len(SEED_STYLES)],
        id=f"{case}-{mode}-{'copy' if copy else 'nocopy'}",
    )
    for k, (case, mode, copy) in enumerate(
        (case, mode, copy)
        for case in CASES
        for mode in MODES
        for copy in (True, False)
        if copy or case in NOCOPY_CASES
    )
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case, mode, copy, seed_style", SYNC_RUNS)
def test_sync_matches_gymnasium(
    case: str, mode: str, copy: bool, seed_style: str, executor: str
) -> None:
    base = 100 + sorted(CASES).index(case) * 31 + list(MODES).index(mode) * 7
    _, _, _, n, _, _ = CASES[case]
    make_seed, hive_seed, ref_seed = _first_seeds(seed_style, n, base)
    hive, ref, n, steps, actions = _make_pair(case, mode, executor, copy=copy, seed=make_seed)
    rng = np.random.default_rng(base)
    with hive, closing(ref):
        assert hive.copy is copy
        assert hive.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"]
        assert hive.single_observation_space == ref.single_observation_space
        assert hive.observation_space == ref.observation_space
        assert hive.action_space == ref.action_space
        d = Differ(hive, ref)
        d.reset("first reset", hive_seed, ref_seed)
        _drive(
            d,
            n=n,
            steps=steps,
            actions=actions,
            mode=mode,
            rng=rng,
            long_episodes=case in LONG_EPISODES,
        )
        if copy:
            d.recheck()
        # The run must actually exercise episode ends (and their autoreset / reset_mask path).
        assert d.ended >= 8, f"only {d.ended} episode ends in {steps} steps: the test is too weak"
        # env_steps counts env.step calls: steps * n minus the next_step autoreset steps.
        if mode != "next_step":
            assert hive.env_steps == steps * n


# next_step (asked for) for every kind of env; same_step too for three; copy=False for two.
ASYNC_RUNS = [
    *[
        (case, "next_step", True)
        for case in ("CartPole", "Pendulum", "CartPole-trunc17", "DictObs", "DictObs-limit4")
    ],
    *[(case, "same_step", True) for case in ("Pendulum", "CartPole-trunc17", "DictObs")],
    ("DictObs", "next_step", False),
    ("DictObs-limit4", "same_step", False),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "case, mode, copy",
    [pytest.param(*r, id=f"{r[0]}-{r[1]}-{'copy' if r[2] else 'nocopy'}") for r in ASYNC_RUNS],
)
def test_async_matches_gymnasium(case: str, mode: str, copy: bool, executor: str) -> None:
    """async_reset, then recv / send(actions, info["env_id"]) == SyncVectorEnv.step.

    batch_size == num_envs, so each recv holds every env (in any order: rows are put back in
    env order by info["env_id"] before comparing, infos and final_obs included).
    """
    seed = 900 + sorted(CASES).index(case)
    hive, ref, n, steps, actions = _make_pair(
        case, mode, executor, copy=copy, seed=seed, batch_size=CASES[case][3]
    )
    if case not in LONG_EPISODES:  # Pendulum needs > 400 steps to truncate twice
        steps = min(steps, 350)
    rng = np.random.default_rng(seed)
    ended = 0

    def recv(where: str, g_obs: Any, g_info: dict, g_rest: tuple | None) -> np.ndarray:
        h = hive.recv()
        if not copy:
            h = _snapshot(h)
        obs, rew, term, trunc, info = h
        assert set(info) >= {"env_id"} and "_env_id" not in info, (
            f"{where}: info keys {sorted(info)}"
        )
        ids = info.pop("env_id")
        assert isinstance(ids, np.ndarray) and ids.dtype == np.int32, f"{where}: env_id {ids!r}"
        assert sorted(ids.tolist()) == list(range(n)), f"{where}: env_id {ids.tolist()}"
        order = np.argsort(ids)
        _same(_take(obs, order), g_obs, f"{where} obs")
        _same(_take(info, order), g_info, f"{where} info")
        if g_rest is None:  # after async_reset: reward 0, flags False, as a reset step
            _same(rew, np.zeros(n, np.float64), f"{where} reward")
            _same(term, np.zeros(n, np.bool_), f"{where} terminated")
            _same(trunc, np.zeros(n, np.bool_), f"{where} truncated")
        else:
            _same(rew[order], g_rest[0], f"{where} reward")
            _same(term[order], g_rest[1], f"{where} terminated")
            _same(trunc[order], g_rest[2], f"{where} truncated")
        return ids

    with hive, closing(ref):
        assert hive.batch_size == n and hive.copy is copy
        hive.async_reset()
        g_obs, g_info = ref.reset(seed=seed)
        ids = recv("async_reset", g_obs, g_info, None)
        for t in range(steps):
            if t == steps // 2:
                # Every env is idle after recv: an async_reset of all, seeded, == reset(seed).
                hive.async_reset(seed=seed + 1)
                g_obs, g_info = ref.reset(seed=seed + 1)
                ids = recv(f"async_reset(seed) before step {t}", g_obs, g_info, None)
            a = actions(rng, n)
            hive.send(a[ids].copy(), ids)
            g_obs, g_rew, g_term, g_trunc, g_info = ref.step(a.copy())
            ended += int(np.count_nonzero(g_term | g_trunc))
            ids = recv(f"step {t}", g_obs, g_info, (g_rew, g_term, g_trunc))
    assert ended >= 5, f"only {ended} episode ends: the test is too weak"
