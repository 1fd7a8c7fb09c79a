"""The C Atari resize (``envs/atari/_cframes.c``) and its numpy definition against OpenCV's
``INTER_AREA``: bit-identical on random images of many sizes and on game frames, max-pool
included."""

from __future__ import annotations

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from envhive.envs.atari._frames import AreaPlan, _cframes, area_plan, area_taps  # noqa: E402

needs_c = pytest.mark.skipif(_cframes is None, reason="built without the C extension")

SIZES = [((210, 160), (84, 84)), ((210, 160), (64, 64)), ((210, 160), (96, 72)),
         ((210, 160), (110, 84)), ((210, 160), (210, 84)), ((210, 160), (84, 160)),
         ((210, 160), (53, 41)), ((37, 29), (11, 7))]


def images(shape: tuple[int, int], rng: np.random.Generator, count: int):
    """Noise, a few palette levels (as game screens have), and sparse bright pixels."""
    for k in range(count):
        kind = k % 3
        if kind == 0:
            yield rng.integers(0, 256, shape, dtype=np.uint8)
        elif kind == 1:
            yield rng.choice(np.array([0, 87, 92, 147, 236, 255], np.uint8), shape)
        else:
            yield ((rng.random(shape) < 0.02) * rng.integers(1, 256)).astype(np.uint8)


@pytest.mark.parametrize("kind", [pytest.param("c", marks=needs_c), "reference"])
@pytest.mark.parametrize(("src", "dst"), SIZES)
def test_bit_identical_to_cv2_inter_area(src, dst, kind):
    plan = area_plan(src, dst) if kind == "c" else AreaPlan(src, dst, _reference=True)
    assert plan is not None
    rng = np.random.default_rng(hash((src, dst)) % 2**32)
    stack = np.zeros((2, *dst), np.uint8)
    count = 150 if kind == "c" else 30
    for k, (a, b) in enumerate(zip(images(src, rng, count), images(src, rng, count))):
        pool = bool(k % 2)
        want = cv2.resize(np.maximum(a, b) if pool else a, dst[::-1], interpolation=cv2.INTER_AREA)
        previous = stack[1].copy()
        a_before = a.copy()
        plan.push(a, b, pool, stack)
        np.testing.assert_array_equal(stack[1], want, err_msg=f"image {k}")
        np.testing.assert_array_equal(stack[0], previous)  # the stack shifted by one frame
        np.testing.assert_array_equal(a, np.maximum(a_before, b) if pool else a_before)


@pytest.mark.parametrize(("src", "dst"), [((210, 160), (105, 80)), ((210, 160), (210, 160)),
                                          ((210, 160), (420, 84)), ((210, 160), (84, 200))])
@needs_c
def test_other_opencv_paths_keep_cv2(src, dst):
    """Integer factors (OpenCV's fast path), no resize and upscaling stay with OpenCV."""
    assert area_plan(src, dst) is None


def test_weights_cover_each_destination_pixel_once():
    for src, dst in [(210, 84), (160, 84), (7, 3), (100, 99)]:
        index, weight = area_taps(src, dst)
        np.testing.assert_allclose(weight.sum(0), 1.0, rtol=1e-5)
        assert index.min() >= 0 and index.max() < src


@needs_c
@pytest.mark.parametrize(("height", "width"), [(84, 84), (64, 48)])
def test_env_frames_equal_the_opencv_path(height, width, monkeypatch):
    """A game played with the compiled resize and with OpenCV's gives the same frames."""
    ale_py = pytest.importorskip("ale_py")  # noqa: F841
    from envhive.envs.atari import AtariEnv

    ours = AtariEnv("breakout", img_height=height, img_width=width)
    ref = AtariEnv("breakout", img_height=height, img_width=width)
    assert ours._plan is not None and ours._cv2 is None  # OpenCV not even imported for it
    # The OpenCV path: no compiled plan, OpenCV's INTER_AREA resize.
    monkeypatch.setattr(ref, "_plan", None)
    monkeypatch.setattr(ref, "_cv2", cv2)
    # raising=False: the env sets _interp only when it takes the OpenCV path; its resize
    # reads it, so a renamed attribute fails the steps below.
    monkeypatch.setattr(ref, "_interp", cv2.INTER_AREA, raising=False)
    actions = np.random.default_rng(1).integers(0, 4, 400)
    o1, _ = ours.reset(seed=5)
    o2, _ = ref.reset(seed=5)
    np.testing.assert_array_equal(o1, o2)
    for t, a in enumerate(actions.tolist()):
        o1, r1, te1, tr1, _ = ours.step(a)
        o2, r2, te2, tr2, _ = ref.step(a)
        np.testing.assert_array_equal(o1, o2, err_msg=f"step {t}")
        assert (r1, te1, tr1) == (r2, te2, tr2)
        if te1 or tr1:
            np.testing.assert_array_equal(ours.reset()[0], ref.reset()[0])


@needs_c
def test_bad_buffers_are_refused_before_anything_is_written():
    plan = area_plan((210, 160), (84, 84))
    a = np.zeros((210, 160), np.uint8)
    small = np.zeros((2, 84, 83), np.uint8)
    with pytest.raises(ValueError, match="stack"):
        plan.push(a, a, False, small)
    with pytest.raises((ValueError, TypeError)):
        plan.push(a[:, :100], a, False, np.zeros((2, 84, 84), np.uint8))


def test_one_plan_serves_every_env_of_a_process_and_envs_build_no_space_until_asked():
    """Per-env memory: the resize plan (weights, read only; its scratch is per call) is
    shared, and the observation space's bound arrays (~110 KB) are built on first use only:
    the batched engine's workers never ask."""
    from envhive.envs.atari._env import AtariEnv

    a, b = AtariEnv("pong"), AtariEnv("pong")
    assert a._plan is not None and a._plan is b._plan
    assert a._observation_space is None
    assert a.observation_space.shape == (4, 84, 84) and a._observation_space is not None
    assert b._observation_space is None
    a.close()
    b.close()
