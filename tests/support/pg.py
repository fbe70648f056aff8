"""Stores for tests: a PostgreSQL database of its own for each test on the server CI
names, migrated stores of each kind made by copying a template migrated once per
worker, and Alembic run the way the store runs it."""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from sqlalchemy import NullPool, create_engine
from sqlalchemy.engine import make_url

from verifier.store import upgrade
from verifier.store.engine import alembic_config, make_engine, migration_connection

POSTGRES_URL = os.environ.get("VERIFIER_TEST_POSTGRES_URL")
NO_POSTGRES = (
    "VERIFIER_TEST_POSTGRES_URL is not set: set it to a server you may create "
    "databases on, e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
# pytest-xdist names each worker (gw0, gw1…): templates are per worker, so two workers
# never copy a database another one is still creating.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


@contextmanager
def postgres_database(url: str, *, template: str | None = None) -> Iterator[str]:
    """A new database on the server of `url` (a copy of `template` when given), dropped
    afterwards: tests never share data."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    name = f"verifier_test_{secrets.token_hex(6)}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"{copy}')
    admin.dispose()
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        _drops.drop(url, name)


def _drop(url: str, name: str) -> None:
    admin = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


class _Drops:
    """A test's database is dropped behind its back: ``DROP DATABASE`` waits for the
    checkpoint it forces, about a second on this server, which the test (and the worker's
    next one) used to wait out. Drops at once share a checkpoint: four threads drained 8 in
    1 s, two in 5.9 s. `wait` (at the end of the worker's session, before its templates
    go) waits for every drop and raises the first that failed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []

    def drop(self, url: str, name: str) -> None:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="drop-db")
            self._pending.append(self._pool.submit(_drop, url, name))

    def wait(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for future in pending:
            future.result()


_templates: dict[str, str] = {}


@contextmanager
def migrated_postgres_database(url: str) -> Iterator[str]:
    """A new database migrated to the head: a copy of this worker's template, which is
    migrated once (`CREATE DATABASE … TEMPLATE` copies files, it runs no migration)."""
    if url not in _templates:
        name = f"verifier_template_{WORKER}_{secrets.token_hex(4)}"
        admin = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        admin.dispose()
        upgrade(make_url(url).set(database=name).render_as_string(hide_password=False))
        _templates[url] = name
    with postgres_database(url, template=_templates[url]) as copy:
        yield copy


_drops = _Drops()


def drop_templates() -> None:
    """Drop this worker's templates (at the end of the session), once every database
    copied from them is dropped."""
    _drops.wait()
    for url, name in _templates.items():
        admin = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
    _templates.clear()


def migrated_sqlite_file(path: Path, template: Path) -> str:
    """The URL of a SQLite store at `path`, a copy of `template` migrated once."""
    if not template.exists():
        upgrade(f"sqlite:///{template}")
    shutil.copyfile(template, path)
    return f"sqlite:///{path}"


def alembic(url: str, name: str, *args: str) -> None:
    """Run an Alembic command the way the store does: programmatic config, live connection."""
    engine = make_engine(url)
    try:
        with migration_connection(engine) as connection:
            getattr(command, name)(alembic_config(connection), *args)
    finally:
        engine.dispose()
