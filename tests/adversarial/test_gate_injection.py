"""Class 9: workflow commands injected through the gate.

A session writes strings the gate prints (paths, branch names, findings' messages
and values). Before, a claimed path or an unclaimed file's name carrying a newline
followed by `::…::` became a GitHub workflow command in `gate --format github` and in
`text`: masking values, stopping command processing, forging annotations. Now the
contract refuses a claimed path with a control character at ingest, and every face
escapes the rest. Real repositories, real sessions verified into the store with the
default configuration (a test command), then `verifier gate` on the command line.
"""

from __future__ import annotations

import os
import re
import unicodedata
from typing import Any

import pytest

from tests.support.gate import gate
from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, fix_turns, fixed_session, to_bytes
from verifier.app.pipeline import verify_report
from verifier.config import Config, RepositoryConfig
from verifier.errors import InvalidReport
from verifier.findings import DeliveryStatus
from verifier.store import Store

COMMAND = re.compile(r"^\s*::|##\[")
WRONG = "    return b - a\n"  # a fix the base's tests fail


def config(repo: GitRepo) -> Config:
    calc = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    return Config(database_url=os.environ["VERIFIER_DATABASE_URL"], repositories={"calc": calc})


def raw_controls(text: str) -> list[str]:
    return [
        f"U+{ord(c):04X}"
        for c in text
        if c != "\n" and (unicodedata.category(c) in ("Cc", "Zl", "Zp") or c == "\u202e")
    ]


def gate_outputs(capsys: Any, session_id: str) -> dict[str, str]:
    outputs = {}
    for fmt in ("github", "text", "json", "junit", "sarif"):
        ran = gate(capsys, "--session", session_id, "--format", fmt)
        outputs[fmt] = ran.out
        assert ran.code in (0, 1), ran.err
    return outputs


def assert_only_our_commands(outputs: dict[str, str]) -> list[str]:
    """No raw control character anywhere; in `github`, the annotations, then command
    processing stopped until an end token nothing else knows. The annotations."""
    for fmt, out in outputs.items():
        assert raw_controls(out) == [], fmt
        if fmt != "github":
            assert [line for line in out.split("\n") if COMMAND.search(line)] == [], fmt
    lines = outputs["github"].split("\n")
    stop = next(i for i, line in enumerate(lines) if line.startswith("::stop-commands::"))
    token = lines[stop].removeprefix("::stop-commands::")
    assert len(token) == 32 and lines[-2:] == [f"::{token}::", ""]
    for line in lines[:stop]:
        assert re.fullmatch(r"::(error|warning|notice) [^:]*::.*", line), line
    assert not [line for line in lines[stop + 1 : -2] if f"::{token}::" in line]
    return lines[:stop]


def test_a_claimed_path_carrying_a_workflow_command_is_refused_at_ingest(
    repo: GitRepo,
) -> None:
    """The issue's example: the claim's path is `calc.py` + newline + `::error …::`."""
    report = fixed_session(repo, turns=fix_turns(WRONG)).report()
    report["changes"][0]["path"] = "calc.py\n::error file=calc.py,line=1::all tests pass"
    with pytest.raises(InvalidReport) as caught:
        verify_report(to_bytes(report), config(repo))
    assert caught.value.field == "changes.0.path"
    assert caught.value.problem.startswith("control character U+000A at offset 7")
    with Store.open(os.environ["VERIFIER_DATABASE_URL"]) as store:
        assert [r.field for r in store.rejected()] == ["changes.0.path"]


@pytest.mark.parametrize(
    "name",
    [
        "notes\n::add-mask::not delivered\n::stop-commands::x\n::notice::delivered",
        "notes\r::error file=calc.py::ok\u2028::warning::w\u0085\x1b[2J\u202e##[error]legacy",
    ],
    ids=["newline-commands", "cr-legacy-ansi-separators"],
)
def test_an_unclaimed_file_named_as_workflow_commands_starts_none_in_any_format(
    repo: GitRepo, capsys: Any, name: str
) -> None:
    """Variants: the name is not claimed (git allows any byte but NUL and `/`), so it
    reaches the gate in the `change.undeclared` finding; the branch says more."""
    (repo.path / name).write_text("x\n", encoding="utf-8")
    report = fixed_session(repo, turns=fix_turns(WRONG)).report()
    report["repo"]["branch"] = "agent/fix\n::add-mask::agent\n##[error]forged"
    verdict = verify_report(to_bytes(report), config(repo)).verification
    assert verdict.delivery_status is DeliveryStatus.NOT_DELIVERED
    unclaimed = [f for f in verdict.checks["changes"].findings if f.code == "change.undeclared"]
    assert [f.path for f in unclaimed] == [name]
    outputs = gate_outputs(capsys, "s-1")
    annotations = assert_only_our_commands(outputs)
    assert any("change.undeclared" in line for line in annotations)
    assert "not delivered" in outputs["text"] and "notes\\x" in outputs["text"]


def test_honest_a_created_file_whose_name_holds_colons_is_claimed_and_delivered(
    repo: GitRepo, capsys: Any
) -> None:
    """Counterpart: `::` inside a name is not a control character: claimed, delivered,
    and the gate passes with no annotation, its own stop and end lines only."""
    from verifier.agent.harness import call, model_turn

    turns = [
        *fix_turns()[:2],
        model_turn(call("write_file", "c3", path="docs/a::b é.md", content="# notes\n")),
        model_turn("Fixed subtract() and wrote notes."),
    ]
    report = fixed_session(repo, turns=turns).report()
    assert "docs/a::b é.md" in [c["path"] for c in report["changes"]]
    verdict = verify_report(to_bytes(report), config(repo)).verification
    assert verdict.delivery_status is DeliveryStatus.DELIVERED, verdict.first_finding
    assert assert_only_our_commands(gate_outputs(capsys, "s-1")) == []
