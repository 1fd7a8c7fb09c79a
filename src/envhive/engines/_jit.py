"""``jit``: numba's ``njit`` with an on-disk cache that every later process hits.

Compiling envhive's engines takes seconds (CartPole's driver ~3 s, a MuJoCo family ~5 s), paid
by every script, test and benchmark. numba can cache compiled code on disk (``cache=True``),
but three things stopped it from hitting in a second process, and this module removes each:

1. **Closures.** Drivers are built per family by closing over the family's compiled
   functions, so numba inlines them. numba keys a closure's cache entry on the pickled
   contents of its cells, and those pickles differ from process to process (a dispatcher
   carries a random UUID, a numba type a per-process counter). envhive's entries are keyed
   instead on a description that is the same in every process: module, qualified name and
   first line, and for a closure each cell described by value (numbers, strings, tuples,
   arrays by content, numba types by name, dispatchers by their own key), so two closures of
   one ``def`` over different values stay apart. A cell it cannot describe leaves that
   function uncached (compiled in each process, never wrong).
2. **C functions through ctypes.** A ctypes pointer is an address baked into the code, which
   numba refuses to cache. :func:`c_function` registers the C function's address under an
   envhive symbol name and returns an ``ExternalFunction`` of that name: the cached code links
   by name, resolved again in each process. (A private name also keeps LLVM from treating
   ``pow`` as the libm function it may rewrite, which is why ctypes was used before.)
3. **Staleness.** numba checks only the source file of the cached function itself, not the
   files of the functions it inlined. So envhive's entries live in a directory keyed by a hash
   of every compiled-code source file (``engines/``, ``kernels/``, ``envs/``, ``_ops.py``)
   and the numba version: any change to any of them starts a fresh directory.

Where: ``$ENVHIVE_CACHE_DIR``, else ``$XDG_CACHE_HOME/envhive``, else ``~/.cache/envhive``.
``ENVHIVE_CACHE=0`` turns caching off; an unwritable directory does too (silently: the code
then compiles in each process, as before).

Safety: numba's index files are pickles, and loading a pickle runs code. So the directory
must be private: envhive creates it (and its ``numba-<hash>`` directory) with mode 0o700,
and refuses one that is owned by another user, writable by others (or by a group other than
the user's private group), or reached through a directory others can write to without the
sticky bit (a shared ``/tmp`` is fine, a world-writable home is not). It then warns, naming
the directory and why, and uses a private one instead: ``<tempdir>/envhive-<uid>`` if that is
safe, else a fresh directory for this process only.

Examples:
    >>> import numpy as np
    >>> @jit(nogil=True)
    ... def twice(x):
    ...     return 2 * x
    >>> int(twice(21))
    42
    >>> twice._envhive_key.split(":")[0]
    'envhive.engines._jit.twice'

"""

from __future__ import annotations

import ctypes
import hashlib
import pathlib
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numba.core import caching, types
from numba.core.dispatcher import Dispatcher

from envhive.engines._private_dir import cache_root, private_cache_dir

__all__ = ["jit", "c_function", "cache_dir", "source_hash", "compile_report"]

_PACKAGE = pathlib.Path(__file__).resolve().parent.parent  # .../envhive
#: What compiled code is made of: a change in any of these files invalidates every entry.
_COMPILED_SOURCES = ("engines", "kernels", "envs", "_ops.py")


def source_hash(root: pathlib.Path = _PACKAGE, parts: tuple[str, ...] = _COMPILED_SOURCES) -> str:
    """A hash of every ``.py`` file under ``parts`` of ``root`` (paths and contents) and of
    the numba version: the name of the cache directory.

    Examples:
        >>> len(source_hash())
        16
    """
    h = hashlib.sha256(numba.__version__.encode())
    try:  # compiled MuJoCo code calls libmujoco: a new version starts a new cache too
        from importlib.metadata import version

        h.update(version("mujoco").encode())
    except Exception:  # not installed
        pass
    for part in parts:
        base = root / part
        files = sorted(base.rglob("*.py")) if base.is_dir() else [base]
        for path in files:
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def cache_dir() -> pathlib.Path | None:
    """Where compiled code is cached (``None``: caching is off, or no directory is usable).

    The configured directory when it is safe to load code from (see the module docstring),
    else, with a warning, a private fallback.
    """
    root = cache_root()
    return None if root is None else private_cache_dir(root, f"numba-{_HASH}")


_HASH = source_hash()
_DIR = cache_dir()


class _Locator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):  # type: ignore[name-defined,misc]
    """Puts an envhive function's entries under :func:`cache_dir`, by module path, and
    stamps them with the source hash (not the file's mtime: the directory already says it)."""

    def __init__(self, py_func: Any, py_file: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        assert _DIR is not None
        rel = pathlib.Path(py_file).resolve().relative_to(_PACKAGE.parent)
        self._cache_path = str(_DIR / rel.parent / rel.stem)

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> Any:
        return _HASH

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if _DIR is None:
            return None
        try:
            pathlib.Path(py_file).resolve().relative_to(_PACKAGE)
        except ValueError:
            return None  # not envhive's code
        return super().from_function(py_func, py_file)


class _Impl(caching.CompileResultCacheImpl):  # type: ignore[misc]
    _locator_classes = [_Locator]


class _Cache(caching.FunctionCache):  # type: ignore[misc]
    """numba's function cache, keyed on envhive's stable description of the function."""

    _impl_class = _Impl

    def __init__(self, py_func: Any, key: str) -> None:
        self._envhive_key = key
        super().__init__(py_func)

    def _index_key(self, sig: Any, codegen: Any) -> Any:
        return (sig, codegen.magic_tuple(), self._envhive_key)


def _describe(value: Any) -> str:
    """``value`` (a closure cell) as a string that is the same in every process, or a
    ``TypeError`` when there is no such description."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_describe(v) for v in value) + ")"
    if isinstance(value, np.generic):
        return f"{value.dtype}:{value!r}"
    if isinstance(value, np.ndarray) and value.dtype != object:
        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16]
        return f"array:{value.dtype}:{value.shape}:{digest}"
    if isinstance(value, types.Type):
        return f"type:{value}"
    if isinstance(value, Dispatcher):
        key = getattr(value, "_envhive_key", None)
        if key is None:
            raise TypeError(f"a compiled function not made by envhive's jit: {value.py_func.__qualname__}")
        return f"jit:{key}"
    raise TypeError(f"no stable description of a {type(value).__name__}")


def _stable_key(fn: Callable[..., Any]) -> str | None:
    """``fn``'s module, qualified name, first line and cells described (``None``: a cell has
    no stable description, so ``fn`` is not cached)."""
    key = f"{fn.__module__}.{fn.__qualname__}:{fn.__code__.co_firstlineno}"
    try:
        cells = [_describe(c.cell_contents) for c in fn.__closure__ or ()]
    except (TypeError, ValueError):  # ValueError: an empty cell
        return None
    if cells:
        key += ":" + hashlib.sha256("|".join(cells).encode()).hexdigest()[:16]
    return key


_MADE: list[Any] = []  # every dispatcher jit made (they live as long as the process anyway)


def compile_report() -> list[dict[str, Any]]:
    """For each function made by :func:`jit` that ran (was compiled or loaded): its key, and
    how many of its signatures came from the disk cache and how many were compiled.

    Examples:
        >>> all(set(r) == {"key", "cached", "compiled"} for r in compile_report())
        True
    """
    out = []
    for d in _MADE:
        if d.signatures:
            out.append({"key": d._envhive_key, "cached": sum(d.stats.cache_hits.values()),
                        "compiled": sum(d.stats.cache_misses.values()) if d._envhive_key else len(d.signatures)})
    return out


def jit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(**options)`` whose compiled code is cached on disk for every later
    process (see the module docstring). Use it for all of envhive's compiled code."""

    def wrap(fn: Callable[..., Any]) -> Any:
        dispatcher = numba.njit(**options)(fn)
        key = _stable_key(fn)
        dispatcher._envhive_key = key
        _MADE.append(dispatcher)
        if _DIR is not None and key is not None:
            try:
                dispatcher._cache = _Cache(fn, key)
            except (RuntimeError, OSError):  # no usable directory: compile per process
                pass
        return dispatcher

    return wrap


_SYMBOLS: dict[str, int] = {}


def c_function(name: str, fn: Any, signature: Any) -> Any:
    """A C function (a ctypes function, or an address) callable from compiled code by the
    symbol ``envhive_<name>``, so that the code can be cached (see the module docstring).

    Examples:
        >>> import ctypes
        >>> from numba import types
        >>> libc = ctypes.CDLL(None)
        >>> labs = c_function("labs", libc.labs, types.int64(types.int64))
        >>> @jit()
        ... def call(x):
        ...     return labs(x)
        >>> int(call(-5))
        5
    """
    import llvmlite.binding as llvm

    address = fn if isinstance(fn, int) else ctypes.cast(fn, ctypes.c_void_p).value
    if not address:
        raise ValueError(f"c_function({name!r}): no address")
    symbol = f"envhive_{name}"
    if _SYMBOLS.get(symbol) != address:
        llvm.add_symbol(symbol, address)
        _SYMBOLS[symbol] = address
    return types.ExternalFunction(symbol, signature)
