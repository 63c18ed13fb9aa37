"""``python -m microgradnorm.i18n COMMAND``: another name of ``python -m microgradnorm.i18n_tools COMMAND``
(refresh, check, untranslated, hashes), kept because translators and the docs have long used it. The tools
live in :mod:`microgradnorm.i18n_tools`, apart from the runtime translation; this file is only run, never
imported.
"""

import sys

from microgradnorm.i18n_tools.__main__ import main

sys.exit(main(prog="python -m microgradnorm.i18n"))
