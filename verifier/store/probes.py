"""What the service's probes and metrics read: a few aggregates and the schema revision.

Read from the database at each scrape rather than counted in memory, so that
the figures are right however many processes ingest and verify. The session
counts come from the `session_counts` aggregate (a few thousand rows whatever
the number of sessions); verdicts are counted over the runs, which are only
ever appended to, so the count never goes down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, inspect, select, text

from verifier.store.models import RunModel, SessionCountModel

if TYPE_CHECKING:
    from verifier.store.db import Store


@dataclass(frozen=True)
class Tallies:
    """Sessions by done (True/False) and by current delivery status; runs by verdict."""

    sessions_by_done: dict[bool, int]
    sessions_by_status: dict[str, int]
    runs_by_verdict: dict[str, int]


def tallies(store: Store) -> Tallies:
    """The counts `/metrics` exposes, read in one transaction."""
    counts = func.coalesce(func.sum(SessionCountModel.sessions), 0)
    with store.transaction() as session:
        every = SessionCountModel.dimension == "all"  # each session counted once
        by_done = session.execute(
            select(SessionCountModel.done, counts).where(every).group_by(SessionCountModel.done)
        ).all()
        by_status = session.execute(
            select(SessionCountModel.delivery_status, counts)
            .where(every)
            .group_by(SessionCountModel.delivery_status)
        ).all()
        verdicts = session.execute(
            select(RunModel.delivery_status, func.count()).group_by(RunModel.delivery_status)
        ).all()
    return Tallies(
        sessions_by_done={bool(done): int(n) for done, n in by_done},
        sessions_by_status={status: int(n) for status, n in by_status},
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
