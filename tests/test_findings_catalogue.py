"""docs/findings.md, the code and the tests agree on every finding code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.messages import repeated_phrase, repetitions
from tests.support.paths import ROOT
from verifier.checks import registered
from verifier.findings import Finding
from verifier.formats.render import finding_text

# The first parts of every finding code, as the registered checks declare them.
PREFIXES = "|".join(
    re.escape(prefix.removesuffix(".")) for check in registered() for prefix in check.prefixes
)
CODE = re.compile(rf"^({PREFIXES})\.[a-z_]+$")
LITERAL = re.compile(rf"""["']((?:{PREFIXES})\.[a-z_]+)["']""")
# Strings of that shape that are JSON paths into a report, not finding codes.
NOT_CODES = {"audit.count", "audit.entries", "audit.head", "audit.trail"}
# Module names of the audit package's lazy exports (audit/__init__.py), not finding codes.
NOT_CODES |= {
    "audit._collect",
    "audit.chain",
    "audit.completeness",
    "audit.findings",
    "audit.jcs",
    "audit.verification",
}


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


def _message_templates() -> list[tuple[str, ast.JoinedStr | ast.Constant]]:
    """(where, message) of every ``Finding(code, message, ...)`` written in the source."""
    found: list[tuple[str, ast.JoinedStr | ast.Constant]] = []
    for folder in ("verifier", "audit"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Finding"
                    and len(node.args) >= 2
                    and isinstance(node.args[1], ast.JoinedStr | ast.Constant)
                ):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found.append((where, node.args[1]))
    return found


def test_no_message_template_says_its_path_twice_or_repeats_a_phrase() -> None:
    """Each finding's message, as written: the path at most once, no phrase of three words
    twice in its words (what a rendering adds is held by the demo's and the replay's tests,
    with `tests.support.messages`)."""
    templates = _message_templates()
    assert len(templates) >= 50
    wrong = []
    for where, message in templates:
        if isinstance(message, ast.Constant):
            words = str(message.value)
            paths = 0
        else:
            words = " ".join(
                part.value if isinstance(part, ast.Constant) else "{}" for part in message.values
            )
            paths = sum(
                1
                for part in message.values
                if isinstance(part, ast.FormattedValue) and ast.unparse(part.value).endswith("path")
            )
        phrase = repeated_phrase(words)
        if paths > 1 or phrase is not None:
            wrong.append(f"{where}: {paths} paths, repeated {phrase!r}")
    assert wrong == []


def test_the_repetition_detector_finds_what_the_issue_found() -> None:
    said = (
        "NOTES.md: after the head commit the head commit differs from the model's requests "
        "replayed from the base commit"
    )
    assert repeated_phrase(said) == "the head commit"
    finding = Finding("change.missing", "calc.py: is not at head", "calc.py")
    assert repetitions("change.missing calc.py: calc.py: is not at head", finding) == [
        "the path 'calc.py' 2 times"
    ]
    assert repetitions(finding_text(finding), finding) == []
