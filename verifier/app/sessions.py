"""Stored sessions: the one view of a session, and the commands that read or add them.

`SessionView` is how every face shows a stored session: its row, the run its
verdict comes from, its latest run and, when it is read whole, every run and
override. `show`, `listing`, `ingest` and `override` are the commands of
``verifier show``, ``list``, ``ingest`` and ``override``, each a plain function
of the configuration that opens the store, reads or writes, and closes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from verifier.app import Notice
from verifier.errors import ConfigError, InvalidReport, NotFound, UnknownTask, VerifierError
from verifier.findings import DeliveryStatus, Finding
from verifier.findings import trail_note as checks_trail_note
from verifier.moments import utc_text
from verifier.store import Counts, Listed, NoStore, RunRow, SessionRow, Store
from verifier.store.overrides import OverrideRow, overridden_count, overrides, record_override

if TYPE_CHECKING:
    from verifier.config import Config


def trail_note(run: RunRow | None) -> str | None:
    """What `run`'s verdict rests on when the report had no audit trail and the
    repository's policy accepted that (`trail = "optional"`): the audit check's note,
    which every face shows beside the verdict (`verifier.findings.trail_note`)."""
    return checks_trail_note(None if run is None else run.result.get("checks"))


def run_dict(run: RunRow) -> dict[str, Any]:
    """One run as a session's view lists it: its verdict, each check's status, its result."""
    return {
        "id": run.id,
        "verifier_version": run.verifier_version,
        "delivery_status": run.delivery_status.value,
        "checks": {name: status.value for name, status in run.checks.items()},
        "verified_at": utc_text(run.finished_at),
        "result": run.result,
    }


@dataclass(frozen=True)
class SessionView:
    """A stored session as every face shows it.

    `verdict_run` is the latest conclusive run (an inconclusive run never hides an
    earlier verdict), `latest_run` the latest of all; `runs` (oldest first) and
    `overrides` (oldest first, the last one stands) are there when the session was
    read whole (`show`), empty in a listing.
    """

    session: SessionRow
    verdict_run: RunRow | None
    latest_run: RunRow | None
    runs: tuple[RunRow, ...] = ()
    overrides: tuple[OverrideRow, ...] = ()

    @classmethod
    def of(cls, listed: Listed) -> SessionView:
        """The view of a listing's row: the verdict run and the latest run, no history."""
        return cls(listed.session, listed.verdict_run, listed.latest_run)

    @classmethod
    def whole(
        cls, session: SessionRow, runs: Sequence[RunRow], overrides: Sequence[OverrideRow] = ()
    ) -> SessionView:
        """The view of a session read whole: the verdict run picked from its runs."""
        conclusive = [r for r in runs if r.delivery_status is not DeliveryStatus.INCONCLUSIVE]
        return cls(
            session,
            conclusive[-1] if conclusive else None,
            runs[-1] if runs else None,
            tuple(runs),
            tuple(overrides),
        )

    @property
    def delivery_status(self) -> str:
        """The computed verdict: the verdict run's, else the latest run's, else ``pending``."""
        run = self.shown_run
        return "pending" if run is None else run.delivery_status.value

    @property
    def effective_status(self) -> str:
        """A person's standing override, else the computed verdict."""
        return self.session.override_status or self.delivery_status

    @property
    def shown_run(self) -> RunRow | None:
        """The run whose findings go with the verdict: the verdict run, else the latest."""
        return self.verdict_run or self.latest_run

    @property
    def trail_note(self) -> str | None:
        """The shown run's note of a trail-less report its repository accepts (`trail_note`)."""
        return trail_note(self.shown_run)

    @property
    def first_finding(self) -> Finding | None:
        """The finding that decided the shown run's verdict (`findings.deciding_finding`)."""
        run = self.shown_run
        return None if run is None else run.deciding_finding

    def to_dict(self) -> dict[str, Any]:
        """The session whole (``show --format json``): every column of its row, then the
        computed `delivery_status`, its `trail_note` (None but for a report without a
        trail that the repository accepts), `effective_status`, every override, the
        latest run and every run."""
        data = {
            k: utc_text(v) if isinstance(v, datetime) else v
            for k, v in asdict(self.session).items()
        }
        data["delivery_status"] = self.delivery_status
        data["trail_note"] = self.trail_note
        data["effective_status"] = self.effective_status
        data["overrides"] = [o.to_dict() for o in self.overrides]
        data["latest_run"] = None if self.latest_run is None else run_dict(self.latest_run)
        data["runs"] = [run_dict(run) for run in self.runs]
        return data

    def summary_dict(self) -> dict[str, Any]:
        """The session as one line of a listing (``list --format json``)."""
        first, latest = self.first_finding, self.latest_run
        return {
            "session_id": self.session.session_id,
            "agent_status": self.session.raw_status,
            "done": self.session.done,
            "delivery_status": self.delivery_status,
            "trail_note": self.trail_note,
            "override_status": self.session.override_status,
            "effective_status": self.effective_status,
            "first_finding": None if first is None else first.to_dict(),
            "verified_at": None
            if self.verdict_run is None
            else utc_text(self.verdict_run.finished_at),
            "latest_run": None
            if latest is None
            else {
                "id": latest.id,
                "delivery_status": latest.delivery_status.value,
                "verified_at": utc_text(latest.finished_at),
            },
        }


@dataclass(frozen=True)
class Listing:
    """Every stored session, newest first, with the rates of the computed verdicts and how
    many sessions carry a person's override (which the rates do not count)."""

    sessions: tuple[SessionView, ...]
    rates: Counts
    overridden: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions": [view.summary_dict() for view in self.sessions],
            "rates": {
                **self.rates.to_dict(),
                "verdicts": "computed",
                "overridden": self.overridden,
            },
        }


def show(config: Config, session_id: str) -> SessionView:
    """The stored session, whole; `NotFound` when it is not stored (or nothing is)."""
    try:
        with Store.open(config.database_url, read_only=True) as store:
            session = store.get_session(session_id)
            return SessionView.whole(session, store.runs(session_id), overrides(store, session_id))
    except NoStore as exc:
        raise NotFound(f"session {session_id!r} is not stored: {exc}") from None


def listing(config: Config, *, notice: Notice | None = None) -> Listing:
    """Every stored session with the rates; none when nothing is stored yet (`notice` says so)."""
    try:
        with Store.open(config.database_url, read_only=True) as store:
            rows = store.sessions()
            return Listing(
                tuple(SessionView.of(row) for row in rows), store.rates(), overridden_count(store)
            )
    except NoStore as exc:
        if notice is not None:
            notice(str(exc))
        return Listing((), Counts(), 0)


@dataclass(frozen=True)
class Ingested:
    """What became of one report given to `ingest`.

    `result` is ``stored``, ``already stored``, ``invalid`` (not a report, or not
    readable), ``unknown task`` (it names a task nobody declared: not stored) or
    ``conflict`` (its session id is stored with other bytes).
    """

    report: str
    result: str
    session_id: str = ""
    message: str = ""

    @property
    def refused(self) -> bool:
        return self.result in ("invalid", "unknown task", "conflict")

    def to_dict(self) -> dict[str, str]:
        return {
            "report": self.report,
            "result": self.result,
            "session_id": self.session_id,
            "message": self.message,
        }


@dataclass(frozen=True)
class Ingestion:
    """Every report given to `ingest`, in order; exit 2 when any was refused."""

    reports: tuple[Ingested, ...]

    @property
    def exit_code(self) -> int:
        return 2 if any(r.refused for r in self.reports) else 0


def ingest(config: Config, sources: Sequence[str], *, progress: Notice | None = None) -> Ingestion:
    """Store each report (a file, or ``-`` for stdin) without verifying it; one that
    cannot be stored is said so in its line, and the others are stored all the same.
    `progress` hears of each report as it is done."""
    done: list[Ingested] = []
    with Store.open(config.database_url) as store:
        for n, source in enumerate(sources, 1):
            done.append(_ingest_one(store, source, config))
            if progress is not None:
                progress(f"{n}/{len(sources)} {done[-1].result}: {source}")
    return Ingestion(tuple(done))


def _ingest_one(store: Store, source: str, config: Config) -> Ingested:
    # Here, not at the top: a read (`show`, `list`) never loads the verification stack
    # that submit's parse brings (the checks, the contract, the google-genai SDK).
    from verifier.app import pipeline

    limit = config.max_report_bytes
    try:
        raw = pipeline.read_source(source, limit)
        session, created = pipeline.submit(
            store, raw, source, max_report_bytes=limit, config=config
        )
    except (ConfigError, InvalidReport) as exc:
        return Ingested(source, "invalid", message=str(exc))
    except UnknownTask as exc:
        return Ingested(source, "unknown task", message=str(exc))
    except VerifierError as exc:  # a session id stored with other bytes, above all
        return Ingested(source, "conflict", getattr(exc, "session_id", ""), str(exc))
    return Ingested(source, "stored" if created else "already stored", session.session_id)


@dataclass(frozen=True)
class Overridden:
    """An override just recorded, and the session's verdicts once it stands."""

    override: OverrideRow
    session: SessionView

    def to_dict(self) -> dict[str, Any]:
        return {
            "override": self.override.to_dict(),
            "session_id": self.session.session.session_id,
            "delivery_status": self.session.delivery_status,
            "override_status": self.session.session.override_status,
            "effective_status": self.session.effective_status,
        }


def override(
    config: Config, session_id: str, *, status: str, reason: str, author: str
) -> Overridden:
    """Record a person's verdict (``delivered``, ``not_delivered``, or ``cleared`` to
    withdraw it) beside the computed one, which stays as it is."""
    with Store.open(config.database_url) as store:
        row = record_override(store, session_id, status=status, reason=reason, author=author)
        return Overridden(row, SessionView.of(store.listed(session_id)))
