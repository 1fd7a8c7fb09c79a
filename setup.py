"""Build hook for the one C extension; all metadata lives in pyproject.toml.

``envhive._runloop`` is the C fast path of ``EnvRunner.run``. It is optional: when
it cannot be compiled (no C compiler), the install goes on and envhive runs the same loop in
Python (``envhive.executors.compiled_runner()`` says which one is in use).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "envhive._runloop",
            ["src/envhive/_runloop.c"],
            optional=True,
        )
    ]
)
