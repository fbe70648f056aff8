"""A PostgreSQL database of its own for each test, on the server CI names."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import NullPool, create_engine
from sqlalchemy.engine import make_url

POSTGRES_URL = os.environ.get("VERIFIER_TEST_POSTGRES_URL")
NO_POSTGRES = (
    "VERIFIER_TEST_POSTGRES_URL is not set: set it to a server you may create "
    "databases on, e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@contextmanager
def postgres_database(url: str) -> Iterator[str]:
    """A new database on the server of `url`, dropped afterwards: tests never share data."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    name = f"verifier_test_{secrets.token_hex(6)}"
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.dispose()
