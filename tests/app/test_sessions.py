"""`verifier.app.sessions`: the one view of a stored session, and show, list, ingest and
override as functions of the configuration, on a real store."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.api import T0, make_config, verification
from tests.support.report_factory import make_report_bytes
from verifier.app import pipeline, sessions
from verifier.app.sessions import SessionView
from verifier.errors import BadRequest, NotFound
from verifier.store import Store


def stored(db_url: str, *session_ids: str) -> None:
    with Store.open(db_url) as store:
        for session_id in session_ids:
            pipeline.submit(store, make_report_bytes(session_id), f"test:{session_id}")


def test_an_inconclusive_run_never_hides_the_verdict_before_it(db_url: str) -> None:
    stored(db_url, "s1")
    with Store.open(db_url) as store:
        first = store.record_run(verification("s1", failed=True))
        store.record_run(verification("s1", error=True, started_at=T0 + timedelta(minutes=1)))
    view = sessions.show(make_config(db_url), "s1")
    assert view.delivery_status == "not_delivered"
    assert view.verdict_run is not None and view.verdict_run.id == first
    assert view.shown_run is view.verdict_run
    assert view.latest_run is not None and view.latest_run.delivery_status.value == "inconclusive"
    assert view.first_finding is not None and view.first_finding.code == "change.missing"
    data = view.to_dict()
    assert data["delivery_status"] == "not_delivered" == data["effective_status"]
    assert [r["delivery_status"] for r in data["runs"]] == ["not_delivered", "inconclusive"]
    assert data["latest_run"]["delivery_status"] == "inconclusive"


def test_the_view_of_a_whole_session_has_every_column_then_the_verdicts_in_order(
    db_url: str,
) -> None:
    stored(db_url, "s1")
    view = sessions.show(make_config(db_url), "s1")
    keys = list(view.to_dict())
    assert keys[:2] == ["session_id", "agent_name"]
    assert keys[-4:] == ["effective_status", "overrides", "latest_run", "runs"]
    assert view.to_dict()["delivery_status"] == "pending"
    assert view.to_dict()["ended_at"] == "2026-11-29T10:02:10Z"


def test_a_session_only_ever_inconclusive_shows_its_latest_run(db_url: str) -> None:
    stored(db_url, "s1")
    with Store.open(db_url) as store:
        store.record_run(verification("s1", error=True))
    view = sessions.show(make_config(db_url), "s1")
    assert view.verdict_run is None and view.delivery_status == "inconclusive"
    assert view.shown_run is view.latest_run


def test_show_of_a_session_not_stored_or_of_no_store_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="'s1' is not stored: no store at"):
        sessions.show(make_config(f"sqlite:///{tmp_path / 'none.sqlite3'}"), "s1")
    url = f"sqlite:///{tmp_path / 'some.sqlite3'}"
    stored(url, "s2")
    with pytest.raises(NotFound):
        sessions.show(make_config(url), "s1")


def test_the_listing_holds_every_session_with_the_rates_and_the_overridden(db_url: str) -> None:
    stored(db_url, "s1", "s2")
    with Store.open(db_url) as store:
        store.record_run(verification("s1"))
    config = make_config(db_url)
    sessions.override(config, "s2", status="delivered", reason="read it", author="cli:bo")
    listing = sessions.listing(config)
    by_id = {view.session.session_id: view for view in listing.sessions}
    assert by_id["s1"].delivery_status == "delivered"
    assert by_id["s2"].delivery_status == "pending"
    assert by_id["s2"].effective_status == "delivered"
    assert listing.rates.total == 2 and listing.overridden == 1
    data = listing.to_dict()
    assert data["rates"]["verdicts"] == "computed" and data["rates"]["overridden"] == 1
    line = next(s for s in data["sessions"] if s["session_id"] == "s1")
    assert line["latest_run"]["delivery_status"] == "delivered"
    assert line["verified_at"] == line["latest_run"]["verified_at"]


def test_a_listing_without_a_store_is_empty_and_says_why(tmp_path: Path) -> None:
    said: list[str] = []
    config = make_config(f"sqlite:///{tmp_path / 'none.sqlite3'}")
    listing = sessions.listing(config, notice=said.append)
    assert listing.sessions == () and listing.rates.total == 0
    assert len(said) == 1 and "no store at" in said[0]


def test_ingest_stores_each_report_and_says_what_became_of_the_others(tmp_path: Path) -> None:
    config = make_config(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    good, other, bad = tmp_path / "good.json", tmp_path / "other.json", tmp_path / "bad.json"
    good.write_bytes(make_report_bytes("s1"))
    other.write_bytes(make_report_bytes("s1", final_text="other bytes"))
    bad.write_bytes(b"not json")
    heard: list[str] = []
    sources = [str(good), str(good), str(other), str(bad), str(tmp_path / "absent.json")]
    done = sessions.ingest(config, sources, progress=heard.append)
    assert [r.result for r in done.reports] == [
        "stored",
        "already stored",
        "conflict",
        "invalid",
        "invalid",
    ]
    assert done.reports[2].session_id == "s1" and "different bytes" in done.reports[2].message
    assert "cannot read report" in done.reports[4].message
    assert done.exit_code == 2
    assert heard[0] == f"1/5 stored: {good}"
    assert sessions.ingest(config, [str(good)]).exit_code == 0


def test_ingest_of_a_report_naming_an_undeclared_task_stores_nothing_and_says_so(
    tmp_path: Path,
) -> None:
    config = make_config(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    report = tmp_path / "task.json"
    report.write_bytes(make_report_bytes("s-task", task_id="calc-404"))
    done = sessions.ingest(config, [str(report)])
    assert [(r.result, r.session_id) for r in done.reports] == [("unknown task", "")]
    assert "'calc-404'" in done.reports[0].message
    assert done.exit_code == 2
    with Store.open(config.database_url) as store:
        assert store.sessions() == []


def test_an_override_stands_beside_the_computed_verdict(db_url: str) -> None:
    stored(db_url, "s1")
    with Store.open(db_url) as store:
        store.record_run(verification("s1", failed=True))
    config = make_config(db_url)
    done = sessions.override(config, "s1", status="delivered", reason="moved", author="cli:al")
    assert done.to_dict() == {
        "override": done.override.to_dict(),
        "session_id": "s1",
        "delivery_status": "not_delivered",
        "override_status": "delivered",
        "effective_status": "delivered",
    }
    view = sessions.show(config, "s1")
    assert [o.reason for o in view.overrides] == ["moved"]
    with pytest.raises(BadRequest):
        sessions.override(config, "s1", status="delivered", reason=" ", author="cli:al")


def test_a_listing_line_and_the_whole_view_agree_on_the_verdicts(db_url: str) -> None:
    stored(db_url, "s1")
    with Store.open(db_url) as store:
        store.record_run(verification("s1", failed=True))
        listed = store.listed("s1")
    line, whole = SessionView.of(listed), sessions.show(make_config(db_url), "s1")
    assert line.delivery_status == whole.delivery_status
    assert line.first_finding == whole.first_finding
    assert line.summary_dict()["first_finding"]["code"] == "change.missing"
