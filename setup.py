"""Build hook for the C extensions; all metadata lives in pyproject.toml.

Both are optional: when one cannot be compiled (no C compiler), the install goes on and
envhive runs the same thing in Python.

* ``envhive._runloop`` is the C fast path of ``EnvRunner.run`` (else the same loop in Python;
  ``envhive.executors.compiled_runner()`` says which one is in use).
* ``envhive.envs.atari._cframes`` is Atari's max-pool + area resize + frame stack push (else
  ``cv2.resize``, which it equals bit for bit). ``-ffp-contract=off``: no fused multiply-add,
  so its float sums round as OpenCV's do.
* ``envhive.envs.atari._alethreads`` (C++, Linux) steps a batch of Atari games in C++ threads
  through ale-py's exported C++ API, with the same resize (``_area.h``); without it the native
  Atari engine runs the games in worker processes.
"""

import sys

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "envhive._runloop",
            ["src/envhive/_runloop.c"],
            optional=True,
        ),
        Extension(
            "envhive.envs.atari._cframes",
            ["src/envhive/envs/atari/_cframes.c"],
            extra_compile_args=[] if sys.platform == "win32" else ["-ffp-contract=off"],
            depends=["src/envhive/envs/atari/_area.h"],
            optional=True,
        ),
        *([Extension(
            "envhive.envs.atari._alethreads",
            ["src/envhive/envs/atari/_threads.cpp", "src/envhive/envs/atari/_ale_oldabi.cpp"],
            language="c++",
            extra_compile_args=["-std=c++17", "-O3", "-ffp-contract=off", "-pthread"],
            extra_link_args=["-pthread"],
            libraries=["dl"],
            depends=["src/envhive/envs/atari/_area.h", "src/envhive/envs/atari/_ale_batch.h"],
            optional=True,
        )] if sys.platform.startswith("linux") else []),
    ]
)
