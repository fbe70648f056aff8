"""Silent failures of a dispatcher that misreads the model's vocabulary (issue 8).

Each harness below is buggy, and records faithfully what it did: the audit
effects are the hashes of what it wrote, the claims are those effects, the
commit holds those bytes, and the tests pass (the edits are to notes the tests
do not read). Changes, tests and audit all pass; only the model's own requests,
replayed, show the work is not what was asked. Each must be NOT delivered.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.messages import repetitions
from tests.support.sessions import BASE, CALC, PYTEST, to_bytes
from verifier._internal.snapshot import temp_parent
from verifier.agent.harness import DEFAULT_TOOLS, ScriptedModel, Tool, call, model_turn, run_session
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckStatus, DeliveryStatus, Verification
from verifier.formats.gate import finding_line
from verifier.verify import Options, verify

FIXED = CALC.replace("subtract(a, b):\n    return a + b", "subtract(a, b):\n    return a - b")
NOTES = "# Notes\n\nalpha\nbeta\ngamma\n"


def lines(root: Path, args: Mapping[str, Any]) -> tuple[Path, list[str], int, int]:
    path = root / str(args["path"])
    return path, path.read_text().splitlines(True), int(args["start_line"]), int(args["end_line"])


def off_by_one(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """Reads the 1-based range as 0-based: overwrites the line after the one asked for."""
    path, text, start, end = lines(root, args)
    text[start : end + 1] = [args["replacement"]]
    path.write_text("".join(text))
    return {"ok": True}


def whole_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """Still speaks write_file(path, content): the replacement becomes the file."""
    (root / str(args["path"])).write_text(str(args["replacement"]))
    return {"ok": True}


def unchecked(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """Never compares the expected text: stale line numbers land where they point."""
    path, text, start, end = lines(root, args)
    text[start - 1 : end] = [args["replacement"]]
    path.write_text("".join(text))
    return {"ok": True}


def skipping(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """Does not know the operation and says it did it."""
    return {"ok": True}


def run(repo: GitRepo, replace_lines: Tool, *turns: Any) -> Verification:
    tools = {**DEFAULT_TOOLS, "replace_lines": replace_lines}
    model = ScriptedModel([*turns, model_turn("Done.")])
    report = run_session(repo.path, "s-bad", "Edit notes.", model, tools=tools, commit=True)
    cfg = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    config = Config(repositories={"calc": cfg})
    return verify(parse_report(to_bytes(report.report())), config, Options(repo.path))


def edit(cid: str, start: int, end: int, expected: str, new: str) -> Any:
    return call(
        "replace_lines",
        cid,
        path="NOTES.md",
        start_line=start,
        end_line=end,
        expected=expected,
        replacement=new,
    )


@pytest.fixture
def notes(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "r")
    repo.commit({**BASE, "calc.py": FIXED, "NOTES.md": NOTES}, "base")
    return repo


def caught_by_replay_alone(v: Verification, code: str) -> str:
    """Every other check passes, replay fails with `code`; its message."""
    statuses = {name: result.status for name, result in v.checks.items()}
    assert statuses == {
        "changes": CheckStatus.PASS,
        "tests": CheckStatus.PASS,
        "audit": CheckStatus.PASS,
        "replay": CheckStatus.FAIL,
    }, v.to_dict()["checks"]
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    (finding,) = v.checks["replay"].findings
    assert finding.code == code
    assert finding.path == "NOTES.md"
    return finding.message


def test_an_edit_that_overwrote_the_wrong_range(notes: GitRepo) -> None:
    v = run(notes, off_by_one, model_turn(edit("c1", 4, 4, "beta\n", "BETA\n")))
    assert (notes.path / "NOTES.md").read_text() == "# Notes\n\nalpha\nbeta\nBETA\n"
    message = caught_by_replay_alone(v, "replay.mismatch")
    assert "first differing line: 4 (replayed 'BETA', found 'beta')" in message
    # Where the replay stands is the request, said once; the path once.
    assert message.startswith("NOTES.md: after call 'c1'") and message.count("NOTES.md") == 1
    (finding,) = v.checks["replay"].findings
    assert repetitions(message, finding) == []
    assert repetitions(finding_line(finding), finding) == []


def test_a_bounded_replace_carried_out_as_a_whole_file_write(notes: GitRepo) -> None:
    v = run(notes, whole_file, model_turn(edit("c1", 4, 4, "beta\n", "BETA\n")))
    assert (notes.path / "NOTES.md").read_text() == "BETA\n"
    message = caught_by_replay_alone(v, "replay.whole_file_write")
    assert "'c1'" in message and "whole file" in message


def test_a_replace_applied_at_stale_line_numbers(notes: GitRepo) -> None:
    v = run(
        notes,
        unchecked,
        # c1 inserts a line at the top; c2 still counts "gamma" as line 5 (it is 6 now).
        model_turn(edit("c1", 1, 1, "# Notes\n", "# Notes\n# (draft)\n")),
        model_turn(edit("c2", 5, 5, "gamma\n", "GAMMA\n")),
    )
    caught_by_replay_alone(v, "replay.expected_mismatch")
    (finding,) = v.checks["replay"].findings
    assert (finding.expected, finding.found) == ("'gamma\\n'", "'beta\\n'")
    assert "'c2'" in finding.message


def test_an_edit_answered_as_done_and_skipped(notes: GitRepo) -> None:
    # The session also writes a file honestly: it is not empty (change.empty_session would
    # catch that alone), and only the replay sees that the edit was never carried out.
    v = run(
        notes,
        skipping,
        model_turn(call("write_file", "c0", path="CHANGES.md", content="- beta is BETA\n")),
        model_turn(edit("c1", 4, 4, "beta\n", "BETA\n")),
    )
    assert (notes.path / "NOTES.md").read_text() == NOTES
    caught_by_replay_alone(v, "replay.skipped")


def test_the_same_sessions_by_an_honest_harness_are_delivered(notes: GitRepo) -> None:
    v = run(
        notes,
        DEFAULT_TOOLS["replace_lines"],
        model_turn(edit("c1", 1, 1, "# Notes\n", "# Notes\n# (draft)\n")),
        model_turn(edit("c2", 6, 6, "gamma\n", "GAMMA\n"), edit("c3", 4, 4, "alpha\n", "A\n")),
    )
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()["checks"]
    assert v.checks["replay"].details["steps"] == 3


def test_a_recorded_effect_that_is_not_what_the_harness_wrote(notes: GitRepo) -> None:
    """The trail lies about one step and the head agrees with the lie's end: still caught."""
    tools = {**DEFAULT_TOOLS}
    model = ScriptedModel(
        [
            model_turn(edit("c1", 4, 4, "beta\n", "BETA\n")),
            model_turn(edit("c2", 4, 4, "BETA\n", "beta\n")),
            model_turn("Done."),
        ]
    )
    session = run_session(notes.path, "s-lie", "Edit.", model, tools=tools, commit=True)
    # The first effect claims another result; both effects still chain to base and head.
    forged = {**session.bodies[1]["effects"][0], "sha256_after": "0" * 64}
    session.bodies[1]["effects"] = [forged]
    session.bodies[2]["effects"] = [{**session.bodies[2]["effects"][0], "sha256_before": "0" * 64}]
    cfg = RepositoryConfig("calc", path=notes.path, test_command=tuple(PYTEST), test_timeout_s=60)
    v = verify(
        parse_report(to_bytes(session.report())),
        Config(repositories={"calc": cfg}),
        Options(notes.path),
    )
    assert v.checks["replay"].status is CheckStatus.FAIL
    assert [f.code for f in v.checks["replay"].findings] == ["replay.mismatch"]
    assert "recorded effect" in v.checks["replay"].findings[0].message


# Class 11 (issue 16): replay without a budget. A report of many one-line bounded
# replaces on a multi-MB file cost a rejoin and a hash of the whole file per call.
DATA = "".join(f"row {n:06d} {n * 7919 % 1000003:07d}\n" for n in range(500_000))  # ~10 MB
CALLS = 30  # x 10 MB: past what replay hashes after every step (Budget.exact_bytes)


@pytest.fixture
def data_repo(tmp_path: Path) -> Iterator[GitRepo]:
    """In memory when there is room: the harness writes the 10 MB file once per call."""
    with tempfile.TemporaryDirectory(dir=temp_parent(64 << 20) or tmp_path) as folder:
        repo = GitRepo(Path(folder) / "r")
        repo.commit({**BASE, "calc.py": FIXED, "DATA.txt": DATA}, "base")
        yield repo


def data_edit(cid: str, line: int, expected: str, new: str) -> Any:
    return call(
        "replace_lines",
        cid,
        path="DATA.txt",
        start_line=line,
        end_line=line,
        expected=expected,
        replacement=new,
    )


def budgeted(repo: GitRepo, *turns: Any, **config: Any) -> Verification:
    model = ScriptedModel([*turns, model_turn("Done.")])
    report = run_session(repo.path, "s-big", "Edit data.", model, commit=True)
    cfg = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    return verify(
        parse_report(to_bytes(report.report())),
        Config(repositories={"calc": cfg}, **config),
        Options(repo.path),
    )


def test_many_one_line_replaces_on_a_large_file_cost_a_few_file_sizes(
    data_repo: GitRepo,
) -> None:
    """The issue's example, honest: delivered, and replay's work does not grow with the
    calls times the file's size (30 calls x 10 MB would be 600 MB hashed)."""
    rows = DATA.splitlines(True)
    calls = [
        data_edit(f"c{n}", 1 + n * 9973, rows[n * 9973], rows[n * 9973].upper())
        for n in range(CALLS)
    ]
    v = budgeted(data_repo, model_turn(*calls))
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()["checks"]
    details = v.checks["replay"].details
    assert details["steps"] == CALLS
    assert details["work_bytes"] <= 6 * len(DATA)


def test_replaces_by_text_past_the_work_budget_are_inconclusive(data_repo: GitRepo) -> None:
    """Each replace by text scans the whole file: the work budget stops the replay."""
    calls = [
        call("edit_file", f"t{n}", path="DATA.txt", old_text=f"row {n:06d} ", new_text=f"ROW {n} ")
        for n in range(20)
    ]
    v = budgeted(data_repo, model_turn(*calls), replay_max_work_bytes=20 * len(DATA))
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE
    replay = v.checks["replay"]
    assert replay.status is CheckStatus.ERROR
    assert [(f.code, f.path, f.found) for f in replay.findings] == [
        ("replay.budget_exceeded", "DATA.txt", "work")
    ]


def test_a_file_grown_past_the_replayable_size_is_inconclusive(data_repo: GitRepo) -> None:
    """Writes that grow a file past `replay_max_file_bytes`: not rebuilt, and not passed."""
    v = budgeted(
        data_repo,
        model_turn(call("write_file", "w1", path="GROWN.txt", content="x\n" * 100_000)),
        replay_max_file_bytes=100_000,
    )
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE
    assert [(f.code, f.path, f.found) for f in v.checks["replay"].findings] == [
        ("replay.budget_exceeded", "GROWN.txt", "file size")
    ]


def test_a_wrong_range_among_many_replaces_on_a_large_file_is_still_caught(
    data_repo: GitRepo,
) -> None:
    """Where the per-call hashes are skipped (a large file), a harness that writes one
    call's edit elsewhere is still not delivered."""
    rows = DATA.splitlines(True)
    calls = [
        data_edit(f"c{n}", 1 + n * 9973, rows[n * 9973], rows[n * 9973].upper())
        for n in range(CALLS)
    ]
    tools = {**DEFAULT_TOOLS, "replace_lines": off_by_one}
    model = ScriptedModel([model_turn(*calls), model_turn("Done.")])
    report = run_session(data_repo.path, "s-big", "Edit.", model, tools=tools, commit=True)
    cfg = RepositoryConfig(
        "calc", path=data_repo.path, test_command=tuple(PYTEST), test_timeout_s=60
    )
    v = verify(
        parse_report(to_bytes(report.report())),
        Config(repositories={"calc": cfg}),
        Options(data_repo.path),
    )
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    (finding,) = v.checks["replay"].findings
    assert (finding.code, finding.path) == ("replay.mismatch", "DATA.txt")
    assert "'c0'" in finding.message
