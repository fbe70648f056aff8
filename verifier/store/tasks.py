"""The tasks an operator declared through the store (`verifier task add`, ``POST /v1/tasks``).

A task is added once; adding it again with the same content changes nothing,
with other content it is refused unless the caller asks to replace it. Each
addition or replacement appends its admin log entry in the same transaction.
The tasks file's tasks are not kept here: the command layer reads the file, and
its task wins over the store's (`verifier.app.tasks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from verifier.errors import TaskConflict
from verifier.store.models import AdminLogModel, TaskModel, utcnow
from verifier.tasks import Task

if TYPE_CHECKING:
    from verifier.store.db import Store


@dataclass(frozen=True)
class TaskRow:
    """A stored task, and who declared it when."""

    task: Task
    added_at: datetime
    added_by: str


def add_task(
    store: Store, task: Task, *, actor: str, replace: bool = False
) -> tuple[TaskRow, bool]:
    """Store `task`; True when it was added or replaced, False when it was stored as is.

    The same task again changes nothing; other content under a stored id raises
    `TaskConflict` unless `replace`. Logged as ``task.add`` or ``task.replace``.
    """
    assert task.id is not None
    with store.transaction(write=True) as session:
        stored = session.scalars(
            select(TaskModel).where(TaskModel.task_id == task.id).with_for_update()
        ).one_or_none()
        if stored is not None and _task(stored) == task:
            return _row(stored), False
        if stored is not None and not replace:
            raise TaskConflict(task.id)
        action = "task.add" if stored is None else "task.replace"
        if stored is None:
            stored = TaskModel(task_id=task.id)
            session.add(stored)
        stored.repository = task.repository
        stored.fail_to_pass = list(task.fail_to_pass)
        stored.pass_to_pass = list(task.pass_to_pass)
        stored.read_only = task.read_only
        stored.added_at = utcnow()
        stored.added_by = actor
        session.add(
            AdminLogModel(actor=actor, action=action, subject=task.id, detail=_detail(task))
        )
        session.flush()
        return _row(stored), True


def get_task(store: Store, task_id: str) -> TaskRow | None:
    """The stored task `task_id`, or None."""
    with store.transaction() as session:
        stored = session.get(TaskModel, task_id)
        return None if stored is None else _row(stored)


def list_tasks(store: Store) -> list[TaskRow]:
    """Every stored task, by id."""
    with store.transaction() as session:
        return [_row(m) for m in session.scalars(select(TaskModel).order_by(TaskModel.task_id))]


def _task(model: TaskModel) -> Task:
    return Task(
        model.task_id,
        model.repository,
        tuple(model.fail_to_pass),
        tuple(model.pass_to_pass),
        model.read_only,
    )


def _row(model: TaskModel) -> TaskRow:
    return TaskRow(_task(model), model.added_at, model.added_by)


def _detail(task: Task) -> dict[str, Any]:
    return {
        "repository": task.repository,
        "fail_to_pass": list(task.fail_to_pass),
        "pass_to_pass": list(task.pass_to_pass),
        "read_only": task.read_only,
    }
