"""docs/findings.md, the code and the tests agree on every finding code."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import ROOT
from verifier.checks import registered

# The first parts of every finding code, as the registered checks declare them.
PREFIXES = "|".join(
    re.escape(prefix.removesuffix(".")) for check in registered() for prefix in check.prefixes
)
CODE = re.compile(rf"^({PREFIXES})\.[a-z_]+$")
LITERAL = re.compile(rf"""["']((?:{PREFIXES})\.[a-z_]+)["']""")
# Strings of that shape that are JSON paths into a report, not finding codes.
NOT_CODES = {"audit.count", "audit.entries", "audit.head", "audit.trail"}


def documented() -> set[str]:
    text = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
    return {m for m in re.findall(r"^\| `([a-z_.]+)` \|", text, re.MULTILINE) if CODE.match(m)}


def literals(folder: str, exclude: str = "") -> set[str]:
    found: set[str] = set()
    for path in (ROOT / folder).rglob("*.py"):
        if exclude and exclude in path.parts:
            continue
        found |= set(LITERAL.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_emitted_code_is_documented() -> None:
    emitted = (literals("verifier") | literals("audit")) - NOT_CODES
    assert emitted - documented() == set()


def test_every_documented_code_is_emitted() -> None:
    emitted = literals("verifier") | literals("audit")
    assert documented() - emitted == set()


def test_every_code_has_a_test_that_names_it() -> None:
    tested = {
        code
        for path in (ROOT / "tests").rglob("test_*.py")
        if path.name != Path(__file__).name and "benchmarks" not in path.parts
        for code in LITERAL.findall(path.read_text(encoding="utf-8"))
    }
    assert documented() - tested == set()


def test_the_catalogue_is_not_empty() -> None:
    assert len(documented()) >= 50


def test_each_check_has_a_section_headed_by_its_title_and_prefixes() -> None:
    text = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^## (.+)$", text, re.MULTILINE))
    for check in registered():
        prefixes = ", ".join(f"`{prefix}*`" for prefix in check.prefixes)
        assert f"{check.title} ({prefixes})" in headings, check.name


def test_every_documented_code_starts_with_a_prefix_of_a_registered_check() -> None:
    text = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_]+\.[a-z_.]+)` \|", text, re.MULTILINE))
    assert rows - documented() == set()
