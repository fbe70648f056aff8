"""The witness's memory: one trail per agent under a session id, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import NullPool, create_engine, text

from audit.chain import seal
from audit.jcs import canonicalize
from tests.support.pg import alembic
from tests.support.report_factory import make_report_bytes
from tests.support.trust import trail
from verifier.contract.report import parse_report
from verifier.errors import ForeignTrail, WitnessConflict
from verifier.store import Store, upgrade
from verifier.store.witness import trail_agents, witness, witnessed


def posted(*entries: dict[str, Any]) -> list[tuple[bytes, dict[str, Any]]]:
    return [(canonicalize(e), e) for e in entries]


def hashes(entries: list[dict[str, Any]]) -> tuple[str, ...]:
    return tuple(e["hash"] for e in entries)


def test_each_agents_tokens_witness_a_trail_of_their_own_whichever_posts_first(
    db_url: str,
) -> None:
    ours, theirs = trail("s-1"), trail("s-1", n=4)
    with Store.open(db_url) as store:
        witness(store, "s-1", posted(theirs[0]), agent="intruder")  # the intruder first
        witness(store, "s-1", posted(*ours), agent="repo-fixer")
        witness(store, "s-1", posted(*theirs[1:]), agent="intruder")
        assert witnessed(store, "s-1", "repo-fixer")[0] == hashes(ours)
        assert witnessed(store, "s-1", "intruder")[0] == hashes(theirs)
        assert trail_agents(store, "s-1") == ("intruder", "repo-fixer")
        # A report of an agent with no trail of its own is held to the unbound tokens'
        # trail, never to another agent's: here there is none.
        assert witnessed(store, "s-1", "someone")[0] == ()
        witness(store, "s-1", posted(*ours[:2]), agent=None)
        assert witnessed(store, "s-1", "someone")[0] == hashes(ours[:2])
        assert witnessed(store, "s-1", "repo-fixer")[0] == hashes(ours)  # its own wins


def test_a_bound_token_may_not_post_the_trail_of_a_session_another_agents_report_names(
    db_url: str,
) -> None:
    with Store.open(db_url) as store:
        store.ingest(parse_report(make_report_bytes("s-1")))  # agent repo-fixer
        with pytest.raises(ForeignTrail, match="names agent 'repo-fixer'"):
            witness(store, "s-1", posted(trail("s-1")[0]), agent="intruder")
        assert trail_agents(store, "s-1") == ()
        witness(store, "s-1", posted(trail("s-1")[0]), agent="repo-fixer")
        witness(store, "s-1", posted(*trail("s-1")), agent=None)  # unbound: any agent's
        assert trail_agents(store, "s-1") == ("", "repo-fixer")


def test_an_agents_trail_still_refuses_what_does_not_extend_it(db_url: str) -> None:
    entries = trail("s-1")
    with Store.open(db_url) as store:
        witness(store, "s-1", posted(*entries[:2]), agent="repo-fixer")
        rewritten = seal("s-1", [{**e, "ts": "2026-11-29T11:00:00Z"} for e in entries])
        with pytest.raises(WitnessConflict) as caught:
            witness(store, "s-1", posted(rewritten[1]), agent="repo-fixer")
        assert caught.value.index == 1
        # Under another agent's token, the same entry starts nothing: it has no start.
        with pytest.raises(WitnessConflict, match="missing"):
            witness(store, "s-1", posted(entries[2]), agent="intruder")


def test_the_migration_keeps_witnessed_rows_an_unbound_tokens_as_the_empty_agent(
    db_url: str,
) -> None:
    upgrade(db_url)
    alembic(db_url, "downgrade", "0007")
    engine = create_engine(db_url, poolclass=NullPool)
    now = datetime(2026, 11, 30, tzinfo=UTC)
    rows = [("s-1", 0, None), ("s-2", 0, "repo-fixer")]
    try:
        with engine.begin() as connection:
            for session_id, idx, agent in rows:
                connection.execute(
                    text(
                        "INSERT INTO witnessed_entries "
                        "(session_id, idx, entry_hash, entry, received_at, agent) "
                        "VALUES (:s, :i, :h, :e, :t, :a)"
                    ),
                    {"s": session_id, "i": idx, "h": "a" * 64, "e": b"{}", "t": now, "a": agent},
                )
    finally:
        engine.dispose()
    upgrade(db_url)
    with Store.open(db_url) as store:
        assert trail_agents(store, "s-1") == ("",)
        assert witnessed(store, "s-1", "anyone")[0] == ("a" * 64,)
        assert trail_agents(store, "s-2") == ("repo-fixer",)
    alembic(db_url, "check")
