"""What a task must achieve, as the operator declared it: the one `Task` type.

A report names its task by id; the operator's task (a tasks file beside the
configuration, the store, the API) is what counts, never the report's own words.
The command layer resolves it and hands it to `verify()`; the checks only read it.
"""

from __future__ import annotations

from dataclasses import dataclass


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
