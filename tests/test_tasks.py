"""The `Task` type: what the checks read of an operator's task."""

from __future__ import annotations

import dataclasses

import pytest

from verifier.tasks import Task


def test_a_task_asks_for_the_base_run_only_when_it_names_acceptance_tests() -> None:
    assert Task("t-1", fail_to_pass=("tests/test_calc.py::test_add",)).has_acceptance
    # Must-keep tests alone, or a read-only task, do not make the base run necessary.
    assert not Task("t-2", pass_to_pass=("tests/test_calc.py::test_sub",)).has_acceptance
    assert not Task("t-3", read_only=True).has_acceptance


def test_a_task_cannot_be_changed_once_resolved() -> None:
    task = Task("t-1", fail_to_pass=("a::b",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.read_only = True  # type: ignore[misc]
