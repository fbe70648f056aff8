"""One cache for test runs: the same tree, under the same conditions, is never tested twice.

Real repositories, real pytest runs, a real SQLite store (and PostgreSQL for the
store's side). Whether the tests really ran is told by the suite itself: with
``network_isolation = "off"`` its test appends a line to a file outside the copy.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.pg import (
    NO_POSTGRES,
    POSTGRES_URL,
    migrated_postgres_database,
)
from tests.support.sessions import BASE, PYTEST, fix_turns, fixed_session, to_bytes
from verifier._internal.snapshot import SnapshotInfo, materialize
from verifier.agent.harness import call, model_turn
from verifier.app.pipeline import verify_report
from verifier.checks.tests.cache import cache_key, cached, keep, reused, tree_digest
from verifier.config import Config, RepositoryConfig
from verifier.findings import CheckResult, CheckStatus, DeliveryStatus, Finding, Verification
from verifier.store import Store
from verifier.store.cache import TestResults

BROKEN = "    return b - a\n"


def counting_repo(tmp_path: Path) -> tuple[GitRepo, Path]:
    """The calc repository whose test suite appends a line to `runs` each time it runs."""
    runs = tmp_path / "runs.log"
    counter = (
        "\n\ndef test_count_the_run():\n"
        f"    with open({str(runs)!r}, 'a') as fh:\n"
        "        fh.write('ran\\n')\n"
    )
    repo = GitRepo(tmp_path / "calc")
    repo.commit({**BASE, "tests/test_calc.py": BASE["tests/test_calc.py"] + counter}, "base")
    return repo, runs


def config(repo: GitRepo, tmp_path: Path, **keys: object) -> Config:
    keys = {"test_command": PYTEST, "test_timeout_s": 60, **keys}
    calc = RepositoryConfig("calc", path=repo.path, **keys)  # type: ignore[arg-type]
    return Config(
        database_url=f"sqlite:///{tmp_path / 'cache.sqlite3'}",
        network_isolation="off",  # so the suite can count its runs on the host
        repositories={"calc": calc},
    )


def ran(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def result_of(verification: Verification) -> tuple[CheckStatus, dict[str, object], tuple[str, ...]]:
    result = verification.checks["tests"]
    return result.status, result.details, result.notes


def test_a_re_verified_session_reuses_its_test_result_and_says_so(tmp_path: Path) -> None:
    repo, runs = counting_repo(tmp_path)
    cfg = config(repo, tmp_path)
    raw = to_bytes(fixed_session(repo).report())

    first = verify_report(raw, cfg).verification
    assert ran(runs) == 1
    second = verify_report(raw, cfg).verification
    assert ran(runs) == 1  # not run again

    assert first.delivery_status is second.delivery_status is DeliveryStatus.DELIVERED
    status, details, notes = result_of(second)
    assert status is CheckStatus.PASS
    assert details["cached_from"] == "s-1"
    assert "cached_from" not in first.checks["tests"].details
    assert any("tests not run" in note and "s-1" in note for note in notes)
    # What the run established is kept as it was: the counts, the output's hash.
    for key in ("counts", "output_sha256", "exit_code", "sandbox"):
        assert details[key] == first.checks["tests"].details[key]
    assert second.checks["tests"].findings == first.checks["tests"].findings


def test_with_the_cache_off_every_verification_runs_the_tests(tmp_path: Path) -> None:
    """`test_result_cache = false`: for a suite known to be flaky, nothing is reused."""
    from dataclasses import replace

    repo, runs = counting_repo(tmp_path)
    cfg = replace(config(repo, tmp_path), test_result_cache=False)
    raw = to_bytes(fixed_session(repo).report())
    first = verify_report(raw, cfg).verification
    second = verify_report(raw, cfg).verification
    assert ran(runs) == 2
    assert "cached_from" not in second.checks["tests"].details
    assert first.delivery_status is second.delivery_status is DeliveryStatus.DELIVERED
    from sqlalchemy import func, select

    from verifier.store.models import TestResultCacheModel

    with Store.open(cfg.database_url) as store, store.transaction() as session:
        assert session.scalar(select(func.count()).select_from(TestResultCacheModel)) == 0


def test_another_session_on_the_same_tree_reuses_the_first_sessions_result(
    tmp_path: Path,
) -> None:
    """The second session also rewrote a test; the base's test runs anyway: same tree."""
    repo, runs = counting_repo(tmp_path)
    cfg = config(repo, tmp_path)
    base = repo.head()
    verify_report(to_bytes(fixed_session(repo, "s-1").report()), cfg)
    repo.git("reset", "-q", "--hard", base)
    weaker = [
        model_turn(
            call("write_file", "w1", path="tests/test_calc.py", content="def test_x():\n    pass\n")
        ),
        *fix_turns(),
    ]
    other = fixed_session(repo, "s-2", turns=weaker).report()
    assert other["repo"]["head_commit"] != base
    verification = verify_report(to_bytes(other), cfg).verification

    assert ran(runs) == 1
    status, details, notes = result_of(verification)
    assert (status, details["cached_from"]) == (CheckStatus.PASS, "s-1")
    assert any("tests/test_calc.py: changed from the base commit" in note for note in notes)


def test_a_failed_run_is_cached_too_and_stays_a_failure(repo: GitRepo, tmp_path: Path) -> None:
    cfg = config(repo, tmp_path)
    raw = to_bytes(fixed_session(repo, turns=fix_turns(replacement=BROKEN)).report())
    first = verify_report(raw, cfg).verification
    second = verify_report(raw, cfg).verification
    assert first.delivery_status is second.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert second.checks["tests"].details["cached_from"] == "s-1"
    assert [f.code for f in second.checks["tests"].findings] == ["tests.failed"]


def test_an_error_is_never_cached(repo: GitRepo, tmp_path: Path) -> None:
    """``true`` exits 0 and counts nothing: tests.uncounted, inconclusive, asked again next time."""
    cfg = config(repo, tmp_path, test_command=("true",))
    raw = to_bytes(fixed_session(repo).report())
    for _ in range(2):
        verification = verify_report(raw, cfg).verification
        tests = verification.checks["tests"]
        assert tests.status is CheckStatus.ERROR
        assert [f.code for f in tests.findings] == ["tests.uncounted"]
        assert "cached_from" not in tests.details
    with Store.open(cfg.database_url) as store, store.transaction() as session:
        from verifier.store.models import TestResultCacheModel

        assert session.query(TestResultCacheModel).count() == 0


def test_another_command_is_another_key(tmp_path: Path) -> None:
    repo, runs = counting_repo(tmp_path)
    raw = to_bytes(fixed_session(repo).report())
    verify_report(raw, config(repo, tmp_path))
    other = config(repo, tmp_path, test_command=(*PYTEST, "-x"))
    verification = verify_report(raw, other).verification
    assert ran(runs) == 2
    assert "cached_from" not in verification.checks["tests"].details


# the key -------------------------------------------------------------------------------


def test_the_key_changes_with_each_thing_that_decides_a_run(repo: GitRepo) -> None:
    calc = RepositoryConfig("calc", test_command=PYTEST)
    cfg = Config()
    argv = ["/usr/bin/python3", "-m", "pytest", "-q"]
    key = cache_key("t" * 64, PYTEST, argv, 60, cfg, calc)
    assert key == cache_key("t" * 64, PYTEST, argv, 60, cfg, calc)
    others = [
        cache_key("u" * 64, PYTEST, argv, 60, cfg, calc),  # the tree
        cache_key("t" * 64, [*PYTEST, "-x"], argv, 60, cfg, calc),  # the command
        cache_key("t" * 64, PYTEST, ["/opt/py/bin/python", *argv[1:]], 60, cfg, calc),  # python
        cache_key("t" * 64, PYTEST, argv, 61, cfg, calc),  # the timeout
        cache_key("t" * 64, PYTEST, argv, 60, Config(network_isolation="off"), calc),  # sandbox
        cache_key("t" * 64, PYTEST, argv, 60, cfg, RepositoryConfig("calc", results="exit-code")),
        cache_key("t" * 64, PYTEST, argv, 60, cfg, RepositoryConfig("calc", venv=Path("/v"))),
    ]
    assert len({key, *others}) == len(others) + 1


def test_the_tree_digest_is_of_the_copy_as_tested(repo: GitRepo, tmp_path: Path) -> None:
    """Files the copy wrote are taken from its digests; test files are read again."""
    snapshot = materialize(repo.path, repo.head(), tmp_path / "work")
    tests = ("tests/**",)
    digest = tree_digest(tmp_path / "work", snapshot, tests)
    assert tree_digest(tmp_path / "work", snapshot, tests) == digest
    (tmp_path / "work" / "tests" / "test_calc.py").write_text("def test_x():\n    pass\n")
    changed = tree_digest(tmp_path / "work", snapshot, tests)
    assert changed != digest
    os.chmod(tmp_path / "work" / "calc.py", 0o755)
    assert tree_digest(tmp_path / "work", snapshot, tests) != changed


# what is kept, and what is reused -------------------------------------------------------


class Kept:
    """A `TestResultCache` in memory: the first result put under a key is the one kept."""

    def __init__(self) -> None:
        self.results: dict[str, tuple[str, dict[str, object]]] = {}

    def get(self, key: str) -> tuple[str, dict[str, object]] | None:
        return self.results.get(key)

    def put(self, key: str, session_id: str, result: dict[str, object]) -> None:
        self.results.setdefault(key, (session_id, result))


def test_only_a_pass_or_a_failure_is_kept_and_without_this_copys_facts() -> None:
    cache = Kept()
    details = {"exit_code": 1, "mode": "commit", "snapshot": {"files": 2}}
    failed = CheckResult("tests", CheckStatus.FAIL, (Finding("tests.failed", "exit 1"),), details)
    errored = CheckResult("tests", CheckStatus.ERROR, (Finding("tests.runner_failed", "no"),))

    keep(cache, "k1", "s-1", failed)
    keep(cache, "k2", "s-1", errored)

    assert set(cache.results) == {"k1"}
    session_id, kept = cache.results["k1"]
    assert (session_id, kept["status"], kept["details"]) == ("s-1", "fail", {"exit_code": 1})


@pytest.mark.parametrize(
    "kept",
    [
        {"status": "error", "findings": []},
        {"status": "pass", "findings": "none"},
        {"status": "fail", "findings": ["tests.failed"]},
        "pass",
    ],
    ids=["an-error", "findings-not-a-list", "a-finding-not-an-object", "not-an-object"],
)
def test_a_kept_result_that_does_not_read_as_one_is_passed_over(kept: object) -> None:
    cache = Kept()
    cache.results["k"] = ("s-1", kept)  # type: ignore[assignment]

    assert cached(cache, "k") is None
    assert cached(cache, "other") is None


def test_a_reused_result_has_this_copys_facts_and_says_whose_it_was() -> None:
    cache = Kept()
    finding = Finding("tests.failed", "exit 1", expected="exit code 0", found="exit code 1")
    details = {"exit_code": 1, "mode": "worktree", "snapshot": {}}
    keep(cache, "k", "s-1", CheckResult("tests", CheckStatus.FAIL, (finding,), details))
    hit = cached(cache, "k")
    assert hit is not None
    copy = SnapshotInfo("commit", "c" * 40, files=3, bytes=30, symlinks=1)

    result = reused(hit, "commit", copy, ("conftest.py: from the base",))

    assert (result.status, result.findings) == (CheckStatus.FAIL, (finding,))
    assert result.details["cached_from"] == "s-1"
    assert (result.details["mode"], result.details["snapshot"]["files"]) == ("commit", 3)
    assert result.notes[0] == "conftest.py: from the base"
    assert "for session s-1, and its result is reused (cached_from)" in result.notes[1]


# the store -----------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
        with Store.open(url) as opened:
            yield opened
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with migrated_postgres_database(POSTGRES_URL) as url, Store.open(url) as opened:
        yield opened


def test_the_store_keeps_the_first_result_put_under_a_key(store: Store) -> None:
    cache = TestResults(store)
    assert cache.get("k" * 64) is None
    first = {"status": "pass", "findings": [], "details": {"counts": {"passed": 3}}}
    cache.put("k" * 64, "s-1", first)
    cache.put("k" * 64, "s-2", {"status": "fail", "findings": []})  # a later worker: dropped
    assert cache.get("k" * 64) == ("s-1", first)
    assert json.dumps(cache.get("k" * 64)[1], sort_keys=True) == json.dumps(first, sort_keys=True)
