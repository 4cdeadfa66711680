"""Intake tests. The suite runs with ``--import-mode=importlib``, so this folder is put on ``sys.path`` for
the corpus builders module (``intake_corpus``, a name no other test folder uses)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
