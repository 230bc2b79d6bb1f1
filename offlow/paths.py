"""Where things are: the checkout offlow runs from, and the real inputs (the BGP table,
the captures): ../shared/data beside the checkout, or $OFFLOW_DATA for a checkout that
lives elsewhere. (Apart from the build, so that naming them imports nothing.)"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("OFFLOW_DATA") or ROOT.parent / "shared" / "data")
