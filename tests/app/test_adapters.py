"""Shadow mode and the migration inventory, over a real store of real sessions.

Sessions are recorded by the reference harness on a real repository and
ingested into a real SQLite store; the commands run through the command line.
A second profile, `renamed`, speaks another vocabulary, the way a provider's
does after it changes: a field renamed, an operation dropped, an action changed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.pg import (
    NO_POSTGRES,
    POSTGRES_URL,
    migrated_postgres_database,
)
from tests.support.sessions import fix_turns, to_bytes, to_interaction
from verifier import resources
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.app import adapters
from verifier.cli import run
from verifier.config import Config
from verifier.contract.profiles import ActionKind, load_profile
from verifier.contract.report import parse_report
from verifier.errors import NotFound
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Verification
from verifier.store import Store
from verifier.store.maintenance import prune

RENAMED = """\
name = "renamed"

[functions.read_file]
action = "read"
args = { path = "path", start_line = "start_line", end_line = "end_line" }
required = ["path"]

[functions.replace_lines]
action = "replace"
args.path = "path"
args.start_line = "start_line"
args.end_line = "end_line"
args.expected = "expected"
args.replacement = "replacement"
required = ["path", "start_line", "end_line", "expected", "replacement"]

[functions.write_file]
action = "write"
args = { path = "file_path", content = "content" }
required = ["path", "content"]

[functions.run_command]
action = "read"
args = { command = "command" }
required = ["command"]
"""


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    folder = tmp_path / "profiles"
    folder.mkdir()
    shutil.copy(resources.profiles_dir() / "default.toml", folder / "default.toml")
    (folder / "renamed.toml").write_text(RENAMED, encoding="utf-8")
    return folder


@pytest.fixture
def config(tmp_path: Path, profiles: Path) -> Path:
    path = tmp_path / "verifier.toml"
    path.write_text(f"[verifier]\nprofiles_dir = {json.dumps(str(profiles))}\n", encoding="utf-8")
    return path


def record(repo: GitRepo, sid: str, turns: list[Any], start: datetime) -> dict[str, Any]:
    session = run_session(repo.path, sid, "Task.", ScriptedModel(turns), start=start)
    return session.report()


NOV_29 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
NOV_01 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The store the commands read: a real SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield os.environ["VERIFIER_DATABASE_URL"]
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with migrated_postgres_database(POSTGRES_URL) as url:
        monkeypatch.setenv("VERIFIER_DATABASE_URL", url)
        yield url


@pytest.fixture
def stored(repo: GitRepo, db_url: str) -> Iterator[Store]:
    """Three sessions in the store: a fix, a write and a command, and an old pruned one."""
    fix = record(repo, "s-fix", fix_turns(), NOV_29)
    write = record(
        repo,
        "s-write",
        [
            model_turn(
                call("write_file", "w1", path="notes.txt", content="é\r\n"),
                call("run_command", "w2", command=["git", "status"]),
                call("list_files", "w3", path="."),
            ),
            model_turn(call("web_fetch", "w4", url="https://example.invalid/")),
            model_turn("Done."),
        ],
        NOV_29 + timedelta(hours=1),
    )
    old = record(repo, "s-old", fix_turns(), NOV_01)
    with Store.open(db_url) as store:
        for report in (fix, to_interaction(write), old):
            store.ingest(parse_report(to_bytes(report)))
        started = datetime(2026, 11, 2, tzinfo=UTC)
        store.record_run(
            Verification(
                "s-old",
                "done",
                True,
                DeliveryStatus.DELIVERED,
                {"changes": CheckResult("changes", CheckStatus.PASS)},
                started,
                started + timedelta(seconds=1),
                "0.1",
            )
        )
        prune(store, datetime(2026, 11, 15, tzinfo=UTC), actor="test", now=NOV_29)
        yield store


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = run([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_profile_against_itself_agrees_and_exits_0(
    stored: Store, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(
        capsys, "adapters", "shadow", "--old", "default", "--new", "default",
        "--format", "json", "--config", config,
    )  # fmt: skip
    data = json.loads(out)

    assert code == 0
    assert data["agree"] is True
    assert (data["sessions"], data["calls"], data["skipped_pruned"]) == (2, 6, 1)
    assert data["pruned"] == ["s-old"]
    # web_fetch is known to neither: reported, and no disagreement.
    (only,) = data["calls_differing"]
    assert (only["call_id"], only["matters"]) == ("w4", False)
    assert only["differences"][0]["kind"] == "unrecognised_by_both"


def test_every_difference_between_two_vocabularies_is_reported_and_exits_1(
    stored: Store, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(
        capsys, "adapters", "shadow", "--old", "default", "--new", "renamed",
        "--format", "json", "--config", config,
    )  # fmt: skip
    data = json.loads(out)
    by_call = {d["call_id"]: d for d in data["calls_differing"]}
    kinds = {cid: {(x["kind"], x["field"]) for x in d["differences"]} for cid, d in by_call.items()}

    assert code == 1
    assert data["agree"] is False
    # write_file reads its path from `file_path` now: missing for the new profile, `path`
    # no longer read, the normalised path gone.
    assert kinds["w1"] == {
        ("missing_field", "file_path"),
        ("extra_field", "path"),
        ("value", "path"),
    }
    assert by_call["w1"]["new"]["problems"] and not by_call["w1"]["old"]["problems"]
    missing = next(x for x in by_call["w1"]["differences"] if x["kind"] == "missing_field")
    assert (missing["old"], missing["new"]) == ("present", "missing")
    extra = next(x for x in by_call["w1"]["differences"] if x["kind"] == "extra_field")
    assert (extra["old"], extra["new"]) == ("read", "ignored")
    assert by_call["w1"]["location"] == "trajectory.interaction.steps.1"
    # run_command became a read (and, where profiles declare permissions, needs another one)
    assert kinds["w2"] - {("permission", None)} == {("action", None)}
    assert by_call["w2"]["old"]["kind"] == "run" and by_call["w2"]["new"]["kind"] == "read"
    assert kinds["w3"] == {("unrecognised", None)}  # list_files dropped
    assert by_call["w3"]["differences"][0]["new"] == "unknown"
    assert not by_call["w4"]["matters"]
    # The fix session reads the same under both: read_file and replace_lines did not change.
    assert "c1" not in by_call and "c2" not in by_call
    assert data["disagreements"] == 3


def test_the_text_view_is_a_table_of_differences_and_a_verdict_line(
    stored: Store, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(
        capsys, "adapters", "shadow", "--old", "default", "--new", "renamed", "--config", config
    )

    assert code == 1
    assert "missing_field" in out and "file_path" in out and "unrecognised" in out
    assert "1 pruned sessions skipped" in out
    assert "profiles default and renamed disagree on 3 calls" in out


def test_session_and_since_select_the_sessions_compared(
    stored: Store, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["adapters", "shadow", "--old", "default", "--new", "renamed", "--format", "json"]
    code, out, _ = cli(capsys, *base, "--session", "s-fix", "--config", config)
    assert (code, json.loads(out)["sessions"], json.loads(out)["calls_differing"]) == (0, 1, [])

    code, out, _ = cli(capsys, *base, "--since", "2026-11-29T10:30:00Z", "--config", config)
    assert code == 1
    assert {d["session_id"] for d in json.loads(out)["calls_differing"]} == {"s-write"}
    assert json.loads(out)["sessions"] == 1

    code, out, _ = cli(capsys, *base, "--session", "s-old", "--config", config)
    assert code == 0
    assert (json.loads(out)["sessions"], json.loads(out)["pruned"]) == (0, ["s-old"])


def test_an_unknown_profile_is_a_usage_error_naming_it(
    stored: Store, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(
        capsys, "adapters", "shadow", "--old", "default", "--new", "v3", "--config", config
    )

    assert code == 2
    assert out == ""
    assert "tool profile 'v3'" in err


def test_usage_errors_exit_2(
    stored: Store, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["adapters", "shadow", "--old", "default", "--new", "renamed", "--config", config]
    assert cli(capsys, *base, "--since", "yesterday")[0] == 2
    assert cli(capsys, *base, "--since", "2026-11-01", "--session", "s-fix")[0] == 2
    code, _, err = cli(capsys, *base, "--session", "s-nope")
    assert code == 2 and "s-nope" in err
    assert cli(capsys, "adapters", "shadow", "--old", "default", "--config", config)[0] == 2


def test_inventory_lists_names_and_shapes_with_counts_and_coverage(
    stored: Store, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "adapters", "inventory", "--format", "json", "--config", config)
    data = json.loads(out)
    shapes = {(s["name"], tuple(s["shape"])): s for s in data["shapes"]}

    assert code == 0
    assert data["profiles"] == ["default", "renamed"]
    assert (data["sessions"], data["skipped_pruned"]) == (2, 1)
    write = shapes[("write_file", ("content:string", "path:string"))]
    assert (write["calls"], write["sessions"]) == (1, 1)
    assert write["known_by"] == ["default", "renamed"]
    assert write["covered_by"] == ["default"]  # renamed refuses it: no `file_path`
    assert shapes[("run_command", ("command:array",))]["covered_by"] == ["default", "renamed"]
    assert shapes[("list_files", ("path:string",))]["known_by"] == ["default"]
    fetch = shapes[("web_fetch", ("url:string",))]
    assert (fetch["known_by"], fetch["covered_by"]) == ([], [])
    replace = shapes[
        (
            "replace_lines",
            (
                "end_line:integer",
                "expected:string",
                "path:string",
                "replacement:string",
                "start_line:integer",
            ),
        )
    ]
    assert replace["covered_by"] == ["default", "renamed"]


def test_inventory_text_marks_what_no_profile_covers(
    stored: Store, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "adapters", "inventory", "--config", config)

    assert code == 0
    line = next(row for row in out.splitlines() if "web_fetch" in row)
    assert "none" in line
    assert "refused by renamed" in out
    assert "1 pruned sessions skipped" in out


def test_an_empty_store_agrees_and_lists_nothing(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(
        capsys, "adapters", "shadow", "--old", "default", "--new", "renamed",
        "--format", "json", "--config", config,
    )  # fmt: skip
    assert code == 0 and json.loads(out)["sessions"] == 0
    code, out, _ = cli(capsys, "adapters", "inventory", "--format", "json", "--config", config)
    assert code == 0 and json.loads(out)["shapes"] == []


def test_compare_reads_a_line_base_change_as_a_value_difference(
    repo: GitRepo, profiles: Path
) -> None:
    """A profile that renames a line field reads the same call to other parameters."""
    renamed = RENAMED.replace('args.start_line = "start_line"', 'args.start_line = "from"')
    (profiles / "zero.toml").write_text(renamed, encoding="utf-8")
    report = parse_report(to_bytes(record(repo, "s-z", fix_turns(), NOV_29)))
    replace = report.trajectory.calls[1]

    old, new, differences = adapters.compare(
        load_profile(profiles, "default"), load_profile(profiles, "zero"), replace
    )

    assert old.kind is new.kind is ActionKind.REPLACE
    assert {(d.kind, d.field) for d in differences} == {
        ("missing_field", "from"),
        ("extra_field", "start_line"),
        ("value", "start_line"),
    }
    assert all(d.matters for d in differences)


def test_the_command_runs_as_a_real_process(stored: Store, config: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "verifier", "adapters", "shadow", "--old", "default",
         "--new", "renamed", "--format", "json", "--config", str(config)],
        capture_output=True, text=True, env=os.environ.copy(), timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["disagreements"] == 3


def test_shadow_and_inventory_read_the_configured_store_and_profiles(
    stored: Store, config: Path
) -> None:
    cfg = Config.load(config)
    shadowed = adapters.shadow(cfg, "default", "renamed", ("s-write",))
    assert shadowed.scan.sessions == 1 and shadowed.exit_code == 1
    since = adapters.shadow(cfg, "default", "default", since=NOV_29)
    assert since.scan.sessions == 2 and since.exit_code == 0
    taken = adapters.inventory(cfg)
    assert taken.profiles == ("default", "renamed") and taken.scan.pruned == ["s-old"]


def test_no_store_yet_reads_no_session_and_says_why_and_a_session_named_is_not_found(
    tmp_path: Path, profiles: Path
) -> None:
    cfg = Config.from_mapping(
        {
            "verifier": {
                "database_url": f"sqlite:///{tmp_path / 'none.sqlite3'}",
                "profiles_dir": str(profiles),
            }
        }
    )
    said: list[str] = []
    assert adapters.shadow(cfg, "default", "renamed", notice=said.append).scan.sessions == 0
    assert adapters.inventory(cfg, notice=said.append).shapes == ()
    assert len(said) == 2 and all("no store at" in line for line in said)
    with pytest.raises(NotFound, match="'s-1' is not stored"):
        adapters.shadow(cfg, "default", "renamed", ("s-1",))
