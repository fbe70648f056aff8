"""Tasks: the commands of ``verifier task add|list|show`` and ``/v1/tasks``, and the one
resolution of the task a report names (`resolve`), which the pipeline calls.

An operator declares tasks in two places: the tasks file (``[verifier] tasks_file``,
by default ``tasks.toml`` beside the configuration file), read each time it is
needed, and the store (`verifier task add`, ``POST /v1/tasks``). The file's task
wins over the store's, and a task the file declares cannot be added to the store
(it would never count). A report only names its task (``task_id``): what the task
asks for is the operator's word, never the report's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from verifier.config import Config
from verifier.errors import BadRequest, InfrastructureError, NotFound, UnknownTask
from verifier.moments import utc_text
from verifier.tasks import Task, load_tasks_file, make_task

if TYPE_CHECKING:
    from verifier.contract.report import Report
    from verifier.store import Store
    from verifier.store.tasks import TaskRow

Source = Literal["file", "store"]


@dataclass(frozen=True)
class TaskView:
    """A task as an operator reads it: its tests, and where it was declared."""

    task: Task
    source: Source
    # The tasks file it came from, or who stored it when.
    path: Path | None = None
    added_at: datetime | None = None
    added_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        task = self.task
        return {
            "task_id": task.id,
            "repository": task.repository,
            "fail_to_pass": list(task.fail_to_pass),
            "pass_to_pass": list(task.pass_to_pass),
            "read_only": task.read_only,
            "source": self.source,
            "path": None if self.path is None else str(self.path),
            "added_at": utc_text(self.added_at),
            "added_by": self.added_by,
        }


@dataclass(frozen=True)
class Resolved:
    """The task a session is judged by, and what the verdict notes of how it was chosen."""

    task: Task | None
    notes: tuple[str, ...] = ()


def file_tasks(config: Config) -> tuple[Path | None, dict[str, Task]]:
    """The tasks file in force and its tasks: none when no file is set and none lies
    beside the configuration; `ConfigError` when a file set does not exist or does not
    read as tasks."""
    path, required = config.tasks_location()
    if path is None or (not required and not path.exists()):
        return path, {}
    return path, load_tasks_file(path)


def add(
    config: Config,
    task_id: Any,
    *,
    repository: Any = None,
    fail_to_pass: Any = (),
    pass_to_pass: Any = (),
    read_only: Any = False,
    actor: str,
    replace: bool = False,
    store: Store | None = None,
) -> tuple[TaskView, bool]:
    """Store a task (validated by `verifier.tasks.make_task`, `BadRequest` naming the
    field); True when it was added or replaced. A task the tasks file declares is
    refused: the file's would win. `store` is the service's open store; without one
    the configured store is opened."""
    task = make_task(
        task_id,
        repository=repository,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        read_only=read_only,
    )
    path, declared = file_tasks(config)
    if task.id in declared:
        raise BadRequest(
            "task_id",
            f"task {task.id!r} is declared in the tasks file {str(path)!r}, which wins over "
            "the store: change it there",
        )
    from verifier.store.tasks import add_task

    with _opened(config, store) as opened:
        row, changed = add_task(opened, task, actor=actor, replace=replace)
    return TaskView(row.task, "store", added_at=row.added_at, added_by=row.added_by), changed


def tasks(config: Config, *, store: Store | None = None) -> list[TaskView]:
    """Every task in force, by id: the tasks file's, then the store's it does not shadow."""
    from verifier.store.tasks import list_tasks

    path, declared = file_tasks(config)
    views = {task_id: TaskView(task, "file", path) for task_id, task in declared.items()}
    for row in _stored(config, store, list_tasks):
        if row is not None and row.task.id is not None and row.task.id not in views:
            views[row.task.id] = TaskView(
                row.task, "store", added_at=row.added_at, added_by=row.added_by
            )
    return [views[task_id] for task_id in sorted(views)]


def show(config: Config, task_id: str, *, store: Store | None = None) -> TaskView:
    """The task in force under `task_id` (the file's before the store's); `NotFound`."""
    path, declared = file_tasks(config)
    if task_id in declared:
        return TaskView(declared[task_id], "file", path)
    from verifier.store.tasks import get_task

    found = _stored(config, store, lambda opened: [get_task(opened, task_id)])
    row = found[0] if found else None
    if row is None:
        raise NotFound(f"task {task_id!r} is declared neither in the tasks file nor in the store")
    return TaskView(row.task, "store", added_at=row.added_at, added_by=row.added_by)


def resolve(
    config: Config, report: Report, store: Store | None, *, repo_name: str | None = None
) -> Resolved:
    """The task `report`'s session is judged by: the operator's task of its ``task_id``.

    * no ``task_id``: no task; a report's ``task_read_only`` makes it a read-only task
      only where the repository's policy says ``allow_read_only_claims`` (noted either
      way);
    * a ``task_id``: the tasks file's task, else the store's (`store`; None: the
      configured store, opened read-only); one declared for another repository than the
      policy's (`repo_name`, else ``repo.name``), or declared nowhere, is `UnknownTask`,
      and nothing of the report is stored. The report's ``task_read_only`` never
      overrides the operator's task.
    """
    doc = report.doc
    policy = repo_name or doc.repo.name
    claimed = doc.task_read_only is True
    if doc.task_id is None:
        if not claimed:
            return Resolved(None)
        if config.repository(policy).allow_read_only_claims:
            note = (
                "the report says its task changes nothing (task_read_only), and the policy of "
                f"repository {policy!r} lets that claim count (allow_read_only_claims)"
            )
            return Resolved(Task(None, policy, read_only=True), (note,))
        note = (
            "the report says its task changes nothing (task_read_only): not counted, the "
            f"policy of repository {policy!r} does not allow such claims "
            "(allow_read_only_claims = false); an operator's task can say so"
        )
        return Resolved(None, (note,))
    found = _declared(config, doc.task_id, store)
    if found is None:
        raise UnknownTask(
            doc.task_id,
            f"the report names task {doc.task_id!r}, which the operator has not declared "
            "(neither in the tasks file nor with `verifier task add`); nothing was stored: "
            "declare the task, then send the report again",
        )
    task, where = found
    if task.repository is not None and task.repository != policy:
        raise UnknownTask(
            doc.task_id,
            f"task {doc.task_id!r} is declared for repository {task.repository!r}, and this "
            f"session is judged as repository {policy!r}; nothing was stored",
        )
    if task.repository is None:
        task = replace(task, repository=policy)
    notes = [f"task {task.id!r} ({where}): {_counts(task)}"]
    if claimed and not task.read_only:
        notes.append(
            f"the report says its task changes nothing (task_read_only): not counted, the "
            f"operator's task {task.id!r} is not read-only"
        )
    return Resolved(task, tuple(notes))


def _stored(
    config: Config, store: Store | None, read: Callable[[Store], Sequence[TaskRow | None]]
) -> Sequence[TaskRow | None]:
    """What `read` finds in the store (`store`, else the configured one read-only); nothing
    when there is no store yet."""
    from verifier.store import NoStore

    try:
        with _opened(config, store, read_only=True) as opened:
            return read(opened)
    except NoStore:
        return []


def _declared(config: Config, task_id: str, store: Store | None) -> tuple[Task, str] | None:
    """The operator's task `task_id` and where it was declared, or None."""
    path, declared = file_tasks(config)
    if task_id in declared:
        return declared[task_id], f"from the tasks file {str(path)!r}"
    from verifier.store.tasks import get_task

    if store is not None:
        row = get_task(store, task_id)
    else:
        from verifier.store import NoStore

        try:
            with _opened(config, None, read_only=True) as opened:
                row = get_task(opened, task_id)
        except NoStore:  # no store yet: it holds no task
            row = None
        except (InfrastructureError, NotFound) as exc:
            # Fail closed: a task the store may hold, unread, is not a task we know.
            raise UnknownTask(
                task_id,
                f"the report names task {task_id!r}, which the tasks file does not declare, "
                f"and the store cannot be read to look for it ({exc}); nothing was stored",
            ) from None
    return None if row is None else (row.task, "from the store")


def _counts(task: Task) -> str:
    parts = [
        f"{len(task.fail_to_pass)} acceptance test{'s' if len(task.fail_to_pass) != 1 else ''}",
        f"{len(task.pass_to_pass)} must-keep",
    ]
    if task.read_only:
        parts.append("read-only")
    return ", ".join(parts)


class _opened:
    """The caller's store, left open; or the configured one, opened here and closed."""

    def __init__(self, config: Config, store: Store | None, *, read_only: bool = False) -> None:
        self._config, self._given, self._read_only = config, store, read_only
        self._owned: Store | None = None

    def __enter__(self) -> Store:
        if self._given is not None:
            return self._given
        from verifier.store import Store

        self._owned = Store.open(self._config.database_url, read_only=self._read_only)
        return self._owned

    def __exit__(self, *exc: object) -> None:
        if self._owned is not None:
            self._owned.close()
