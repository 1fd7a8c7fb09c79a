"""``python -m envhive`` runs the ``envhive`` command."""

import sys

from envhive._cli import main

if __name__ == "__main__":
    sys.exit(main())
