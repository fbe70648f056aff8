"""Tasks in the store: added once, replaced only on purpose, each act in the admin log; the
task a session names kept with it. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.report_factory import make_report_bytes
from verifier.contract.report import parse_report
from verifier.errors import TaskConflict
from verifier.store import Store
from verifier.store.tasks import add_task, get_task, list_tasks
from verifier.store.tokens import admin_log
from verifier.tasks import Task

CALC_7 = Task("calc-7", "calc", ("tests/test_calc.py::test_subtract",), ("tests/t.py::é",))


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store.open(db_url) as opened:
        yield opened


def test_a_task_added_reads_back_as_declared_with_who_added_it(store: Store) -> None:
    row, added = add_task(store, CALC_7, actor="cli:ops")
    assert added
    assert (row.task, row.added_by) == (CALC_7, "cli:ops")
    found = get_task(store, "calc-7")
    assert found is not None and found.task == CALC_7
    assert get_task(store, "calc-8") is None
    add_task(store, Task("a-first", read_only=True), actor="cli:ops")
    assert [r.task.id for r in list_tasks(store)] == ["a-first", "calc-7"]
    # The admin log, newest first, holds both acts.
    assert [(e.action, e.subject) for e in admin_log(store)][:2] == [
        ("task.add", "a-first"),
        ("task.add", "calc-7"),
    ]


def test_the_same_task_again_changes_nothing_and_logs_nothing(store: Store) -> None:
    add_task(store, CALC_7, actor="cli:ops")
    logged = len(admin_log(store))
    row, added = add_task(store, CALC_7, actor="cli:someone-else")
    assert not added
    assert row.added_by == "cli:ops"
    assert len(admin_log(store)) == logged


def test_other_tests_under_a_stored_id_are_refused_unless_replaced(store: Store) -> None:
    add_task(store, CALC_7, actor="cli:ops")
    other = Task("calc-7", "calc", ("tests/test_calc.py::test_add",))
    with pytest.raises(TaskConflict) as caught:
        add_task(store, other, actor="cli:ops")
    assert caught.value.field == "task_id" and "--replace" in str(caught.value)
    stored = get_task(store, "calc-7")
    assert stored is not None and stored.task == CALC_7

    row, replaced = add_task(store, other, actor="cli:lead", replace=True)
    assert replaced and row.task == other and row.added_by == "cli:lead"
    stored = get_task(store, "calc-7")
    assert stored is not None and stored.task == other
    last = admin_log(store)[0]
    assert (last.action, last.subject, last.actor) == ("task.replace", "calc-7", "cli:lead")
    assert last.detail["fail_to_pass"] == ["tests/test_calc.py::test_add"]


def test_a_session_keeps_the_task_its_report_names(store: Store) -> None:
    row, _ = store.ingest(parse_report(make_report_bytes("s-task", task_id="calc-7")))
    plain, _ = store.ingest(parse_report(make_report_bytes("s-plain")))
    assert row.task_id == "calc-7"
    assert plain.task_id is None
    assert store.get_session("s-task").task_id == "calc-7"
    assert store.get_session("s-plain").task_id is None
