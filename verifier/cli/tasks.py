"""Tasks: ``verifier task add|list|show`` (docs/tasks.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from verifier.app import tasks
from verifier.cli.options import actor, config_option, emit, format_option
from verifier.formats import render

if TYPE_CHECKING:
    from verifier.config import Config


@click.group("task")
def task_group() -> None:
    """Tasks and their acceptance tests: add, list, show (docs/tasks.md)."""


@task_group.command("add")
@click.argument("task_id", metavar="ID")
@click.option(
    "--fail-to-pass",
    "fail_to_pass",
    metavar="TEST",
    multiple=True,
    help="An acceptance test: must fail at the base, pass at the head (repeat for more).",
)
@click.option(
    "--pass-to-pass",
    "pass_to_pass",
    metavar="TEST",
    multiple=True,
    help="A test that must keep passing (repeat for more).",
)
@click.option("--repository", metavar="NAME", help="The repo.name it is for (default: any).")
@click.option("--read-only", is_flag=True, help="The task asks for no change.")
@click.option("--replace", is_flag=True, help="Replace a stored task of this id.")
@config_option
@format_option
def task_add_command(
    task_id: str,
    fail_to_pass: tuple[str, ...],
    pass_to_pass: tuple[str, ...],
    repository: str | None,
    read_only: bool,
    replace: bool,
    config: Config,
    fmt: str,
) -> None:
    """Store a task (logged in the admin log); test ids in the runner's notation
    (pytest node ids, JUnit classname.name). The tasks file's tasks win over these."""
    view, added = tasks.add(
        config,
        task_id,
        repository=repository,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        read_only=read_only,
        actor=actor(),
        replace=replace,
    )
    emit(
        render.task_json(view, added=added)
        if fmt == "json"
        else render.task_text(view, added=added)
    )


@task_group.command("list")
@config_option
@format_option
def task_list_command(config: Config, fmt: str) -> None:
    """Every task in force: the tasks file's, then the store's."""
    views = tasks.tasks(config)
    emit(render.tasks_json(views) if fmt == "json" else render.tasks_text(views))


@task_group.command("show")
@click.argument("task_id", metavar="ID")
@config_option
@format_option
def task_show_command(task_id: str, config: Config, fmt: str) -> None:
    """One task's tests, and where it was declared."""
    view = tasks.show(config, task_id)
    emit(render.task_json(view) if fmt == "json" else render.task_text(view))
