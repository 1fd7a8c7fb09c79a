"""``python -m envhive`` runs the ``envhive`` command."""

import sys

from envhive._cli import main

sys.exit(main())
