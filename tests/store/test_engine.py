"""The store's engine plumbing (`verifier.store.engine`): bringing a database to head,
and a database we cannot reach named, with its password masked, in the error."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from verifier.errors import ConfigError, InfrastructureError
from verifier.store.engine import (
    HEAD_REVISION,
    at_head,
    current_revision,
    make_engine,
    masked,
    reachable,
)

UNREACHABLE = "postgresql+psycopg://postgres:s3cret@127.0.0.1:1/x"


def test_a_writable_sqlite_file_is_brought_to_head(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.sqlite3'}"
    engine = make_engine(url)
    try:
        at_head(engine)
    finally:
        engine.dispose()
    assert current_revision(url) == HEAD_REVISION


def test_a_read_only_database_is_never_migrated_and_says_how_to_migrate_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "empty.sqlite3"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE unrelated (x INTEGER)")
    url = f"sqlite:///{path}"
    engine = make_engine(url, read_only=True)
    try:
        with pytest.raises(ConfigError, match=r"never migrated.*run `verifier db upgrade`"):
            at_head(engine, read_only=True)
    finally:
        engine.dispose()
    assert current_revision(url) is None


def test_an_unreachable_database_among_several_is_named_with_them_all_masked(
    tmp_path: Path,
) -> None:
    here = make_engine(f"sqlite:///{tmp_path / 'here.sqlite3'}")
    away = make_engine(UNREACHABLE)
    try:
        with pytest.raises(InfrastructureError) as raised, reachable(here, away):
            away.connect()
    finally:
        here.dispose()
        away.dispose()
    message = str(raised.value)
    assert "s3cret" not in message
    assert f"database {masked(here)} or postgresql+psycopg://postgres:***@127.0.0.1:1/x" in message
    assert "cannot be used: " in message and isinstance(raised.value.__cause__, Exception)


def test_a_url_is_masked_for_messages() -> None:
    engine = make_engine(UNREACHABLE)
    try:
        assert masked(engine) == "postgresql+psycopg://postgres:***@127.0.0.1:1/x"
    finally:
        engine.dispose()


def test_every_sqlite_connection_commits_durably_to_the_wal(tmp_path: Path) -> None:
    # synchronous=FULL (2) in WAL mode: a commit returns once the WAL is on the disk, so an
    # acknowledged report survives a power cut; NORMAL (1) would survive a crash only.
    engine = make_engine(f"sqlite:///{tmp_path / 'durable.sqlite3'}")
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 2
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    finally:
        engine.dispose()
