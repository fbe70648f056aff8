"""`verifier.checks.editmatch` against the real gemini-cli: every case below is a file and a
``replace`` or ``write_file`` call; gemini-cli runs them all with scripted turns, and what it
wrote (or refused) must be, byte for byte, what editmatch predicts. Both tool families."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from audit.geminicli import read_transcript
from tests.support import geminicli
from tests.support.gitrepo import GitRepo
from verifier.checks import editmatch


@dataclass(frozen=True)
class Case:
    name: str
    before: bytes | None  # None: the file does not exist
    tool: str
    args: dict[str, Any]
    # The strategy editmatch must find ("" when gemini-cli refuses the edit).
    strategy: str


def rep(name: str, before: bytes | None, old: str, new: str, strategy: str, **more: Any) -> Case:
    args = {"old_string": old, "new_string": new, "instruction": f"case {name}", **more}
    return Case(name, before, "replace", args, strategy)


PY = b"def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
CASES = [
    rep("exact", PY, "    return a - b", "    return a + b", "exact"),
    rep("two_without_allow", b"x = 1\ny = 1\n", "= 1", "= 2", ""),
    rep("two_with_allow", b"x = 1\ny = 1\n", "= 1", "= 2", "exact", allow_multiple=True),
    rep("not_found", PY, "return a / b", "return a + b", ""),
    rep("same_text", PY, "return a - b", "return a - b", ""),
    rep("dollar", PY, "return a - b", "return '$&' + '$1'", "exact"),
    rep(
        "flexible_indent",
        PY,
        "def add(a, b):\n        return a - b",
        "def add(a, b):\n  return a + b",
        "flexible",
    ),
    rep(
        "regex_spacing", b"total = add( 1,2 )\n", "total = add(1, 2)", "total = add(2, 1)", "regex"
    ),
    rep(
        "fuzzy_typo",
        PY,
        "def mull(a, b):\n    return a ** b",
        "def mul(a, b):\n    return b * a",
        "fuzzy",
    ),
    rep("crlf_file", b"one\r\ntwo\r\nthree\r\n", "two", "2", "exact"),
    rep("mixed_endings", b"one\r\ntwo\nthree\n", "three", "3", "exact"),
    rep("no_trailing_newline", b"alpha\nbeta", "beta", "gamma\n", "exact"),
    rep("create_missing", None, "", "fresh\n", "create"),
    rep("empty_old_on_existing", PY, "", "x", ""),
    rep("missing_file", None, "a", "b", ""),
    rep("lone_cr", b"a\rb\nkeep me\n", "   keep me", "kept", "flexible"),
    rep("unicode", "naïve = '😀'\nrésumé = 1\n".encode(), "résumé = 1", "résumé = 2", "exact"),
    Case("write_new", None, "write_file", {"content": "new file\n"}, "write"),
    Case("write_crlf", b"a\r\nb\r\n", "write_file", {"content": "c\nd\n"}, "write"),
    Case("write_escaped", PY, "write_file", {"content": "line\\none\\ttab\n"}, "write"),
]


def _path(case: Case) -> str:
    return f"cases/{case.name}.txt"


def _predict(case: Case, model: str) -> editmatch.Applied:
    if case.tool == "write_file":
        return editmatch.write_bytes(case.before, case.args["content"], model)
    return editmatch.replace_bytes(
        case.before,
        case.args["old_string"],
        case.args["new_string"],
        case.args.get("allow_multiple") is True,
    )


@pytest.mark.parametrize(
    "model", [geminicli.LEGACY_MODEL, geminicli.GEMINI_3_MODEL, "gemini-1.5-pro"]
)
def test_editmatch_writes_what_the_real_gemini_cli_writes(tmp_path: Path, model: str) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit(
        {_path(c): c.before for c in CASES if c.before is not None} | {"README.md": "cases\n"}
    )
    turns = [geminicli.turn({c.tool: {"file_path": _path(c), **c.args}}) for c in CASES] + [
        geminicli.turn("All cases ran.")
    ]
    ran = geminicli.session(repo.path, tmp_path / "home", turns, model=model)
    assert ran.returncode == 0 and ran.transcript is not None, ran.stderr[-3000:]
    statuses = {
        Path(str(call.args["file_path"])).stem: call.status
        for call in read_transcript(ran.transcript).tool_calls
    }
    disagree = []
    for case in CASES:
        predicted = _predict(case, model)
        target = repo.path / _path(case)
        written = target.read_bytes() if target.exists() else None
        expected = predicted.data if predicted.data is not None else case.before
        succeeded = statuses[case.name] == "success"
        if (
            written != expected
            or succeeded != (predicted.data is not None)
            or predicted.strategy != case.strategy
        ):
            disagree.append(
                (case.name, statuses[case.name], predicted.strategy, written, predicted.data)
            )
    assert disagree == [], json.dumps(disagree, default=repr, indent=1)


def test_only_the_exact_match_applies_what_the_model_asked() -> None:
    exact = editmatch.replace_bytes(PY, "return a - b", "return a + b")
    assert exact.tolerance is None
    fuzzy = editmatch.replace_bytes(PY, "def mull(a, b):\n    return a ** b", "x = 1")
    assert fuzzy.strategy == "fuzzy" and fuzzy.code == "replay.tolerant_match"
    assert fuzzy.tolerance is not None and "fuzzy match" in fuzzy.tolerance
    mixed = editmatch.replace_bytes(b"a\r\nb\nc\n", "c", "C")
    assert mixed.data == b"a\r\nb\r\nC\r\n" and mixed.tolerance is not None


def test_a_write_is_unescaped_for_gemini_models_neither_2_nor_3() -> None:
    old = editmatch.write_bytes(None, "a\\nb", "gemini-1.5-pro")
    assert old.data == b"a\nb" and old.code == "replay.corrected_edit"
    for model in ("gemini-2.5-pro", "gemini-3.1-pro-preview", "my-local-model", None):
        kept = editmatch.write_bytes(None, "a\\nb", model)
        assert kept.data == b"a\\nb" and kept.tolerance is None
