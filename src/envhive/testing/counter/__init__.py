"""The counter: a tiny C++ family on envhive's threaded batch core, and its Python twin.

It proves the recipe "add a C++ family" (docs/architecture.md): this folder and one build line
in setup.py are all of it. ``_counter.h`` is the game (one env: build, reset, step, its
observation, infos and configuration), ``_module.cpp`` the three lines that make it a Python
module, ``_engine.py`` its engine and factory, ``_family.py`` its registration, and
``_env.py`` the same game in Python, which the other executors run and the tests compare the
C++ side with. Options (``env_kwargs``): ``size``, ``limit`` (the time limit), and, to make it
slow, ``busy_us``/``sleep_us`` per step and a ``reset_loop``.

Examples:
    >>> import envhive, numpy as np
    >>> import envhive.testing.counter  # registers envhive/Counter-v0
    >>> env = envhive.make("envhive/Counter-v0", num_envs=3, seed=0, env_kwargs={"size": 8})
    >>> obs, info = env.reset()
    >>> obs[:, :2].tolist()
    [[7, 1], [1, 2], [6, 7]]
    >>> env.close()
"""

from envhive.testing.counter import _family  # noqa: F401  (registers the kind)
from envhive.testing.counter._engine import CounterEngine, CounterFactory
from envhive.testing.counter._env import CounterEnv

__all__ = ["CounterEnv", "CounterEngine", "CounterFactory"]
