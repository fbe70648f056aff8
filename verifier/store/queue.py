"""Where a session waits to be verified: the `Queue` the pipeline and the API hand work to.

Two implementations, one per engine:

* `PostgresQueue`: procrastinate's job table, in the same database as the
  sessions. A new session's job is written by the transaction that stores the
  session (`on_insert`), through procrastinate's own SQL function
  ``procrastinate_defer_jobs_v1``, so a report and its job are committed
  together or not at all. The job's queueing lock is the session id: at most
  one job per session waits in ``todo``; a second one is refused by a unique
  index, inside a savepoint so that the refusal does not abort the ingest.
  The session id is also the job's lock: two jobs of one session never run at
  once (a re-verification asked while one runs waits for it).
  `verifier worker` processes run the jobs (`verifier.service.worker`).
* `LocalQueue`: on one machine (SQLite), a bounded pool of threads in the
  ``verifier serve`` process. The store is its durable queue: sessions still
  ``pending`` are picked up when it starts and by the periodic work.

Only plain SQL here: the API process never needs procrastinate's worker code.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from sqlalchemy import Connection, NullPool, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError

log = logging.getLogger(
    "verifier.queue"
)  # its name before the move: logging configurations select by it

# The procrastinate task and queues of the workers (verifier.service.worker registers them).
VERIFY_TASK = "verifier.verify_session"
VERIFY_QUEUE = "verify"
MAINTENANCE_QUEUE = "maintenance"
# Why a run happened (verification_runs.reason). A job for any reason but "reverify"
# (an operator's request, always carried out) names the session's latest run when it
# was queued (`after_run`, None for none): it is moot once another run exists, so a
# session the periodic work queued twice, in a race with a verification finishing,
# is still verified once.
REASONS = ("ingest", "reverify", "retry", "recheck")

_DEFER = text(
    "SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW("
    ":queue, :task, 0, :lock, :lock, CAST(:args AS jsonb), NULL"
    ")]::procrastinate_job_to_defer_v1[])) AS id"
)
_QUEUEING_LOCK_INDEX = "procrastinate_jobs_queueing_lock_idx_v1"
_BUSY = text(
    "SELECT DISTINCT queueing_lock FROM procrastinate_jobs WHERE task_name = :task "
    "AND status IN ('todo', 'doing') AND queueing_lock = ANY(:ids)"
)


class Queue(Protocol):
    """What faces need of a queue; the pipeline calls it, never the reverse."""

    def on_insert(self, session_id: str, reason: str) -> Callable[[Connection], None] | None:
        """What to run inside the transaction that stores a new session; None when this
        queue cannot join it (`enqueue` is then called once the session is stored)."""
        ...

    def enqueue(self, session_id: str, reason: str, *, after_run: int | None = None) -> bool:
        """Queue a verification of a stored session; False when one is already waiting.

        `after_run`: the session's latest run as the caller saw it (see `REASONS`).
        """
        ...

    def busy(self, session_ids: Collection[str]) -> set[str]:
        """Those of `session_ids` with a verification waiting or under way."""
        ...

    def reachable(self) -> str | None:
        """None when jobs can be queued; otherwise why not (for /readyz)."""
        ...

    def close(self) -> None:
        """Release the queue's connections or threads; nothing is queued after this."""
        ...


def libpq_conninfo(url: str) -> str:
    """The libpq connection string of a SQLAlchemy PostgreSQL URL (for procrastinate)."""
    from psycopg.conninfo import make_conninfo

    parsed = make_url(url)
    if not parsed.drivername.startswith("postgresql"):
        raise ValueError(f"not a PostgreSQL URL: {parsed.drivername}")
    params: dict[str, str | int] = {}
    if parsed.host:
        params["host"] = parsed.host
    if parsed.port:
        params["port"] = parsed.port
    if parsed.username:
        params["user"] = parsed.username
    if parsed.password:
        params["password"] = str(parsed.password)
    if parsed.database:
        params["dbname"] = parsed.database
    for key, value in parsed.query.items():
        params[key] = value if isinstance(value, str) else value[-1]
    return make_conninfo("", **params)


def defer(
    connection: Connection, session_id: str, reason: str, after_run: int | None = None
) -> int | None:
    """Write a verification job for `session_id` in `connection`'s transaction.

    Its id, or None when a job for the session already waits (the queueing lock):
    that one will do. The insert runs in a savepoint, so that a refusal leaves the
    caller's transaction usable.
    """
    args = json.dumps({"session_id": session_id, "reason": reason, "after_run": after_run})
    try:
        with connection.begin_nested():
            return int(
                connection.execute(
                    _DEFER,
                    {"queue": VERIFY_QUEUE, "task": VERIFY_TASK, "lock": session_id, "args": args},
                ).scalar_one()
            )
    except IntegrityError as exc:
        if _constraint(exc) == _QUEUEING_LOCK_INDEX:
            return None
        raise


def _constraint(exc: DBAPIError) -> str | None:
    diag = getattr(exc.orig, "diag", None)
    return getattr(diag, "constraint_name", None)


class PostgresQueue:
    """Jobs in procrastinate's table, beside the sessions (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self._engine = create_engine(url, poolclass=NullPool)

    def on_insert(self, session_id: str, reason: str) -> Callable[[Connection], None]:
        """Write the session's job in the transaction that stores it (see `Queue`)."""

        def write_job(connection: Connection) -> None:
            defer(connection, session_id, reason)

        return write_job

    def enqueue(self, session_id: str, reason: str, *, after_run: int | None = None) -> bool:
        """Write a job in a transaction of its own; False when one already waits."""
        with self._engine.begin() as connection:
            return defer(connection, session_id, reason, after_run) is not None

    def busy(self, session_ids: Collection[str]) -> set[str]:
        """Those of `session_ids` with a job waiting or running in procrastinate's table."""
        if not session_ids:
            return set()
        with self._engine.connect() as connection:
            rows = connection.execute(_BUSY, {"task": VERIFY_TASK, "ids": list(session_ids)})
            return {row[0] for row in rows}

    def reachable(self) -> str | None:
        """None when the job table answers; otherwise why not."""
        try:
            with self._engine.connect() as connection:
                found = connection.execute(text("SELECT to_regclass('procrastinate_jobs')"))
                if found.scalar() is None:
                    return "the job queue's tables are missing: run `verifier db upgrade`"
        except DBAPIError as exc:
            return f"the job queue cannot be reached: {type(exc.orig).__name__}"
        return None

    def close(self) -> None:
        """Close the queue's connections."""
        self._engine.dispose()


class LocalQueue:
    """Verifications in this process, at most `concurrency` at once (SQLite, one machine).

    `run(session_id, reason, after_run)` does one verification
    (`verifier.service.worker.run_local`); a session already waiting or running is not
    queued twice.
    """

    def __init__(self, run: Callable[[str, str, int | None], None], concurrency: int) -> None:
        self._run = run
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="verify")
        self._lock = threading.Lock()
        self._queued: set[str] = set()
        self._closed = False

    def on_insert(self, session_id: str, reason: str) -> None:
        """None: a local queue cannot join the store's transaction."""
        return None  # the session's row is the job: `enqueue` once it is committed

    def enqueue(self, session_id: str, reason: str, *, after_run: int | None = None) -> bool:
        """Hand the verification to the pool; False when the session is already queued
        or the pool is stopped."""
        with self._lock:
            if self._closed or session_id in self._queued:
                return False
            self._queued.add(session_id)
        self._pool.submit(self._one, session_id, reason, after_run)
        return True

    def queued(self) -> set[str]:
        """The sessions waiting or being verified now."""
        with self._lock:
            return set(self._queued)

    def busy(self, session_ids: Collection[str]) -> set[str]:
        """Those of `session_ids` waiting or being verified in this process."""
        return self.queued().intersection(session_ids)

    def _one(self, session_id: str, reason: str, after_run: int | None) -> None:
        try:
            self._run(session_id, reason, after_run)
        except Exception:  # one session's bug must not stop the pool
            log.exception("verification of session %s failed", session_id)
        finally:
            with self._lock:
                self._queued.discard(session_id)

    def reachable(self) -> str | None:
        """None while the pool takes work; why not once it is stopped."""
        return "the verification pool is stopped" if self._closed else None

    def close(self, wait: bool = True) -> None:
        """Take no more work; drop what waits; `wait` for the verifications under way."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=True)
