"""SQLite's group commit: concurrent ingests committed together, each answered as alone."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, event

from tests.support.report_factory import make_report_bytes
from verifier.contract.report import parse_report
from verifier.errors import SessionConflict
from verifier.store import Store

OTHERS = 6


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite3"


@pytest.fixture
def store(path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{path}") as opened:
        yield opened


def stored_ids(path: Path) -> set[str]:
    """The session ids on disk, read by another connection."""
    with sqlite3.connect(path) as connection:
        return {row[0] for row in connection.execute("SELECT session_id FROM sessions")}


def ingest_while_the_first_commits(
    store: Store, path: Path, reports: list[bytes], *, fail: frozenset[int] = frozenset()
) -> tuple[dict[int, Any], list[int], list[set[str]]]:
    """Ingest `reports[0]` in a thread and, while its transaction is open, the others
    from a thread each; the outcome (or error) of each, the commits, and what another
    connection saw on disk when each call returned. `fail`: those whose `on_insert` raises."""
    commits: list[int] = []
    event.listen(store._engine, "commit", lambda _c: commits.append(1))
    first_inside = threading.Event()
    outcomes: dict[int, Any] = {}
    seen: dict[int, set[str]] = {}

    def on_insert(n: int) -> Callable[[Connection], None]:
        def run(_connection: Connection) -> None:
            if n == 0:
                first_inside.set()
                deadline = time.monotonic() + 30
                while len(store._group._waiting) < len(reports) - 1:
                    assert time.monotonic() < deadline, "the others never waited"
                    time.sleep(0.005)
            if n in fail:
                raise RuntimeError(f"on_insert {n} fails")

        return run

    def ingest(n: int) -> None:
        try:
            outcomes[n] = store.ingest(parse_report(reports[n]), on_insert=on_insert(n))
        except Exception as exc:  # collected and asserted by the tests
            outcomes[n] = exc
        seen[n] = stored_ids(path)

    threads = [threading.Thread(target=ingest, args=(0,))]
    threads[0].start()
    assert first_inside.wait(30)
    threads += [threading.Thread(target=ingest, args=(n,)) for n in range(1, len(reports))]
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes, commits, [seen[n] for n in range(len(reports))]


def test_ingests_waiting_for_a_commit_are_committed_together_and_each_answered_once_on_disk(
    store: Store, path: Path
) -> None:
    reports = [make_report_bytes(f"s{n}") for n in range(OTHERS + 1)]

    outcomes, commits, seen = ingest_while_the_first_commits(store, path, reports)

    assert [outcomes[n][1] for n in range(OTHERS + 1)] == [True] * (OTHERS + 1)
    assert [outcomes[n][0].session_id for n in range(OTHERS + 1)] == [
        f"s{n}" for n in range(OTHERS + 1)
    ]
    # The first alone, then the six that waited for it in one transaction.
    assert len(commits) == 2
    # Each call returned only once its own report could be read from the disk.
    for n in range(OTHERS + 1):
        assert f"s{n}" in seen[n]
    assert stored_ids(path) == {f"s{n}" for n in range(OTHERS + 1)}


def test_an_ingest_that_fails_in_a_group_fails_alone_and_the_others_are_stored(
    store: Store, path: Path
) -> None:
    reports = [make_report_bytes(f"s{n}") for n in range(OTHERS + 1)]

    outcomes, _, _ = ingest_while_the_first_commits(store, path, reports, fail=frozenset({3}))

    assert isinstance(outcomes[3], RuntimeError) and str(outcomes[3]) == "on_insert 3 fails"
    assert all(outcomes[n][1] for n in range(OTHERS + 1) if n != 3)
    assert stored_ids(path) == {f"s{n}" for n in range(OTHERS + 1)} - {"s3"}


def test_one_session_id_twice_in_a_group_is_stored_once_then_the_same_or_a_conflict(
    store: Store, path: Path
) -> None:
    first = make_report_bytes("s1", "done")
    reports = [make_report_bytes("s0"), first, make_report_bytes("s1", "error"), first]

    outcomes, commits, _ = ingest_while_the_first_commits(store, path, reports)

    done_a, error, done_b = (outcomes[n] for n in (1, 2, 3))
    assert len(commits) == 2
    # Whichever came first in the group stands: other bytes are then a conflict, the same
    # bytes again the stored session.
    stored = store.get_session("s1")
    if stored.status == "error":
        assert error[1] is True
        assert isinstance(done_a, SessionConflict) and isinstance(done_b, SessionConflict)
    else:
        assert stored.status == "done" and isinstance(error, SessionConflict)
        assert sorted([done_a[1], done_b[1]]) == [False, True]
        assert done_a[0] == done_b[0]
    assert stored_ids(path) == {"s0", "s1"}
