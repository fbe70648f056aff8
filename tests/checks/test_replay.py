"""The replay check on honest sessions, and the rules it applies.

Every session is run by the reference harness (`verifier.agent.harness`) against a
real repository and verified end to end; the honest ones of issue 8 (edits
whose line numbers count earlier edits, replace by text, files also edited by
commands, CRLF and Unicode on bytes) must stay delivered.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from audit import jcs_sha256, seal
from tests.support.gitrepo import GitRepo
from tests.support.sessions import BASE, CALC, PYTEST, fixed_session, to_bytes, to_interaction
from verifier.agent.harness import DEFAULT_TOOLS, ScriptedModel, call, model_turn, run_session
from verifier.checks.replay import split_lines
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckStatus, DeliveryStatus, Verification
from verifier.verify import Options, verify

FIXED = CALC.replace("subtract(a, b):\n    return a + b", "subtract(a, b):\n    return a - b")
NOTES = "# Notes\n\nalpha\nbeta\ngamma\n"
# Committed as written (no attributes): CRLF, LF and Unicode, byte for byte.
MIXED = "première\r\nzweite\nτρίτη\r\n最后\n".encode()


def notes_repo(path: Path) -> GitRepo:
    repo = GitRepo(path)
    repo.commit({**BASE, "calc.py": FIXED, "NOTES.md": NOTES, "mixed.txt": MIXED}, "base")
    return repo


def verified(repo: GitRepo, report: dict[str, Any], *, worktree: bool = False) -> Verification:
    cfg = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    before = repo.snapshot()
    v = verify(
        parse_report(to_bytes(report)), Config(repositories={"calc": cfg}), Options(repo.path)
    )
    assert repo.snapshot() == before, "verify modified the repository"
    return v


def session(repo: GitRepo, *turns: Any, commit: bool = True, **kw: Any) -> dict[str, Any]:
    model = ScriptedModel([*turns, model_turn("Done.")])
    return run_session(repo.path, "s-r", "Edit.", model, commit=commit, **kw).report()


def replace(cid: str, path: str, start: int, end: int, expected: str, new: str) -> Any:
    return call(
        "replace_lines",
        cid,
        path=path,
        start_line=start,
        end_line=end,
        expected=expected,
        replacement=new,
    )


def delivered(v: Verification) -> None:
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()["checks"]
    assert v.checks["replay"].status is CheckStatus.PASS


def test_the_fix_session_is_replayed_and_delivered(repo: GitRepo) -> None:
    v = verified(repo, fixed_session(repo).report())
    delivered(v)
    details = dict(v.checks["replay"].details)
    assert 0 < details.pop("work_bytes") <= 4 * len(CALC)  # split, hash before and after
    assert details == {
        "profile": "default",
        "replayed": 1,
        "steps": 1,
        "not_replayable": {},
    }


def test_line_numbers_that_count_earlier_edits_in_one_turn(tmp_path: Path) -> None:
    repo = notes_repo(tmp_path / "r")
    report = session(
        repo,
        model_turn(
            # Two lines become four: "beta" moves from line 4 to line 6.
            replace("c1", "NOTES.md", 1, 2, "# Notes\n\n", "# Notes\n\nintro\nmore\n"),
            replace("c2", "NOTES.md", 6, 6, "beta\n", "BETA\n"),
        ),
        model_turn(replace("c3", "NOTES.md", 7, 7, "gamma\n", "")),
    )
    v = verified(repo, report)
    delivered(v)
    assert (repo.path / "NOTES.md").read_text() == "# Notes\n\nintro\nmore\nalpha\nBETA\n"
    assert v.checks["replay"].details["steps"] == 3


def test_replace_by_text_write_and_delete_are_replayed(tmp_path: Path) -> None:
    repo = notes_repo(tmp_path / "r")
    report = session(
        repo,
        model_turn(call("edit_file", "c1", path="NOTES.md", old_text="beta", new_text="Beta")),
        model_turn(call("write_file", "c2", path="docs/new.md", content="new\n")),
        model_turn(call("delete_file", "c3", path="mixed.txt")),
    )
    v = verified(repo, report)
    delivered(v)
    assert v.checks["replay"].details["replayed"] == 3


def test_crlf_mixed_endings_and_unicode_are_replayed_on_bytes(tmp_path: Path) -> None:
    repo = notes_repo(tmp_path / "r")
    report = session(
        repo,
        model_turn(replace("c1", "mixed.txt", 2, 3, "zweite\nτρίτη\r\n", "deux\r\nтри\n")),
        model_turn(replace("c2", "mixed.txt", 4, 4, "最后\n", "último\r\n")),
    )
    v = verified(repo, report)
    delivered(v)
    assert (repo.path / "mixed.txt").read_bytes() == "première\r\ndeux\r\nтри\núltimo\r\n".encode()


def test_a_file_also_edited_by_a_command_is_left_to_the_hashes(tmp_path: Path) -> None:
    repo = notes_repo(tmp_path / "r")
    script = "import pathlib; p = pathlib.Path('NOTES.md'); p.write_text(p.read_text() + 'z\\n')"
    report = session(
        repo,
        model_turn(replace("c1", "NOTES.md", 3, 3, "alpha\n", "ALPHA\n")),
        model_turn(call("run_command", "c2", command=[sys.executable, "-c", script])),
        model_turn(replace("c3", "NOTES.md", 6, 6, "z\n", "zeta\n")),
    )
    v = verified(repo, report)
    delivered(v)
    details = v.checks["replay"].details
    assert details["replayed"] == 0
    assert "'c2'" in details["not_replayable"]["NOTES.md"]
    assert "run action" in details["not_replayable"]["NOTES.md"]


def test_a_refused_edit_is_not_replayed(tmp_path: Path) -> None:
    """The harness answers a stale range with an error and changes nothing: nothing to replay."""
    repo = notes_repo(tmp_path / "r")
    report = session(
        repo,
        model_turn(replace("c1", "NOTES.md", 3, 3, "beta\n", "BETA\n")),  # beta is line 4
        model_turn(replace("c2", "NOTES.md", 4, 4, "beta\n", "BETA\n")),
    )
    v = verified(repo, report)
    delivered(v)
    assert v.checks["replay"].details["steps"] == 2


def test_uncommitted_work_is_replayed_against_the_working_tree(tmp_path: Path) -> None:
    repo = notes_repo(tmp_path / "r")
    report = session(
        repo, model_turn(replace("c1", "NOTES.md", 5, 5, "gamma\n", "G\n")), commit=False
    )
    v = verified(repo, report)
    delivered(v)
    assert v.checks["replay"].details["replayed"] == 1


def test_a_crlf_checkout_of_lf_blobs_is_replayed_in_git_s_form(tmp_path: Path) -> None:
    """``eol=crlf``: the model sees CRLF, git stores LF; its text is converted as git would."""
    repo = GitRepo(tmp_path / "r")
    attributes = {".gitattributes": "* text=auto eol=crlf\n"}
    repo.commit({**BASE, "calc.py": FIXED, "NOTES.md": NOTES, **attributes})
    for rel in (*BASE, "NOTES.md"):
        (repo.path / rel).unlink()
    repo.git("checkout", "--", ".")
    report = session(
        repo, model_turn(replace("c1", "NOTES.md", 4, 4, "beta\r\n", "BETA\r\n")), commit=False
    )
    v = verified(repo, report)
    delivered(v)


def _apply_patch(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """A tool the default profile does not know: it appends a line."""
    with (root / "NOTES.md").open("a", encoding="utf-8") as fh:
        fh.write(str(args["line"]))
    return {"ok": True}


def test_an_unknown_call_answered_as_successful_is_inconclusive(tmp_path: Path) -> None:
    repo = notes_repo(tmp_path / "r")
    tools = {**DEFAULT_TOOLS, "apply_patch": _apply_patch}
    report = session(repo, model_turn(call("apply_patch", "c1", line="delta\n")), tools=tools)
    v = verified(repo, report)
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE, v.to_dict()["checks"]
    result = v.checks["replay"]
    assert result.status is CheckStatus.ERROR
    assert [f.code for f in result.findings] == ["profile.unknown_call"]
    assert "apply_patch" in result.findings[0].message
    assert "NOTES.md" in result.details["not_replayable"]


def test_an_unknown_call_answered_as_failed_is_harmless(tmp_path: Path) -> None:
    repo = notes_repo(tmp_path / "r")
    report = session(repo, model_turn(call("apply_patch", "c1", line="delta\n")))
    v = verified(repo, report)  # the harness answers {"ok": false, "error": "unknown tool"}
    assert v.checks["replay"].status is CheckStatus.PASS, v.checks["replay"]


# -- v2: another vocabulary, 0-based end-exclusive ranges and camelCase ----------------


def _replace_range(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """v2's replace_range done right: lines [startLine, endLine) counted from 0."""
    path = root / str(args["filePath"])
    lines = split_lines(path.read_bytes())
    start, end = int(args["startLine"]), int(args["endLine"])
    if b"".join(lines[start:end]) != str(args["oldText"]).encode():
        return {"isError": True, "content": "oldText is not at the range"}
    lines[start:end] = [str(args["newText"]).encode()]
    path.write_bytes(b"".join(lines))
    return {"content": "ok"}


def _str_replace(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    path = root / str(args["filePath"])
    data = path.read_bytes()
    old, new = str(args["oldText"]).encode(), str(args["newText"]).encode()
    if data.count(old) != 1:
        return {"isError": True}
    path.write_bytes(data.replace(old, new))
    return {"content": "ok"}


V2_TOOLS = {"replace_range": _replace_range, "str_replace": _str_replace}


def v2_report(repo: GitRepo, tools: Mapping[str, Any] = V2_TOOLS) -> dict[str, Any]:
    report = session(
        repo,
        model_turn(
            call(
                "replace_range",
                "c1",
                filePath="NOTES.md",
                startLine=3,  # "beta", the fourth line
                endLine=4,
                oldText="beta\n",
                newText="BETA\n",
            ),
            call("str_replace", "c2", filePath="NOTES.md", oldText="gamma", newText="GAMMA"),
        ),
        model_turn(
            call(
                "replace_range",
                "c3",
                filePath="NOTES.md",
                startLine=9,
                endLine=10,
                oldText="x\n",
                newText="y\n",
            )
        ),  # refused by the harness: isError
        tools=tools,
    )
    report["agent"]["tool_profile"] = "v2"
    return report


def test_a_v2_session_is_replayed_with_its_own_vocabulary(tmp_path: Path) -> None:
    repo = notes_repo(tmp_path / "r")
    v = verified(repo, v2_report(repo))
    delivered(v)
    assert (repo.path / "NOTES.md").read_text() == "# Notes\n\nalpha\nBETA\nGAMMA\n"
    assert v.checks["replay"].details["profile"] == "v2"


@pytest.mark.parametrize("name", ["default", "legacy-write", "v2"])
def test_every_shipped_profile_replays_the_fix_or_says_it_cannot(repo: GitRepo, name: str) -> None:
    report = fixed_session(repo).report()
    report["agent"]["tool_profile"] = name
    v = verified(repo, report)
    if name == "default":
        delivered(v)
    else:  # read_file/replace_lines mean nothing (or something else) to these profiles
        assert v.delivery_status is DeliveryStatus.INCONCLUSIVE
        assert "profile.unknown_call" in {f.code for f in v.checks["replay"].findings}


def test_lines_end_with_lf_only() -> None:
    assert split_lines(b"a\r\nb\rc\nd") == [b"a\r\n", b"b\rc\n", b"d"]
    assert split_lines(b"") == []
    assert split_lines(b"x\n") == [b"x\n"]


def test_git_failing_under_the_check_is_an_error_not_a_verdict(repo: GitRepo) -> None:
    """The head state names a base the repository lacks (git fails reading it): inconclusive."""
    from verifier._internal.cancel import CancelToken
    from verifier.checks.base import Context, HeadState
    from verifier.checks.replay import CHECK
    from verifier.findings import CheckResult

    report = parse_report(to_bytes(fixed_session(repo).report()))
    cfg = RepositoryConfig("calc", path=repo.path)
    context = Context(
        report, Config(repositories={"calc": cfg}), cfg, repo.path, (), 60.0, CancelToken()
    )
    context.launched.set()
    missing = HeadState("commit", "0" * 40, repo.head())
    context.results["changes"] = CheckResult("changes", CheckStatus.PASS, facts=(missing,))
    result = CHECK.run(context)
    assert result.status is CheckStatus.ERROR
    assert [f.code for f in result.findings] == ["replay.git_failed"]


def test_a_request_outside_the_root_is_never_opened(tmp_path: Path) -> None:
    """The harness refuses it; the replay lists it, never reads ``../`` (worktree mode)."""
    repo = notes_repo(tmp_path / "r")
    (tmp_path / "outside.txt").write_text("secret\n")
    report = session(
        repo,
        model_turn(replace("c1", "../outside.txt", 1, 1, "secret\n", "x\n")),
        # A real change beside it: an empty session is not delivered (change.empty_session).
        model_turn(replace("c2", "NOTES.md", 3, 3, "alpha\n", "ALPHA\n")),
        commit=False,
    )
    v = verified(repo, report)
    delivered(v)
    assert "not a safe path" in v.checks["replay"].details["not_replayable"]["../outside.txt"]
    assert (tmp_path / "outside.txt").read_text() == "secret\n"


# -- gemini-interaction trajectories: the same actions, the report's own places -----------


def test_an_interaction_report_is_replayed_like_its_contents(tmp_path: Path) -> None:
    repo = notes_repo(tmp_path / "r")
    tools = {**DEFAULT_TOOLS, "apply_patch": _apply_patch}
    report = session(
        repo,
        model_turn(replace("c1", "NOTES.md", 3, 3, "alpha\n", "ALPHA\n")),
        model_turn(call("apply_patch", "c2", line="delta\n")),
        tools=tools,
    )
    v = verified(repo, to_interaction(report))
    result = v.checks["replay"]
    assert [f.code for f in result.findings] == ["profile.unknown_call"]
    # The step of the interaction that holds the call, not a contents the report lacks.
    assert result.findings[0].path is not None
    assert result.findings[0].path.startswith("trajectory.interaction.steps.")


def test_a_result_flagged_is_error_is_not_replayed(tmp_path: Path) -> None:
    """An interaction's ``is_error`` says the call failed, whatever its result holds."""
    repo = notes_repo(tmp_path / "r")
    report = to_interaction(
        session(repo, model_turn(replace("c1", "NOTES.md", 4, 4, "x\n", "y\n")))
    )
    steps = report["trajectory"]["interaction"]["steps"]
    result = next(s for s in steps if s["type"] == "function_result")
    result["result"] = {"ok": True}  # as if the harness said ok, and flagged the error
    result["is_error"] = True
    for entry in report["audit"]["entries"]:
        if entry.get("call_id") == "c1":
            entry["result_sha256"] = jcs_sha256({"ok": True})
    bodies = [
        {k: v for k, v in e.items() if k not in ("v", "session_id", "seq", "prev", "hash")}
        for e in report["audit"]["entries"]
    ]
    entries = seal(report["session_id"], bodies)
    report["audit"] = {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]}
    v = verified(repo, report)
    assert v.checks["replay"].status is CheckStatus.PASS, v.checks["replay"]
    assert v.checks["replay"].details["steps"] == 1
