"""``python -m microgradnorm``: the same as the ``microgradnorm`` command."""

import sys

from microgradnorm.cli import main

sys.exit(main())
