"""Atari: every ROM ale-py ships, as ``envhive/<Game>-v5``, with EnvPool's preprocessing.

Options are EnvPool's (names, meanings, v5 defaults), with ale-py's spellings as aliases
(:class:`AtariOptions`). :class:`AtariEnv` is one game behind ``gymnasium.Env``; every executor
runs it, so a seed gives the same frames everywhere. Needs the ``atari`` extra (ale-py, which
ships the ROMs, and OpenCV for resizing); importing envhive does not import ale_py.

Examples:
    >>> import envhive
    >>> "envhive/Pong-v5" in envhive.list_envs()
    True
    >>> env = envhive.make("envhive/Pong-v5", num_envs=2, seed=0, executor="serial")
    >>> obs, info = env.reset()
    >>> obs.shape, info["lives"].dtype.name
    ((2, 4, 84, 84), 'int32')
    >>> env.close()
"""

from envhive.envs.atari._env import AtariEnv
from envhive.envs.atari._options import AtariOptions, game_name, rom_ids

__all__ = ["AtariEnv", "AtariOptions", "game_name", "rom_ids"]
