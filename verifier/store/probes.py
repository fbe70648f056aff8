"""What the service's probes and metrics read: the stats aggregate, the runs, and the schema
revision.

Read from the database at each scrape rather than counted in memory, so that
the figures are right however many processes ingest and verify. The session
counts are the ones ``GET /v1/stats`` answers, read by the same function
(`verifier.store.stats.stats`, from the `session_counts` aggregate: a few
thousand rows whatever the number of sessions), in all and by agent, model and
repository, in one transaction; runs are counted over the runs, which are only
ever appended to, so that count never goes down: from the index of their
verdicts (migration 0010), which cut a scrape over 100,000 runs on SQLite by
about 40 % (`tests/benchmarks/metrics_scrape.py`), where reading every run with
its result was half of it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, inspect, select, text
from sqlalchemy.orm import Session

from verifier.store import stats as counting
from verifier.store.models import RunModel
from verifier.store.rows import Counts, Group

if TYPE_CHECKING:
    from verifier.store.db import Store

# The dimensions a session is counted in besides "all" (`verifier.store.stats.count_rows`).
DIMENSIONS = ("agent", "model", "repo")
# Read from the index on the verdict alone (a covering index: no run row is read).
RUNS_BY_VERDICT = select(RunModel.delivery_status, func.count()).group_by(RunModel.delivery_status)


@dataclass(frozen=True)
class Tallies:
    """The sessions' counts in all (`totals`) and by agent, model and repository (`by`,
    the groups of ``/v1/stats?group_by=...``), and the runs by verdict."""

    totals: Counts
    by: dict[str, list[Group]]
    runs_by_verdict: dict[str, int]

    @property
    def sessions_by_done(self) -> dict[bool, int]:
        """Sessions by whether their agent said done."""
        return {True: self.totals.done, False: self.totals.total - self.totals.done}

    @property
    def sessions_by_status(self) -> dict[str, int]:
        """Sessions by current delivery status."""
        t = self.totals
        return {
            "pending": t.pending,
            "delivered": t.delivered,
            "not_delivered": t.not_delivered,
            "inconclusive": t.inconclusive,
        }


def tallies(store: Store) -> Tallies:
    """The counts `/metrics` exposes, read in one transaction."""
    with store.transaction() as session:

        def same() -> AbstractContextManager[Session]:
            return nullcontext(session)  # every read in this one transaction

        totals = counting.stats(same).totals
        by = {d: counting.stats(same, group_by=d).groups for d in DIMENSIONS}
        verdicts = session.execute(RUNS_BY_VERDICT).all()
    return Tallies(
        totals=totals,
        by=by,
        runs_by_verdict={status: int(n) for status, n in verdicts},
    )


def schema_revision(store: Store) -> str | None:
    """The Alembic revision the database is at; None when it was never migrated."""
    with store.transaction() as session:
        connection = session.connection()
        if not inspect(connection).has_table("alembic_version"):
            return None
        revision = session.scalar(text("SELECT version_num FROM alembic_version"))
        return None if revision is None else str(revision)
