"""No two modules of ours import each other (`make lint` runs the same check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.circles import circles


def test_the_verifier_and_audit_hold_no_import_circle() -> None:
    assert circles("verifier", "audit") == []


def test_a_circle_through_a_type_checking_import_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circled import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circled.c import C\n"
    )
    (package / "c.py").write_text("import circled.a\nclass C: ...\n")
    (package / "d.py").write_text("import circled.a\n")  # imports into the circle, not part of it
    monkeypatch.syspath_prepend(str(tmp_path))
    assert circles("circled") == [["circled.a", "circled.b", "circled.c"]]
