"""Database administration: the commands of ``verifier db upgrade``, ``db copy`` and ``prune``.

The work itself is `verifier.store` (migrations) and `verifier.store.maintenance`
(the checked copy, the batched prune); these functions take the configuration,
open what they act on, and return what the store reports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from verifier.store import Store, upgrade
from verifier.store import maintenance as store_maintenance
from verifier.store.maintenance import CopyResult, PrunePlan, PruneResult, parse_cutoff

if TYPE_CHECKING:  # names for annotations: the checks' registry is no import of `db upgrade`
    from verifier.checks.base import Progress
    from verifier.config import Config

__all__ = ["CopyResult", "Cutoff", "PrunePlan", "PruneResult", "copy", "migrate", "prune"]


def migrate(config: Config) -> None:
    """Migrate the configured database to the latest schema."""
    upgrade(config.database_url)


def copy(config: Config, target: str, *, progress: Progress | None = None) -> CopyResult:
    """Copy the configured SQLite store into the empty PostgreSQL database `target`,
    migrated first, and check the copy before it is committed."""
    return store_maintenance.copy_store(config.database_url, target, progress=progress)


@dataclass(frozen=True)
class Cutoff:
    """The end of what `prune` drops: as the operator wrote it (what the messages repeat)
    and as a moment, in UTC."""

    text: str
    moment: datetime

    @classmethod
    def parse(cls, value: str, now: datetime | None = None) -> Cutoff:
        """``--before``: a date or an ISO datetime, not after `now`; `BadRequest` otherwise."""
        return cls(value, parse_cutoff(value, now or datetime.now(UTC)))


def prune(
    config: Config,
    before: datetime,
    *,
    actor: str,
    review: Callable[[PrunePlan], bool],
    progress: Progress | None = None,
) -> PruneResult | None:
    """Drop the report bytes and test logs of the sessions that ended before `before`.

    What would be dropped is counted first and handed to `review`, which says
    whether to go on: None when it says no, and nothing is changed.
    """
    with Store.open(config.database_url) as store:
        plan = store_maintenance.plan_prune(store, before)
        if not review(plan):
            return None
        return store_maintenance.prune(store, before, actor=actor, progress=progress)
