"""`verifier verify --batch`: the command line in process (tests/support/cli.py) on a real
repository and store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.gitrepo import GitRepo
from tests.support.sessions import config_toml, fixed_session, to_bytes


def run(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("verify", *args, "--config", str(cfg))


def test_verify_batch_prints_one_summary_and_exits_with_the_worst_verdict(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config_toml(tmp_path, repo)
    report = fixed_session(repo).report()
    batch = tmp_path / "batch.jsonl"
    batch.write_text(to_bytes(report).decode() + "\n", encoding="utf-8")

    done = run(cfg, "--batch", str(batch), "--jobs", "1", "--no-store", "--format", "json")

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["sessions"], summary["resolved"], summary["resolved_rate"]) == (1, 1, 1.0)
    assert summary["results"][0]["stored"] == "not stored (--no-store)"

    batch.write_text(to_bytes(report).decode() + "\n{oops\n", encoding="utf-8")
    text = run(cfg, "--batch", str(batch), "--no-store")
    assert text.returncode == 2, text.stderr  # a line that is no session: refused, said
    assert "refused" in text.stdout and "line 2: not JSON" in text.stdout
    assert "resolved 1 of 1 judged (100%)" in text.stdout


def test_verify_batch_refuses_what_only_one_report_takes(repo: GitRepo, tmp_path: Path) -> None:
    cfg = config_toml(tmp_path, repo)
    batch = tmp_path / "batch.jsonl"
    batch.write_text("{}\n", encoding="utf-8")
    both = run(cfg, "report.json", "--batch", str(batch))
    assert both.returncode == 2 and "not both" in both.stderr
    repo_given = run(cfg, "--batch", str(batch), "--repo", str(repo.path))
    assert repo_given.returncode == 2 and "--repo: not with --batch" in repo_given.stderr
    jobs = run(cfg, "report.json", "--jobs", "2")
    assert jobs.returncode == 2 and "--jobs: only with --batch" in jobs.stderr
    neither = run(cfg)
    assert neither.returncode == 2 and "--batch FILE.jsonl" in neither.stderr
