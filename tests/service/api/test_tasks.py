"""`/v1/tasks`, and a report naming a task nobody declared: refused with 422, nothing
stored. On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tests.support.api import RecordingQueue, bearer, make_config
from tests.support.report_factory import make_report_bytes
from verifier.service.api import create_app
from verifier.store import Store
from verifier.store.tokens import admin_log

SUBTRACT = "tests/test_calc.py::test_subtract"
CALC_7 = {"task_id": "calc-7", "repository": "calc", "fail_to_pass": [SUBTRACT]}


def test_an_admin_declares_a_task_and_a_reader_reads_it(
    client: TestClient, tokens: dict[str, str], db_url: str
) -> None:
    admin, read = bearer(tokens["admin"]), bearer(tokens["read"])

    created = client.post("/v1/tasks", json=CALC_7, headers=admin)
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["task_id"], body["fail_to_pass"], body["source"]) == (
        "calc-7",
        [SUBTRACT],
        "store",
    )
    assert body["added_by"] == "token:admin-token"
    assert client.post("/v1/tasks", json=CALC_7, headers=admin).status_code == 200

    listed = client.get("/v1/tasks", headers=read).json()["tasks"]
    assert [t["task_id"] for t in listed] == ["calc-7"]
    shown = client.get("/v1/tasks/calc-7", headers=read).json()
    assert (shown["repository"], shown["pass_to_pass"], shown["read_only"]) == ("calc", [], False)
    missing = client.get("/v1/tasks/calc-8", headers=read)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    # Reading is not declaring.
    assert client.post("/v1/tasks", json=CALC_7, headers=read).status_code == 403
    with Store.open(db_url) as store:
        assert ("task.add", "calc-7", "token:admin-token") in [
            (e.action, e.subject, e.actor) for e in admin_log(store)
        ]


def test_other_tests_under_a_stored_id_are_a_conflict_unless_replaced(
    client: TestClient, tokens: dict[str, str]
) -> None:
    admin = bearer(tokens["admin"])
    client.post("/v1/tasks", json=CALC_7, headers=admin)
    other = {**CALC_7, "fail_to_pass": ["tests/test_calc.py::test_add"]}

    conflict = client.post("/v1/tasks", json=other, headers=admin)
    assert conflict.status_code == 409
    assert conflict.json()["error"] == {
        "code": "task_conflict",
        "field": "task_id",
        "problem": conflict.json()["error"]["problem"],
    }
    assert client.get("/v1/tasks/calc-7", headers=admin).json()["fail_to_pass"] == [SUBTRACT]

    replaced = client.post("/v1/tasks", json={**other, "replace": True}, headers=admin)
    assert replaced.status_code == 201
    assert client.get("/v1/tasks/calc-7", headers=admin).json()["fail_to_pass"] == [
        "tests/test_calc.py::test_add"
    ]


def test_a_bad_task_is_a_400_naming_the_field(client: TestClient, tokens: dict[str, str]) -> None:
    admin = bearer(tokens["admin"])
    cases = [
        ({**CALC_7, "read_only": True}, "read_only"),
        ({**CALC_7, "task_id": "no spaces"}, "task_id"),
        ({**CALC_7, "pass_to_pass": [SUBTRACT]}, "pass_to_pass"),
        ({**CALC_7, "fail_to_pass": "tests/t.py::a"}, "fail_to_pass"),
        ({**CALC_7, "acceptance": []}, "acceptance"),
    ]
    for body, field in cases:
        answer = client.post("/v1/tasks", json=body, headers=admin)
        assert answer.status_code == 400, (body, answer.text)
        assert answer.json()["error"]["field"] == field, answer.json()
    assert client.get("/v1/tasks", headers=admin).json()["tasks"] == []


def test_a_report_naming_an_undeclared_task_is_a_422_and_nothing_is_stored(
    client: TestClient, tokens: dict[str, str], queue: RecordingQueue
) -> None:
    ingest, admin = bearer(tokens["ingest"]), bearer(tokens["admin"])
    report = make_report_bytes("s-task", task_id="calc-7")

    refused = client.post("/v1/sessions", content=report, headers=ingest)

    assert refused.status_code == 422
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("unknown_task", "task_id")
    assert "'calc-7'" in error["problem"]
    assert client.get("/v1/sessions/s-task", headers=admin).status_code == 404
    assert client.get("/v1/rejected", headers=admin).json()["rejected"] == []
    assert queue.jobs == []

    # Once declared, the same bytes are taken, and the session keeps its task.
    assert client.post("/v1/tasks", json=CALC_7, headers=admin).status_code == 201
    accepted = client.post("/v1/sessions", content=report, headers=ingest)
    assert accepted.status_code == 202, accepted.text
    assert queue.jobs == [("s-task", "ingest")]
    shown = client.get("/v1/sessions/s-task", headers=admin).json()
    assert shown["task_id"] == "calc-7"
    listed = client.get("/v1/sessions", params={"task": "calc-7"}, headers=admin).json()
    assert [(x["session_id"], x["task_id"]) for x in listed["sessions"]] == [("s-task", "calc-7")]


def test_the_tasks_file_wins_and_its_tasks_cannot_be_posted(
    db_url: str, tokens: dict[str, str], tmp_path: Path
) -> None:
    tasks_file = tmp_path / "tasks.toml"
    tasks_file.write_text("[tasks.calc-7]\nread_only = true\n", encoding="utf-8")
    config = make_config(db_url, tasks_file=str(tasks_file))
    admin = bearer(tokens["admin"])
    with TestClient(create_app(config, RecordingQueue())) as client:
        refused = client.post("/v1/tasks", json=CALC_7, headers=admin)
        assert refused.status_code == 400 and "tasks file" in refused.json()["error"]["problem"]
        shown = client.get("/v1/tasks/calc-7", headers=admin).json()
        assert (shown["source"], shown["path"], shown["read_only"]) == (
            "file",
            str(tasks_file),
            True,
        )
        # A report naming the file's task is taken.
        report = make_report_bytes("s-file", task_id="calc-7")
        assert client.post("/v1/sessions", content=report, headers=admin).status_code == 202
