"""What each page shows, read from the store: plain values for the templates.

Nothing here verifies: counts come from `Store.stats`, sessions from
`Store.find_sessions` and `Store.listed`, runs from `Store.runs`, and the
session page reads the stored report's bytes with the contract's parser and the
tool profile's normaliser, exactly as the checks read them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from verifier.app.sessions import trail_note
from verifier.contract.profiles import Profile, load_profile
from verifier.contract.report import CANONICAL_STATUSES, parse_report
from verifier.contract.trajectory import ToolCall
from verifier.errors import BadRequest, ConfigError, InvalidReport, ReportPruned
from verifier.findings import deciding_finding
from verifier.service.dashboard.chart import MAX_SERIES, Point, Series
from verifier.store import Counts, FailureReason, Listed, RunRow, SessionFilter, Stats, Store
from verifier.store.overrides import OverrideRow, overrides
from verifier.store.stats import bounds

DIMENSIONS = ("agent", "model", "repo")
# The chart draws one line per agent or per model on demand (`lines=`).
LINES = ("agent", "model")
SORT_KEYS = (
    "key",
    "total",
    "done_rate",
    "delivered_rate",
    "silent_failures",
    "inconclusive",
    "pending",
)
# Past this many days the chart shows weeks: a point per day stops being readable.
MAX_DAILY_POINTS = 92
SILENT_PAGE = 50
# The days a filter may name: the day after the last must still be a date.
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(9998, 12, 31)
ONE_MICROSECOND = timedelta(microseconds=1)
# A session page lists at most this many calls and entries; the rest are counted.
MAX_ROWS = 2000
RAW_CHARS = 400
_ENTRY = re.compile(r"^audit\.entries\[(\d+)\]")


@dataclass(frozen=True)
class Filters:
    """The overview's filters, as the URL holds them (so a view can be shared): `first`
    and `last` are `from` and `to` as typed, `ended_from` and `ended_to` the span they
    name (`_span`)."""

    first: str | None = None
    last: str | None = None
    ended_from: datetime | None = None
    ended_to: datetime | None = None
    agent: str | None = None
    model: str | None = None
    repo: str | None = None
    by: str = "agent"
    sort: str = "total"
    desc: bool = True
    cursor: str | None = None
    lines: str | None = None

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> Filters:
        """Filters from query parameters; `BadRequest` naming the parameter otherwise."""
        by = query.get("by") or "agent"
        if by not in DIMENSIONS:
            raise BadRequest("by", f"got {by!r}, expected one of {', '.join(DIMENSIONS)}")
        sort = query.get("sort") or "total"
        if sort not in SORT_KEYS:
            raise BadRequest("sort", f"got {sort!r}, expected one of {', '.join(SORT_KEYS)}")
        order = query.get("dir") or "desc"
        if order not in ("asc", "desc"):
            raise BadRequest("dir", f"got {order!r}, expected asc or desc")
        lines = query.get("lines") or None
        if lines is not None and lines not in LINES:
            raise BadRequest("lines", f"got {lines!r}, expected one of {', '.join(LINES)}")
        first, last, ended_from, ended_to = _span(query)
        filters = cls(
            first=first,
            last=last,
            ended_from=ended_from,
            ended_to=ended_to,
            agent=query.get("agent") or None,
            model=query.get("model") if "model" in query and query.get("model") != "*" else None,
            repo=query.get("repo") or None,
            by=by,
            sort=sort,
            desc=order == "desc",
            cursor=query.get("cursor") or None,
            lines=lines,
        )
        return filters

    def query(self, **changes: Any) -> dict[str, str]:
        """The query parameters of this view with `changes`; defaults are left out."""
        values: dict[str, Any] = {
            "from": self.first,
            "to": self.last,
            "agent": self.agent,
            "model": self.model,
            "repo": self.repo,
            "by": None if self.by == "agent" else self.by,
            "sort": None if self.sort == "total" else self.sort,
            "dir": None if self.desc else "asc",
            "lines": self.lines,
        }
        values.update(changes)
        return {k: str(v) for k, v in values.items() if v is not None}


def _span(
    query: Mapping[str, str],
) -> tuple[str | None, str | None, datetime | None, datetime | None]:
    """`from` and `to` as typed, and the span they name as the API's stats read it
    (`store.stats.bounds`: a date, or a date and time with its offset; a `to` date is
    its whole day), within the days a filter may name; `BadRequest` naming the field."""
    first = (query.get("from") or "").strip() or None
    last = (query.get("to") or "").strip() or None
    ended_from, ended_to = bounds(first, last)
    earliest, latest = _start(FIRST_DAY), _start(LAST_DAY + timedelta(days=1))
    for name, text, moment in (("from", first, ended_from), ("to", last, ended_to)):
        if moment is not None and not earliest <= moment <= latest:
            raise BadRequest(
                name, f"got {text!r}, expected a moment from {FIRST_DAY} to {LAST_DAY}"
            )
    return first, last, ended_from, ended_to


def _last_day(ended_to: datetime) -> date:
    """The last UTC day a span that ends (excluded) at `ended_to` holds a moment of."""
    return (ended_to.astimezone(UTC) - ONE_MICROSECOND).date()


@dataclass(frozen=True)
class Row:
    """One row of the table by agent, model or repository."""

    key: str
    counts: Counts


@dataclass(frozen=True)
class Silent:
    """A silent failure: done, not delivered, the first thing found wrong, and the note
    of a verdict that rests on a report without a trail (`trail_note`)."""

    listed: Listed
    finding: Mapping[str, Any] | None
    trail_note: str | None = None


@dataclass(frozen=True)
class Reason:
    """A row of "why sessions fail", with the query of the list it counts."""

    reason: FailureReason
    share: float
    query: dict[str, str]


@dataclass(frozen=True)
class Overview:
    filters: Filters
    totals: Counts
    points: list[Point]
    period: str
    rows: list[Row]
    silent: list[Silent]
    next_cursor: str | None
    choices: dict[str, list[str]]
    series: list[Series] | None
    series_left_out: int
    reasons: list[Reason]


def overview(store: Store, filters: Filters) -> Overview:
    """The overview page: totals, the rates over time, the table, the silent failures."""
    scope = {"agent": filters.agent, "model": filters.model, "repo": filters.repo}
    daily = _counts(store, filters, "day", scope)
    period = "day"
    groups = daily.groups
    points: list[Point] = []
    if groups:
        first = (
            filters.ended_from.astimezone(UTC).date()
            if filters.ended_from
            else date.fromisoformat(groups[0].key)
        )
        last = (
            _last_day(filters.ended_to) if filters.ended_to else date.fromisoformat(groups[-1].key)
        )
        step = 1
        if (last - first).days + 1 > MAX_DAILY_POINTS:
            period, step = "week", 7
            groups = _counts(store, filters, "week", scope).groups
            # Weeks from the first to the last that has a session: a range of centuries
            # asked for in the URL draws the weeks that hold sessions, not every week.
            first = max(first, date.fromisoformat(groups[0].key))
            first -= timedelta(days=first.weekday())
            last = min(last, date.fromisoformat(groups[-1].key))
        points = _points(first, last, step, {g.key: g.counts for g in groups})
    series, left_out = _series(store, filters, period, points)
    table = _counts(store, filters, filters.by, scope)
    rows = _sorted([Row(g.key, g.counts) for g in table.groups], filters.sort, filters.desc)
    silent, cursor = _silent(store, filters)
    everything = {d: store.stats(group_by=d).groups for d in DIMENSIONS}
    choices = {d: [g.key for g in groups] for d, groups in everything.items()}
    for dimension, chosen in scope.items():
        if chosen is not None and chosen not in choices[dimension]:
            choices[dimension].append(chosen)  # a shared URL's filter stays visible
    reasons = _reasons(store, filters, daily.totals.not_delivered)
    return Overview(
        filters,
        daily.totals,
        points,
        period,
        rows,
        silent,
        cursor,
        choices,
        series,
        left_out,
        reasons,
    )


def _counts(
    store: Store, filters: Filters, group_by: str, scope: Mapping[str, str | None]
) -> Stats:
    """The stats of `scope` (agent, model, repository) over the span of `filters`."""
    return store.stats(
        ended_from=filters.ended_from, ended_to=filters.ended_to, group_by=group_by, **scope
    )


def _series(
    store: Store, filters: Filters, period: str, points: list[Point]
) -> tuple[list[Series] | None, int]:
    """One delivered-rate line per agent or model (`filters.lines`), the busiest first,
    at most `MAX_SERIES`, over the chart's periods; and how many were left out."""
    if filters.lines is None:
        return None, 0
    scope = {"agent": filters.agent, "model": filters.model, "repo": filters.repo}
    ranking = _counts(store, filters, filters.lines, scope).groups
    ranking.sort(key=lambda g: (-g.counts.total, g.key))
    series = []
    for group in ranking[:MAX_SERIES]:
        one = {**scope, filters.lines: group.key}
        counts = _counts(store, filters, period, one)
        by_period = {g.key: g.counts for g in counts.groups}
        shown = [by_period.get(p.label, Counts()) for p in points]
        series.append(
            Series(
                group.key,
                tuple(c.delivered_rate for c in shown),
                tuple(c.total for c in shown),
            )
        )
    return series, max(0, len(ranking) - MAX_SERIES)


def _reasons(store: Store, filters: Filters, not_delivered: int) -> list[Reason]:
    """Why sessions fail: the not-delivered sessions of this view by check and finding
    code, each with the query of the sessions list that shows them."""
    view = ListFilters(
        verdict="not_delivered",
        agent=filters.agent,
        model=filters.model,
        repo=filters.repo,
        first=filters.first,
        last=filters.last,
        ended_from=filters.ended_from,
        ended_to=filters.ended_to,
    )
    rows = store.failure_reasons(view.store_filter(datetime.now(UTC)))
    return [
        Reason(
            row,
            row.sessions / not_delivered if not_delivered else 0.0,
            view.query(check=row.check, code=row.code),
        )
        for row in rows
    ]


def _points(first: date, last: date, step: int, counts: Mapping[str, Counts]) -> list[Point]:
    """A point for every period from `first` to `last`, empty periods included."""
    points = []
    day = first
    while day <= last:
        c = counts.get(day.isoformat(), Counts())
        points.append(
            Point(day.isoformat(), c.done_rate, c.delivered_rate, c.total, c.silent_failures)
        )
        day += timedelta(days=step)
    return points


def _sorted(rows: list[Row], sort: str, desc: bool) -> list[Row]:
    """Rows by `sort`, ties by key; rows without a rate (none concluded) last either way."""
    if sort == "key":
        return sorted(rows, key=lambda r: r.key, reverse=desc)
    valued = [r for r in rows if getattr(r.counts, sort) is not None]
    valued.sort(key=lambda r: r.key)
    valued.sort(key=lambda r: getattr(r.counts, sort), reverse=desc)
    return valued + sorted(
        (r for r in rows if getattr(r.counts, sort) is None), key=lambda r: r.key
    )


def _silent(store: Store, filters: Filters) -> tuple[list[Silent], str | None]:
    chosen = SessionFilter(
        agent=filters.agent,
        # '' (no model) is how the stats name sessions without one; the list keeps them below.
        model=filters.model or None,
        repo=filters.repo,
        done=True,
        delivery_status="not_delivered",
        ended_from=filters.ended_from,
        ended_to=filters.ended_to,
    )
    page = store.find_sessions(chosen, limit=SILENT_PAGE, cursor=filters.cursor)
    items = page.items
    if filters.model == "":
        items = [item for item in items if not item.session.agent_model]
    silent = [
        Silent(item, first_finding(item.verdict_run), trail_note(item.verdict_run))
        for item in items
    ]
    return silent, page.next_cursor


def _start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def first_finding(run: RunRow | None) -> Mapping[str, Any] | None:
    """The finding that decided a run's verdict (`findings.deciding_finding`: a failed
    check's before an erring one's), as stored, with its check's name."""
    if run is None:
        return None
    found = deciding_finding(
        (str(check.get("status", "")), [{"check": name, **f} for f in check.get("findings", [])])
        for name, check in run.result.get("checks", {}).items()
    )
    return found


# -- the list of sessions -----------------------------------------------------------------

# The time presets of the list: the sessions that ended in the last 24 h, 7 d or 30 d.
PRESETS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
VERDICTS = ("delivered", "not_delivered", "inconclusive", "pending")
LIST_PAGE = 50
MAX_SEARCH = 200


@dataclass(frozen=True)
class ListFilters:
    """The list's filters, as the URL holds them (so a list can be shared); `from` and
    `to` as the overview's (`Filters`)."""

    verdict: str | None = None
    done: bool | None = None
    status: str | None = None
    agent: str | None = None
    model: str | None = None
    repo: str | None = None
    first: str | None = None
    last: str | None = None
    ended_from: datetime | None = None
    ended_to: datetime | None = None
    preset: str | None = None
    q: str | None = None
    check: str | None = None
    code: str | None = None
    task: str | None = None
    cursor: str | None = None

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> ListFilters:
        """Filters from query parameters; `BadRequest` naming the parameter otherwise."""
        verdict = query.get("verdict") or None
        if verdict is not None and verdict not in VERDICTS:
            raise BadRequest("verdict", f"got {verdict!r}, expected one of {', '.join(VERDICTS)}")
        done_text = query.get("done") or None
        if done_text is not None and done_text not in ("yes", "no"):
            raise BadRequest("done", f"got {done_text!r}, expected yes or no")
        preset = query.get("range") or None
        if preset is not None and preset not in PRESETS:
            raise BadRequest("range", f"got {preset!r}, expected one of {', '.join(PRESETS)}")
        q = (query.get("q") or "").strip() or None
        if q is not None and len(q) > MAX_SEARCH:
            raise BadRequest("q", f"is {len(q)} characters, over the limit of {MAX_SEARCH}")
        for name in query:
            if "\x00" in query[name]:
                raise BadRequest(name, "holds a NUL character")
        first, last, ended_from, ended_to = _span(query)
        filters = cls(
            verdict=verdict,
            done=None if done_text is None else done_text == "yes",
            status=query.get("status") or None,
            agent=query.get("agent") or None,
            model=query.get("model") if "model" in query and query.get("model") != "*" else None,
            repo=query.get("repo") or None,
            first=first,
            last=last,
            ended_from=ended_from,
            ended_to=ended_to,
            preset=preset,
            q=q,
            check=query.get("check") or None,
            code=query.get("code") or None,
            task=query.get("task") or None,
            cursor=query.get("cursor") or None,
        )
        if preset is not None and (first or last):
            raise BadRequest("range", f"got {preset!r} beside from/to: choose one or the other")
        if filters.code is not None and filters.check is None:
            raise BadRequest("code", f"got {filters.code!r} without check: name the check too")
        return filters

    def query(self, **changes: Any) -> dict[str, str]:
        """The query parameters of this list with `changes`; what is unset is left out.
        A change of filter starts again at the first page."""
        values: dict[str, Any] = {
            "q": self.q,
            "verdict": self.verdict,
            "done": None if self.done is None else ("yes" if self.done else "no"),
            "status": self.status,
            "agent": self.agent,
            "model": self.model,
            "repo": self.repo,
            "range": self.preset,
            "from": self.first,
            "to": self.last,
            "check": self.check,
            "code": self.code,
            "task": self.task,
        }
        values.update(changes)
        return {k: str(v) for k, v in values.items() if v is not None}

    def store_filter(self, now: datetime) -> SessionFilter:
        """The store's filter of this list; a preset counts back from `now`."""
        ended_from, ended_to = self.ended_from, self.ended_to
        if self.preset is not None:
            ended_from = now - PRESETS[self.preset]
        return SessionFilter(
            agent=self.agent,
            model=self.model,
            repo=self.repo,
            agent_status=self.status,
            done=self.done,
            delivery_status=self.verdict,
            ended_from=ended_from,
            ended_to=ended_to,
            search=self.q,
            task=self.task,
            check=self.check,
            code=self.code,
        )


@dataclass(frozen=True)
class ListItem:
    """A row of the list: the session, its verdict, the first thing found wrong, and
    the note of a verdict that rests on a report without a trail (`trail_note`)."""

    listed: Listed
    finding: Mapping[str, Any] | None
    trail_note: str | None = None


@dataclass(frozen=True)
class SessionList:
    filters: ListFilters
    total: int
    items: list[ListItem]
    next_cursor: str | None
    choices: dict[str, list[str]]
    statuses: list[str]


def session_list(store: Store, filters: ListFilters, now: datetime) -> SessionList:
    """The list page: how many sessions pass the filters, and one page of them."""
    chosen = filters.store_filter(now)
    page = store.find_sessions(chosen, limit=LIST_PAGE, cursor=filters.cursor)
    items = []
    for item in page.items:
        shown = item.verdict_run or item.latest_run
        items.append(ListItem(item, first_finding(shown), trail_note(shown)))
    choices = {d: [g.key for g in store.stats(group_by=d).groups] for d in DIMENSIONS}
    for dimension, value in (
        ("agent", filters.agent),
        ("model", filters.model),
        ("repo", filters.repo),
    ):
        if value is not None and value not in choices[dimension]:
            choices[dimension].append(value)  # a shared URL's filter stays visible
    statuses = list(CANONICAL_STATUSES)
    if filters.status is not None and filters.status not in statuses:
        statuses.append(filters.status)
    return SessionList(
        filters, store.count_sessions(chosen), items, page.next_cursor, choices, statuses
    )


# -- the session page ---------------------------------------------------------------------


@dataclass
class ChangeView:
    index: int
    path: str
    action: str
    sha256_before: str | None
    sha256_after: str | None
    mode: str
    findings: list[int] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return f"change-{self.index}"


@dataclass
class CallView:
    index: int
    location: str
    call_id: str
    name: str
    raw: str
    kind: str
    path: str | None
    params: str
    problems: tuple[str, ...]
    response: str
    findings: list[int] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return f"call-{self.index}"


@dataclass
class EntryView:
    index: int
    seq: str
    kind: str
    tool: str
    call_id: str
    decision: str
    effects: list[str]
    raw: str
    findings: list[int] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return f"entry-{self.index}"


@dataclass
class FindingView:
    index: int
    check: str
    code: str
    message: str
    path: str | None
    expected: str | None
    found: str | None
    target: str | None = None
    target_label: str | None = None

    @property
    def anchor(self) -> str:
        return f"finding-{self.index}"


@dataclass
class SessionPage:
    listed: Listed
    runs: list[RunRow]
    shown: RunRow | None
    overrides: list[OverrideRow]
    report_problem: str | None
    task: str | None
    changes: list[ChangeView]
    calls: list[CallView]
    entries: list[EntryView]
    calls_total: int
    entries_total: int
    profile: str
    findings: list[FindingView]
    checks: dict[str, Any]
    tests: dict[str, Any] | None
    trail_note: str | None = None


def session_page(store: Store, session_id: str, profiles_dir: Path) -> SessionPage:
    """The three accounts of one session side by side, its findings pointing at their rows."""
    listed = store.listed(session_id)
    runs = store.runs(session_id)
    shown = listed.verdict_run or listed.latest_run
    checks: dict[str, Any] = {} if shown is None else dict(shown.result.get("checks", {}))
    page = SessionPage(
        listed=listed,
        runs=runs,
        shown=shown,
        overrides=overrides(store, session_id),
        report_problem=None,
        task=None,
        changes=[],
        calls=[],
        entries=[],
        calls_total=0,
        entries_total=0,
        profile=listed.session.tool_profile or "default",
        findings=[
            FindingView(
                i,
                name,
                str(f.get("code", "")),
                str(f.get("message", "")),
                f.get("path"),
                f.get("expected"),
                f.get("found"),
            )
            for i, (name, f) in enumerate(
                (name, f) for name, check in checks.items() for f in check.get("findings", [])
            )
        ],
        checks=checks,
        tests=checks.get("tests"),
        trail_note=trail_note(shown),
    )
    locations: dict[str, int] = {}
    try:
        raw = store.report_bytes(session_id)
        report = parse_report(raw)
        page.task = report.doc.task
        page.changes = [
            ChangeView(
                i,
                c.path,
                c.action,
                c.sha256_before,
                c.sha256_after,
                "" if c.mode_before == c.mode_after else f"{c.mode_before} → {c.mode_after}",
            )
            for i, c in enumerate(report.doc.changes)
        ]
        entries = report.doc.audit.entries
        page.entries_total = len(entries)
        page.entries = [_entry(i, e) for i, e in enumerate(entries[:MAX_ROWS])]
        trajectory = report.trajectory
        page.calls_total = len(trajectory.calls)
        profile: Profile | None = None
        try:
            profile = load_profile(profiles_dir, report.doc.agent.tool_profile)
        except ConfigError as exc:
            page.report_problem = f"calls shown raw: {exc}"
        for i, call in enumerate(trajectory.calls[:MAX_ROWS]):
            location = trajectory.location(call.turn, call.part)
            locations.setdefault(location, i)
            page.calls.append(_call(i, call, location, profile))
    except ReportPruned as exc:
        page.report_problem = str(exc)
    except InvalidReport as exc:
        page.report_problem = f"the stored report no longer reads: {exc}"
    _point(page, locations)
    return page


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= RAW_CHARS else text[: RAW_CHARS - 1] + "…"


def _entry(index: int, entry: Mapping[str, Any]) -> EntryView:
    effects = entry.get("effects")
    shown = []
    if isinstance(effects, list):
        for effect in effects:
            if isinstance(effect, dict):
                shown.append(str(effect.get("path", "?")))
    return EntryView(
        index,
        str(entry.get("seq", "")),
        str(entry.get("kind", "")),
        str(entry.get("tool", "")),
        str(entry.get("call_id", "")),
        str(entry.get("decision", "")),
        shown,
        _short(entry),
    )


def _call(index: int, call: ToolCall, location: str, profile: Profile | None) -> CallView:
    kind, path, params, response = "", None, "", "no response"
    problems: tuple[str, ...] = ()
    if profile is not None:
        action = profile.normalise(call)
        kind = action.kind.value
        path = action.path
        params = _short(dict(action.params)) if action.params else ""
        problems = action.problems
    answer = call.response_object
    if answer is not None:
        failed = call.is_error
        if failed is None and profile is not None:
            failed = profile.response_failed(answer)
        response = "failed" if failed else "ok"
    return CallView(
        index,
        location,
        call.call_id,
        call.name,
        _short(dict(call.args)),
        kind,
        path,
        params,
        problems,
        response,
    )


def _point(page: SessionPage, locations: Mapping[str, int]) -> None:
    """Give each finding the row it is about, and each row its findings."""
    changes: dict[str, ChangeView] = {}
    for change in page.changes:
        changes.setdefault(change.path, change)
    calls_by_id = {c.call_id: c for c in page.calls}
    calls_by_path: dict[str, CallView] = {}
    for c in page.calls:
        if c.path is not None:
            calls_by_path.setdefault(c.path, c)
    entries = {e.index: e for e in page.entries}
    for finding in page.findings:
        row: ChangeView | CallView | EntryView | None = None
        label = ""
        path = finding.path or ""
        match = _ENTRY.match(path)
        if match and int(match.group(1)) in entries:
            row, label = entries[int(match.group(1))], f"audit entry {match.group(1)}"
        elif path.startswith("trajectory."):
            for location, i in locations.items():
                if path == location or path.startswith(location + "."):
                    row, label = page.calls[i], f"call {i}"
                    break
        elif path in changes:
            row, label = changes[path], f"claimed change {changes[path].index}"
        elif path in calls_by_path:
            row, label = calls_by_path[path], f"call {calls_by_path[path].index}"
        if row is None:
            for value in (finding.expected, finding.found):
                if value is not None and value in calls_by_id:
                    row = calls_by_id[value]
                    label = f"call {row.index}"
                    break
        if row is not None:
            finding.target, finding.target_label = row.anchor, label
            row.findings.append(finding.index)
