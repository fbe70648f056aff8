"""The example claims check."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from verifier.checks.claims import CHECK
from verifier.findings import CheckStatus


def context(changes: list[Any]) -> Any:
    return SimpleNamespace(report=SimpleNamespace(doc=SimpleNamespace(changes=changes)))


def test_a_report_that_claims_no_change_fails_with_claims_none() -> None:
    result = CHECK.run(context([]))
    assert result.status is CheckStatus.FAIL
    assert [f.code for f in result.findings] == ["claims.none"]


def test_a_report_that_claims_a_change_passes() -> None:
    assert CHECK.run(context([object()])).status is CheckStatus.PASS
