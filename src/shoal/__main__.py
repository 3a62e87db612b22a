"""``python -m shoal``: the ``shoal`` command."""

import sys

from shoal.cli import main

sys.exit(main())
