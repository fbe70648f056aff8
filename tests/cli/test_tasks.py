"""`verifier task add|list|show`, and `verify` of a report naming a task nobody declared:
the command line in process (`cli.run`, what the `verifier` script runs) on a real store;
tests/cli/test_cli.py runs it as a subprocess for the exit codes a script sees."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.gitrepo import GitRepo
from tests.support.sessions import config_toml, fixed_session, to_bytes

SUBTRACT = "tests/test_calc.py::test_subtract"


def run(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--config", str(cfg))


def store_config(tmp_path: Path, repo: GitRepo) -> Path:
    cfg = config_toml(tmp_path, repo)
    text = cfg.read_text(encoding="utf-8").replace(
        "[verifier]\n", f'[verifier]\ndatabase_url = "sqlite:///{tmp_path / "s.sqlite3"}"\n'
    )
    cfg.write_text(text, encoding="utf-8")
    return cfg


def test_a_task_is_added_listed_and_shown_and_replaced_only_on_purpose(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = store_config(tmp_path, repo)
    (tmp_path / "tasks.toml").write_text("[tasks.explain]\nread_only = true\n", encoding="utf-8")

    added = run(cfg, "task", "add", "calc-7", "--fail-to-pass", SUBTRACT, "--repository", "calc")
    assert added.returncode == 0, added.stderr
    assert "task calc-7 stored" in added.stdout and SUBTRACT in added.stdout
    again = run(cfg, "task", "add", "calc-7", "--fail-to-pass", SUBTRACT, "--repository", "calc")
    assert again.returncode == 0 and "already stored as given" in again.stdout

    other = run(cfg, "task", "add", "calc-7", "--fail-to-pass", "tests/test_calc.py::test_add")
    assert other.returncode == 2
    assert "task_conflict" in other.stderr and "--replace" in other.stderr

    listed = json.loads(run(cfg, "task", "list", "--format", "json").stdout)
    assert [(t["task_id"], t["source"]) for t in listed["tasks"]] == [
        ("calc-7", "store"),
        ("explain", "file"),
    ]
    shown = json.loads(run(cfg, "task", "show", "calc-7", "--format", "json").stdout)
    assert (shown["fail_to_pass"], shown["repository"]) == ([SUBTRACT], "calc")

    replaced = run(cfg, "task", "add", "calc-7", "--pass-to-pass", SUBTRACT, "--replace")
    assert replaced.returncode == 0, replaced.stderr
    shown = json.loads(run(cfg, "task", "show", "calc-7", "--format", "json").stdout)
    assert (shown["fail_to_pass"], shown["pass_to_pass"]) == ([], [SUBTRACT])

    text = run(cfg, "task", "list").stdout
    assert "explain" in text and "tasks file" in text and "calc-7" in text


def test_a_bad_task_is_refused_naming_the_option(repo: GitRepo, tmp_path: Path) -> None:
    cfg = store_config(tmp_path, repo)
    done = run(cfg, "task", "add", "calc-7", "--fail-to-pass", SUBTRACT, "--read-only")
    assert done.returncode == 2
    assert "read_only" in done.stderr and "cannot have acceptance tests" in done.stderr
    missing = run(cfg, "task", "show", "calc-9")
    assert missing.returncode == 2 and "'calc-9'" in missing.stderr


def test_verify_of_a_report_naming_an_undeclared_task_exits_3_and_stores_nothing(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = store_config(tmp_path, repo)
    report = fixed_session(repo).report()
    report["task_id"] = "calc-404"
    path = tmp_path / "report.json"
    path.write_bytes(to_bytes(report))

    done = run(cfg, "verify", str(path))

    assert done.returncode == 3, done.stderr
    assert "unknown_task" in done.stderr and "'calc-404'" in done.stderr
    listed = run(cfg, "list", "--format", "json")
    assert json.loads(listed.stdout)["sessions"] == []
