"""Benchmark: 4 versus 1 `verifier worker` processes on I/O-bound test commands.

The data: 40 sessions of the calc repository, each verified with a test command
that sleeps 1 s (`results = "exit-code"`, no sandbox, the test result cache
off: the sessions share one tree), in a PostgreSQL database
of their own. Workers (concurrency 1 each) are started and registered first;
the clock runs from committing the sessions and their jobs (`pipeline.submit`
with the queue) until none is pending, and every session must then hold exactly
one run. The subject is 4 worker processes, the raw operation the same work on
1. Target: 4 workers at least 3.5 times as fast. One timed run of each (they
take a minute): `--repeat` does not apply.

    .venv/bin/python -m tests.benchmarks.run --only workers
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))  # the test helpers import each other as pytest runs them

from sqlalchemy import NullPool, create_engine, text  # noqa: E402

from tests.benchmarks.timing import Result, Row  # noqa: E402
from tests.support.gitrepo import GitRepo  # noqa: E402
from tests.support.pg import postgres_database  # noqa: E402
from tests.support.service import PYTHON, sessions, wait_for, workers, write_config  # noqa: E402
from tests.support.sessions import calc_repo  # noqa: E402
from verifier.app.pipeline import submit  # noqa: E402
from verifier.store import Store, upgrade  # noqa: E402
from verifier.store.queue import PostgresQueue  # noqa: E402

SLEEP = [PYTHON, "-c", "import time; time.sleep(1)"]


def registered(url: str) -> int:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return int(
                connection.execute(text("SELECT count(*) FROM procrastinate_workers")).scalar_one()
            )
    finally:
        engine.dispose()


def run(count: int, n_workers: int, repo: GitRepo, tmp: Path, server: str) -> float:
    reports = sessions(repo, count, prefix=f"w{n_workers}")
    with postgres_database(server) as url:
        upgrade(url)
        # Every session is the same tree: with the cache, only the first would be tested.
        config = write_config(tmp, repo, SLEEP, test_result_cache=False)
        with workers(n_workers, config, url, tmp / f"logs-{n_workers}"):
            # each process runs a verify worker and a maintenance worker
            wait_for("workers registered", lambda: registered(url) >= 2 * n_workers)
            queue = PostgresQueue(url)
            with Store.open(url) as store:
                start = time.perf_counter()
                for raw in reports:
                    submit(store, raw, "bench", queue=queue)
                wait_for("all verified", lambda: not store.session_ids("pending"))
                elapsed = time.perf_counter() - start
                assert sum(len(store.runs(f"w{n_workers}-{i:04d}")) for i in range(count)) == count
            queue.close()
    return elapsed


SESSIONS = 40
TARGET = 3.5


def bench(tmp: Path, repeat: int) -> Result:
    server = os.environ.get(
        "VERIFIER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    repo = calc_repo(tmp / "calc")
    one = run(SESSIONS, 1, repo, tmp, server)
    four = run(SESSIONS, 4, repo, tmp, server)
    row = Row(
        "workers",
        f"4 worker processes, {SESSIONS} sessions, tests sleeping 1 s",
        four,
        "1 worker process, the same sessions",
        one,
        f">= {TARGET}x faster",
        one / TARGET,
    )
    facts = {"workers, speed-up": f"{one / four:.2f}x ({one:.1f} s against {four:.1f} s)"}
    return Result([row], facts)
