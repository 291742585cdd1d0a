"""``python -m jobs.session``: build the class-data archive of Spark's driver, once per
installation (``./platform setup`` runs it; jobs.session.classes says why)."""

import sys

from jobs.session.classes import build

sys.exit(0 if build() is not None else 1)
