"""Build hook for the C and C++ extensions; all metadata lives in pyproject.toml.

Every one is optional: when one cannot be compiled (no C or C++ compiler), the install goes on
and envhive runs the same thing another way.

* ``envhive._runloop`` is the C fast path of ``EnvRunner.run`` (else the same loop in Python;
  ``envhive.executors.compiled_runner()`` says which one is in use).
* ``envhive.envs.atari._cframes`` is Atari's max-pool + area resize + frame stack push (else
  ``cv2.resize``, which it equals bit for bit). ``-ffp-contract=off``: no fused multiply-add,
  so its float sums round as OpenCV's do.
* The C++ families on envhive's threaded batch core (``src/envhive/engines/include/envhive``),
  Linux only, one line each in ``FAMILIES``: ``envhive.envs.atari._alethreads`` steps Atari
  games through ale-py's exported C++ API (without it, ``envhive/<Game>-v5`` runs ``AtariEnv``
  on the process executor).
  ``-O3`` on purpose (the area resize takes about twice as long at ``-O2``).
* ``envhive.jax._xla`` is ``env.xla()``'s FFI handlers (``jax.ffi``), compiled against the XLA
  FFI headers vendored in ``src/envhive/jax/include`` (no jax needed to build; without it,
  ``xla()`` says the extension is missing).
"""

import sys

from setuptools import Extension, setup

CORE = "src/envhive/engines/include"


def threaded_family(name: str, sources: list[str], depends: tuple[str, ...] = (), libraries: tuple[str, ...] = ()):
    """A C++ family's module on the threaded batch core (its game header, its module file)."""
    core = [f"{CORE}/envhive/{h}" for h in ("threaded_batch.h", "batch_module.h", "batch_api.h")]
    return Extension(
        name, sources, language="c++", include_dirs=[CORE],
        extra_compile_args=["-std=c++17", "-O3", "-ffp-contract=off", "-pthread"],
        extra_link_args=["-pthread"], libraries=list(libraries), depends=[*core, *depends], optional=True,
    )


ATARI = "src/envhive/envs/atari"
FAMILIES = [
    threaded_family("envhive.envs.atari._alethreads",
                    [f"{ATARI}/_alethreads.cpp", f"{ATARI}/_ale_newabi.cpp", f"{ATARI}/_ale_oldabi.cpp"],
                    (f"{ATARI}/_area.h", f"{ATARI}/_linear.h", f"{ATARI}/_ale_api.h", f"{ATARI}/_ale_game.h"), ("dl",)),
    threaded_family("envhive.testing.counter._counter", ["src/envhive/testing/counter/_module.cpp"]),
]

# envhive.jax._xla: the XLA FFI handlers of env.xla(), against the vendored XLA FFI headers
# (src/envhive/jax/include/xla): building it needs no jax.
XLA = Extension(
    "envhive.jax._xla", ["src/envhive/jax/_xla.cpp"], language="c++",
    include_dirs=[CORE, "src/envhive/jax/include"],
    # -isystem: the vendored headers' own warnings are not envhive's to fix.
    extra_compile_args=[] if sys.platform == "win32" else ["-std=c++17", "-O2", "-isystem", "src/envhive/jax/include"],
    depends=[f"{CORE}/envhive/batch_api.h", *(f"src/envhive/jax/include/xla/ffi/api/{h}" for h in ("api.h", "c_api.h", "ffi.h"))],
    optional=True,
)

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
        XLA,
        *(FAMILIES if sys.platform.startswith("linux") else []),
    ]
)
