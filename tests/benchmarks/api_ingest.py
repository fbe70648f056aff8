"""Benchmark: posting reports to the HTTP API against a raw executemany of the same rows.

The data: the ingest benchmark's 1,000 reports of 17 KB (`store_ingest.report_sets`).
The subject: `POST /v1/sessions` of each report's bytes, one after the other,
from one HTTP client with a keep-alive connection, to `create_app` served by
uvicorn in the same process (one process, as `verifier serve` runs), on a
SQLite file and on a PostgreSQL database; every answer must be 202. The whole
request is timed: HTTP, the token check, parsing the report, storing it (the
client sets TCP_NODELAY, as a harness posting reports should: without it, each
request waits for a delayed ACK, 40 ms on Linux, whatever the server does). The
raw operation is what the store must write for the same reports, through the
driver alone in one transaction (the ingest benchmark's). Target: 300 reports/s
or more through the API on SQLite, on one process.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import httpx

from tests.benchmarks import store_ingest
from tests.benchmarks.timing import Result, Row, measure
from tests.support.api import bearer, make_config, make_tokens, serve
from verifier.contract.report import Report
from verifier.service.api import create_app

TARGET_PER_S = 300


def through_api(stack: ExitStack, url: str) -> Callable[[list[Report]], None]:
    token = make_tokens(url)["ingest"]
    base = stack.enter_context(serve(create_app(make_config(url))))
    # TCP_NODELAY: otherwise the client's Nagle holds the body back until the server's
    # delayed ACK of the headers (40 ms a request on Linux), and that is all one measures.
    transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    client = stack.enter_context(
        httpx.Client(base_url=base, headers=bearer(token), timeout=60, transport=transport)
    )

    def post(reports: list[Report]) -> None:
        for report in reports:
            response = client.post("/v1/sessions", content=report.raw)
            assert response.status_code == 202, response.text

    return post


def run(tmp: Path, repeat: int) -> Result:
    n = store_ingest.REPORTS
    sets = store_ingest.report_sets(repeat + 1)
    targets: dict[str, Callable[[list[Report]], None]] = {}
    with ExitStack() as stack:
        targets["sqlite api"] = through_api(stack, f"sqlite:///{tmp / 'api.sqlite3'}")
        raw_path = tmp / "raw.sqlite3"
        from verifier.store import Store

        Store.open(f"sqlite:///{raw_path}").close()
        targets["sqlite raw"] = store_ingest.raw_sqlite(raw_path)
        postgres = store_ingest._postgres_databases(stack, 2)
        if postgres is not None:
            targets["postgres api"] = through_api(stack, postgres[0])
            targets["postgres raw"] = store_ingest.raw_postgres(postgres[1], stack)

        t = measure(store_ingest.each_set(targets, sets), repeat)

    rows = [
        Row(
            "api",
            f"POST /v1/sessions x {n:,}, SQLite ({n / t['sqlite api']:,.0f}/s)",
            t["sqlite api"],
            "executemany of the same rows, one transaction",
            t["sqlite raw"],
            f">= {TARGET_PER_S}/s",
            n / TARGET_PER_S,
        )
    ]
    if "postgres api" in t:
        rows.append(
            Row(
                "api",
                f"POST /v1/sessions x {n:,}, PostgreSQL ({n / t['postgres api']:,.0f}/s)",
                t["postgres api"],
                "executemany of the same rows, one transaction",
                t["postgres raw"],
            )
        )
    facts = {"api, rates": ", ".join(f"{name} {n / s:,.0f}/s" for name, s in t.items())}
    return Result(rows, facts)
