"""What a task must achieve, as the operator declared it: the one `Task` type.

A report names its task by id; the operator's task (a tasks file beside the
configuration, the store, the API) is what counts, never the report's own words.
The command layer resolves it and hands it to `verify()`; the checks only read it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.controls import codepoint, first_control
from verifier.errors import BadRequest, ConfigError

#: A task's id, as a report's ``task_id`` gives it (the contract's pattern).
TASK_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
#: The longest test id taken (a pytest node id with parameters can be long).
MAX_TEST_ID = 2000
#: The most tests one list of a task may name.
MAX_TESTS = 10_000
#: The keys of a task's table in the tasks file (`load_tasks_file`).
TASK_KEYS = ("repository", "fail_to_pass", "pass_to_pass", "read_only")


@dataclass(frozen=True)
class Task:
    """A task and its tests, by each runner's own notation (pytest node ids,
    JUnit ``classname.name``).

    * ``fail_to_pass``: the acceptance tests: each must fail at the base and pass
      at the head;
    * ``pass_to_pass``: tests that must keep passing;
    * ``read_only``: the task is declared to change nothing (an empty session is
      then not a failure), as the repository's policy allows it.
    """

    id: str | None
    repository: str | None = None
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    read_only: bool = False

    @property
    def has_acceptance(self) -> bool:
        """Whether the task names acceptance tests: the base is then always run too."""
        return bool(self.fail_to_pass)


def make_task(
    task_id: Any,
    *,
    repository: Any = None,
    fail_to_pass: Any = (),
    pass_to_pass: Any = (),
    read_only: Any = False,
) -> Task:
    """A `Task` from what an operator gave, or `BadRequest` naming the field and the problem.

    The one validation of a task, whichever way it is declared (the tasks file, the
    command line, the API): an id of the contract's pattern, test ids that are
    non-empty lines of text, no test named twice or in both lists, and no acceptance
    test on a read-only task (a test that must go from failing to passing needs a
    change).
    """
    if not isinstance(task_id, str) or not re.fullmatch(TASK_ID_PATTERN, task_id):
        raise BadRequest(
            "task_id", f"expected 1 to 128 characters of A-Z a-z 0-9 . _ : -, got {task_id!r}"
        )
    if repository is not None and (not isinstance(repository, str) or not repository.strip()):
        raise BadRequest("repository", f"expected a repository name, got {repository!r}")
    if repository is not None and first_control(repository) is not None:
        raise BadRequest("repository", f"holds a control character: {repository!r}")
    if not isinstance(read_only, bool):
        raise BadRequest("read_only", f"expected true or false, got {read_only!r}")
    f2p = _test_ids(fail_to_pass, "fail_to_pass")
    p2p = _test_ids(pass_to_pass, "pass_to_pass")
    both = sorted(set(f2p) & set(p2p))
    if both:
        raise BadRequest(
            "pass_to_pass",
            f"{both[0]!r} is also an acceptance test (fail_to_pass): a test must fail at the "
            "base or keep passing, not both",
        )
    if read_only and f2p:
        raise BadRequest(
            "read_only",
            "a read-only task changes nothing, so it cannot have acceptance tests "
            f"(fail_to_pass names {f2p[0]!r})",
        )
    return Task(task_id, repository, f2p, p2p, read_only)


def _test_ids(value: Any, field: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise BadRequest(field, f"expected a list of test ids, got {value!r}")
    if len(value) > MAX_TESTS:
        raise BadRequest(field, f"names {len(value)} tests, over the limit of {MAX_TESTS}")
    seen: set[str] = set()
    for n, test in enumerate(value):
        where = f"{field}[{n}]"
        if not isinstance(test, str) or not test.strip():
            raise BadRequest(where, f"expected a test id (a non-empty string), got {test!r}")
        if test != test.strip():
            raise BadRequest(where, f"a test id has no leading or trailing space: {test!r}")
        if len(test) > MAX_TEST_ID:
            raise BadRequest(where, f"{len(test)} characters, over the limit of {MAX_TEST_ID}")
        found = first_control(test)
        if found is not None:
            raise BadRequest(where, f"control character {codepoint(found[1])} at offset {found[0]}")
        if test in seen:
            raise BadRequest(where, f"{test!r} is listed twice")
        seen.add(test)
    return tuple(value)


def parse_tasks(data: Mapping[str, Any], source: str) -> dict[str, Task]:
    """The tasks of a tasks file's document: ``[tasks.ID]`` tables; `ConfigError` naming
    the file, the task and the key otherwise."""
    unknown = sorted(set(data) - {"tasks"})
    if unknown:
        raise ConfigError(f"tasks file {source}: unknown table {unknown[0]!r}: expected [tasks.ID]")
    tables = data.get("tasks", {})
    if not isinstance(tables, Mapping):
        raise ConfigError(f"tasks file {source}: tasks: expected a table of [tasks.ID] tables")
    tasks = {}
    for task_id, table in tables.items():
        where = f"tasks file {source}: tasks.{task_id}"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: expected a table")
        extra = sorted(set(table) - set(TASK_KEYS))
        if extra:
            raise ConfigError(f"{where}.{extra[0]}: unknown key (expected {', '.join(TASK_KEYS)})")
        try:
            tasks[task_id] = make_task(task_id, **table)
        except BadRequest as exc:
            key = "" if exc.field == "task_id" else f".{exc.field}"
            raise ConfigError(f"{where}{key}: {exc.problem}") from None
    return tasks


def load_tasks_file(path: Path) -> dict[str, Task]:
    """The tasks declared in the TOML file `path` (`parse_tasks`); `ConfigError` when it
    cannot be read."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"tasks file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"tasks file {str(path)!r} cannot be read: {exc}") from None
    return parse_tasks(data, repr(str(path)))
