"""The ``"mujoco"`` engine kind: the MuJoCo envs with a compiled step, registered on import.

The engine registry (``envhive.engines``) imports this module on its first lookup. It names
its code as ``"module:attr"`` strings, so importing it imports neither mujoco nor numba.
Each entry names the env class and its compiled family (``_families``, ``_families_small``);
Humanoid has none and runs on threads (``envhive._registry``).

Examples:
    >>> from envhive.engines import compiled_env
    >>> compiled_env("envhive/Hopper-v5").family
    'envhive.envs.mujoco._families:HopperFamily'
"""

from __future__ import annotations

from envhive.engines import CompiledEnv, EngineKind, register_kind

__all__: list[str] = []

_IDS = (  # (id, env class, "module:family")
    ("Ant-v5", "AntEnv", "_families:AntFamily"),
    ("HalfCheetah-v5", "HalfCheetahEnv", "_families:HalfCheetahFamily"),
    ("Hopper-v5", "HopperEnv", "_families:HopperFamily"),
    ("Swimmer-v5", "SwimmerEnv", "_families:SwimmerFamily"),
    ("Walker2d-v5", "Walker2dEnv", "_families:Walker2dFamily"),
    ("InvertedPendulum-v5", "InvertedPendulumEnv", "_families_small:InvertedPendulumFamily"),
    ("InvertedDoublePendulum-v5", "InvertedDoublePendulumEnv",
     "_families_small:InvertedDoublePendulumFamily"),
    ("Reacher-v5", "ReacherEnv", "_families_small:ReacherFamily"),
)

register_kind(
    EngineKind("mujoco", "envhive.envs.mujoco._factory:mujoco_factory", "mujoco"),
    [CompiledEnv(f"envhive/{id}", "mujoco", f"envhive.envs.mujoco:{cls}", f"envhive.envs.mujoco.{family}")
     for id, cls, family in _IDS],
)
