"""Prometheus metrics of the service, each app with a registry of its own.

Read from the database at scrape time (`verifier.store.probes`), so they are
right however many processes ingest and verify, and survive restarts:

* the sessions as ``GET /v1/stats`` counts them, from the same aggregate and the
  same function, all time: ``verifier_sessions{delivery_status}`` (gauges, each
  session once, by its current verdict: pending, delivered, not_delivered,
  inconclusive), ``verifier_done_sessions``, ``verifier_silent_failures`` (done
  and not delivered), ``verifier_delivered_rate`` and ``verifier_done_rate`` (over
  the conclusive sessions; no sample while there is none, as the API's null);
  each again ``_by_agent{agent}``, ``_by_model{model}`` and ``_by_repo{repo}``;
* ``verifier_runs_total{verdict}``: verification runs finished (a re-verify is one
  more run, never one more session); ``verifier_verdicts_total{verdict}`` is the
  same count under its old name, deprecated: it was read as sessions and is not;
* ``verifier_sessions_ingested_total{agent_status}`` (``done`` or ``not_done``),
  ``verifier_pending_sessions`` and ``verifier_inconclusive_sessions``;
* ``verifier_check_seconds{check}``: how long each check took, observed by the
  process that ran it (`observe_run`).

Labels are bounded: an agent status is reduced to done / not done (a raw status
is whatever the agent wrote), a verdict is one of three or four, a check one of
the verifier's own; agents, models and repositories are the `MAX_LABEL_VALUES`
with the most sessions, the rest summed under `OTHER` (a value literally named
``other`` is counted there too). A session without a model is ``model=""``.
Never a session id or a hash.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from verifier.store.probes import DIMENSIONS, tallies
from verifier.store.rows import Counts, Group

if TYPE_CHECKING:
    from verifier.findings import Verification
    from verifier.store import Store

VERDICTS = ("delivered", "not_delivered", "inconclusive")
STATUSES = ("pending", *VERDICTS)
# Label values per dimension (agents, models, repositories), the rest summed as OTHER:
# a Prometheus series per value, so an unbounded set would grow without end.
MAX_LABEL_VALUES = 50
OTHER = "other"
CONTENT_TYPE = CONTENT_TYPE_LATEST
# Checks last from milliseconds (an audit) to the test timeout (600 s by default).
CHECK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)

# One histogram per process, whatever the number of apps in it: verifications run in
# the process's workers, not in an app. Each app's registry exposes it (`Metrics`).
CHECK_SECONDS = Histogram(
    "verifier_check_seconds",
    "Seconds each check took, by check.",
    ["check"],
    buckets=CHECK_BUCKETS,
    registry=None,
)


def observe_run(verification: Verification) -> None:
    """Record how long each check of a finished verification took."""
    for name, result in verification.checks.items():
        CHECK_SECONDS.labels(check=name).observe(max(result.duration_s, 0.0))


class Metrics:
    """The registry of one app: the database's figures and this process's check timings."""

    def __init__(self, store: Store) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_StoreCollector(store))
        self.registry.register(CHECK_SECONDS)

    def render(self) -> bytes:
        """The text exposition format; reads the database (`InfrastructureError` when down)."""
        return generate_latest(self.registry)


def bounded(groups: Sequence[Group], limit: int = MAX_LABEL_VALUES) -> list[Group]:
    """At most `limit` groups, those with the most sessions (then by key), and the rest
    summed as one `OTHER` group; sorted by key. The sum over them is the sum over all."""
    ranked = sorted((g for g in groups if g.key != OTHER), key=lambda g: (-g.counts.total, g.key))
    kept = ranked[:limit]
    rest = ranked[limit:] + [g for g in groups if g.key == OTHER]
    if rest:
        kept.append(Group(OTHER, sum((g.counts for g in rest), Counts())))
    return sorted(kept, key=lambda g: g.key)


class _Scope:
    """The session families of one scope: all sessions, or by one dimension."""

    def __init__(self, dimension: str | None) -> None:
        suffix = "" if dimension is None else f"_by_{dimension}"
        whose = "" if dimension is None else f", by {dimension}"
        labels = [] if dimension is None else [dimension]
        self.sessions = GaugeMetricFamily(
            f"verifier_sessions{suffix}",
            f"Sessions stored, each once, by current delivery status{whose} (as /v1/stats).",
            labels=[*labels, "delivery_status"],
        )
        self.done = GaugeMetricFamily(
            f"verifier_done_sessions{suffix}",
            f"Sessions whose agent said done{whose}.",
            labels=labels,
        )
        self.silent = GaugeMetricFamily(
            f"verifier_silent_failures{suffix}",
            f"Sessions done but not delivered{whose}.",
            labels=labels,
        )
        self.delivered_rate = GaugeMetricFamily(
            f"verifier_delivered_rate{suffix}",
            f"Share of the conclusive sessions that delivered{whose} (none: no sample).",
            labels=labels,
        )
        self.done_rate = GaugeMetricFamily(
            f"verifier_done_rate{suffix}",
            f"Share of the conclusive sessions whose agent said done{whose}.",
            labels=labels,
        )

    def add(self, key: Sequence[str], counts: Counts) -> None:
        by_status = {
            "pending": counts.pending,
            "delivered": counts.delivered,
            "not_delivered": counts.not_delivered,
            "inconclusive": counts.inconclusive,
        }
        for status in STATUSES:
            self.sessions.add_metric([*key, status], by_status[status])
        self.done.add_metric(key, counts.done)
        self.silent.add_metric(key, counts.silent_failures)
        if counts.delivered_rate is not None:
            self.delivered_rate.add_metric(key, counts.delivered_rate)
        if counts.done_rate is not None:
            self.done_rate.add_metric(key, counts.done_rate)

    def families(self) -> tuple[GaugeMetricFamily, ...]:
        return (self.sessions, self.done, self.silent, self.delivered_rate, self.done_rate)


class _StoreCollector(Collector):
    """Counts read from the database at each scrape."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def describe(self) -> Iterator[Metric]:
        # Registration must not reach the database: the families, without samples.
        yield from _families()
        for dimension in (None, *DIMENSIONS):
            yield from _Scope(dimension).families()

    def collect(self) -> Iterator[Metric]:
        figures = tallies(self._store)
        ingested, runs, verdicts, pending, inconclusive = _families()
        for done in (True, False):
            status = "done" if done else "not_done"
            ingested.add_metric([status], figures.sessions_by_done.get(done, 0))
        for verdict in VERDICTS:
            runs.add_metric([verdict], figures.runs_by_verdict.get(verdict, 0))
            verdicts.add_metric([verdict], figures.runs_by_verdict.get(verdict, 0))
        pending.add_metric([], figures.sessions_by_status.get("pending", 0))
        inconclusive.add_metric([], figures.sessions_by_status.get("inconclusive", 0))
        yield from (ingested, runs, verdicts, pending, inconclusive)
        everything = _Scope(None)
        everything.add([], figures.totals)
        yield from everything.families()
        for dimension in DIMENSIONS:
            scope = _Scope(dimension)
            for group in bounded(figures.by[dimension]):
                scope.add([group.key], group.counts)
            yield from scope.families()


def _families() -> tuple[
    CounterMetricFamily,
    CounterMetricFamily,
    CounterMetricFamily,
    GaugeMetricFamily,
    GaugeMetricFamily,
]:
    return (
        CounterMetricFamily(
            "verifier_sessions_ingested",
            "Sessions stored, by agent status (done or not_done).",
            labels=["agent_status"],
        ),
        CounterMetricFamily(
            "verifier_runs",
            "Verification runs finished, by verdict (a re-verify is one more run).",
            labels=["verdict"],
        ),
        CounterMetricFamily(
            "verifier_verdicts",
            "Deprecated: verifier_runs_total under its old name (it counts runs, not "
            "sessions); for sessions by verdict read verifier_sessions.",
            labels=["verdict"],
        ),
        GaugeMetricFamily("verifier_pending_sessions", "Sessions stored and not yet verified."),
        GaugeMetricFamily(
            "verifier_inconclusive_sessions",
            "Sessions whose verifications never concluded (the retry backlog).",
        ),
    )
