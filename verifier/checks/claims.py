"""An example check (added to show what adding a check touches, then reverted): the
report claims at least one change."""

from __future__ import annotations

from collections.abc import Mapping

from audit.findings import Finding
from verifier.checks.base import Context
from verifier.findings import CheckResult, CheckStatus

NAME = "claims"


class ClaimsCheck:
    """Step 5 of the verdict: a session that claims no change delivered nothing."""

    name = NAME
    title = "Claims"
    prefixes: Mapping[str, str] = {"claims.": "the claims check: what the report says it changed"}
    launches = False
    reads: tuple[str, ...] = ()

    def run(self, context: Context) -> CheckResult:
        if context.report.doc.changes:
            return CheckResult(NAME, CheckStatus.PASS)
        finding = Finding("claims.none", "the report claims no change")
        return CheckResult(NAME, CheckStatus.FAIL, (finding,))


CHECK = ClaimsCheck()
