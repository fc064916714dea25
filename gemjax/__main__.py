"""``python -m gemjax``: the same as the ``gemjax`` command."""

import sys

from gemjax.cli import main

sys.exit(main())
