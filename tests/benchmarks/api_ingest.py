"""Benchmark: posting reports to the HTTP API against the driver writing the same rows.

The data: the ingest benchmark's 1,000 reports of 17 KB (`store_ingest.report_sets`).
The subject: `POST /v1/sessions` of each report's bytes, one after the other,
from one HTTP client with a keep-alive connection, to `create_app` served by
uvicorn in the same process (one process, as `verifier serve --no-worker` runs:
on PostgreSQL with its `PostgresQueue`, so each new session's job is written in
the transaction that stores it), on a SQLite file and on a PostgreSQL database;
every answer must be 202. The whole request is timed: HTTP, the token check,
parsing the report, storing it (the client sets TCP_NODELAY, as a harness posting
reports should: without it, each request waits for a delayed ACK, 40 ms on Linux,
whatever the server does).

Two raw operations, through the driver alone with the store's pragmas: the same
rows in one transaction (the ingest benchmark's: one commit for 1,000 reports),
and the same rows one transaction per report, which is the floor of a client that
posts one report after the other and is answered only once its report is on disk
(``synchronous=FULL``; PostgreSQL's ``synchronous_commit`` as the server has it):
a commit, so a flush of the log to the disk, per report. Target: 300 reports/s or
more through the API on SQLite, on one process.
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
from verifier.store import Store
from verifier.store.queue import PostgresQueue

TARGET_PER_S = 300


def through_api(stack: ExitStack, url: str) -> Callable[[list[Report]], None]:
    token = make_tokens(url)["ingest"]
    queue = None if url.startswith("sqlite") else PostgresQueue(url)
    if queue is not None:
        stack.callback(queue.close)
    base = stack.enter_context(serve(create_app(make_config(url), queue)))
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
        for each in (False, True):
            raw_path = tmp / f"raw-{each}.sqlite3"
            Store.open(f"sqlite:///{raw_path}").close()
            targets[f"sqlite raw{' each' * each}"] = store_ingest.raw_sqlite(raw_path, each=each)
        postgres = store_ingest._postgres_databases(stack, 3)
        if postgres is not None:
            targets["postgres api"] = through_api(stack, postgres[0])
            for each in (False, True):
                targets[f"postgres raw{' each' * each}"] = store_ingest.raw_postgres(
                    postgres[1 + each], stack, each=each
                )

        t = measure(store_ingest.each_set(targets, sets), repeat)

    rows: list[Row] = []
    for engine, name in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        if f"{engine} api" not in t:
            continue
        subject = f"POST /v1/sessions x {n:,}, {name} ({n / t[f'{engine} api']:,.0f}/s)"
        target = (f">= {TARGET_PER_S}/s", n / TARGET_PER_S) if engine == "sqlite" else ("-", None)
        rows.append(
            Row(
                "api",
                subject,
                t[f"{engine} api"],
                "executemany of the same rows, one transaction",
                t[f"{engine} raw"],
                *target,
            )
        )
        rows.append(
            Row(
                "api",
                subject,
                t[f"{engine} api"],
                f"the same rows, one transaction per report ({n / t[f'{engine} raw each']:,.0f}/s)",
                t[f"{engine} raw each"],
            )
        )
    facts = {"api, rates": ", ".join(f"{name} {n / s:,.0f}/s" for name, s in t.items())}
    return Result(rows, facts)
