"""The rows the store hands out: frozen values, never ORM objects, and the filters it takes.

`SessionRow` and `RunRow` are what is stored of a session and of one of its
verification runs; `Listed` and `SessionLine` a session with its verdict, whole
or as a line of an export; `Counts`, `Group` and `Stats` the counts of
`Store.stats`; `SessionFilter` and `Page` what `Store.find_sessions` takes and
gives; `RejectedRow` a report that could not be read. Nothing here needs
SQLAlchemy, so the formats and the faces read rows without the engine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from verifier.errors import BadRequest
from verifier.findings import CheckStatus, DeliveryStatus, Finding, deciding_finding

# The most sessions one page of `Store.find_sessions` holds, and the batch the store
# reads in (`Store.session_lines`, `Store.findings_of`).
MAX_PAGE = 500
# What `SessionFilter.delivery_status` may be: a verdict, or pending (no run yet).
DELIVERY_STATUSES = ("pending", "delivered", "not_delivered", "inconclusive")
# The verdicts that decide: an inconclusive run never replaces one of these.
CONCLUSIVE = (DeliveryStatus.DELIVERED.value, DeliveryStatus.NOT_DELIVERED.value)
# What `Store.stats` groups by (`Group.key`).
GROUP_BY = ("day", "week", "agent", "model", "repo")


# A claimed change as the report writes it, and as `Store.claimed_changes` gives it back.
CLAIMED_CHANGE_KEYS = ("path", "action", "sha256_before", "sha256_after")


@dataclass(frozen=True)
class SessionRow:
    """A stored session; the report bytes themselves come from `Store.report_bytes`."""

    session_id: str
    agent_name: str
    agent_version: str | None
    agent_model: str | None
    tool_profile: str | None
    repo_name: str
    base_commit: str
    head_commit: str | None
    raw_status: str
    status: str
    done: bool
    started_at: datetime
    ended_at: datetime
    report_sha256: str
    ingested_at: datetime
    branch: str | None = None
    # pending (no run yet), delivered, not_delivered, inconclusive: see `Listed`.
    delivery_status: str = "pending"
    pruned_at: datetime | None = None
    # A person's override (`verifier.store.overrides`), shown beside the computed
    # verdict and never in place of it: delivered, not_delivered, or None.
    override_status: str | None = None
    # The task the report names (`task_id`), None when it names none.
    task_id: str | None = None


@dataclass(frozen=True)
class RunRow:
    """One verification run; `findings` in check order, then in each check's order."""

    id: int
    session_id: str
    verifier_version: str
    delivery_status: DeliveryStatus
    checks: dict[str, CheckStatus]  # in the order the run reported them
    started_at: datetime
    finished_at: datetime
    duration_s: float
    result: dict[str, Any]
    findings: tuple[Finding, ...]
    # Why it ran (cli, ingest, reverify, retry, recheck), and the worker that ran it.
    reason: str | None = None
    worker: str | None = None

    @property
    def deciding_finding(self) -> Finding | None:
        """The finding that decided this run's verdict (`verifier.findings.deciding_finding`):
        a failed check's before an erring one's."""
        checks = self.result.get("checks")
        if not isinstance(checks, dict) or not checks:
            # A run without its result document (as tests build them): findings in order.
            return self.findings[0] if self.findings else None
        found = deciding_finding(
            (str(check.get("status", "")), check.get("findings", [])) for check in checks.values()
        )
        if not isinstance(found, dict):
            return None
        return Finding(
            str(found.get("code", "")),
            str(found.get("message", "")),
            found.get("path"),
            found.get("expected"),
            found.get("found"),
        )


@dataclass(frozen=True)
class Listed:
    """A session with its verdict: the latest conclusive run, and the latest run beside it.

    An inconclusive run (a repository unmounted for a moment) never hides an earlier
    conclusive verdict; `latest_run` says it happened.
    """

    session: SessionRow
    verdict_run: RunRow | None
    latest_run: RunRow | None

    @property
    def delivery_status(self) -> str:
        """delivered, not_delivered, inconclusive (only ever inconclusive), or pending."""
        if self.verdict_run is not None:
            return self.verdict_run.delivery_status.value
        return "pending" if self.latest_run is None else self.latest_run.delivery_status.value

    @property
    def effective_status(self) -> str:
        """The override when one stands, else the computed `delivery_status`: what a
        merge gate decides on. The stats count the computed verdict only."""
        return self.session.override_status or self.delivery_status


@dataclass(frozen=True)
class Counts:
    """Sessions by state, each judged by its latest conclusive verdict.

    Both rates are over the conclusive sessions (delivered or not delivered) and
    are None when there is none: sums divided once, never averages of rates.
    `silent_failures` are done but not delivered. Sessions only ever inconclusive,
    and sessions not verified yet (`pending`), stand beside the rates.
    """

    total: int = 0
    done: int = 0
    delivered: int = 0
    not_delivered: int = 0
    inconclusive: int = 0
    pending: int = 0
    silent_failures: int = 0
    done_conclusive: int = 0

    @property
    def conclusive(self) -> int:
        """Sessions with a conclusive verdict: delivered or not delivered."""
        return self.delivered + self.not_delivered

    @property
    def done_rate(self) -> float | None:
        """The share of conclusive sessions whose agent said it was done."""
        return self.done_conclusive / self.conclusive if self.conclusive else None

    @property
    def delivered_rate(self) -> float | None:
        """The share of conclusive sessions that delivered."""
        return self.delivered / self.conclusive if self.conclusive else None

    def __add__(self, other: Counts) -> Counts:
        """The counts of both, field by field (the rates follow from the sums)."""
        return Counts(
            *(getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self))
        )

    @classmethod
    def of(cls, done: bool, delivery_status: str, sessions: int) -> Counts:
        """The counts of `sessions` sessions in one state."""
        delivered = delivery_status == "delivered"
        not_delivered = delivery_status == "not_delivered"
        return cls(
            total=sessions,
            done=sessions if done else 0,
            delivered=sessions if delivered else 0,
            not_delivered=sessions if not_delivered else 0,
            inconclusive=sessions if delivery_status == "inconclusive" else 0,
            pending=sessions if delivery_status == "pending" else 0,
            silent_failures=sessions if done and not_delivered else 0,
            done_conclusive=sessions if done and (delivered or not_delivered) else 0,
        )

    def to_dict(self) -> dict[str, Any]:
        """The counts and both rates, as the API and ``verifier stats`` give them."""
        return {
            "total": self.total,
            "done": self.done,
            "delivered": self.delivered,
            "not_delivered": self.not_delivered,
            "inconclusive": self.inconclusive,
            "pending": self.pending,
            "silent_failures": self.silent_failures,
            "conclusive": self.conclusive,
            "done_conclusive": self.done_conclusive,
            "done_rate": self.done_rate,
            "delivered_rate": self.delivered_rate,
        }


@dataclass(frozen=True)
class Group:
    """The counts of one group of `Store.stats`: a day (YYYY-MM-DD), a week (the
    ISO week's Monday), an agent, a model ('' for none) or a repository."""

    key: str
    counts: Counts


@dataclass(frozen=True)
class Stats:
    """What `Store.stats` answers: the counts in all, and by group (sorted by key)."""

    totals: Counts
    groups: list[Group] = field(default_factory=list)


@dataclass(frozen=True)
class SessionFilter:
    """What `Store.find_sessions` keeps; every field optional, all given must hold."""

    agent: str | None = None
    # '' is no model, as the stats name it.
    model: str | None = None
    repo: str | None = None
    agent_status: str | None = None
    done: bool | None = None
    delivery_status: str | None = None
    head_commit: str | None = None
    branch: str | None = None
    ended_from: datetime | None = None
    ended_to: datetime | None = None
    # Any of these (a merge gate's selections): session ids, head commits (full SHAs).
    session_ids: tuple[str, ...] | None = None
    head_commits: tuple[str, ...] | None = None
    # A search: part of the session id or the branch (any case), or the start of the
    # head or base commit.
    search: str | None = None
    # The task the report names (`task_id`).
    task: str | None = None
    # Sessions whose shown run (the verdict run, else the latest) has a finding of this
    # check, and of this code when given: the rows of `Store.failure_reasons`.
    check: str | None = None
    code: str | None = None

    def __post_init__(self) -> None:
        # Checked when the filter is made, so that an export streaming its rows never
        # learns of a bad filter after its first line.
        if self.code is not None and self.check is None:
            raise BadRequest("code", f"got {self.code!r} without check: name the check as well")


@dataclass(frozen=True)
class FailureReason:
    """A row of "why sessions fail": how many sessions have a finding of `check` in
    their shown run (of `code`, or of any code when `code` is None)."""

    check: str
    code: str | None
    sessions: int


@dataclass(frozen=True)
class Page:
    """One page of `Store.find_sessions`; `next_cursor` asks for the next, None at the end."""

    items: list[Listed]
    next_cursor: str | None


@dataclass(frozen=True)
class SessionLine:
    """A session as an export or a merge gate reads many: its row, its verdict, the
    verdict run's id and end, and the first finding of the run its verdict shows
    (the verdict run, else the latest), without loading runs, checks and findings."""

    session: SessionRow
    verdict_run_id: int | None
    verified_at: datetime | None
    first_finding_code: str | None
    # The run the verdict shows: the verdict run, else the latest (inconclusive) one.
    run_id: int | None = None

    @property
    def delivery_status(self) -> str:
        """The session's computed verdict (see `Listed.delivery_status`)."""
        return self.session.delivery_status

    @property
    def effective_status(self) -> str:
        """The override when one stands, else the computed verdict (see `Listed`)."""
        return self.session.override_status or self.session.delivery_status


@dataclass(frozen=True)
class RejectedRow:
    """A report that could not be read: where it came from, the field at fault and why,
    and the hash and size of its bytes (which `Store.rejected_bytes` returns)."""

    id: int
    received_at: datetime
    source: str
    field: str
    problem: str
    report_sha256: str
    report_size: int
