"""The registry (`verifier.checks.registered`) and what each check declares for the faces."""

from __future__ import annotations

from verifier.checks import registered
from verifier.formats.gate import CHECK_OF_PREFIX


def test_every_check_has_a_name_a_title_and_prefixes_of_its_own() -> None:
    checks = registered()
    assert [c.name for c in checks] == ["changes", "tests", "audit", "replay"]
    assert [c.title for c in checks] == ["Changes", "Tests", "Audit", "Replay"]
    prefixes = [p for c in checks for p in c.prefixes]
    assert prefixes == ["change.", "tests.", "audit.", "replay.", "profile."]
    assert len(set(prefixes)) == len(prefixes)
    assert all(p.endswith(".") and "." not in p[:-1] for p in prefixes)


def test_a_check_reads_only_checks_registered_before_it() -> None:
    """`verify()` refuses a check that reads one it has not started yet."""
    seen: set[str] = set()
    for check in registered():
        assert set(check.reads) <= seen, check.name
        seen.add(check.name)


def test_the_gate_names_the_check_of_every_registered_prefix() -> None:
    for check in registered():
        for prefix in check.prefixes:
            assert CHECK_OF_PREFIX[prefix.removesuffix(".")].startswith(f"the {check.name} check")
    assert len(CHECK_OF_PREFIX) == sum(len(c.prefixes) for c in registered())
