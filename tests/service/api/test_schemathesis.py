"""Schemathesis against /openapi.json on a real server: no generated request makes it fail."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.api import RecordingQueue, bearer, make_config, make_tokens, serve
from tests.support.pg import NO_POSTGRES, POSTGRES_URL, postgres_database
from tests.support.report_factory import make_report_bytes
from verifier.app.evidence import create_key
from verifier.config import Config
from verifier.service.api import create_app
from verifier.store import upgrade

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """A served API with one stored session, and an admin token (admin may call everything);
    on SQLite and on PostgreSQL, whose refusals (NUL in text, 32-bit ids) differ."""
    with ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{Path(tmp_path_factory.mktemp('fuzz')) / 'api.sqlite3'}"
        else:
            if not POSTGRES_URL:
                pytest.skip(NO_POSTGRES)
            url = stack.enter_context(postgres_database(POSTGRES_URL))
            upgrade(url)
        admin = make_tokens(url)["admin"]
        # The witness signs its receipts with the evidence key: a service without it is
        # misconfigured (503), which is not what this test looks for.
        key = Path(tmp_path_factory.mktemp("key")) / "witness.pem"
        create_key(key)
        config = Config.from_mapping(
            {
                "verifier": {"database_url": url, "max_report_bytes": 256 * 1024},
                "evidence": {"signing_key": str(key)},
            }
        )
        app = create_app(config, RecordingQueue())
        base = stack.enter_context(serve(app))
        report = make_report_bytes("s-1")
        httpx.post(f"{base}/v1/sessions", content=report, headers=bearer(admin))
        yield base, admin


@schemathesis.serializer("application/x-ndjson")
def _json_lines(ctx: schemathesis.SerializationContext, value: Any) -> bytes:
    """The witness's body (`POST /v1/sessions/{id}/trail`): JSON lines, sent as generated."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return json.dumps(value).encode()  # negative cases: any JSON value


# The document the served app publishes, built here without a database (a test below
# holds it equal to what the server answers): pytest parametrizes over its operations.
schema = schemathesis.openapi.from_dict(create_app(make_config("sqlite://")).openapi())


def test_the_served_document_is_the_one_fuzzed(live: tuple[str, str]) -> None:
    assert httpx.get(f"{live[0]}/openapi.json").json() == schema.raw_schema


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_no_generated_request_makes_the_api_fail(case: Any, live: tuple[str, str]) -> None:
    base, admin = live
    case.call_and_validate(base_url=base, headers=bearer(admin), checks=CHECKS)
