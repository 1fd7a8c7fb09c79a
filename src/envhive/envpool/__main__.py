"""``python -m envhive.envpool SCRIPT [ARGS ...]``: run an EnvPool script unchanged on envhive.

``import envpool`` inside the script (and its submodules) resolves to ``envhive.envpool``
(:func:`envhive.envpool.install`); ``sys.argv`` is the script's.

Examples:
    >>> main([])
    usage: python -m envhive.envpool SCRIPT [ARGS ...]
    2
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence

from envhive.envpool import install


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``argv[0]`` as ``__main__`` with ``argv`` as its ``sys.argv``; returns 0 (or 2 for
    no script)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m envhive.envpool SCRIPT [ARGS ...]")
        return 2
    install()
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
