"""Whether a directory is private to this user: the compiled-code cache loads pickles from it.

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

__all__ = ["private_dir", "unsafe_reason"]


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
