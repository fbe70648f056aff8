"""`make demo`: every scenario gets its verdict, and a second run is deterministic.

The tests that read the demo's folder share its runs in a worker (`Demo`).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from audit.recorder import dumps
from audit.trailfile import check_trail_file
from tests.support import geminicli
from tests.support.messages import repetitions
from verifier.config import Config
from verifier.demo import page as demo_page
from verifier.demo import run as demo
from verifier.findings import Verification
from verifier.formats import gate as gate_formats
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


@dataclass(frozen=True)
class Run:
    """What one run of the demo returned and printed."""

    verifications: list[Verification]
    printed: str


class Demo:
    """The demo run into one folder, as `make demo`, with the store the environment names
    set as a user's would be: first with `--format json`, then again as text. Each run is
    made when a test first reads it, once per worker (a run costs seconds of CPU): the
    tests of this module read the same runs when they share a worker."""

    def __init__(self, tmp: Path) -> None:
        self.out, self.user_store = tmp / "out", tmp / "user.sqlite3"
        self.reports_after_first: dict[str, bytes] = {}

    def _run(self, fmt: str) -> Run:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("VERIFIER_DATABASE_URL", f"sqlite:///{self.user_store}")
            patch.delenv("VERIFIER_CONFIG", raising=False)
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                verifications = demo.run(self.out, fmt)
        return Run(verifications, printed.getvalue())

    @functools.cached_property
    def first(self) -> Run:
        assert not self.out.exists(), "the json run is the folder's first"
        run = self._run("json")
        self.reports_after_first = {p.name: p.read_bytes() for p in self.reports()}
        return run

    @functools.cached_property
    def second(self) -> Run:
        """The text run: the folder's second when `first` was read before, else its first."""
        return self._run("text")

    def reports(self) -> list[Path]:
        return sorted((self.out / "reports").glob("*.json"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    return Demo(tmp_path_factory.mktemp("demo"))


def test_demo_verdicts_rates_and_a_deterministic_second_run(runs: Demo) -> None:
    first = runs.first.verifications
    got = {
        v.session_id: (v.delivery_status.value, v.first_finding.code if v.first_finding else None)
        for v in first
    }
    assert got == EXPECTED
    printed = json.loads(runs.first.printed)
    assert printed["rates"]["done"] == 8 and printed["rates"]["delivered"] == 2
    # The whole-file write agrees with every hash and the tests: only the replay sees it.
    whole = next(v for v in first if v.session_id == "demo-08-whole-file")
    assert {name for name, check in whole.checks.items() if check.findings} == {"replay"}
    # Every finding as a person reads it, in the message and the gate's line: its path
    # once, no phrase said twice.
    said = [f for v in first for check in v.checks.values() for f in check.findings]
    assert len({f.code for f in said}) >= 6
    for finding in said:
        assert repetitions(finding.message, finding) == [], finding
        assert repetitions(gate_formats.finding_line(finding), finding) == [], finding

    assert len(runs.reports_after_first) == len(EXPECTED)
    assert len(runs.second.verifications) == len(EXPECTED)  # again, into the same folder
    reports = runs.reports()
    assert {p.name: p.read_bytes() for p in reports} == runs.reports_after_first

    with Store.open(f"sqlite:///{runs.out / 'verifier.sqlite3'}") as store:
        assert store.rates().total == 9
        assert len(store.runs("demo-01-delivered")) == 2
        # Each report is the recorder's bytes, stored as they were written.
        for path in reports:
            raw = path.read_bytes()
            assert raw == dumps(json.loads(raw))
            assert store.report_bytes(path.stem) == raw
    # Never the store the environment names: the demo leaves no trace outside its folder.
    assert not runs.user_store.exists()


def test_demo_trails_and_page(runs: Demo) -> None:
    """Each session's trail is on disk and whole; the buggy harness of demo-05 rewrote its
    own, re-chained, so the file alone looks sound; the page is the same view, standalone."""
    verifications, printed, out = runs.second.verifications, runs.second.printed, runs.out
    assert "verifier serve" in printed and "token create --scope read" in printed
    assert "http://127.0.0.1:8080/" in printed and "index.html" in printed
    # The commands printed read the demo's store from any folder.
    demo_store = f"sqlite:///{out.resolve() / 'verifier.sqlite3'}"
    demo_config = Config.load(out / "verifier.toml", environ={})
    assert demo_config.database_url == demo_store
    # The evidence key of the README's tour is the demo's too: nothing is written into ~.
    assert demo_config.evidence.signing_key.parent == out.resolve()

    for scenario in demo.SCENARIOS:
        trail = out / "trails" / f"{scenario.session_id}.jsonl"
        check = check_trail_file(trail, session_id=scenario.session_id)
        assert check.exit_code == 0, check.as_dict()
    gap = (out / "trails" / "demo-05-audit-gap.jsonl").read_text()
    assert '"call_id":"c1"' in gap and '"call_id":"c2"' not in gap

    page = (out / "index.html").read_text(encoding="utf-8")
    for v in verifications:
        assert v.session_id in page
    assert page.count(">not delivered<") == 7 and page.count(">delivered<") == 2
    assert '<span class="value" id="silent-failures">6</span>' in page
    assert "verifier serve" in page and "token create --scope read" in page
    # Self-contained: the dashboard's stylesheet inlined, nothing fetched, nothing run.
    assert ".figure .value.delivered" in page
    assert not re.search(r"(src|href|action)=|<script|<link|@import|url\(", page)

    # What it shows is escaped.
    hostile = {verifications[0].session_id: '<img src=x onerror="alert(1)">'}
    rates = {"sessions": 1, "done": 1, "delivered": 0, "done_rate": 1.0, "delivered_rate": 0.0}
    escaped = demo_page.render(verifications[:1], rates, hostile, ["<b>"])
    assert "<b>" not in escaped and "&lt;b&gt;" in escaped
    assert "<img" not in escaped and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in escaped


def test_demo_gemini_cli_says_how_to_install_gemini_cli_when_it_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFIER_GEMINI_CLI", str(tmp_path / "no-gemini"))
    done = subprocess.run(
        [sys.executable, "-m", "verifier", "demo", "--gemini-cli", "--dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "gemini-cli 0.61.0 is not installed: npm install" in done.stderr
    assert not (tmp_path / "d").exists()


def test_demo_gemini_cli_records_real_sessions_and_tells_done_from_delivered(
    tmp_path: Path,
) -> None:
    gemini = geminicli.require()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "verifier", "demo", "--gemini-cli"),
            *("--format", "json", "--dir", str(tmp_path / "d")),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "VERIFIER_GEMINI_CLI": str(gemini)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    sessions = json.loads(done.stdout)["sessions"]
    assert [(s["done"], s["delivery_status"]) for s in sessions] == [
        (True, "delivered"),
        (True, "not_delivered"),
        (True, "not_delivered"),
        (True, "delivered"),
    ]
    assert (tmp_path / "d" / "gemini-cli.html").is_file()
