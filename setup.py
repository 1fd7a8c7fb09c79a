"""Build hook for the C extensions; all metadata lives in pyproject.toml.

Both are optional: when one cannot be compiled (no C compiler), the install goes on and
envhive runs the same thing in Python.

* ``envhive._runloop`` is the C fast path of ``EnvRunner.run`` (else the same loop in Python;
  ``envhive.executors.compiled_runner()`` says which one is in use).
* ``envhive.envs.atari._cframes`` is Atari's max-pool + area resize + frame stack push (else
  ``cv2.resize``, which it equals bit for bit). ``-ffp-contract=off``: no fused multiply-add,
  so its float sums round as OpenCV's do.
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
            optional=True,
        ),
    ]
)
