"""make(api="sb3"): a Stable-Baselines3 VecEnv over any pool, equal to SB3's own DummyVecEnv.

Checked against SB3 itself: its DummyVecEnv over the same gymnasium envs with the same seeds
and actions (observations, float32 rewards, dones, every info key including
``terminal_observation`` and ``TimeLimit.truncated``, ``reset_infos``) on every executor; its
VecEnv wrappers (VecNormalize, VecMonitor, VecFrameStack, VecCheckNan, VecTransposeImage,
VecExtractDictObs) over both; its helpers (``make_vec_env``, ``evaluate_policy``); its
algorithms, which must train identically over both and learn CartPole over envhive.
SB3 2.9 has no checker for VecEnvs (``env_checker.check_env`` takes a single gymnasium env),
so these differential tests are the check.
"""

from __future__ import annotations

import sys
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from stable_baselines3 import A2C, DQN, PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import (  # noqa: E402
    DummyVecEnv,
    VecCheckNan,
    VecEnv,
    VecExtractDictObs,
    VecFrameStack,
    VecMonitor,
    VecNormalize,
    VecTransposeImage,
    is_vecenv_wrapped,
)

import envhive  # noqa: E402
from envhive.executors import available_executors  # noqa: E402
from envhive.frontends import SB3VecEnv  # noqa: E402
from envhive.testing import SPACE_ZOO, CountingEnv, ZooEnv  # noqa: E402

pytestmark = pytest.mark.timeout(300)

EXECUTORS = available_executors()

FLAT_DICT = spaces.Dict({
    "pos": spaces.Box(-1.0, 1.0, (2,), np.float64),
    "id": spaces.Discrete(3),
    "bits": spaces.MultiBinary(2),
    "grid": spaces.MultiDiscrete([3, 4]),
})


def cartpole(steps=25):
    return lambda: gym.make("CartPole-v1", max_episode_steps=steps)


def zoo(obs_space, act_space=None, max_len=5):
    return lambda: ZooEnv(obs_space, act_space or spaces.Discrete(3), max_len=max_len)


class InfoEnv(CountingEnv):
    """CountingEnv whose infos hold every kind of value: nested dicts, arrays, numpy and
    Python scalars, objects, keys only some envs report."""

    def _info(self):
        t = self.t
        info = {"step": t, "nested": {"a": float(t) / 2, "arr": np.arange(3) * t},
                "f32": np.float32(t) / 4, "name": f"s{t}", "flag": t % 2 == 0}
        if (t + (self.tag or 0)) % 3 == 0:
            info["sometimes"] = np.array([t, -t], np.int32)
        return info


class OptionsEnv(CountingEnv):
    """Reports the reset options it got in its reset info."""

    def reset(self, *, seed=None, options=None):
        obs, _ = super().reset(seed=seed, options=options)
        return obs, {"options": options}


class RenderEnv(CountingEnv):
    def __init__(self, tag=0, render_mode="rgb_array"):
        super().__init__(tag=tag)
        self.render_mode = render_mode

    def render(self):
        return np.full((2, 3, 3), self.tag, np.uint8)


# ------------------------------------------------------------------ comparing with DummyVecEnv
def assert_same(ref, got, path="value"):
    """Equal values of the same kinds: containers recursively, arrays with dtype and shape,
    scalars with the same dtype (Python and numpy scalars of one dtype are the same)."""
    if isinstance(ref, dict):
        assert isinstance(got, dict), f"{path}: {type(got).__name__}, expected a dict"
        assert list(ref) == list(got) or set(ref) == set(got), f"{path}: keys {list(got)} != {list(ref)}"
        for key in ref:
            assert_same(ref[key], got[key], f"{path}[{key!r}]")
    elif isinstance(ref, (tuple, list)):
        assert type(got) is type(ref) and len(got) == len(ref), f"{path}: {got!r} != {ref!r}"
        for i, (a, b) in enumerate(zip(ref, got)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(ref, np.ndarray):
        assert isinstance(got, np.ndarray), f"{path}: {type(got).__name__}, expected an array"
        assert got.dtype == ref.dtype and got.shape == ref.shape, f"{path}: {got.dtype}{got.shape} != {ref.dtype}{ref.shape}"
        assert np.array_equal(got, ref), f"{path}: {got} != {ref}"
    elif isinstance(ref, (bool, int, float, np.generic)):
        assert np.asarray(got).dtype == np.asarray(ref).dtype, f"{path}: {got!r} is not of {ref!r}'s dtype"
        assert got == ref, f"{path}: {got!r} != {ref!r}"
    else:
        assert got == ref, f"{path}: {got!r} != {ref!r}"


def random_actions(space, n, steps, seed=0):
    space = spaces.Tuple([space] * n)
    space.seed(seed)
    out = []
    for _ in range(steps):
        rows = space.sample()
        out.append(np.stack([np.asarray(r) for r in rows]))
    return out


def assert_same_run(ref, got, actions, resets=2):
    """Step both VecEnvs with the same actions, with ``resets`` seeded/unseeded resets;
    return how many episodes ended (terminated, truncated)."""
    ended = [0, 0]
    chunk = len(actions) // resets
    for r in range(resets):
        if r % 2 == 0:
            assert ref.seed(100 + r) == got.seed(100 + r)
        assert_same(ref.reset(), got.reset(), "reset obs")
        assert_same(ref.reset_infos, got.reset_infos, "reset_infos")
        for t, act in enumerate(actions[r * chunk:(r + 1) * chunk]):
            ro, rr, rd, ri = ref.step(act)
            go, gr, gd, gi = got.step(act)
            where = f"reset {r} step {t}"
            assert_same(ro, go, f"{where} obs")
            assert_same(rr, gr, f"{where} rewards")
            assert_same(rd, gd, f"{where} dones")
            assert_same(ri, gi, f"{where} infos")
            assert_same(ref.reset_infos, got.reset_infos, f"{where} reset_infos")
            for info in ri:
                if "terminal_observation" in info:
                    ended[int(info["TimeLimit.truncated"])] += 1
    ref.close()
    got.close()
    return ended


# ------------------------------------------------------------------ the VecEnv itself
def test_is_an_sb3_vec_env_with_single_env_spaces():
    venv = envhive.make("CartPole-v1", 3, api="sb3", seed=0)
    assert isinstance(venv, VecEnv) and isinstance(venv, SB3VecEnv)
    assert venv.num_envs == 3
    ref = gym.make("CartPole-v1")
    assert venv.observation_space == ref.observation_space
    assert venv.action_space == ref.action_space
    assert venv.render_mode is None
    assert venv.metadata["render_fps"] == ref.metadata["render_fps"]
    assert venv.unwrapped is venv
    assert repr(venv) == "envhive.SB3VecEnv('CartPole-v1', num_envs=3, executor='serial')"
    obs = venv.reset()
    assert obs.shape == (3, 4) and obs.dtype == np.float32
    venv.close()
    venv.close()  # idempotent
    ref.close()


@pytest.mark.parametrize("name", EXECUTORS)
def test_cartpole_equals_dummy_vec_env(name):
    """Episodes end terminated and truncated inside the run; seeded and unseeded resets."""
    ref = DummyVecEnv([cartpole()] * 4)
    got = envhive.make(cartpole(), 4, api="sb3", executor=name)
    actions = random_actions(spaces.Discrete(2), 4, 300)
    terminated, truncated = assert_same_run(ref, got, actions)
    assert terminated >= 10 and truncated >= 3, (terminated, truncated)


def test_native_kernel_equals_dummy_vec_env():
    """A compiled id on the native executor (no per-env objects): the same transitions as
    DummyVecEnv over gymnasium's make of that id."""
    ref = DummyVecEnv([lambda: gym.make("envhive/CartPole-v1", max_episode_steps=25)] * 4)
    got = envhive.make("envhive/CartPole-v1", 4, api="sb3", executor="native", max_episode_steps=25)
    assert got.pool.executor.name == "native"
    terminated, truncated = assert_same_run(ref, got, random_actions(spaces.Discrete(2), 4, 300))
    assert terminated >= 10 and truncated >= 3


@pytest.mark.parametrize("name", EXECUTORS)
@pytest.mark.parametrize("obs", ["dict", "tuple", "discrete", "image"])
def test_structured_observations_equal_dummy_vec_env(name, obs):
    """Dict observations are dicts of arrays, Tuple ones tuples (as DummyVecEnv gives them);
    ZooEnv's infos ("len" on reset, "t" on odd steps) go to infos and reset_infos."""
    space = FLAT_DICT if obs == "dict" else SPACE_ZOO[obs]
    ref = DummyVecEnv([zoo(space)] * 3)
    got = envhive.make(zoo(space), 3, api="sb3", executor=name)
    terminated, truncated = assert_same_run(ref, got, random_actions(spaces.Discrete(3), 3, 200))
    assert terminated >= 5 and truncated >= 5


@pytest.mark.parametrize("name", EXECUTORS)
def test_infos_equal_dummy_vec_env(name):
    """Every kind of info value, nested dicts, keys only some envs report, final infos of
    ended envs and reset infos of the envs that replaced them."""
    fns = [lambda i=i: InfoEnv(pattern=[(3 + i, "term"), (2, "trunc")], tag=i) for i in range(3)]
    ref = DummyVecEnv(fns)
    got = envhive.make(fns, api="sb3", executor=name)
    terminated, truncated = assert_same_run(ref, got, [np.ones(3, np.int64)] * 40)
    assert terminated >= 5 and truncated >= 5


def test_info_rows_keep_what_each_env_reported():
    from envhive._infos import add_info
    from envhive.frontends._sb3 import info_rows

    cols = add_info({}, {"x": {"a": 1}, "arr": np.arange(2)}, 0, 3)
    add_info(cols, {"x": 5, "obj": [1]}, 1, 3)  # a number where env 0 reported a dict
    rows = info_rows(cols, 3)
    assert_same(rows, [{"x": {"a": 1}, "arr": np.arange(2)}, {"x": 5, "obj": [1]}, {}])
    rows[0]["arr"][0] = 9  # rows are copies, not views of the column
    assert cols["arr"].values[0, 0] == 0


# ------------------------------------------------------------------ SB3's wrappers over it
def wrapped_pair(wrap, fn, n=4, name="serial"):
    return wrap(DummyVecEnv([fn] * n)), wrap(envhive.make(fn, n, api="sb3", executor=name))


@pytest.mark.parametrize("name", ["serial", "process"])
def test_vec_normalize_equals_it_over_dummy_vec_env(name):
    ref, got = wrapped_pair(lambda v: VecNormalize(v, gamma=0.9), cartpole(), name=name)
    assert_same_run(ref, got, random_actions(spaces.Discrete(2), 4, 200))
    assert np.array_equal(ref.obs_rms.mean, got.obs_rms.mean)
    assert np.array_equal(ref.ret_rms.var, got.ret_rms.var)
    assert np.array_equal(ref.get_original_obs(), got.get_original_obs())


@pytest.mark.parametrize("name", ["serial", "process"])
def test_vec_monitor_equals_it_over_dummy_vec_env(name):
    ref, got = wrapped_pair(VecMonitor, cartpole(), name=name)
    for venv in (ref, got):
        venv.seed(0)
        venv.reset()
    episodes = 0
    for act in random_actions(spaces.Discrete(2), 4, 200):
        (_, _, _, ri), (_, _, _, gi) = ref.step(act), got.step(act)
        for a, b in zip(ri, gi):
            assert ("episode" in a) == ("episode" in b)
            if "episode" in a:
                episodes += 1
                assert (a["episode"]["r"], a["episode"]["l"]) == (b["episode"]["r"], b["episode"]["l"])
                a.pop("episode"), b.pop("episode")  # "t" is wall time
            assert_same(a, b)
    assert episodes >= 20
    ref.close(), got.close()


def test_frame_stack_and_extract_dict_obs_equal_them_over_dummy_vec_env():
    boxes = spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (2,)), "img": spaces.Box(0, 255, (3, 3, 1), np.uint8)})
    ref, got = wrapped_pair(lambda v: VecFrameStack(v, n_stack=3), zoo(boxes))  # Box entries only
    assert_same_run(ref, got, random_actions(spaces.Discrete(3), 4, 60))
    ref, got = wrapped_pair(lambda v: VecFrameStack(VecExtractDictObs(v, "pos"), 2), zoo(FLAT_DICT))
    assert_same_run(ref, got, random_actions(spaces.Discrete(3), 4, 60))
    ref, got = wrapped_pair(lambda v: VecFrameStack(v, n_stack=2), cartpole())
    assert_same_run(ref, got, random_actions(spaces.Discrete(2), 4, 60))


def test_transpose_image_and_check_nan():
    ref, got = wrapped_pair(lambda v: VecCheckNan(VecTransposeImage(v), raise_exception=True),
                            zoo(SPACE_ZOO["image"]))
    assert got.observation_space.shape == (3, 4, 4)
    assert_same_run(ref, got, random_actions(spaces.Discrete(3), 4, 40))
    nan_env = VecCheckNan(envhive.make(zoo(SPACE_ZOO["box"], spaces.Box(-1, 1, (2,))), 2, api="sb3"),
                          raise_exception=True)
    nan_env.reset()
    nan_env.step(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="nan"):
        nan_env.step(np.full((2, 2), np.nan, np.float32))
    nan_env.close()


def test_evaluate_policy_and_make_vec_env_see_the_monitor():
    """make_vec_env(vec_env_cls=...) wraps each env in SB3's Monitor; env_is_wrapped finds it
    (on process workers too), so evaluate_policy reads Monitor's episode records."""
    class Lean:
        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            return (obs[:, 2] > 0).astype(np.int64), None

    def build(cls):
        return make_vec_env("CartPole-v1", n_envs=3, seed=4, vec_env_cls=cls,
                            env_kwargs={"max_episode_steps": 60})

    ref = build(DummyVecEnv)
    got = build(lambda fns: envhive.make(fns, api="sb3", executor="process"))
    assert got.env_is_wrapped(Monitor) == [True, True, True]
    assert got.env_is_wrapped(gym.wrappers.TimeLimit, indices=1) == [True]
    assert got.env_is_wrapped(gym.wrappers.ClipAction) == [False] * 3
    assert not is_vecenv_wrapped(got, VecMonitor)
    a = evaluate_policy(Lean(), ref, n_eval_episodes=9, return_episode_rewards=True)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        b = evaluate_policy(Lean(), got, n_eval_episodes=9, return_episode_rewards=True)
    assert not [w for w in record if "Monitor" in str(w.message)]  # it found the Monitor
    assert a == b and len(a[0]) == 9
    ref.close(), got.close()


# ------------------------------------------------------------------ env access, seeds, options
@pytest.mark.parametrize("name", EXECUTORS)
def test_get_set_attr_env_method_and_env_is_wrapped(name):
    fns = [lambda i=i: Monitor(RenderEnv(tag=i)) for i in range(3)]
    venv = envhive.make(fns, api="sb3", executor=name)
    assert venv.render_mode == "rgb_array"
    assert venv.get_attr("tag") == [0, 1, 2]
    assert venv.get_attr("tag", indices=[2, 0]) == [2, 0]
    assert venv.get_attr("tag", indices=1) == [1]
    assert venv.has_attr("pattern") and not venv.has_attr("no_such_attribute")
    with pytest.raises(AttributeError, match="no_such_attribute"):
        venv.get_attr("no_such_attribute")
    venv.set_attr("tag", 7, indices=[1])
    assert venv.get_attr("tag") == [0, 7, 2]
    venv.set_attr("pattern", [(2, "trunc")])  # a list is one value, given to every env
    assert venv.get_attr("pattern") == [[(2, "trunc")]] * 3
    obs = venv.reset()
    assert obs[:, 0].tolist() == [0, 7, 2]
    assert venv.env_method("_obs", 5, indices=[0, 2])[1].tolist() == [2, 0, 0, 5]
    assert [o.tolist() for o, _ in venv.env_method("reset", seed=3, indices=[2])] == [[2, 1, 0, -1]]
    assert venv.env_is_wrapped(Monitor) == [True] * 3
    assert venv.env_is_wrapped(gym.wrappers.TimeLimit) == [False] * 3
    images = venv.get_images()
    assert [img[0, 0, 0] for img in images] == [0, 7, 2]
    assert venv.render().shape == (4, 6, 3)  # SB3 tiles the images
    venv.close()


def test_get_attr_returns_methods_uncalled():
    venv = envhive.make(lambda: CountingEnv(tag=1), 2, api="sb3")
    method = venv.get_attr("_obs")[0]
    assert callable(method) and method(3).tolist() == [1, -1, 0, 3]
    venv.close()


def test_env_access_on_a_native_kernel():
    venv = envhive.make("envhive/CartPole-v1", 3, api="sb3", executor="native")
    assert venv.get_attr("render_mode") == [None] * 3
    assert venv.get_attr("observation_space", indices=[0])[0] == venv.observation_space
    assert not venv.has_attr("no_such_attribute")
    assert venv.env_is_wrapped(Monitor) == [False] * 3  # no per-env objects, no wrappers
    venv.reset()
    venv.step(np.zeros(3, np.int64))
    venv.close()


def test_seeds_are_used_by_one_reset_as_in_dummy_vec_env():
    venv = envhive.make("CartPole-v1", 3, api="sb3")
    assert venv.seed(5) == [5, 6, 7]
    first = venv.reset()
    second = venv.reset()  # unseeded: continues each env's generator
    assert not np.array_equal(first, second)
    venv.seed(5)
    assert np.array_equal(venv.reset(), first)
    venv.close()
    seeded = envhive.make("CartPole-v1", 3, api="sb3", seed=5)  # make(seed=) seeds the first reset
    assert np.array_equal(seeded.reset(), first)
    assert seeded.action_space.sample() == envhive.make("CartPole-v1", 1, api="sb3", seed=5).action_space.sample()
    seeded.close()


def test_reset_options_as_in_dummy_vec_env():
    venv = envhive.make(OptionsEnv, 3, api="sb3")
    ref = DummyVecEnv([OptionsEnv] * 3)
    for v in (venv, ref):
        v.set_options({"level": 2})
        v.reset()
    assert venv.reset_infos == ref.reset_infos == [{"options": {"level": 2}}] * 3
    for v in (venv, ref):
        v.reset()  # options are used once
    assert venv.reset_infos == ref.reset_infos == [{"options": None}] * 3
    for v in (venv, ref):
        v.set_options([{"level": 1}, {"level": 3}, {"level": 1}])
        obs = v.reset()
        assert obs[:, 1].tolist() == [2, 2, 2]  # every env reset once more (3rd episode)
    assert venv.reset_infos == ref.reset_infos
    venv.close(), ref.close()


def test_float_actions_of_whole_numbers_fit_integer_spaces():
    """SB3's MultiBinary policies sample float actions; whole numbers are cast to the
    space's dtype, anything else is refused by the pool."""
    venv = envhive.make(zoo(SPACE_ZOO["box"], spaces.MultiBinary(4)), 2, api="sb3")
    venv.reset()
    venv.step(np.array([[0, 1, 1, 0], [1, 1, 0, 0]], np.float32))
    with pytest.raises(envhive.ActionError):
        venv.step(np.full((2, 4), 0.5, np.float32))
    venv.close()


def test_misuse_is_a_clear_error():
    with pytest.raises(envhive.ConfigError, match="resets ended envs itself"):
        envhive.make("CartPole-v1", 2, api="sb3", autoreset="same_step")
    with pytest.raises(envhive.ConfigError, match="copy=False"):
        envhive.make("CartPole-v1", 2, api="sb3", copy=False)
    with pytest.raises(envhive.ConfigError, match="numpy arrays"):
        envhive.make("CartPole-v1", 2, api="sb3", device="cpu")
    with pytest.raises(envhive.ConfigError, match="nested observation spaces"):
        envhive.make(zoo(SPACE_ZOO["dict"]), 2, api="sb3")
    with pytest.raises(envhive.ConfigError, match="Text observation has no array form"):
        envhive.make(zoo(SPACE_ZOO["text"]), 2, api="sb3")
    venv = envhive.make("CartPole-v1", 2, api="sb3")
    venv.reset()
    with pytest.raises(envhive.ConfigError, match="step_async"):
        venv.step_wait()
    with pytest.raises(IndexError):
        venv.get_attr("render_mode", indices=[2])
    venv.close()


@pytest.mark.parametrize("indices", [[0.5], 0.5, [True], "0", [0, "1"], [None]])
def test_indices_that_are_not_ints_are_refused(indices):
    """SB3 casts nothing: ``indices=[0.5]`` used to mean env 0."""
    venv = envhive.make(CountingEnv, 3, api="sb3")
    for call in (lambda: venv.get_attr("tag", indices=indices),
                 lambda: venv.set_attr("tag", 1, indices=indices),
                 lambda: venv.env_method("_info", indices=indices),
                 lambda: venv.env_is_wrapped(Monitor, indices=indices)):
        with pytest.raises(envhive.ConfigTypeError) as info:
            call()
        assert "indices: expected None, an int or a sequence of ints" in str(info.value)
        assert repr(indices) in str(info.value)
    assert venv.get_attr("tag", indices=np.array([2, 0])) == venv.get_attr("tag", indices=[2, 0])
    assert venv.get_attr("tag", indices=np.int64(1)) == venv.get_attr("tag", indices=1)
    assert venv.get_attr("tag", indices=(i for i in (1, 2))) == venv.get_attr("tag", indices=[1, 2])
    venv.close()


def test_env_is_wrapped_takes_a_class():
    venv = envhive.make(CountingEnv, 3, api="sb3")
    with pytest.raises(envhive.ConfigTypeError, match=r"expected a wrapper class .*got int 3"):
        venv.env_is_wrapped(3)
    venv.close()


def test_set_options_checks_its_argument_at_the_call():
    venv = envhive.make(OptionsEnv, 2, api="sb3")
    with pytest.raises(envhive.ConfigTypeError, match=r"expected a dict \(or None\) for env 0, got int 1"):
        venv.set_options([1, 2])
    with pytest.raises(envhive.ConfigError, match="expected 2 dicts \\(one per env\\), got 3"):
        venv.set_options([{}, {}, {}])
    with pytest.raises(envhive.ConfigTypeError, match="got str"):
        venv.set_options("level=2")
    venv.set_options([{"level": 1}, None])  # None: no options for that env, as {} in SB3
    venv.reset()
    assert venv.reset_infos == [{"options": {"level": 1}}, {"options": None}]
    venv.close()


class StepEnv(gym.Env):
    """Counts from its constructor (SB3's test env of that name): steps before any reset as
    after one, so DummyVecEnv and an implicit reset agree."""

    def __init__(self, max_steps=3):
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(0, 999, (1,), np.int64)
        self.max_steps, self.current_step = max_steps, 0

    def reset(self, *, seed=None, options=None):
        self.current_step = 0
        return np.array([0]), {}

    def step(self, action):
        self.current_step += 1
        return np.array([self.current_step]), 1.0, False, self.current_step >= self.max_steps, {}


@pytest.mark.parametrize("name", EXECUTORS)
def test_step_before_reset_resets_first(name):
    """SB3's VecFrameStack and VecCheckNan tests step before any reset. DummyVecEnv steps
    the envs as built; envhive resets them first (make's seeds), and the seeds of seed()
    and options of set_options() are kept for the next reset()."""
    ref = DummyVecEnv([StepEnv] * 3)
    got = envhive.make(StepEnv, 3, api="sb3", executor=name)
    for _ in range(5):  # through an episode end
        assert_same(ref.step(np.zeros(3, np.int64)), got.step(np.zeros(3, np.int64)))
    ref.close(), got.close()
    venv = envhive.make(CountingEnv, 2, api="sb3", executor=name)  # refuses to step un-reset
    venv.seed(7)
    venv.set_options({"level": 1})
    obs, _, _, _ = venv.step(np.ones(2, np.int64))
    assert obs[:, 1:].tolist() == [[0, 1, 1]] * 2  # episode 0, step 1, action 1
    assert venv.reset_infos == [{"episode": 0, "step": 0}] * 2
    assert venv._seeds == [7, 8] and venv._options == [{"level": 1}] * 2
    obs = venv.reset()
    assert obs[:, 0].tolist() == [7, 8] and venv._seeds == [None, None]
    venv.close()


class ActionEnv(gym.Env):
    """Keeps the last action it was given (``last``), for any action space."""

    def __init__(self, action_space):
        self.action_space = action_space
        self.observation_space = spaces.Box(0, 1, (1,), np.float32)
        self.last = None

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.last = action
        return np.zeros(1, np.float32), 0.0, False, False, {}


def same_tree(a, b):
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_tree(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(same_tree, a, b))
    return np.array_equal(a, b)


STRUCTURED_ACTIONS = {
    "dict": spaces.Dict({"move": spaces.Box(-1, 1, (2,), np.float32), "jump": spaces.Discrete(3),
                         "keys": spaces.MultiBinary(3)}),
    "tuple": spaces.Tuple((spaces.Discrete(4), spaces.Box(-1, 1, (2,), np.float32))),
    "nested": spaces.Dict({"a": spaces.Tuple((spaces.Discrete(2), spaces.Discrete(5))),
                           "b": spaces.MultiDiscrete([2, 3])}),
}


@pytest.mark.parametrize("name", EXECUTORS)
@pytest.mark.parametrize("kind", sorted(STRUCTURED_ACTIONS))
def test_structured_actions_one_per_env_as_dummy_vec_env_takes_them(name, kind):
    """SB3's list of one action per env (``[space.sample() for _ in range(n)]``) reaches each
    env as DummyVecEnv hands it over; a batch (a dict of batches, a tuple of batches) too."""
    space = STRUCTURED_ACTIONS[kind]
    fn = lambda: ActionEnv(space)  # noqa: E731
    ref, got = DummyVecEnv([fn] * 3), envhive.make(fn, 3, api="sb3", executor=name)
    ref.reset(), got.reset()
    space.seed(0)
    for _ in range(3):
        rows = [space.sample() for _ in range(3)]
        ref.step(rows)
        got.step(rows)
        for a, b, row in zip(ref.get_attr("last"), got.get_attr("last"), rows):
            assert same_tree(a, row) and same_tree(b, row), (b, row)
    batch = got.pool.action_space.sample()  # any one action, repeated as a batch of 3
    stacked = tree_batch(batch, 3)
    got.step(stacked)
    assert all(same_tree(b, batch) for b in got.get_attr("last"))
    ref.close(), got.close()


def tree_batch(action, n):
    if isinstance(action, dict):
        return {k: tree_batch(v, n) for k, v in action.items()}
    if isinstance(action, tuple):
        return tuple(tree_batch(v, n) for v in action)
    return np.stack([np.asarray(action)] * n)


def test_structured_actions_that_do_not_fit_name_the_env():
    space = STRUCTURED_ACTIONS["dict"]
    venv = envhive.make(lambda: ActionEnv(space), 2, api="sb3")
    venv.reset()
    rows = [space.sample(), {"move": np.zeros(2, np.float32)}]
    with pytest.raises(envhive.ActionError, match=r"env 1.*expected a dict with keys \['jump', 'keys', 'move'\], got \['move'\]"):
        venv.step(rows)
    rows = [space.sample(), space.sample()]
    rows[0]["jump"] = 7
    with pytest.raises(envhive.ActionError, match="outside Discrete"):
        venv.step(rows)
    venv.close()
    tup = envhive.make(lambda: ActionEnv(STRUCTURED_ACTIONS["tuple"]), 2, api="sb3")
    tup.reset()
    with pytest.raises(envhive.ActionError, match=r"\(env 1\).*value 9 .*outside Discrete\(4\)"):
        tup.step([(1, np.zeros(2, np.float32)), (9, np.zeros(2, np.float32))])
    tup.close()


class NoOptionsEnv(gym.Env):
    """SB3's NanAndInfEnv's kind of reset: a seed but no ``options`` parameter."""

    def __init__(self):
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(-1, 1, (2,), np.float32)
        self.t = 0

    def reset(self, seed=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), {}

    def step(self, action):
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return obs, 1.0, self.t >= 4, False, {}


@pytest.mark.parametrize("name", EXECUTORS)
def test_env_without_reset_options_trains(name):
    """Its first reset used to get ``options=None`` and raise: PPO failed at once."""
    torch.set_num_threads(1)
    ref = DummyVecEnv([NoOptionsEnv] * 2)
    got = envhive.make(NoOptionsEnv, 2, api="sb3", executor=name)
    assert_same_run(ref, got, [np.array([0, 1])] * 12)  # seeded and unseeded resets, autoresets
    venv = envhive.make(NoOptionsEnv, 2, api="sb3", executor=name, seed=0)
    PPO("MlpPolicy", venv, n_steps=8, batch_size=16, n_epochs=1, seed=0, device="cpu").learn(16)
    venv.close()


@pytest.mark.parametrize("name", EXECUTORS)
def test_factory_error_is_caught_by_its_own_class(name):
    """SB3's ``except gym.error.DeprecatedEnv:`` fallback to the newer id runs."""

    def make_warm(env_id):
        venv = envhive.make(lambda: gym.make(env_id), 1, api="sb3", executor=name)
        venv.close()
        return env_id

    def make_cliffwalking():
        try:
            return make_warm("CliffWalking-v0")
        except gym.error.DeprecatedEnv as err:
            assert isinstance(err, envhive.EnvWorkerError)
            assert err.env_id == 0 and err.cause_type == "DeprecatedEnv"
            assert "CliffWalking-v1" in str(err) and "registration.py" in err.worker_traceback
            return make_warm("CliffWalking-v1")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert make_cliffwalking() == "CliffWalking-v1"


def test_without_sb3_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # import now raises ImportError
    with pytest.raises(envhive.ConfigError, match=r"pip install 'envhive\[sb3\]'"):
        envhive.make("CartPole-v1", 2, api="sb3")


# ------------------------------------------------------------------ SB3's algorithms
@pytest.mark.parametrize("name", EXECUTORS)
def test_algorithms_run_on_every_executor(name):
    torch.set_num_threads(1)
    venv = envhive.make("CartPole-v1", 4, api="sb3", executor=name)
    A2C("MlpPolicy", venv, n_steps=8, seed=0, device="cpu").learn(128)
    DQN("MlpPolicy", venv, learning_starts=32, buffer_size=500, train_freq=4, seed=0,
        device="cpu").learn(128)
    venv.close()
    dict_env = envhive.make(zoo(FLAT_DICT), 4, api="sb3", executor=name)
    PPO("MultiInputPolicy", dict_env, n_steps=16, batch_size=32, n_epochs=1, seed=0,
        device="cpu").learn(64)
    dict_env.close()


def test_ppo_trains_identically_over_envhive_and_dummy_vec_env():
    """Same seeds, same data: the trained weights are bit-identical."""
    torch.set_num_threads(1)

    def train(venv):
        model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=2, seed=3, device="cpu")
        model.learn(512)
        venv.close()
        return model.policy.state_dict()

    ref = train(DummyVecEnv([cartpole(40)] * 4))
    got = train(envhive.make(cartpole(40), 4, api="sb3", executor="process"))
    assert ref.keys() == got.keys()
    for key in ref:
        assert torch.equal(ref[key], got[key]), key


def test_ppo_learns_cartpole():
    """PPO (hyperparameters after rl-baselines3-zoo's CartPole) over 8 envhive envs: the
    trained policy balances the pole; the same evaluation of the untrained one does not.

    Evaluated with sampled actions: a freshly initialized policy acts about at random
    (~20 steps per episode), while its greedy actions can balance the pole by chance (seed
    0's do for ~400 steps), which would prove nothing.
    """
    torch.set_num_threads(1)
    start = time.perf_counter()
    venv = envhive.make("CartPole-v1", 8, api="sb3", seed=0)
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=256, n_epochs=10, gamma=0.98,
                gae_lambda=0.8, learning_rate=1e-3, ent_coef=0.0, seed=0, device="cpu")
    evaluation = envhive.make("CartPole-v1", 8, api="sb3", seed=10_000)

    def score(deterministic=False):
        return evaluate_policy(model, evaluation, n_eval_episodes=16, deterministic=deterministic,
                               warn=False)[0]

    untrained = score()
    model.learn(60_000)
    trained, greedy = score(), score(deterministic=True)
    venv.close(), evaluation.close()
    elapsed = time.perf_counter() - start
    print(f"PPO CartPole: untrained {untrained:.1f}, trained {trained:.1f} "
          f"(greedy {greedy:.1f}), {elapsed:.1f} s")
    assert untrained < 50, untrained
    assert trained >= 200 and greedy >= 200, (trained, greedy)
