"""Whether a directory is private to this user, and envhive's cache directories, made private.

The compiled-code cache (``_jit.py``) loads pickles from its directory, and the Atari engine
trusts the verdict of its ALE self-check kept beside it (``envs/atari/_selfcheck.py``): both
live under :func:`cache_root` in directories made by :func:`private_cache_dir`.

A directory is private when this user owns it and no one else can write to it (a group may,
when it is the user's own private group, as with a umask of 002), and when every directory
above it is owned by this user or root and is not writable by others, unless sticky (a shared
``/tmp`` is fine: others cannot rename or replace what is ours in it). Off POSIX (no uids)
every directory counts as private.

Examples:
    >>> import pathlib, tempfile
    >>> base = pathlib.Path(tempfile.mkdtemp())
    >>> private_dir(base / "cache", "numba-1") == (base / "cache" / "numba-1", None)
    True
    >>> (base / "open").mkdir(mode=0o777); (base / "open").chmod(0o777)
    >>> path, reason = private_dir(base / "open", "numba-1")
    >>> path, reason.endswith("others can write to it (mode 777)")
    (None, True)
    >>> (base / "open" / "numba-1").exists()  # nothing was made inside it
    False
"""

from __future__ import annotations

import os
import pathlib
import stat

__all__ = ["private_dir", "unsafe_reason", "cache_root", "private_cache_dir"]


def cache_root() -> pathlib.Path | None:
    """envhive's cache directory: ``$ENVHIVE_CACHE_DIR``, else ``$XDG_CACHE_HOME/envhive``,
    else ``~/.cache/envhive``; ``None`` when ``ENVHIVE_CACHE=0`` turns caching off.

    Examples:
        >>> import os
        >>> cache_root() is None or cache_root().name == "envhive" or "ENVHIVE_CACHE_DIR" in os.environ
        True
    """
    if os.environ.get("ENVHIVE_CACHE", "1") == "0":
        return None
    root = os.environ.get("ENVHIVE_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "envhive")
    return pathlib.Path(root)


def private_cache_dir(root: pathlib.Path, name: str,
                      what: str = "compiled code (pickles, which run code when loaded)") -> pathlib.Path | None:
    """``root / name``, made if missing (mode 0o700), when no one else can write to it; else a
    private fallback, with a warning that says why (``what``: what is loaded from it);
    ``None`` when nothing can be made."""
    import tempfile
    import warnings

    path, reason = private_dir(root, name)
    if reason is None:
        return path  # private, or not creatable (then nothing is cached, silently)
    fallback, _ = private_dir(pathlib.Path(tempfile.gettempdir()) / f"envhive-{os.getuid()}", name)
    if fallback is None:  # taken by someone else: a directory for this process only
        fallback = pathlib.Path(tempfile.mkdtemp(prefix="envhive-cache-")) / name
        fallback.mkdir(mode=0o700)
    noun = what.split(" (")[0]
    warnings.warn(
        f"envhive: not loading {noun} from {root / name} ({reason}). The cache holds {what}, so "
        f"whoever can write there could change what this process runs. Using {fallback} instead; "
        "to use the cache, make the directory yours and private (chmod 700), or point "
        "ENVHIVE_CACHE_DIR at one that is.",
        UserWarning, stacklevel=3,
    )
    return fallback


def private_dir(root: pathlib.Path, name: str) -> tuple[pathlib.Path | None, str | None]:
    """``(root / name, None)`` once both exist (made with mode 0o700 where missing) and are
    private; ``(None, why)`` when one is not (nothing is made inside a directory that is not);
    ``(None, None)`` when they cannot be made (a file in the way, a read-only disk)."""
    for path in (root, root / name):
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            return None, None
        reason = unsafe_reason(path)
        if reason is not None:
            return None, reason
    return root / name, None


def _private_group(gid: int) -> bool:
    """Whether ``gid`` is this user's own group (named after the user, no other members)."""
    try:
        import grp
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
        group = grp.getgrgid(gid)
    except (ImportError, KeyError):
        return False
    return gid == os.getgid() and group.gr_name == user and set(group.gr_mem) <= {user}


def unsafe_reason(path: pathlib.Path) -> str | None:
    """Why code must not be loaded from the directory ``path`` (``None``: it is private)."""
    if not hasattr(os, "getuid"):
        return None
    uid = os.getuid()
    try:
        real = path.resolve(strict=True)
        st = os.stat(real)
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid != uid:
            return f"{real}: it is owned by uid {st.st_uid}, not by you (uid {uid})"
        if mode & stat.S_IWOTH:
            return f"{real}: others can write to it (mode {mode:o})"
        if mode & stat.S_IWGRP and not _private_group(st.st_gid):
            return f"{real}: its group (gid {st.st_gid}) can write to it (mode {mode:o})"
        for above in real.parents:  # whoever can write here can swap what is below
            st = os.stat(above)
            mode = stat.S_IMODE(st.st_mode)
            if st.st_uid not in (uid, 0) or (mode & stat.S_IWOTH and not mode & stat.S_ISVTX):
                return f"{above}, which holds it, is owned by uid {st.st_uid} with mode {mode:o}"
    except OSError as err:
        return f"{path}: it cannot be inspected ({err})"
    return None
