"""`make demo`: every scenario gets its verdict, and a second run is deterministic."""

from __future__ import annotations

import json
from pathlib import Path

from verifier import demo
from verifier.config import Config
from verifier.store import Store

EXPECTED = {
    "demo-01-delivered": ("delivered", None),
    "demo-02-change-missing": ("not_delivered", "change.missing"),
    "demo-03-wrong-range": ("not_delivered", "change.hash_mismatch"),
    "demo-04-tests-fail": ("not_delivered", "tests.failed"),
    "demo-05-audit-gap": ("not_delivered", "audit.call_without_entry"),
    "demo-06-undeclared": ("not_delivered", "change.undeclared"),
    "demo-07-out-of-turns": ("not_delivered", "tests.failed"),
    "demo-08-whole-file": ("not_delivered", "replay.whole_file_write"),
    "demo-09-worktree-fr": ("delivered", None),
}


def test_demo_verdicts_rates_and_a_deterministic_second_run(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    first = demo.run(tmp_path / "out", "json")
    got = {
        v.session_id: (v.delivery_status.value, v.first_finding.code if v.first_finding else None)
        for v in first
    }
    assert got == EXPECTED
    printed = json.loads(capsys.readouterr().out)
    assert printed["rates"]["done"] == 8 and printed["rates"]["delivered"] == 2

    reports = sorted((tmp_path / "out" / "reports").glob("*.json"))
    before = {p.name: p.read_bytes() for p in reports}
    demo.run(tmp_path / "out", "json")
    assert {p.name: p.read_bytes() for p in reports} == before

    with Store.open(f"sqlite:///{tmp_path / 'out' / 'verifier.sqlite3'}") as store:
        assert store.rates().total == 9
        assert len(store.runs("demo-01-delivered")) == 2
    # Never the store the environment names: the demo leaves no trace outside its folder.
    assert not Path(Config.load().database_url.removeprefix("sqlite:///")).exists()
