"""docs/evidence.md lists every reason code a bundle can be refused for, and no other."""

from __future__ import annotations

import re

from audit.bundle import REASONS
from tests.support.paths import ROOT

DOC = ROOT / "docs" / "evidence.md"


def test_every_reason_code_is_documented_and_every_documented_one_exists() -> None:
    documented = re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text(encoding="utf-8"), re.M)
    assert documented == list(REASONS)
