"""``python -m moldau`` = the ``moldau`` command."""

import sys

from moldau.cli.main import main

sys.exit(main())
