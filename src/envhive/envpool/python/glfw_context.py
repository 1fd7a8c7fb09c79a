"""``envpool.python.glfw_context``: EnvPool's OpenGL set-up for MuJoCo rendering on Windows.

EnvPool preloads Mesa's DLLs and makes a GLFW context on Windows; elsewhere both are no-ops,
and so they are here (envhive.envpool renders MuJoCo through envhive's or EnvPool's engines,
which set up their own contexts).

Examples:
    >>> preload_windows_gl_dlls(strict=True)
    >>> try_ensure_mujoco_glfw_context(64, 48)
    False
"""

from __future__ import annotations

__all__ = ["preload_windows_gl_dlls", "try_ensure_mujoco_glfw_context"]


def preload_windows_gl_dlls(strict: bool = False) -> None:
    """Nothing to preload outside EnvPool's Windows wheels."""


def try_ensure_mujoco_glfw_context(width: int, height: int) -> bool:
    """No GLFW context is made here; returns ``False`` (none was made)."""
    return False
