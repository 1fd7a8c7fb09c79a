"""What envhive knows of the installed ale-py, each thing found once and kept on disk.

* **Whether the threaded engine may call into ale-py's library** (:func:`binding_problem`):
  the C++ side calls ALE's C++ API through symbols looked up by name (``_ale_api.h``), which
  is only as safe as ale-py's library is what the engine was written against. So, before the
  engine is used, an ale-py version outside :data:`ALE_VERSIONS` (the ones
  ``tools/ale_versions.sh`` runs the Atari suite on) is refused, and the engine is checked
  against :class:`~envhive.envs.atari.AtariEnv` (ale-py's own Python binding) **in a
  subprocess** (``_selfcheck.py``): a library whose C++ changed a type or an object's size
  may crash there, never in the user's process. The verdict is kept per ale-py version,
  library file and engine build (their hashes), beside the compiled-code cache, in a private
  directory (``engines/_private_dir.py``: whoever could write it could make envhive call an
  incompatible library). Any problem sends ``envhive/<Game>-v5`` to ``AtariEnv`` on the
  process executor, with the reason.
* **Facts of a ROM** (:func:`rom_facts`): its screen size (210 lines, or up to 250 for 13
  ROMs), and its modes and difficulties (what ``mode=``/``difficulty=`` may be), read with
  ale-py's own binding (loading a ROM takes a tenth of a second or more) and kept on disk per
  ale-py build.

``ENVHIVE_CACHE=0`` keeps nothing on disk: each process then finds them again.

Examples:
    >>> lib = ale_library()
    >>> lib is None or lib.version.count(".") >= 1
    True
    >>> version_problem("0.9.1") is not None, version_problem("0.11.2")
    (True, None)
"""

from __future__ import annotations

import functools
import glob
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from envhive.engines._private_dir import cache_root, private_cache_dir

__all__ = ["ALE_VERSIONS", "AleLibrary", "ale_library", "version_problem", "binding_problem", "RomFacts",
           "rom_facts", "trust_for_self_check"]

#: The ale-py minor versions the threaded engine was written and checked against
#: (``tools/ale_versions.sh``); others run ``AtariEnv`` on the process executor.
ALE_VERSIONS = ("0.10", "0.11", "0.12")

_CHECK_TIMEOUT_S = 600  # a loaded machine; the check itself takes seconds
_TRUSTED = False  # set in the self-check's own process (it checks the engine it runs)


@dataclass(frozen=True)
class AleLibrary:
    """The installed ale-py: its version, its extension's file, and a key naming both."""

    version: str
    path: str
    key: str


@functools.lru_cache(maxsize=1)
def ale_library() -> AleLibrary | None:
    """The installed ale-py, found without importing it (``None``: not installed)."""
    try:
        spec = importlib.util.find_spec("ale_py")
        version = importlib.metadata.version("ale-py")
    except (ImportError, ValueError, importlib.metadata.PackageNotFoundError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(glob.glob(os.path.join(next(iter(spec.submodule_search_locations)), "_ale_py*")))
    if not found:
        return None
    return AleLibrary(version, found[0], f"{version}-{_file_hash(found[0])}")


def _file_hash(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def version_problem(version: str) -> str | None:
    """Why the threaded engine does not call ale-py ``version`` (``None``: it may)."""
    if ".".join(version.split(".")[:2]) in ALE_VERSIONS:
        return None
    return (f"ale-py {version} is not one of the versions the threaded Atari engine was checked with "
            f"({', '.join(v + '.x' for v in ALE_VERSIONS)})")


def _cache_dir() -> pathlib.Path | None:
    root = cache_root()
    if root is None:
        return None
    return private_cache_dir(root, "atari", "the Atari engine's ALE checks (which ale-py library it may call)")


def _read(name: str) -> Any:
    folder = _cache_dir()
    try:
        return None if folder is None else json.loads((folder / name).read_text())
    except (OSError, ValueError):
        return None


def _write(name: str, value: Any) -> None:
    folder = _cache_dir()
    if folder is None:
        return
    try:  # a whole file or none: write beside it, then rename
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, folder / name)
    except OSError:
        pass


def trust_for_self_check() -> None:
    """In the self-check's own process: the engine under check is used without a verdict."""
    global _TRUSTED
    _TRUSTED = True
    binding_problem.cache_clear()


def extension_path() -> str | None:
    """The C++ extension's file, found without loading it (``None``: not built)."""
    import importlib.util

    spec = importlib.util.find_spec("envhive.envs.atari._alethreads")
    return None if spec is None or spec.origin is None else str(spec.origin)


@functools.lru_cache(maxsize=1)
def binding_problem() -> str | None:
    """Why the threaded engine must not call into the installed ale-py (``None``: it may):
    not installed, a version outside :data:`ALE_VERSIONS`, or a failed self-check (see the
    module docstring; run once per ale-py library and engine build, the verdict kept on disk)."""
    if _TRUSTED:
        return None
    lib = ale_library()
    if lib is None:
        return "ale-py is not installed (pip install 'envhive[atari]')"
    problem = version_problem(lib.version)
    if problem is not None:
        return problem
    extension = extension_path()
    if extension is None:
        return "the C++ extension envhive.envs.atari._alethreads is not built (no C++ compiler at install?)"
    name = f"check-{lib.key}-{_file_hash(extension)}.json"
    cached = _read(name)
    if isinstance(cached, dict) and "problem" in cached:
        return cached["problem"]  # type: ignore[no-any-return]
    problem, conclusive = _run_self_check()
    if conclusive:
        _write(name, {"problem": problem, "ale_py": lib.version})
    return problem


def _run_self_check() -> tuple[str | None, bool]:
    """Run ``_selfcheck.py`` in a child interpreter: ``(problem, conclusive)`` (a timeout or a
    child that could not start says nothing about the library, so it is not kept)."""
    import signal
    import subprocess

    src = str(pathlib.Path(__file__).resolve().parents[3])  # what holds this envhive package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    try:
        done = subprocess.run([sys.executable, "-m", "envhive.envs.atari._selfcheck"], capture_output=True,
                              text=True, timeout=_CHECK_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return f"the engine's self-check took over {_CHECK_TIMEOUT_S} s", False
    except OSError as err:
        return f"the engine's self-check could not start: {err}", False
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return f"the engine crashed ({name}) in its self-check against this ale-py", True
    try:
        verdict = json.loads(done.stdout.strip().splitlines()[-1])
        return verdict["problem"], True
    except (ValueError, IndexError, KeyError, TypeError):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"the engine's self-check failed (exit status {done.returncode}): {tail[0]}", False


@dataclass(frozen=True)
class RomFacts:
    """What a ROM is, as ALE sees it.

    Attributes:
        screen: its screen's ``(height, width)`` (``(210, 160)`` for most; up to 250 lines).
        modes: the game modes ALE offers (``mode=``).
        difficulties: the difficulties ALE offers (``difficulty=``).
    """

    screen: tuple[int, int]
    modes: tuple[int, ...]
    difficulties: tuple[int, ...]


_FACTS: dict[str, RomFacts] = {}


def rom_facts(rom: str) -> RomFacts:
    """The facts of ROM ``rom`` (a ROM id ale-py ships), read from ALE once per ale-py build
    and kept on disk (needs ale-py).

    Examples:
        >>> lib = ale_library()
        >>> lib is None or rom_facts("pooyan").screen == (220, 160)
        True
    """
    facts = _FACTS.get(rom)
    if facts is not None:
        return facts
    lib = ale_library()
    name = f"roms-{lib.key if lib is not None else 'unknown'}.json"
    known = _read(name)
    known = known if isinstance(known, dict) else {}
    entry = known.get(rom)
    if entry is None:
        entry = _read_rom(rom)
        known = _read(name) or {}  # another process may have added ROMs meanwhile
        known[rom] = entry
        _write(name, known)
    facts = RomFacts((int(entry[0]), int(entry[1])), tuple(entry[2]), tuple(entry[3]))
    _FACTS[rom] = facts
    return facts


def _read_rom(rom: str) -> list[Any]:
    from envhive._extras import require

    ale_py = require("ale_py", "atari", "envhive's Atari envs")
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    ale = ale_py.ALEInterface()
    ale.loadROM(str(ale_py.roms.get_rom_path(rom)))
    h, w = ale.getScreenDims()
    return [int(h), int(w), [int(m) for m in ale.getAvailableModes()],
            [int(d) for d in ale.getAvailableDifficulties()]]
