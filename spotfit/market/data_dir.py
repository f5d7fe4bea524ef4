"""Where the bundled traces and price catalogs live (`spotfit/data/`), for every module that reads them."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
