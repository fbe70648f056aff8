"""Alembic environment of the verifier's store.

The database comes from, in order: a live connection passed by the caller in
``config.attributes["connection"]`` (what `verifier.store.engine` does), the
``sqlalchemy.url`` option, or the verifier's own configuration. Without a
connection, one is opened as the store opens its own for migrating.
"""

from __future__ import annotations

from collections.abc import Mapping
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from verifier.config import Config
from verifier.store.engine import make_engine, migration_connection
from verifier.store.models import Base

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


# Procrastinate's job queue lives in the same PostgreSQL database (migration 0005 applies
# its schema); its tables, types and functions are not our models, so autogenerate and
# `alembic check` leave every name with this prefix alone.
QUEUE_PREFIX = "procrastinate_"


def include_name(name: str | None, type_: str, parent_names: Mapping[str, str | None]) -> bool:
    """False for the queue's tables and everything on them (their indexes, constraints)."""
    if type_ == "table":
        return not (name or "").startswith(QUEUE_PREFIX)
    return not (parent_names.get("table_name") or "").startswith(QUEUE_PREFIX)


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or Config.load().database_url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite alters most things by copying the table; batch mode does that for us.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    """Write the SQL for a URL without connecting (``alembic upgrade --sql``)."""
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
        compare_type=True,
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(_url())
    try:
        with migration_connection(engine) as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
