"""1 versus 4 `verifier worker` processes on I/O-bound test commands (each sleeps 1 s).

    VERIFIER_TEST_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python tests/service/bench_workers.py [sessions]

Workers are started and registered first; the clock runs from the moment the sessions
and their jobs are committed until none is pending. Not a test (no timed assertion):
the ratio goes into the notes and docs/benchmarks.md.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # as pytest's pythonpath

from gitrepo import GitRepo  # noqa: E402
from service.svc import PYTHON, sessions, wait_for, workers, write_config  # noqa: E402
from sessions import calc_repo  # noqa: E402
from sqlalchemy import NullPool, create_engine, text  # noqa: E402
from store.pg import postgres_database  # noqa: E402

from verifier.pipeline import submit  # noqa: E402
from verifier.queue import PostgresQueue  # noqa: E402
from verifier.store import Store, upgrade  # noqa: E402

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
        config = write_config(tmp, repo, SLEEP)
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


def main() -> None:
    server = os.environ["VERIFIER_TEST_POSTGRES_URL"]
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        repo = calc_repo(tmp / "calc")
        one = run(count, 1, repo, tmp, server)
        four = run(count, 4, repo, tmp, server)
    print(f"{count} sessions, test command sleeps 1 s")
    print(f"1 worker : {one:.2f} s ({count / one:.2f} sessions/s)")
    print(f"4 workers: {four:.2f} s ({count / four:.2f} sessions/s)")
    print(f"ratio    : {one / four:.2f}x")


if __name__ == "__main__":
    main()
