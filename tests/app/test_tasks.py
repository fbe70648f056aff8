"""Tasks in the command layer: the tasks file and the store, and the one resolution of the
task a report names, on real repositories and real stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.report_factory import make_report_bytes
from tests.support.sessions import PYTEST, fixed_session, to_bytes
from verifier.app import tasks
from verifier.app.pipeline import submit, verify_report
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.errors import BadRequest, ConfigError, NotFound, UnknownTask
from verifier.findings import DeliveryStatus
from verifier.store import Store
from verifier.tasks import Task

SUBTRACT = "tests/test_calc.py::test_subtract"


def config(
    repo: GitRepo, tmp_path: Path, tasks_toml: str | None = None, **repo_keys: Any
) -> Config:
    """`calc` registered with its tests; a tasks file beside the configuration when given."""
    if tasks_toml is not None:
        (tmp_path / "tasks.toml").write_text(tasks_toml, encoding="utf-8")
    repo_cfg = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60, **repo_keys
    )
    return Config(
        database_url=f"sqlite:///{tmp_path / 'store.sqlite3'}",
        repositories={"calc": repo_cfg},
        source=tmp_path / "verifier.toml",
    )


def stored_sessions(cfg: Config) -> tuple[list[str], int]:
    with Store.open(cfg.database_url) as store:
        return [s.session.session_id for s in store.sessions()], len(store.rejected())


def test_a_report_naming_an_undeclared_task_is_refused_and_nothing_is_stored(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config(repo, tmp_path, "[tasks.calc-7]\n")
    report = fixed_session(repo).report()
    report["task_id"] = "calc-8"
    with pytest.raises(UnknownTask) as caught:
        verify_report(to_bytes(report), cfg)
    assert caught.value.field == "task_id" and caught.value.exit_code == 3
    assert "'calc-8'" in caught.value.problem and "nothing was stored" in caught.value.problem
    assert stored_sessions(cfg) == ([], 0)
    # The API's path: the same refusal, before the session is stored.
    with Store.open(cfg.database_url) as store, pytest.raises(UnknownTask):
        submit(store, to_bytes(report), "api", config=cfg)
    assert stored_sessions(cfg) == ([], 0)


def test_a_task_declared_for_another_repository_is_refused(repo: GitRepo, tmp_path: Path) -> None:
    cfg = config(repo, tmp_path, '[tasks.calc-7]\nrepository = "other"\n')
    raw = make_report_bytes("s-1", task_id="calc-7")
    with Store.open(cfg.database_url) as store, pytest.raises(UnknownTask) as caught:
        submit(store, raw, "api", config=cfg)
    assert "repository 'other'" in caught.value.problem
    assert "as repository 'calc'" in caught.value.problem
    assert stored_sessions(cfg) == ([], 0)


def test_the_tasks_file_wins_over_the_store_and_the_verdict_says_which_task_counted(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config(repo, tmp_path, f'[tasks.calc-7]\nfail_to_pass = ["{SUBTRACT}"]\n')
    (tmp_path / "tasks.toml").rename(tmp_path / "later.toml")
    tasks.add(cfg, "calc-7", pass_to_pass=[SUBTRACT], actor="cli:ops")
    (tmp_path / "later.toml").rename(tmp_path / "tasks.toml")
    report = fixed_session(repo).report()
    report["task_id"] = "calc-7"

    outcome = verify_report(to_bytes(report), cfg)

    notes = outcome.verification.notes
    assert any(n.startswith("task 'calc-7' (from the tasks file") for n in notes), notes
    assert any("1 acceptance test, 0 must-keep" in n for n in notes), notes
    with Store.open(cfg.database_url) as store:
        assert store.get_session("s-1").task_id == "calc-7"
    view = tasks.show(cfg, "calc-7")
    assert (view.source, view.task.fail_to_pass) == ("file", (SUBTRACT,))


def test_a_stored_task_is_resolved_when_the_file_does_not_declare_it(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config(repo, tmp_path)
    tasks.add(cfg, "calc-7", repository="calc", fail_to_pass=[SUBTRACT], actor="cli:ops")
    with Store.open(cfg.database_url) as store:
        resolved = tasks.resolve(cfg, parse_report(make_report_bytes(task_id="calc-7")), store)
    assert resolved.task == Task("calc-7", "calc", (SUBTRACT,))
    assert resolved.notes == ("task 'calc-7' (from the store): 1 acceptance test, 0 must-keep",)
    # Without an open store (--no-store), the configured one is read for it.
    assert tasks.resolve(cfg, parse_report(make_report_bytes(task_id="calc-7")), None) == resolved


def test_a_reports_read_only_claim_never_makes_a_task_read_only_by_itself(
    repo: GitRepo, tmp_path: Path
) -> None:
    claim = parse_report(make_report_bytes(task_read_only=True))
    strict = config(repo, tmp_path)
    refused = tasks.resolve(strict, claim, None)
    assert refused.task is None
    assert "not counted" in refused.notes[0] and "allow_read_only_claims" in refused.notes[0]

    lax = config(repo, tmp_path, allow_read_only_claims=True)
    allowed = tasks.resolve(lax, claim, None)
    assert allowed.task == Task(None, "calc", read_only=True)

    # The operator's task wins over the claim, whatever the policy.
    tasks.add(lax, "calc-7", fail_to_pass=[SUBTRACT], actor="cli:ops")
    named = parse_report(make_report_bytes(task_id="calc-7", task_read_only=True))
    operator = tasks.resolve(lax, named, None)
    assert operator.task is not None and not operator.task.read_only
    assert "not counted, the operator's task 'calc-7' is not read-only" in operator.notes[1]
    # No task and no claim: judged as before, nothing noted.
    assert tasks.resolve(strict, parse_report(make_report_bytes()), None) == tasks.Resolved(None)


def test_a_task_the_file_declares_cannot_be_added_to_the_store(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config(repo, tmp_path, "[tasks.calc-7]\nread_only = true\n")
    with pytest.raises(BadRequest) as caught:
        tasks.add(cfg, "calc-7", fail_to_pass=[SUBTRACT], actor="cli:ops")
    assert caught.value.field == "task_id" and "tasks file" in caught.value.problem
    assert [view.task.id for view in tasks.tasks(cfg)] == ["calc-7"]


def test_tasks_lists_the_files_then_the_stores_and_show_names_a_missing_one(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config(repo, tmp_path, "[tasks.b-file]\nread_only = true\n")
    # No store yet: the file's tasks alone.
    assert [(v.task.id, v.source) for v in tasks.tasks(cfg)] == [("b-file", "file")]
    tasks.add(cfg, "a-store", fail_to_pass=[SUBTRACT], actor="cli:ops")
    views = tasks.tasks(cfg)
    assert [(v.task.id, v.source) for v in views] == [("a-store", "store"), ("b-file", "file")]
    assert views[0].to_dict()["added_by"] == "cli:ops"
    assert views[1].to_dict()["path"] == str(tmp_path / "tasks.toml")
    with pytest.raises(NotFound, match="'c-none'"):
        tasks.show(cfg, "c-none")


def test_a_named_tasks_file_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    cfg = Config(tasks_file=tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="does not exist"):
        tasks.tasks(cfg)


def test_an_honest_session_naming_no_task_is_judged_as_before(
    repo: GitRepo, tmp_path: Path
) -> None:
    cfg = config(repo, tmp_path, "[tasks.calc-7\n")  # a broken file nobody needs is not read
    outcome = verify_report(to_bytes(fixed_session(repo).report()), cfg, store=False)
    assert outcome.verification.delivery_status is DeliveryStatus.DELIVERED
    assert not any("task" in note for note in outcome.verification.notes)
