"""The rows the store hands out (`verifier.store.rows`): plain values, no engine needed."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

from verifier.findings import CheckStatus, DeliveryStatus
from verifier.store import rows
from verifier.store.rows import Counts, Listed, RunRow, SessionLine, SessionRow

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def session(**fields: object) -> SessionRow:
    values: dict[str, object] = {
        "session_id": "s1",
        "agent_name": "fixer",
        "agent_version": "1",
        "agent_model": None,
        "tool_profile": "default",
        "repo_name": "calc",
        "base_commit": "6f1c" * 10,
        "head_commit": None,
        "raw_status": "done",
        "status": "done",
        "done": True,
        "started_at": T0,
        "ended_at": T0,
        "report_sha256": "0" * 64,
        "ingested_at": T0,
    }
    return SessionRow(**{**values, **fields})  # type: ignore[arg-type]


def run(run_id: int, status: DeliveryStatus) -> RunRow:
    return RunRow(
        id=run_id,
        session_id="s1",
        verifier_version="0.1.0",
        delivery_status=status,
        checks={"tests": CheckStatus.PASS},
        started_at=T0,
        finished_at=T0,
        duration_s=0.0,
        result={},
        findings=(),
    )


def test_the_rows_module_imports_no_sqlalchemy_and_none_of_the_engine() -> None:
    tree = ast.parse(Path(rows.__file__).read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert "verifier.findings" in imported  # the walk sees the module's imports
    assert not {m for m in imported if m.split(".")[0] in ("sqlalchemy", "alembic")}
    assert not {m for m in imported if m.startswith("verifier.store")}


def test_rates_are_over_conclusive_sessions_and_none_without_any() -> None:
    assert Counts().done_rate is None and Counts().delivered_rate is None
    counts = (
        Counts.of(True, "delivered", 3)
        + Counts.of(True, "not_delivered", 1)
        + Counts.of(False, "not_delivered", 4)
        + Counts.of(True, "inconclusive", 5)
        + Counts.of(True, "pending", 7)
    )
    assert (counts.total, counts.done, counts.conclusive) == (20, 16, 8)
    assert (counts.silent_failures, counts.inconclusive, counts.pending) == (1, 5, 7)
    assert counts.delivered_rate == 3 / 8 and counts.done_rate == 4 / 8
    assert counts.to_dict()["done_conclusive"] == 4


def test_a_verdict_shows_the_conclusive_run_and_an_override_stands_beside_it() -> None:
    verdict, later = run(1, DeliveryStatus.DELIVERED), run(2, DeliveryStatus.INCONCLUSIVE)
    assert Listed(session(), verdict, later).delivery_status == "delivered"
    assert Listed(session(), None, later).delivery_status == "inconclusive"
    assert Listed(session(), None, None).delivery_status == "pending"
    overridden = Listed(session(override_status="not_delivered"), verdict, later)
    assert (overridden.delivery_status, overridden.effective_status) == (
        "delivered",
        "not_delivered",
    )
    stored = session(delivery_status="delivered", override_status="not_delivered")
    line = SessionLine(stored, verdict_run_id=1, verified_at=T0, first_finding_code=None)
    assert (line.delivery_status, line.effective_status) == ("delivered", "not_delivered")
