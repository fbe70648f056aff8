"""What only a real server shows: bodies over the limit refused on the wire by uvicorn,
with the connection left usable for the next client."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import pytest

from tests.support.api import bearer, make_config, make_tokens, serve
from tests.support.report_factory import make_report_bytes
from verifier.service.api import create_app

LIMIT = 32 * 1024


@pytest.fixture
def live(sqlite_url: str) -> Iterator[tuple[str, dict[str, str]]]:
    tokens = make_tokens(sqlite_url)
    with serve(create_app(make_config(sqlite_url, max_report_bytes=LIMIT))) as base:
        yield base, tokens


def test_a_declared_length_over_the_limit_is_refused_and_the_server_serves_on(
    live: tuple[str, dict[str, str]],
) -> None:
    base, tokens = live
    with httpx.Client(base_url=base, headers=bearer(tokens["ingest"])) as client:
        refused = client.post("/v1/sessions", content=b"{" + b" " * LIMIT)
        assert refused.status_code == 413
        assert refused.json()["error"]["code"] == "too_large"
    with httpx.Client(base_url=base, headers=bearer(tokens["ingest"])) as client:
        assert client.post("/v1/sessions", content=make_report_bytes("s-1")).status_code == 202
        assert client.get("/v1/sessions/s-1", headers=bearer(tokens["read"])).status_code == 200


def test_a_chunked_body_over_the_limit_is_413_and_kept_as_head_and_hash(
    live: tuple[str, dict[str, str]],
) -> None:
    base, tokens = live
    chunks = [b"{" + b" " * 20_000] + [b"x" * 20_000] * 4
    whole = b"".join(chunks)
    with httpx.Client(base_url=base) as client:
        refused = client.post(
            "/v1/sessions", content=iter(chunks), headers=bearer(tokens["ingest"])
        )
        assert refused.status_code == 413
        admin = bearer(tokens["admin"])
        (kept,) = client.get("/v1/rejected", headers=admin).json()["rejected"]
        assert (kept["report_size"], kept["report_sha256"]) == (
            len(whole),
            hashlib.sha256(whole).hexdigest(),
        )
        assert whole.startswith(client.get(kept["url"], headers=admin).content)
