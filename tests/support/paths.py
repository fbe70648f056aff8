"""Where the checkout's files are, for tests wherever they sit in the tree."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
# A recorded session's model turns (the calc fix), replayed by the scripted model.
TURNS = FIXTURES / "turns"
# The contract's published test vectors.
VECTORS = ROOT / "docs" / "contract" / "vectors"
