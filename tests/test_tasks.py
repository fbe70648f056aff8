"""The `Task` type (what the checks read of an operator's task), its validation and the
tasks file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from verifier.errors import BadRequest, ConfigError
from verifier.tasks import Task, load_tasks_file, make_task


def test_a_task_asks_for_the_base_run_only_when_it_names_acceptance_tests() -> None:
    assert Task("t-1", fail_to_pass=("tests/test_calc.py::test_add",)).has_acceptance
    # Must-keep tests alone, or a read-only task, do not make the base run necessary.
    assert not Task("t-2", pass_to_pass=("tests/test_calc.py::test_sub",)).has_acceptance
    assert not Task("t-3", read_only=True).has_acceptance


def test_a_task_cannot_be_changed_once_resolved() -> None:
    task = Task("t-1", fail_to_pass=("a::b",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.read_only = True  # type: ignore[misc]


# The one validation of a task, whichever face declared it.


def test_a_task_is_made_from_what_an_operator_gives() -> None:
    task = make_task(
        "calc-7",
        repository="calc",
        fail_to_pass=["tests/test_calc.py::test_subtract"],
        pass_to_pass=["tests/test_calc.py::test_add", "Calc.test_mul"],
    )
    assert task == Task(
        "calc-7",
        "calc",
        ("tests/test_calc.py::test_subtract",),
        ("tests/test_calc.py::test_add", "Calc.test_mul"),
        False,
    )


@pytest.mark.parametrize(
    ("given", "field", "words"),
    [
        ({"task_id": "has space"}, "task_id", "A-Z a-z 0-9"),
        ({"task_id": "x" * 129}, "task_id", "1 to 128"),
        ({"fail_to_pass": "tests/t.py::a"}, "fail_to_pass", "a list of test ids"),
        ({"fail_to_pass": ["ok", ""]}, "fail_to_pass[1]", "non-empty"),
        ({"pass_to_pass": ["a\nb"]}, "pass_to_pass[0]", "U+000A"),
        ({"pass_to_pass": [" a"]}, "pass_to_pass[0]", "leading or trailing space"),
        ({"fail_to_pass": ["a", "a"]}, "fail_to_pass[1]", "listed twice"),
        ({"fail_to_pass": ["a"], "pass_to_pass": ["a"]}, "pass_to_pass", "also an acceptance"),
        ({"fail_to_pass": ["a"], "read_only": True}, "read_only", "cannot have acceptance"),
        ({"read_only": "yes"}, "read_only", "true or false"),
        ({"repository": ""}, "repository", "repository name"),
        ({"fail_to_pass": [7]}, "fail_to_pass[0]", "got 7"),
    ],
)
def test_a_bad_task_is_refused_naming_the_field_and_the_problem(
    given: dict[str, Any], field: str, words: str
) -> None:
    arguments = {"task_id": "t-1", **given}
    with pytest.raises(BadRequest) as caught:
        make_task(arguments.pop("task_id"), **arguments)
    assert caught.value.field == field
    assert words in caught.value.problem


def test_the_tasks_file_declares_tasks_as_tables(tmp_path: Path) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(
        '[tasks.calc-7]\nrepository = "calc"\nfail_to_pass = ["tests/test_calc.py::test_sub"]\n'
        "\n[tasks.explain]\nread_only = true\n",
        encoding="utf-8",
    )
    tasks = load_tasks_file(path)
    assert tasks == {
        "calc-7": Task("calc-7", "calc", ("tests/test_calc.py::test_sub",)),
        "explain": Task("explain", read_only=True),
    }


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[tasks.t]\nfail_to_pass = "a"\n', "tasks.t.fail_to_pass: expected a list"),
        ("[tasks.t]\nacceptance = []\n", "tasks.t.acceptance: unknown key"),
        ('[tasks."a b"]\n', "tasks.a b: expected 1 to 128"),
        ("[task.t]\n", "unknown table 'task'"),
        ("tasks = 3\n", "tasks: expected a table"),
        ("[tasks]\nt = 3\n", "tasks.t: expected a table"),
        ("[tasks.t\n", "cannot be read"),
    ],
)
def test_a_bad_tasks_file_is_a_config_error_naming_the_file_the_task_and_the_key(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_tasks_file(path)
    assert str(path) in str(caught.value)
    assert words in str(caught.value)


def test_a_missing_tasks_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_tasks_file(tmp_path / "nope.toml")
