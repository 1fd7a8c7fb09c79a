"""The lean base class shared by envhive's MuJoCo envs.

Every env here reproduces one of gymnasium's v5 MuJoCo envs step for step: same XML asset,
same ``mj_step(model, data, nstep=frame_skip)`` (followed by ``mj_rnePostConstraint`` where
the outputs read ``cfrc_ext``, see ``rne_post_constraint``), same reset noise drawn in the same
order from ``self.np_random``, and rewards computed with the same numpy operations on operands
of the same dtypes, so observations, rewards and infos are bit-identical to gymnasium's, types
included. What differs is the Python around the simulator: views into ``MjData`` are cached
once, observations are assembled in a preallocated buffer (each step returns a fresh copy of
it), numpy's Python wrappers (``np.sum``, ``np.clip``, ``np.linalg.norm``, ``np.einsum``) are
replaced by the ufunc or C calls they end in, slow numpy scalar operations (``bool_ * float``)
are precomputed, and the time limit lives inside the env instead of in a ``TimeLimit`` wrapper.

Changing ``model.opt.timestep`` after construction is not supported (``dt`` is cached), nor
are the private reward attributes (``_healthy_reward`` ...) after construction.

Examples:
    >>> from envhive.envs.mujoco import HalfCheetahEnv
    >>> env = HalfCheetahEnv()
    >>> env.frame_skip, round(env.dt, 6), env.max_episode_steps
    (5, 0.05, 1000)
    >>> obs, info = env.reset(seed=0)
    >>> env.state_vector().shape
    (18,)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import error, logger, spaces
from numpy.typing import NDArray

try:
    import mujoco
except ImportError:  # pragma: no cover - exercised only where mujoco is missing
    mujoco = None

from envhive.envs.mujoco._libmujoco import mj_rne_post_constraint, mj_step

try:  # The ufunc and the C function np.clip and np.einsum end in, without their wrappers.
    from numpy._core.multiarray import c_einsum
    from numpy._core.umath import clip as clip_ufunc  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - numpy < 2
    from numpy.core.multiarray import c_einsum  # type: ignore[no-redef]
    from numpy.core.umath import clip as clip_ufunc  # type: ignore[no-redef]

__all__ = [
    "MujocoEnv",
    "StepResult",
    "assets_dir",
    "c_einsum",
    "clip_scalar",
    "clip_ufunc",
    "mj_rne_post_constraint",
    "mj_step",
]

DEFAULT_SIZE = 480

#: What ``step`` returns: ``(observation, reward, terminated, truncated, info)``.
StepResult = tuple[NDArray[np.float64], SupportsFloat, bool, bool, dict[str, Any]]

_ndarray = np.ndarray


def assets_dir() -> str:
    """Return gymnasium's MuJoCo assets directory, where the v5 envs' XML files live.

    Returns:
        The absolute path of ``gymnasium/envs/mujoco/assets``.

    Examples:
        >>> import os
        >>> os.path.isfile(os.path.join(assets_dir(), "ant.xml"))
        True
    """
    import gymnasium.envs.mujoco as gym_mujoco

    return os.path.join(os.path.dirname(gym_mujoco.__file__), "assets")


def clip_scalar(x: np.float64, lo: np.float64, hi: np.float64) -> np.float64:
    """``np.clip(x, lo, hi)`` for a float64 scalar, bit for bit, several times faster.

    numpy's float clip returns NaN if any operand is NaN, else ``lo`` if ``x < lo``, else
    ``hi`` if ``x > hi``, else ``x`` itself (so ``clip(-0.0, 0.0, 0.0)`` is ``-0.0``). The
    tests check this against ``np.clip`` on NaNs, infinities and signed zeros.

    Args:
        x: the value.
        lo: the lower bound, an ``np.float64`` (returned as is when it wins).
        hi: the upper bound, an ``np.float64``.

    Returns:
        The clipped value.

    Examples:
        >>> lo, hi = np.float64(-1.0), np.float64(1.0)
        >>> [float(clip_scalar(np.float64(v), lo, hi)) for v in (-3.0, 0.5, 3.0)]
        [-1.0, 0.5, 1.0]
    """
    if x != x:
        return x
    if lo != lo:
        return lo
    if x < lo:
        x = lo
    if hi != hi:
        return hi
    return hi if x > hi else x


def _expand_model_path(model_path: str) -> str:
    """Resolve ``model_path`` exactly like gymnasium's ``expand_model_path``."""
    if model_path.startswith((".", "/")):
        fullpath = model_path
    elif model_path.startswith("~"):
        fullpath = os.path.expanduser(model_path)
    else:
        fullpath = os.path.join(assets_dir(), model_path)
    if not os.path.exists(fullpath):
        raise OSError(f"File {fullpath} does not exist")
    return fullpath


class MujocoEnv(gym.Env[NDArray[np.float64], NDArray[np.float32]]):
    """Base class: model loading, spaces, state, reset, time limit and rendering.

    ``step`` checks the action, then runs ``_step_pre`` (writes the control and returns what
    the rewards need from the state before the physics, e.g. the x position), the physics
    (``mj_step`` ``frame_skip`` times, then ``mj_rnePostConstraint`` if
    ``rne_post_constraint``) and ``_step_post`` (observation, rewards, termination, info).
    :meth:`step_many` runs the same three parts for many envs, with the physics of all of
    them in one GIL-free call. Subclasses implement ``_step_pre`` (the default only writes
    the control), ``_step_post`` (inlined for speed: cached views, no helper calls; it must
    count ``self._elapsed_steps`` and truncate at ``self._max_steps``), ``_obs`` (the
    observation of the current state, used by ``reset``), ``_reset_model`` (noise and
    ``set_state``, as gymnasium's ``reset_model``) and ``_reset_info``.

    Args:
        xml_file: the MJCF file, resolved like gymnasium does: absolute, ``./`` or ``~`` paths
            as given, bare names inside gymnasium's assets directory.
        frame_skip: MuJoCo steps per env step.
        max_episode_steps: the time limit: ``step`` returns ``truncated=True`` once this many
            steps were taken since the last reset. ``None`` disables it.
        render_mode: ``None`` or ``"rgb_array"`` (rendered with ``mujoco.Renderer``; needs an
            OpenGL backend, e.g. ``MUJOCO_GL=egl``). Other modes raise ``ValueError``.
        width: rendered image width. The model's offscreen buffer grows to fit it.
        height: rendered image height.
        camera_id: a model camera to render from, ``-1`` for the free camera.
        camera_name: a model camera, by name (not with ``camera_id``).
        default_camera_config: attributes set on the free camera, as in gymnasium.
        max_geom: maximum number of rendered geoms.
        visual_options: ``{mjtVisFlag: bool}`` render flags.
        rne_post_constraint: call ``mj_rnePostConstraint`` after each step, as gymnasium does
            (it fills ``data.cacc``, ``cfrc_int`` and ``cfrc_ext``). ``None`` (default): only
            in envs whose observation or reward reads them (Ant, Humanoid); elsewhere those
            three ``MjData`` fields are the only difference from gymnasium, since nothing
            else depends on them. ``True`` makes ``env.data`` match gymnasium's everywhere.

    Raises:
        OSError: the XML file does not exist.
        ValueError: an unsupported ``render_mode`` or a bad ``max_episode_steps``.
        gymnasium.error.DependencyNotInstalled: ``mujoco`` is not installed.

    Examples:
        >>> from envhive.envs.mujoco import SwimmerEnv
        >>> env = SwimmerEnv(max_episode_steps=2)
        >>> _ = env.reset(seed=1)
        >>> action = env.action_space.sample()
        >>> [env.step(action)[3] for _ in range(2)]
        [False, True]
        >>> env.elapsed_steps
        2
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}
    #: Whether the env's outputs read what ``mj_rnePostConstraint`` computes.
    _uses_rne_post_constraint: bool = False

    def __init__(
        self,
        xml_file: str,
        frame_skip: int,
        *,
        max_episode_steps: int | None,
        render_mode: str | None = None,
        width: int = DEFAULT_SIZE,
        height: int = DEFAULT_SIZE,
        camera_id: int | None = None,
        camera_name: str | None = None,
        default_camera_config: dict[str, Any] | None = None,
        max_geom: int = 1000,
        visual_options: dict[int, bool] | None = None,
        rne_post_constraint: bool | None = None,
    ) -> None:
        if mujoco is None:  # pragma: no cover
            raise error.DependencyNotInstalled('MuJoCo is not installed, run `pip install "mujoco"`')
        if render_mode is not None and render_mode != "rgb_array":
            raise ValueError(
                f"render_mode={render_mode!r} is not supported by envhive's MuJoCo envs: use None "
                "or 'rgb_array' (or gymnasium's own env for 'human', 'depth_array', 'rgbd_tuple')"
            )
        if max_episode_steps is not None and (
            isinstance(max_episode_steps, bool)
            or not isinstance(max_episode_steps, (int, np.integer))
            or max_episode_steps < 1
        ):
            raise ValueError(f"max_episode_steps must be None or an int >= 1, got {max_episode_steps!r}")
        if camera_id is not None and camera_name is not None:
            raise ValueError("Both `camera_id` and `camera_name` cannot be specified at the same time.")

        self.fullpath = _expand_model_path(xml_file)
        self.width = width
        self.height = height
        model = mujoco.MjModel.from_xml_path(self.fullpath)
        # As gymnasium: grow (never shrink) the offscreen framebuffer to the render size.
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
        data = mujoco.MjData(model)
        self.model = model
        self.data = data
        self.init_qpos: NDArray[np.float64] = data.qpos.ravel().copy()
        self.init_qvel: NDArray[np.float64] = data.qvel.ravel().copy()
        self._frame_skip = int(frame_skip)
        self._dt = float(model.opt.timestep * frame_skip)
        self.metadata = {"render_modes": ["rgb_array"], "render_fps": int(np.round(1.0 / self._dt))}

        bounds = model.actuator_ctrlrange.copy().astype(np.float32)
        low, high = bounds.T
        self.action_space = spaces.Box(low=low, high=high, dtype=np.float32)

        self.max_episode_steps = max_episode_steps
        self._max_steps = sys.maxsize if max_episode_steps is None else int(max_episode_steps)
        self._elapsed_steps = 0
        if rne_post_constraint is None:
            rne_post_constraint = self._uses_rne_post_constraint
        self.rne_post_constraint = bool(rne_post_constraint)

        # Views into MjData stay valid for the lifetime of `data`.
        self._qpos: NDArray[np.float64] = data.qpos
        self._qvel: NDArray[np.float64] = data.qvel
        self._ctrl: NDArray[np.float64] = data.ctrl
        self._act_shape: tuple[int, ...] = (model.nu,)

        self.render_mode = render_mode
        self.camera_id = camera_id
        self.camera_name = camera_name
        self._default_camera_config = default_camera_config
        self._max_geom = max_geom
        self._visual_options = dict(visual_options or {})
        self._renderer: Any = None
        self._camera: Any = None
        self._scene_option: Any = None

    # ----------------------------------------------------------------- gymnasium-like API

    @property
    def frame_skip(self) -> int:
        """MuJoCo steps per env step."""
        return self._frame_skip

    @frame_skip.setter
    def frame_skip(self, value: int) -> None:
        self._frame_skip = int(value)
        self._dt = float(self.model.opt.timestep * value)

    @property
    def dt(self) -> float:
        """Simulated seconds per env step: ``model.opt.timestep * frame_skip``."""
        return self._dt

    @property
    def elapsed_steps(self) -> int:
        """Steps taken since the last reset (what the time limit counts)."""
        return self._elapsed_steps

    def step(self, action: NDArray[np.float32]) -> StepResult:
        """Advance ``frame_skip`` MuJoCo steps with ``action`` as the control.

        Args:
            action: the control, shape ``(model.nu,)``.

        Returns:
            ``(obs, reward, terminated, truncated, info)`` exactly as gymnasium's v5 env of
            the same name (with the time limit of its registration) returns them.

        Raises:
            ValueError: the action does not have shape ``(model.nu,)``.
        """
        if action.__class__ is not _ndarray or action.shape != self._act_shape:
            action = self._check_action(action)
        before = self._step_pre(action)
        model, data = self.model, self.data
        mj_step(model, data, self._frame_skip)
        if self.rne_post_constraint:
            mj_rne_post_constraint(model, data)
        return self._step_post(action, before)

    @classmethod
    def step_many(
        cls, envs: Sequence[MujocoEnv], actions: Sequence[Any]
    ) -> list[StepResult | BaseException]:
        """Step several envs, with the physics of all of them in one GIL-free call.

        Each env's entry is exactly what ``env.step(action)`` would have returned (and each
        env's state afterwards is what it would have been), or the exception it would have
        raised: an env whose action is rejected is not stepped and the others proceed. The
        envs may be of different classes and have different ``frame_skip``. An env whose
        class overrides ``step`` itself (or that is not a ``MujocoEnv``) is stepped with its
        own ``step``, as is every env when one appears twice in ``envs``.

        Where the batched call is not available (see ``envhive.envs.mujoco._batch``), the
        physics runs env by env with ``mujoco.mj_step``: same results, more GIL hand-offs.

        Args:
            envs: the envs.
            actions: one action per env.

        Returns:
            One ``(obs, reward, terminated, truncated, info)`` tuple or exception per env.

        Raises:
            ValueError: ``envs`` and ``actions`` differ in length.

        Examples:
            >>> from envhive.envs.mujoco import HalfCheetahEnv, HopperEnv
            >>> envs = [HalfCheetahEnv(), HopperEnv()]
            >>> for seed, env in enumerate(envs):
            ...     _ = env.reset(seed=seed)
            >>> out = MujocoEnv.step_many(envs, [np.zeros(6, np.float32), np.zeros(2)])
            >>> out[0][0].shape, type(out[1]).__name__
            ((17,), 'ValueError')
        """
        from envhive.envs.mujoco._batch import step_physics

        n = len(envs)
        if len(actions) != n:
            raise ValueError(f"step_many: got {n} envs but {len(actions)} actions")
        results: list[StepResult | BaseException | None] = [None] * n
        base_step = MujocoEnv.step
        sequential = len({id(env) for env in envs}) != n
        pending: list[tuple[int, MujocoEnv, NDArray[Any], Any]] = []
        for i in range(n):
            env = envs[i]
            action = actions[i]
            try:
                if sequential or not isinstance(env, MujocoEnv) or type(env).step is not base_step:
                    results[i] = env.step(action)
                    continue
                if action.__class__ is not _ndarray or action.shape != env._act_shape:
                    action = env._check_action(action)
                pending.append((i, env, action, env._step_pre(action)))
            except Exception as err:
                results[i] = err
        if pending:
            step_physics([p[1] for p in pending])
            for i, env, action, before in pending:
                try:
                    results[i] = env._step_post(action, before)
                except Exception as err:
                    results[i] = err
        return results  # type: ignore[return-value]

    def set_state(self, qpos: NDArray[np.float64], qvel: NDArray[np.float64]) -> None:
        """Set ``qpos`` and ``qvel`` and run ``mj_forward``, as gymnasium's ``set_state``.

        Args:
            qpos: joint positions, shape ``(model.nq,)``.
            qvel: joint velocities, shape ``(model.nv,)``.

        Raises:
            ValueError: on a shape mismatch.
        """
        qpos = np.asarray(qpos)
        qvel = np.asarray(qvel)
        if qpos.shape != (self.model.nq,) or qvel.shape != (self.model.nv,):
            raise ValueError(
                f"set_state: expected qpos {(self.model.nq,)} and qvel {(self.model.nv,)}, "
                f"got {qpos.shape} and {qvel.shape}"
            )
        self._qpos[:] = qpos
        self._qvel[:] = qvel
        # gymnasium also does `data.act[:] = None` when na == 0: a no-op on an empty array.
        mujoco.mj_forward(self.model, self.data)

    def do_simulation(self, ctrl: NDArray[Any], n_frames: int) -> None:
        """Apply ``ctrl`` and step ``n_frames`` MuJoCo steps, as gymnasium's ``do_simulation``.

        Args:
            ctrl: the control, shape ``(model.nu,)``.
            n_frames: the number of MuJoCo steps.

        Raises:
            ValueError: on a shape mismatch.
        """
        ctrl = self._check_action(ctrl)
        self._ctrl[:] = ctrl
        mj_step(self.model, self.data, n_frames)
        if self.rne_post_constraint:
            mj_rne_post_constraint(self.model, self.data)

    def state_vector(self) -> NDArray[np.float64]:
        """Return ``concatenate([qpos, qvel])``."""
        return np.concatenate([self._qpos.flat, self._qvel.flat])

    def get_body_com(self, body_name: str) -> NDArray[np.float64]:
        """Return the cartesian position of a body frame (a view of ``data.xpos``)."""
        return self.data.body(body_name).xpos  # type: ignore[no-any-return]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float64], dict[str, Any]]:
        """Reset as gymnasium's ``MujocoEnv.reset``: seed, ``mj_resetData``, noise, forward.

        Args:
            seed: seeds ``self.np_random`` (gymnasium's seeding).
            options: ignored, as in gymnasium.

        Returns:
            The first observation and the reset info.
        """
        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        obs = self._reset_model()
        info = self._reset_info()
        self._elapsed_steps = 0
        return obs, info

    def render(self) -> NDArray[np.uint8] | None:  # type: ignore[override]
        """Render an RGB frame (``render_mode="rgb_array"``), or warn and return ``None``.

        The camera is set up as gymnasium's offscreen viewer does: the free camera looking at
        the median geom position from ``model.stat.extent`` away, then
        ``default_camera_config``, unless ``camera_id``/``camera_name`` names a model camera.

        Returns:
            An ``(height, width, 3)`` uint8 image, or ``None`` without a render mode.
        """
        if self.render_mode is None:
            logger.warn(
                "You are calling render method without specifying any render mode. "
                "Pass render_mode='rgb_array' to the constructor."
            )
            return None
        if self._renderer is None:
            self._make_renderer()
        self._renderer.update_scene(self.data, camera=self._camera, scene_option=self._scene_option)
        return self._renderer.render()  # type: ignore[no-any-return]

    def close(self) -> None:
        """Free the renderer, if one was made."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # ------------------------------------------------------------------ subclass hooks

    def _step_pre(self, action: NDArray[Any]) -> Any:
        """The part of ``step`` before the physics: write the control, return what
        ``_step_post`` needs from the state before the physics (``None`` here)."""
        self._ctrl[...] = action

    def _step_post(self, action: NDArray[Any], before: Any) -> StepResult:
        """The part of ``step`` after the physics: ``(obs, reward, terminated, truncated,
        info)``, counting the step towards the time limit."""
        raise NotImplementedError

    def _obs(self) -> NDArray[np.float64]:
        raise NotImplementedError

    def _reset_model(self) -> NDArray[np.float64]:
        """gymnasium's ``reset_model``: set the noisy start state, return its observation."""
        self.set_state(*self._reset_state())
        return self._obs()

    def _reset_state(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The ``(qpos, qvel)`` a reset starts from, drawing the reset noise from
        ``self.np_random`` exactly as gymnasium's ``reset_model`` does. (The native engine
        calls it, then sets the state of many envs in one compiled call.)"""
        raise NotImplementedError

    def _reset_info(self) -> dict[str, Any]:
        return {}

    # ------------------------------------------------------------------ helpers

    def _check_action(self, action: Any) -> NDArray[Any]:
        """The slow path for an action that is not an ndarray of shape ``(nu,)``."""
        action = np.asarray(action)
        if action.shape != self._act_shape:
            raise ValueError(
                f"Action dimension mismatch. Expected {self._act_shape}, found {action.shape}"
            )
        return action  # type: ignore[no-any-return]

    def _body_id(self, body: int | str) -> int:
        """The id of a body given by id or name (gymnasium's ``data.body(...)`` accepts both)."""
        return int(self.data.body(body).id)

    def _make_renderer(self) -> None:
        renderer = mujoco.Renderer(self.model, self.height, self.width, self._max_geom)
        option = mujoco.MjvOption()
        for flag, value in self._visual_options.items():
            option.flags[flag] = value
        camera = mujoco.MjvCamera()
        camera_id = self.camera_id
        if camera_id is None:
            # gymnasium resolves a camera named "track", then uses the free camera anyway when
            # no camera was asked for; a named camera that does not exist gives -1 (free).
            if self.camera_name is None:
                camera_id = -1
            else:
                camera_id = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, self.camera_name)
        camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        camera.fixedcamid = -1
        for i in range(3):
            camera.lookat[i] = np.median(self.data.geom_xpos[:, i])
        camera.distance = self.model.stat.extent
        for key, value in (self._default_camera_config or {}).items():
            if isinstance(value, np.ndarray):
                getattr(camera, key)[:] = value
            else:
                setattr(camera, key, value)
        if camera_id != -1:
            camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        camera.fixedcamid = camera_id
        self._renderer, self._camera, self._scene_option = renderer, camera, option
