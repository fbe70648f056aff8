"""The store's engine and migrations: connecting to SQLite or PostgreSQL, and Alembic.

Plumbing under `verifier.store.db`: `make_engine` turns a database URL into an
engine (a SQLite file's folder created, its pragmas set; a PostgreSQL connect
timeout), `at_head` is what `Store.open` asks of a database before using it, and
`upgrade`, `current_revision` and `head_revision` are ``verifier db upgrade``
and the revision checks. Alembic's configuration is built in code
(`alembic_config`); its import costs half a second, so a store already at
`HEAD_REVISION` opens without it.

Errors leave here as the verifier's own: a URL we cannot use is a `ConfigError`,
a database we cannot reach an `InfrastructureError` (`reachable`), a read-only
store with no file yet `NoStore`; messages show URLs with their password masked.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event, func, inspect, select
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import (
    ArgumentError,
    DatabaseError,
    InterfaceError,
    NoSuchModuleError,
    OperationalError,
)
from sqlalchemy.pool import ConnectionPoolEntry

from verifier import resources
from verifier.errors import ConfigError, InfrastructureError, NotFound

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

MIGRATIONS_DIR = resources.migrations_dir()
# The newest migration. Opening a store that is already there needs no Alembic (whose
# import costs half a second of every command); a test keeps this equal to Alembic's head.
HEAD_REVISION = "0010"
SQLITE_BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
MIGRATION_LOCK_ID = 0x7665_7269  # any constant: PostgreSQL advisory lock key for migrating
# Alembic's `context` and `op` are module-level proxies: one command per process at a time.
_ALEMBIC_COMMAND = threading.Lock()


class NoStore(NotFound):
    """A reader found no database where the configuration points: nothing stored yet."""

    code = "no_store"


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for `url`; for SQLite, the file's folder is created and pragmas set.

    `read_only`: a SQLite file is opened with ``mode=ro`` (``immutable=1`` when even
    that fails, as on a read-only mount where no lock file can be made), never
    created; PostgreSQL sessions are ``default_transaction_read_only``.
    """
    parsed = parse_url(url)
    try:
        if parsed.get_backend_name() != "sqlite":
            connect_args: dict[str, Any] = {}
            if parsed.get_backend_name() == "postgresql":
                connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
                if read_only:
                    connect_args["options"] = "-c default_transaction_read_only=on"
            return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
        if read_only:
            return _read_only_sqlite(parsed)
        engine = create_engine(parsed)
    except (NoSuchModuleError, ImportError) as exc:
        masked_url = parsed.render_as_string(hide_password=True)
        raise ConfigError(f"database URL {masked_url}: no driver for it ({exc})") from None
    database = parsed.database or ""
    if database not in ("", ":memory:") and not database.startswith("file:"):
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InfrastructureError(f"cannot create the folder of {database}: {exc}") from None
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def parse_url(url: str) -> URL:
    """`url` parsed; one that is not a URL is a `ConfigError` (which does not repeat it:
    it may hold a password)."""
    try:
        return make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"database URL is not valid: {exc}") from None


def at_head(engine: Engine, *, read_only: bool = False) -> None:
    """Make sure the database of `engine` is at `HEAD_REVISION` before it is used.

    A database already there is left alone. A writable SQLite file is migrated
    there (created on first use); any other database must have been migrated by
    ``verifier db upgrade``, so that several workers never race to migrate it,
    and a database behind this verifier is a `ConfigError` saying so.
    """
    with reachable(engine):
        if _stored_revisions(engine) == (HEAD_REVISION,):
            return
        if engine.dialect.name == "sqlite" and not read_only:
            _migrate(engine)
        else:
            _require_head(engine)


def alembic_config(connection: Connection | None = None) -> AlembicConfig:
    """The Alembic configuration of the store, built in code; `connection` is used if given."""
    from alembic.config import Config as AlembicConfig

    # Alembic's default stdout is the sys.stdout of when alembic.config was first
    # imported; the current one is where a caller (a redirected CLI, a test) writes.
    config = AlembicConfig(stdout=sys.stdout)
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@contextmanager
def migration_connection(engine: Engine) -> Iterator[Connection]:
    """A connection in one transaction for migrating, committed when the block succeeds.

    A lock is taken first so that two migrations of one database run one after
    the other: SQLite's write lock, PostgreSQL's transaction advisory lock. On
    SQLite, foreign keys are off while batch migrations copy and drop tables,
    and checked before commit.
    """
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as connection:
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        elif engine.dialect.name == "postgresql":
            connection.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK_ID)))
        try:
            yield connection
            if sqlite and connection.exec_driver_sql("PRAGMA foreign_key_check").first():
                raise ConfigError("migration left rows whose foreign keys do not resolve")
            connection.commit()
        finally:
            if sqlite:
                connection.rollback()
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")


def upgrade(url: str) -> None:
    """Migrate the database at `url` to the head revision (`verifier db upgrade`)."""
    engine = make_engine(url)
    try:
        with reachable(engine):
            _migrate(engine)
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The revision the database at `url` is at; None when it was never migrated."""
    engine = make_engine(url)
    try:
        with reachable(engine):
            revisions = _stored_revisions(engine)
        return revisions[0] if revisions else None
    finally:
        engine.dispose()


def head_revision() -> str:
    """The revision this verifier's models correspond to, as Alembic finds it."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, f"no migration in {MIGRATIONS_DIR}"
    return head


@contextmanager
def reachable(*engines: Engine) -> Iterator[None]:
    """Turn a database we cannot talk to into an `InfrastructureError` naming it.

    With several engines (a copy's source and target), the message names them
    all, since the driver's error does not say which one failed.
    """
    try:
        yield
    except (OperationalError, InterfaceError, DatabaseError) as exc:
        # DatabaseError itself (not its subclasses: a constraint, a bad statement) is
        # SQLite's "file is not a database" and "database disk image is malformed".
        if type(exc) is not DatabaseError and not isinstance(
            exc, (OperationalError, InterfaceError)
        ):
            raise
        names = " or ".join(masked(e) for e in engines)
        reason = str(exc.orig).strip() or type(exc.orig).__name__
        raise InfrastructureError(f"database {names} cannot be used: {reason}") from exc


def masked(engine: Engine) -> str:
    """The URL of `engine` for messages and logs: its password shown as ``***``."""
    return engine.url.render_as_string(hide_password=True)


def read_only_sqlite_file(parsed: URL) -> Path:
    """The SQLite file a read-only store at `parsed` reads: a `ConfigError` when it names
    none (memory, a ``file:`` URI), `NoStore` when there is no file there."""
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        raise ConfigError(f"a read-only store needs a SQLite file, not {database or 'memory'!r}")
    path = Path(database).resolve()
    if not path.is_file():
        raise NoStore(f"no store at {str(path)!r}: nothing has been stored there yet")
    return path


def connect_read_only_sqlite(path: Path) -> sqlite3.Connection:
    """A read-only connection to the SQLite file at `path` (``mode=ro``, or ``immutable``
    on a read-only mount), as every read-only store's engine makes them."""
    uri = f"{path.as_uri()}?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
        connection.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError:
        # A WAL database on a read-only mount cannot make its shared-memory file.
        connection = sqlite3.connect(f"{uri}&immutable=1", uri=True, check_same_thread=False)
    connection.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    return connection


def _read_only_sqlite(parsed: URL) -> Engine:
    path = read_only_sqlite_file(parsed)
    return create_engine(f"sqlite:///{path}", creator=lambda: connect_read_only_sqlite(path))


# The triggers the migrations put on SQLite's append-only tables (0004: admin_log, 0006:
# verdict_overrides), in their words: the models cannot say them.
SQLITE_APPEND_ONLY = ("admin_log", "verdict_overrides")


def _empty_sqlite(connection: Connection) -> bool:
    """True when the SQLite database holds nothing at all: no table, index, view or trigger."""
    return connection.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar() == 0


def _create_at_head(connection: Connection) -> None:
    """Create a new, empty SQLite database at `HEAD_REVISION` from the models, and stamp it.

    Alembic's cookbook ("Building an Up to Date Database from Scratch"): what the
    migrations would do, without their table copies or loading them (13 ms of CPU
    instead of 84 ms with Alembic loaded), nor importing Alembic (a fresh process's
    first store: 0.53 s instead of 0.98 s). The version table is Alembic's, written
    here: `command.stamp` would import Alembic. The models keep their columns in the
    migrated order, and tests/store/test_migrations.py holds a store made this way
    identical, in all SQLite keeps (columns, indexes, keys, triggers, SQL, rows), to
    one migrated step by step; a database with anything in it is migrated as before.
    Runs in `migration_connection`'s transaction: two processes creating one file
    go one after the other, and the foreign keys are checked before commit.
    """
    from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table

    from verifier.store.models import Base

    Base.metadata.create_all(connection, checkfirst=False)
    for table in SQLITE_APPEND_ONLY:
        for event_name in ("UPDATE", "DELETE"):
            connection.exec_driver_sql(
                f"CREATE TRIGGER {table}_no_{event_name.lower()} BEFORE {event_name} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
            )
    # Alembic's version table, as its DefaultImpl.version_table_impl defines it.
    version = Table(
        "alembic_version",
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
    )
    version.create(connection)
    connection.execute(version.insert().values(version_num=HEAD_REVISION))


def _migrate(engine: Engine) -> None:
    with migration_connection(engine) as connection, _ALEMBIC_COMMAND:
        if engine.dialect.name == "sqlite" and _empty_sqlite(connection):
            _create_at_head(connection)
            return
        from alembic import command
        from alembic.util import CommandError

        try:
            command.upgrade(alembic_config(connection), "head")
        except CommandError as exc:
            raise ConfigError(
                f"cannot migrate database {masked(engine)}: {exc} "
                "(was it migrated by a newer verifier?)"
            ) from None


def _stored_revisions(engine: Engine) -> tuple[str, ...]:
    """The revisions in Alembic's version table; empty when never migrated."""
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return ()
        rows = connection.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    return tuple(sorted(row[0] for row in rows))


def _require_head(engine: Engine) -> None:
    current = _stored_revisions(engine)
    head = HEAD_REVISION
    if current != (head,):
        found = ", ".join(current) or "no revision (never migrated)"
        raise ConfigError(
            f"database {masked(engine)} is at {found}, this verifier needs revision {head}: "
            "run `verifier db upgrade`"
        )


# synchronous=FULL: every commit waits for the WAL to reach the disk, so that a report
# answered 202 survives a power cut, not only a crash of the process (NORMAL's promise).
# It is SQLite's default too; said here so that no build or a later change weakens it.
SQLITE_PRAGMAS = (
    f"busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
    "foreign_keys=ON",
    "journal_mode=WAL",
    "synchronous=FULL",
)


def _sqlite_pragmas(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in SQLITE_PRAGMAS:
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()
