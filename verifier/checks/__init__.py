"""The checks: one module each, one protocol (`verifier.checks.base.Check`), registered
here and nowhere else.

A check is an object with a `name`, a `title`, the `prefixes` of its finding
codes, the names of the checks whose results it `reads`, and
`run(context) -> CheckResult`. `verify()` starts each check as soon as the
checks it reads are done; a check reads what an earlier one established as
typed facts (`Context.fact(HeadState)`), never from its details or its finding
codes. Adding a check is a module and a line in `registered()`: the store keeps
statuses as rows, the renderers walk the results, and the gate
(`verifier.formats.gate.CHECK_OF_PREFIX`) and the findings catalogue read what
each check declares, so none of them changes.
"""

from __future__ import annotations

from verifier.checks import audit, changes, replay
from verifier.checks.base import Check
from verifier.checks.tests import check as tests

__all__ = ["registered"]


def registered() -> tuple[Check, ...]:
    """Every check, in the order their results are shown."""
    return (changes.CHECK, tests.CHECK, audit.CHECK, replay.CHECK)
