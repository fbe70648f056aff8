"""Prometheus metrics of the service, each app with a registry of its own.

* ``verifier_sessions_ingested_total{agent_status}`` (``done`` or ``not_done``) and
  ``verifier_verdicts_total{verdict}``: read from the database at scrape time
  (`verifier.store.probes`), so they are right however many processes ingest
  and verify, and survive restarts;
* ``verifier_pending_sessions`` and ``verifier_inconclusive_sessions``: the backlog,
  from the same aggregate;
* ``verifier_check_seconds{check}``: how long each check took, observed by the
  process that ran it (`observe_run`).

Labels are bounded: an agent status is reduced to done / not done (a raw status
is whatever the agent wrote), a verdict is one of three, a check one of the
verifier's own. Never a session id or a hash.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from verifier.store.probes import tallies

if TYPE_CHECKING:
    from verifier.findings import Verification
    from verifier.store import Store

VERDICTS = ("delivered", "not_delivered", "inconclusive")
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


class _StoreCollector(Collector):
    """Counts read from the database at each scrape."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def describe(self) -> Iterator[Metric]:
        # Registration must not reach the database: the families, without samples.
        yield from _families()

    def collect(self) -> Iterator[Metric]:
        figures = tallies(self._store)
        ingested, verdicts, pending, inconclusive = _families()
        for done in (True, False):
            status = "done" if done else "not_done"
            ingested.add_metric([status], figures.sessions_by_done.get(done, 0))
        for verdict in VERDICTS:
            verdicts.add_metric([verdict], figures.runs_by_verdict.get(verdict, 0))
        pending.add_metric([], figures.sessions_by_status.get("pending", 0))
        inconclusive.add_metric([], figures.sessions_by_status.get("inconclusive", 0))
        yield from (ingested, verdicts, pending, inconclusive)


def _families() -> tuple[
    CounterMetricFamily, CounterMetricFamily, GaugeMetricFamily, GaugeMetricFamily
]:
    return (
        CounterMetricFamily(
            "verifier_sessions_ingested",
            "Sessions stored, by agent status (done or not_done).",
            labels=["agent_status"],
        ),
        CounterMetricFamily(
            "verifier_verdicts",
            "Verification runs finished, by verdict.",
            labels=["verdict"],
        ),
        GaugeMetricFamily("verifier_pending_sessions", "Sessions stored and not yet verified."),
        GaugeMetricFamily(
            "verifier_inconclusive_sessions",
            "Sessions whose verifications never concluded (the retry backlog).",
        ),
    )
