"""The background work: one verification per job, and the periodic work beside it.

A face of `verifier.app.pipeline` like the others: a job is `pipeline.verify_session`
with the guard that makes a result count only while its job is still held; the
run's check durations then go into this process's metrics (`observe_run`).

* `run_job` (PostgreSQL, procrastinate): the guard runs inside the verdict's
  transaction and locks the job's row, held when it is still ``doing``, by this
  worker, at the attempt it fetched. A worker that lost its job (taken for dead
  and its job retried elsewhere) gets `LostJob`: its result is discarded, and
  `HeldJobManager` leaves the job to its new holder. procrastinate itself
  finishes a job by id alone; that is the seam this closes.
* `run_local` (SQLite, one machine): the same step in ``verifier serve``'s pool.
* `maintain`: retry stalled jobs (PostgreSQL), queue pending sessions nobody
  queued (``verifier ingest``), re-verify inconclusive sessions whose cause was
  infrastructure with a capped exponential backoff, and re-check delivered ones
  when configured. Once per deployment: a procrastinate periodic task on
  PostgreSQL, the APScheduler job of ``verifier serve`` on SQLite.

On a stop (SIGTERM), `Runtime.stopping` is set before the test runs are killed:
a verification that ends after that raises `Released` from its guard, nothing
is recorded, and its job goes back to the queue.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from procrastinate import App, BaseRetryStrategy, JobContext, PsycopgConnector, RetryDecision
from procrastinate import exceptions as procrastinate_errors
from procrastinate.jobs import Job, Status
from procrastinate.manager import JobManager
from sqlalchemy import Connection, text

from verifier.app.pipeline import verify_session
from verifier.config import Config, ServiceConfig
from verifier.errors import Cancelled, InfrastructureError, LostJob
from verifier.service.metrics import observe_run
from verifier.store.queue import MAINTENANCE_QUEUE, VERIFY_QUEUE, VERIFY_TASK, Queue, libpq_conninfo

if TYPE_CHECKING:
    from verifier.findings import DeliveryStatus
    from verifier.store import Store

log = logging.getLogger(
    "verifier.worker"
)  # its name before the move: logging configurations select by it

MAINTENANCE_TASK = "verifier.maintenance"
# Inconclusive causes worth another run: infrastructure that may come back (a repository
# unmounted, git failing, a runner missing). Not: tests.uncounted, tests.no_command,
# tests.unsandboxed, tests.isolation_unavailable, change.trusted_ref_untrustworthy (the
# configuration decides those, another run says the same), tests.tampering_suspected (a
# person judges it), nor a check skipped. docs/findings.md lists every code.
RETRYABLE = frozenset(
    {
        "change.repo_unavailable",
        "change.git_failed",
        "change.base_missing",
        "change.trusted_ref_missing",
        "change.fetch_failed",
        "tests.snapshot_failed",
        "tests.base_infra_failed",
        "tests.head_moved",
        "tests.runner_not_found",
        "tests.runner_failed",
    }
)
# Sessions looked at per kind and per round of the periodic work.
BATCH = 1000
# A job whose verification could not be stored is tried again this many times.
STORE_RETRIES = 5

_HELD = text(
    "SELECT id FROM procrastinate_jobs WHERE id = :job AND status = 'doing' "
    "AND worker_id = :worker AND attempts = :attempts FOR UPDATE"
)
# The same test as one statement for procrastinate's connector: the row locked first,
# then finished or retried only when it is still this worker's.
_HELD_CTE = (
    "WITH held AS MATERIALIZED (SELECT id FROM procrastinate_jobs WHERE id = %(job_id)s "
    "AND status = 'doing' AND worker_id = %(worker_id)s AND attempts = %(attempts)s "
    "FOR UPDATE) "
)


class Released(Cancelled):
    """A verification stopped by a stop request: nothing recorded, its job queued again."""

    code = "released"


def worker_label() -> str:
    """Who ran a run: host and process (and, on PostgreSQL, the worker's id)."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Runtime:
    """What the jobs of one process share."""

    config: Config
    store: Store
    name: str = field(default_factory=worker_label)
    stopping: threading.Event = field(default_factory=threading.Event)


# --- one verification -------------------------------------------------------------------


def stop_guard(runtime: Runtime) -> Callable[[Connection], bool]:
    """A guard for a run with no job: refuse to record once a stop was asked."""

    def guard(connection: Connection) -> bool:
        if runtime.stopping.is_set():
            raise Released("stopping: the run was interrupted, nothing recorded")
        return True

    return guard


def held_guard(
    runtime: Runtime, job_id: int, worker_id: int, attempts: int
) -> Callable[[Connection], bool]:
    """A guard that holds the verdict to the job: still ``doing``, this worker's, this attempt.

    The job's row stays locked until the verdict commits, so the stalled-job sweep
    cannot hand it to another worker in between.
    """

    def guard(connection: Connection) -> bool:
        if runtime.stopping.is_set():
            raise Released("stopping: the run was interrupted, nothing recorded")
        params = {"job": job_id, "worker": worker_id, "attempts": attempts}
        return connection.execute(_HELD, params).first() is not None

    return guard


def moot(store: Store, session_id: str, reason: str, after_run: int | None) -> bool:
    """True when the job's purpose is served: another run exists than the one it was
    queued after (an operator's "reverify" is never moot)."""
    if reason == "reverify":
        return False
    latest = store.listed(session_id).latest_run
    return (None if latest is None else latest.id) != after_run


def run_job(runtime: Runtime, job: Job) -> str:
    """Verify the session of a fetched job; returns the verdict, "moot" or "discarded"."""
    args: Mapping[str, Any] = job.task_kwargs
    session_id, reason = str(args["session_id"]), str(args.get("reason", "ingest"))
    after_run = args.get("after_run")
    assert job.id is not None and job.worker_id is not None
    if moot(runtime.store, session_id, reason, after_run):
        log.info("session %s: job %s is moot, another run exists", session_id, job.id)
        return "moot"
    label = f"{runtime.name}/{job.worker_id}"
    guard = held_guard(runtime, job.id, job.worker_id, job.attempts)
    try:
        outcome = verify_session(
            runtime.store,
            session_id,
            runtime.config,
            reason=reason,
            job_id=job.id,
            worker=label,
            guard=guard,
        )
    except LostJob:
        log.warning(
            "session %s: job %s is no longer held by worker %s: its result is discarded",
            session_id,
            job.id,
            label,
        )
        return "discarded"
    except Exception as exc:
        if runtime.stopping.is_set() and not isinstance(exc, Released):
            raise Released(f"stopping: {exc}") from exc
        raise
    observe_run(outcome.verification)
    status = outcome.verification.delivery_status.value
    log.info("session %s: %s (run %s, job %s)", session_id, status, outcome.run_id, job.id)
    return status


def run_local(runtime: Runtime, session_id: str, reason: str, after_run: int | None) -> None:
    """One verification in ``verifier serve``'s pool (SQLite); a stop leaves it pending."""
    if runtime.stopping.is_set() or moot(runtime.store, session_id, reason, after_run):
        return
    try:
        outcome = verify_session(
            runtime.store,
            session_id,
            runtime.config,
            reason=reason,
            worker=runtime.name,
            guard=stop_guard(runtime),
        )
    except Released:
        log.info("session %s: verification interrupted by the stop, not recorded", session_id)
        return
    except Exception:
        if runtime.stopping.is_set():
            log.info("session %s: verification interrupted by the stop, not recorded", session_id)
            return
        raise
    observe_run(outcome.verification)
    log.info(
        "session %s: %s (run %s)",
        session_id,
        outcome.verification.delivery_status.value,
        outcome.run_id,
    )


# --- when to verify again ---------------------------------------------------------------


def infrastructure_cause(result: Mapping[str, Any]) -> bool:
    """True when every check that could not be carried out failed for a `RETRYABLE` cause.

    A check that says nothing of why (no finding) is not retried: the cause is unknown.
    """
    checks = result.get("checks", {})
    errors = [check for check in checks.values() if check.get("status") == "error"]
    return bool(errors) and all(
        check.get("findings") and all(f.get("code") in RETRYABLE for f in check["findings"])
        for check in errors
    )


def retry_delay_s(inconclusive_runs: int, service: ServiceConfig) -> float:
    """The wait before the next run after `inconclusive_runs` (≥ 1) runs: doubled, capped."""
    exponent = min(inconclusive_runs - 1, 60)  # 2**60 s is past any cap; no overflow
    return float(min(service.retry_base_s * 2**exponent, service.retry_cap_s))


class Run(Protocol):
    """What the retry policy reads of a stored run (`verifier.store.RunRow`)."""

    @property
    def delivery_status(self) -> DeliveryStatus: ...
    @property
    def finished_at(self) -> dt.datetime: ...
    @property
    def result(self) -> dict[str, Any]: ...
    @property
    def id(self) -> int: ...


def retry_due(runs: Sequence[Run], service: ServiceConfig) -> dt.datetime | None:
    """When an inconclusive session is due for another run; None when it is not retried.

    Not after a conclusive verdict, not when the latest run's cause was not
    infrastructure, and not once it has had `retry_max_runs` inconclusive runs.
    """
    if not runs:
        return None
    inconclusive = 0
    for run in reversed(runs):
        if run.delivery_status.value != "inconclusive":
            break
        inconclusive += 1
    if inconclusive == 0 or inconclusive >= service.retry_max_runs:
        return None
    latest = runs[-1]
    if not infrastructure_cause(latest.result):
        return None
    return latest.finished_at + dt.timedelta(seconds=retry_delay_s(inconclusive, service))


def requeue(
    store: Store, queue: Queue, service: ServiceConfig, now: dt.datetime | None = None
) -> dict[str, int]:
    """Queue what is due: pending sessions nobody queued, infrastructure-inconclusive
    sessions whose backoff has passed, delivered sessions due for a re-check.

    Sessions with a verification waiting or under way (`Queue.busy`) are left
    alone. What is read after `busy` is fresh enough; a job queued
    in a race all the same is moot when it runs (`moot`). Returns how many of each
    were queued.
    """
    now = now or dt.datetime.now(dt.UTC)
    queued = {"ingest": 0, "retry": 0, "recheck": 0}

    # Read again after `busy`: a verdict commits before its job ends, so a session whose
    # job had ended when `busy` looked is no longer pending if it was verified.
    pending = store.session_ids("pending", limit=BATCH)
    idle = set(pending) - queue.busy(pending)
    for session_id in sorted(idle.intersection(store.session_ids("pending", limit=BATCH))):
        queued["ingest"] += queue.enqueue(session_id, "ingest", after_run=None)

    inconclusive = store.session_ids("inconclusive", limit=BATCH)
    for session_id in sorted(set(inconclusive) - queue.busy(inconclusive)):
        runs = store.runs(session_id)
        due = retry_due(runs, service)
        if due is not None and due <= now:
            queued["retry"] += queue.enqueue(session_id, "retry", after_run=runs[-1].id)

    if service.recheck_delivered_s > 0:
        delivered = store.session_ids("delivered", limit=BATCH)
        after = dt.timedelta(seconds=service.recheck_delivered_s)
        for session_id in sorted(set(delivered) - queue.busy(delivered)):
            latest = store.listed(session_id).latest_run
            if latest is not None and latest.finished_at + after <= now:
                queued["recheck"] += queue.enqueue(session_id, "recheck", after_run=latest.id)
    if any(queued.values()):
        log.info("periodic work queued %s", queued)
    return queued


# --- procrastinate (PostgreSQL) ---------------------------------------------------------


def build_app(runtime: Runtime, queue: Queue) -> App:
    """The procrastinate app of a worker process: the verify task, the periodic work."""
    concurrency = runtime.config.service.concurrency
    connector = PsycopgConnector(
        conninfo=libpq_conninfo(runtime.config.database_url),
        min_size=1,
        max_size=concurrency + 4,
    )
    app = App(connector=connector)
    app.job_manager = HeldJobManager(connector)

    @app.task(name=VERIFY_TASK, queue=VERIFY_QUEUE, pass_context=True, retry=ReleaseRetry())
    def verify_task(
        context: JobContext, session_id: str, reason: str, after_run: int | None = None
    ) -> str:
        return run_job(runtime, context.job)

    @app.periodic(cron=runtime.config.service.maintenance_cron, periodic_id="maintenance")
    # At most one round waits (queueing lock); rounds may overlap, each is idempotent. No
    # `lock`: a worker dying mid-round would hold it, and the sweep that frees dead
    # workers' jobs is this very task.
    @app.task(name=MAINTENANCE_TASK, queue=MAINTENANCE_QUEUE, queueing_lock="maintenance")
    async def maintenance_task(timestamp: int) -> dict[str, int]:
        stalled = await retry_stalled(app, runtime.config.service.stalled_after_s)
        queued = await asyncio.to_thread(requeue, runtime.store, queue, runtime.config.service)
        sent = await asyncio.to_thread(retry_webhooks, runtime)
        return {"stalled": stalled, **queued, **sent}

    del verify_task, maintenance_task  # registered on the app
    return app


def retry_webhooks(runtime: Runtime) -> dict[str, int]:
    """The periodic work's webhook round: due deliveries attempted (`verifier.app.notify`)."""
    if not runtime.config.webhooks:
        return {}
    from verifier.app.notify import retry_due

    try:
        return retry_due(runtime.store, runtime.config)
    except Exception:  # a webhook round never stops the periodic work
        log.exception("webhooks: the retry round failed")
        return {}


async def retry_stalled(app: App, stalled_after_s: float) -> int:
    """Put the jobs of workers with no heartbeat for `stalled_after_s` back in the queue.

    A job whose session already has another job waiting (the queueing lock) is
    failed instead: that other job will verify the session.
    """
    manager = app.job_manager
    retried = 0
    for job in await manager.get_stalled_jobs(seconds_since_heartbeat=stalled_after_s):
        assert job.id is not None
        try:
            await manager.retry_job_by_id_async(job.id, retry_at=dt.datetime.now(dt.UTC))
        except procrastinate_errors.UniqueViolation:
            await manager.finish_job_by_id_async(job.id, Status.FAILED, delete_job=False)
            log.warning("job %s of a stalled worker ended: another job of it waits", job.id)
            continue
        except procrastinate_errors.ConnectorException as exc:  # finished meanwhile
            log.info("stalled job %s not retried: %s", job.id, exc.__cause__ or exc)
            continue
        log.warning("job %s of a stalled worker (%s) queued again", job.id, job.worker_id)
        retried += 1
    return retried


class ReleaseRetry(BaseRetryStrategy):
    """Released jobs go back to the queue at once, whatever their attempts; a run that
    could not be stored is tried again a few times, later each time. Nothing else is
    retried: the job fails, and the periodic work queues a pending session again."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        if isinstance(exception, Released):
            return RetryDecision(retry_in={"seconds": 0})
        if isinstance(exception, InfrastructureError) and job.attempts < STORE_RETRIES:
            return RetryDecision(retry_in={"seconds": 2 ** (job.attempts + 1)})
        return None


class HeldJobManager(JobManager):
    """procrastinate's job manager, finishing or retrying a job only while this worker
    holds it (still ``doing``, its worker id, the attempt it fetched).

    procrastinate finishes a job by its id alone: a worker taken for dead that comes
    back would mark the job its successor runs as finished, and the successor's
    verdict would then be refused too. Here the late worker leaves it alone.
    """

    async def finish_job(self, job: Job, status: Status, delete_job: bool) -> None:
        rows = await self.connector.execute_query_all_async(
            query=_HELD_CTE
            + "SELECT procrastinate_finish_job_v1(id, %(status)s, %(delete_job)s) FROM held",
            job_id=job.id,
            worker_id=job.worker_id,
            attempts=job.attempts,
            status=status.value,
            delete_job=delete_job,
        )
        if not rows:
            _left(job)

    async def retry_job(
        self,
        job: Job,
        retry_at: dt.datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        lock: str | None = None,
    ) -> None:
        query = (
            _HELD_CTE + "SELECT procrastinate_retry_job_v2(id, %(retry_at)s, %(priority)s, "
            "%(queue)s, %(lock)s) FROM held"
        )
        try:
            rows = await self.connector.execute_query_all_async(
                query=query,
                job_id=job.id,
                worker_id=job.worker_id,
                attempts=job.attempts,
                retry_at=retry_at or dt.datetime.now(dt.UTC),
                priority=priority,
                queue=queue,
                lock=lock,
            )
        except procrastinate_errors.UniqueViolation:
            # Another job of the session waits already: it will do; this one ends.
            await self.finish_job(job, Status.ABORTED, delete_job=False)
            return
        if not rows:
            _left(job)


def _left(job: Job) -> None:
    log.warning("job %s is no longer held by worker %s: left as it is", job.id, job.worker_id)
