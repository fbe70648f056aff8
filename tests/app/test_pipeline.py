"""The pipeline every face calls: submit, verify, record, on real repositories and stores."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, fixed_session, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.app.pipeline import Oversized, read_source, verify_file, verify_report, verify_session
from verifier.checks import registered
from verifier.checks.base import Context
from verifier.config import Config, RepositoryConfig
from verifier.errors import ConfigError, InvalidReport, SessionConflict
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding
from verifier.store import Store
from verifier.verify import verify


def config(repo: GitRepo, tmp_path: Path, command: tuple[str, ...] = tuple(PYTEST)) -> Config:
    repo_cfg = RepositoryConfig("calc", path=repo.path, test_command=command, test_timeout_s=60)
    url = f"sqlite:///{tmp_path / 'pipeline.sqlite3'}"
    return Config(database_url=url, repositories={"calc": repo_cfg})


def test_a_verified_report_is_stored_with_its_run_and_a_second_run_is_added(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config(repo, tmp_path)
    raw = to_bytes(fixed_session(repo).report())
    first = verify_report(raw, cfg)
    second = verify_report(raw, cfg)
    assert first.verification.delivery_status is DeliveryStatus.DELIVERED
    assert (first.exit_code, first.stored) == (0, f"stored as run {first.run_id}")
    assert second.run_id is not None and first.run_id is not None
    assert second.run_id > first.run_id
    with Store.open(cfg.database_url) as store:
        assert store.report_bytes("s-1") == raw
        assert [run.id for run in store.runs("s-1")] == [first.run_id, second.run_id]


def _processes_with(token: str) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if token in line and "ps -ww" not in line]


def test_a_trajectory_found_invalid_while_the_tests_run_cancels_them_and_keeps_the_bytes(
    repo: GitRepo, tmp_path: Path
) -> None:
    token = f"verifier-cancel-{uuid.uuid4().hex}"
    cfg = config(repo, tmp_path, ("{python}", "-c", "import time; time.sleep(120)", token))
    report = fixed_session(repo).report()
    report["trajectory"]["contents"][1]["parts"] = "not a list of parts"
    raw = to_bytes(report)
    with pytest.raises(InvalidReport) as info:
        verify_report(raw, cfg)
    assert info.value.field.startswith("trajectory.contents.1")
    assert _processes_with(token) == []  # the test run was killed, not waited for
    with Store.open(cfg.database_url) as store:
        assert store.sessions() == []  # never stored as a session...
    with Store.open(cfg.database_url) as store, store.transaction() as session:
        from verifier.store.models import RejectedReportModel

        (kept,) = session.query(RejectedReportModel).all()
        assert kept.report == raw  # ...but its bytes are kept, with why


def test_a_session_id_stored_with_other_bytes_is_refused_and_no_run_recorded(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config(repo, tmp_path)
    report = fixed_session(repo).report()
    verify_report(to_bytes(report), cfg)
    report["final_text"] = "rewritten afterwards"
    with pytest.raises(SessionConflict):
        verify_report(to_bytes(report), cfg)
    with Store.open(cfg.database_url) as store:
        assert len(store.runs("s-1")) == 1


def test_blob_digests_are_cached_in_the_store_and_read_back(repo: GitRepo, tmp_path: Path) -> None:
    """The second verification reads the digests the first stored: a wrong one shows."""
    writes = [
        call("write_file", f"w{i}", path=f"gen/f{i}.py", content=f"X = {i}\n") for i in range(70)
    ]
    turns = [model_turn(*writes), model_turn("Generated.")]
    session = run_session(repo.path, "s-gen", "Generate.", ScriptedModel(turns), commit=True)
    raw = to_bytes(session.report())
    cfg = config(repo, tmp_path)
    first = verify_report(raw, cfg).verification  # its tests fail: subtract() is not fixed
    assert first.checks["changes"].status is CheckStatus.PASS
    blob = repo.git("rev-parse", "HEAD:gen/f3.py")
    with Store.open(cfg.database_url) as store:
        cached = store.blob_digests([blob])
        claim = next(c for c in session.claims() if c["path"] == "gen/f3.py")
        assert cached == {blob: claim["sha256_after"]}
        store._engine.dispose()
    with Store.open(cfg.database_url) as store, store.transaction() as db:
        from verifier.store.models import BlobDigestModel

        db.get(BlobDigestModel, blob).sha256 = "0" * 64  # type: ignore[union-attr]
    again = verify_report(raw, cfg).verification
    codes = [f.code for f in again.checks["changes"].findings]
    assert codes == ["change.hash_mismatch"]


class Example:
    """A check nobody's renderer or store knows: registered by passing it along."""

    name = "example"
    reads: tuple[str, ...] = ("changes",)
    launches = False

    def run(self, context: Context) -> CheckResult:
        changes = context.results["changes"]
        return CheckResult.from_findings(
            "example", [Finding("example.seen", "seen")] if changes.findings else []
        )


def test_a_new_check_needs_no_column_and_no_renderer(repo: GitRepo, tmp_path: Path) -> None:
    from verifier.contract.report import parse_report
    from verifier.formats import render

    cfg = config(repo, tmp_path)
    report = parse_report(to_bytes(fixed_session(repo).report()))
    v = verify(report, cfg, checks=[*registered(), Example()])
    assert list(v.checks) == ["changes", "tests", "audit", "replay", "example"]
    with Store.open(cfg.database_url) as store:
        store.ingest(report)
        store.record_run(v)
        (run,) = store.runs("s-1")
    assert run.checks["example"] is CheckStatus.PASS
    assert "example" in render.verification_text(v, width=200)
    assert json.loads(render.verification_json(v))["checks"]["example"]["status"] == "pass"


def test_verify_file_reads_the_report_and_applies_the_command_lines_options(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config(repo, tmp_path)
    path = tmp_path / "report.json"
    path.write_bytes(to_bytes(fixed_session(repo).report()))
    failing = (sys.executable, "-c", "raise SystemExit(1)")
    outcome = verify_file(cfg, str(path), test_command=failing, store=False)
    assert outcome.stored == "not stored (--no-store)" and outcome.run_id is None
    assert outcome.verification.checks["tests"].status is CheckStatus.FAIL
    assert not (tmp_path / "pipeline.sqlite3").exists()


def test_read_source_reads_a_file_or_stdin_and_a_missing_file_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(b"{}")
    assert read_source(str(path), 10) == b"{}"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"from stdin")))
    assert read_source("-", 100) == b"from stdin"
    big = read_source(str(path), 1)
    assert isinstance(big, Oversized) and big.size == 2
    with pytest.raises(ConfigError, match="cannot read report"):
        read_source(str(tmp_path / "absent.json"), 10)


def test_a_stored_session_verified_again_is_judged_and_recorded_as_the_first_time(
    repo: GitRepo, tmp_path: Path
) -> None:
    """`verify_report` and `verify_session` share their sequence: the same verdict, and a
    run each."""
    cfg = config(repo, tmp_path)
    first = verify_report(to_bytes(fixed_session(repo).report()), cfg)
    with Store.open(cfg.database_url) as store:
        again = verify_session(store, "s-1", cfg, reason="reverify")
        runs = store.runs("s-1")
    assert again.verification.delivery_status is first.verification.delivery_status
    assert [run.id for run in runs] == [first.run_id, again.run_id]
    assert runs[-1].reason == "reverify" and again.stored == f"stored as run {again.run_id}"
