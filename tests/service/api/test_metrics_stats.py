"""/metrics and /v1/stats agree on a live server (SQLite and PostgreSQL): the same sessions,
rates and silent failures, in all and by agent, model and repository; a re-verify is one
more run, never one more session; the label values are bounded; and the Grafana dashboard
of docs/grafana reads only metrics the server exposes, its panels showing the stats' figures."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api import RecordingQueue, bearer, make_config, make_tokens, serve, verification
from tests.support.paths import ROOT
from tests.support.report_factory import make_report_bytes, report_dict
from verifier.service.api import create_app
from verifier.service.metrics import MAX_LABEL_VALUES, OTHER, observe_run
from verifier.store import Store

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


# (session, agent status, agent, model, repository, what its runs decide, oldest first)
SESSIONS: list[tuple[str, str, str, str | None, str, list[str]]] = [
    ("a-1", "done", "alpha", "m1", "calc", ["delivered"]),
    ("a-2", "done", "alpha", "m1", "calc", ["not_delivered"]),  # a silent failure
    ("a-3", "error", "alpha", "m2", "web", ["not_delivered"]),
    ("b-1", "done", "beta", "m2", "calc", ["delivered", "not_delivered"]),  # re-verified
    ("b-2", "done", "beta", None, "web", ["inconclusive"]),
    ("b-3", "error", "beta", None, "web", []),  # pending
    ("c-1", "done", "gamma", "m1", "calc", ["not_delivered", "delivered"]),  # re-verified
]


def _record(store: Store, session_id: str, verdict: str) -> None:
    store.record_run(
        verification(session_id, failed=verdict == "not_delivered", error=verdict == "inconclusive")
    )


@pytest.fixture
def live(db_url: str) -> Iterator[tuple[str, dict[str, str], str]]:
    """A served API over a store holding `SESSIONS`, verified as they say; its tokens."""
    tokens = make_tokens(db_url)
    repo_of = report_dict()["repo"]
    app = create_app(make_config(db_url), RecordingQueue())
    with serve(app) as base:
        for sid, status, agent, model, repo, _ in SESSIONS:
            named: dict[str, Any] = {"name": agent, "version": "1", "tool_profile": "default"}
            if model is not None:
                named["model"] = model
            raw = make_report_bytes(sid, status, agent=named, repo={**repo_of, "name": repo})
            response = httpx.post(
                f"{base}/v1/sessions", content=raw, headers=bearer(tokens["ingest"])
            )
            assert response.status_code == 202, response.text
        with Store.open(db_url) as store:
            for sid, *_, verdicts in SESSIONS:
                for verdict in verdicts:
                    _record(store, sid, verdict)
        yield base, tokens, db_url


def _get(base: str, token: str, path: str) -> httpx.Response:
    response = httpx.get(f"{base}{path}", headers=bearer(token))
    assert response.status_code == 200, response.text
    return response


def _agree(figures: Samples, stats: dict[str, Any], suffix: str, labels: tuple) -> None:
    """The samples of one scope are the counts and rates /v1/stats gives for it."""
    for status in ("pending", "delivered", "not_delivered", "inconclusive"):
        key = tuple(sorted((*labels, ("delivery_status", status))))
        assert figures[(f"verifier_sessions{suffix}", key)] == stats[status], (suffix, status)
    assert figures[(f"verifier_done_sessions{suffix}", labels)] == stats["done"]
    assert figures[(f"verifier_silent_failures{suffix}", labels)] == stats["silent_failures"]
    for rate in ("delivered_rate", "done_rate"):
        if stats[rate] is None:
            assert (f"verifier_{rate}{suffix}", labels) not in figures
        else:
            assert figures[(f"verifier_{rate}{suffix}", labels)] == pytest.approx(stats[rate])


def test_metrics_and_stats_agree_in_all_and_by_agent_model_and_repository(
    live: tuple[str, dict[str, str], str],
) -> None:
    base, tokens, _ = live
    figures = samples(_get(base, tokens["read"], "/metrics").text)
    stats = _get(base, tokens["read"], "/v1/stats").json()
    assert stats["total"] == len(SESSIONS) and stats["silent_failures"] == 2
    _agree(figures, stats, "", ())
    for dimension in ("agent", "model", "repo"):
        groups = _get(base, tokens["read"], f"/v1/stats?group_by={dimension}").json()["groups"]
        assert groups, dimension
        exposed = {
            dict(labels)[dimension]
            for name, labels in figures
            if name == f"verifier_done_sessions_by_{dimension}"
        }
        assert exposed == {g["key"] for g in groups}, dimension
        for group in groups:
            _agree(figures, group, f"_by_{dimension}", ((dimension, group["key"]),))


def test_a_reverify_is_one_more_run_never_one_more_session(
    live: tuple[str, dict[str, str], str],
) -> None:
    base, tokens, db_url = live
    before = samples(_get(base, tokens["read"], "/metrics").text)
    with Store.open(db_url) as store:
        _record(store, "a-1", "not_delivered")  # a-1 delivered, verified again: not delivered
    after = samples(_get(base, tokens["read"], "/metrics").text)

    def sessions(figures: Samples, status: str) -> float:
        return figures[("verifier_sessions", (("delivery_status", status),))]

    def runs(figures: Samples, name: str, verdict: str) -> float:
        return figures[(name, (("verdict", verdict),))]

    assert sum(sessions(after, s) for s in ("pending", "delivered", "not_delivered",
                                           "inconclusive")) == len(SESSIONS)  # fmt: skip
    assert sessions(after, "delivered") == sessions(before, "delivered") - 1
    assert sessions(after, "not_delivered") == sessions(before, "not_delivered") + 1
    assert after[("verifier_silent_failures", ())] == before[("verifier_silent_failures", ())] + 1
    # Runs: every run of SESSIONS (9) and the re-verify; the old name says the same.
    assert runs(before, "verifier_runs_total", "not_delivered") == 4
    assert runs(after, "verifier_runs_total", "not_delivered") == 5
    assert runs(after, "verifier_runs_total", "delivered") == 3
    for verdict in ("delivered", "not_delivered", "inconclusive"):
        assert runs(after, "verifier_verdicts_total", verdict) == runs(
            after, "verifier_runs_total", verdict
        )
    stats = _get(base, tokens["read"], "/v1/stats").json()
    _agree(after, stats, "", ())


def test_the_metrics_help_says_the_verdicts_counter_is_deprecated(
    live: tuple[str, dict[str, str], str],
) -> None:
    base, tokens, _ = live
    helps = {
        f.name: f.documentation
        for f in text_string_to_metric_families(_get(base, tokens["read"], "/metrics").text)
    }
    assert helps["verifier_verdicts"].startswith("Deprecated: verifier_runs_total")
    assert "re-verify is one more run" in helps["verifier_runs"]


def test_agents_past_the_label_limit_are_summed_as_other(sqlite_url: str) -> None:
    tokens = make_tokens(sqlite_url)
    app = create_app(make_config(sqlite_url), RecordingQueue())
    extra = 7
    agents = MAX_LABEL_VALUES + extra
    with serve(app) as base:
        with httpx.Client(base_url=base, headers=bearer(tokens["ingest"])) as client:
            for n in range(agents):
                # agent-00 has the most sessions (3), then agent-01 (2), the rest one each.
                for k in range(3 if n == 0 else 2 if n == 1 else 1):
                    named = {"name": f"agent-{n:02d}", "version": "1", "tool_profile": "default"}
                    raw = make_report_bytes(f"s-{n}-{k}", agent=named)
                    assert client.post("/v1/sessions", content=raw).status_code == 202
        figures = samples(_get(base, tokens["read"], "/metrics").text)
        stats = _get(base, tokens["read"], "/v1/stats").json()
    by_agent = {
        dict(labels)["agent"]: value
        for (name, labels), value in figures.items()
        if name == "verifier_done_sessions_by_agent"
    }
    assert len(by_agent) == MAX_LABEL_VALUES + 1 and OTHER in by_agent
    assert by_agent["agent-00"] == 3 and by_agent["agent-01"] == 2
    # Ties are kept by name: the last `extra` agents by name are summed under other.
    assert by_agent[OTHER] == extra
    assert (
        f"agent-{agents - 1:02d}" not in by_agent and f"agent-{agents - extra:02d}" not in by_agent
    )
    assert sum(by_agent.values()) == stats["done"] == stats["total"]


# -- docs/grafana/verifier-dashboard.json, against the live /metrics ---------------------------

DASHBOARD = ROOT / "docs" / "grafana" / "verifier-dashboard.json"
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or"}
KEYWORDS |= {"unless", "offset", "inf", "nan"}
# What each stat panel's query is in GET /v1/stats: the panel shows that figure.
STAT_OF = {
    "verifier_delivered_rate": "delivered_rate",
    "verifier_done_rate": "done_rate",
    "verifier_silent_failures": "silent_failures",
    **{f'verifier_sessions{{delivery_status="{s}"}}': s for s in ("delivered", "not_delivered")},
    **{f'verifier_sessions{{delivery_status="{s}"}}': s for s in ("inconclusive", "pending")},
}
SELECTOR = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?$")
MATCHER = re.compile(r'\s*(?P<label>\w+)\s*(?P<op>=~|=)\s*"(?P<value>[^"]*)"\s*')


def _queries(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    variables = dashboard["templating"]["list"]
    return exprs + [v["definition"] for v in variables if v["type"] == "query"]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (label_values' first argument too)."""
    text = re.sub(r'"[^"]*"', "", expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"label_values\(\s*([\w:]+)\s*,\s*\w+\s*\)", r"\1", text)
    names = set(re.findall(r"(?<![\w.])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()", text))
    return {n for n in names if n.lower() not in KEYWORDS}


def select(figures: Samples, selector: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples a plain selector (a name and label matchers) picks, by their labels."""
    match = SELECTOR.match(selector.replace("$agent", ".*").replace("$model", ".*"))
    assert match is not None, selector
    matchers = [m.groupdict() for m in MATCHER.finditer(match["labels"] or "")]
    picked = {}
    for (name, labels), value in figures.items():
        given = dict(labels)
        if name == match["name"] and all(
            (re.fullmatch(m["value"], given.get(m["label"], "")) is not None)
            if m["op"] == "=~"
            else given.get(m["label"], "") == m["value"]
            for m in matchers
        ):
            picked[labels] = value
    return picked


def test_every_query_of_the_grafana_dashboard_reads_metrics_the_server_exposes(
    live: tuple[str, dict[str, str], str],
) -> None:
    base, tokens, _ = live
    observe_run(verification("a-1"))  # the check histogram has samples once a run is observed
    text = _get(base, tokens["read"], "/metrics").text
    exposed = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = _queries(dashboard)
    assert len(queries) >= 10
    for expr in queries:
        names = metric_names(expr)
        assert names, expr
        assert names <= exposed, f"{expr}: {sorted(names - exposed)} not in /metrics"
    assert metric_names('sum by (le) (rate(x_bucket{a="b"}[5m])) / y') == {"x_bucket", "y"}
    assert metric_names("label_values(verifier_sessions_by_agent, agent)") == {
        "verifier_sessions_by_agent"
    }


def test_the_grafana_panels_show_what_v1_stats_says(
    live: tuple[str, dict[str, str], str],
) -> None:
    base, tokens, _ = live
    figures = samples(_get(base, tokens["read"], "/metrics").text)
    stats = _get(base, tokens["read"], "/v1/stats").json()
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    stat_panels = [p for p in dashboard["panels"] if p["type"] == "stat"]
    assert stat_panels
    for panel in stat_panels:
        for target in panel["targets"]:
            expr = target["expr"]
            assert expr in STAT_OF, f"{panel['title']}: {expr} has no /v1/stats figure here"
            [value] = select(figures, expr).values()
            assert value == pytest.approx(stats[STAT_OF[expr]]), panel["title"]
    # The per-agent and per-model lines: one per group of /v1/stats?group_by=..., its rate.
    checked = 0
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            found = re.match(r"^verifier_(\w+?)_by_(agent|model|repo)\b", target["expr"])
            if found is None:
                continue
            figure, dimension = found.groups()
            groups = _get(base, tokens["read"], f"/v1/stats?group_by={dimension}").json()
            expected = {g["key"]: g[figure] for g in groups["groups"] if g[figure] is not None}
            shown = {dict(k)[dimension]: v for k, v in select(figures, target["expr"]).items()}
            assert shown == pytest.approx(expected), target["expr"]
            checked += 1
    assert checked >= 4
