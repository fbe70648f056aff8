"""A store moved to PostgreSQL exports the very same bundle as the SQLite store it came from."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from audit.bundle import verify_bundle
from tests.support.evidence import build, export
from tests.support.pg import NO_POSTGRES, POSTGRES_URL, postgres_database
from verifier.store.maintenance import copy_store

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not POSTGRES_URL, reason=NO_POSTGRES)]


def test_a_bundle_exported_from_postgresql_is_byte_for_byte_the_sqlite_one(
    tmp_path: Path,
) -> None:
    assert POSTGRES_URL is not None
    exported = build(tmp_path)
    from_sqlite = export(exported)
    with postgres_database(POSTGRES_URL) as url:
        copy_store(exported.config.database_url, url)
        on_postgres = replace(exported, config=replace(exported.config, database_url=url))
        from_postgres = export(on_postgres)
    assert len(verify_bundle(from_postgres).sessions) == 3
    assert from_postgres == from_sqlite
