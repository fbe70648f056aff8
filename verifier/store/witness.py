"""The witness's memory: trail entries as the service received them while a session ran.

A trail belongs to the agent of the token that posted it: each agent's tokens
witness a trail of their own under a session id (a token bound to no agent, the
trail of ``""``), so no token of another agent can start it, extend it, or
block it by posting first. `witness` appends posted entries to the posting
token's trail after checking each link against what is held (`audit.chain`:
the genesis value, each entry's hash over its content, each ``prev`` the hash
before it); an entry that does not extend the held chain raises
`WitnessConflict` naming its index; an entry posted again with the same hash is
taken as already seen (idempotent). A bound token may not post the trail of a
session whose stored report, or whose ``session_start``, names another agent
(`ForeignTrail`). `witnessed` reads back the prefix a report is held to, hashes
and times, for the audit check (`verifier.checks.audit`): its own agent's trail,
never another agent's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from audit.chain import KINDS, entry_hash, genesis
from audit.jcs import CanonicalizationError
from verifier.errors import BadRequest, ForeignTrail, WitnessConflict
from verifier.store.models import SessionModel, WitnessedEntryModel

if TYPE_CHECKING:
    from verifier.store.db import Store

# Entries one post may carry.
MAX_ENTRIES_PER_POST = 10_000


def parse_lines(body: bytes) -> list[tuple[bytes, dict[str, Any]]]:
    """A JSON lines body: each line's bytes and its object; `BadRequest` naming the line."""
    out: list[tuple[bytes, dict[str, Any]]] = []
    for n, line in enumerate(body.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequest("entries", f"line {n} is not JSON: {exc}") from None
        if not isinstance(entry, dict):
            raise BadRequest("entries", f"line {n}: expected a JSON object (an entry)")
        out.append((line.strip(), entry))
    if not out:
        raise BadRequest("entries", "no entries: expected JSON lines, one trail entry each")
    if len(out) > MAX_ENTRIES_PER_POST:
        raise BadRequest(
            "entries", f"got {len(out)} entries, expected at most {MAX_ENTRIES_PER_POST}"
        )
    return out


def witness(
    store: Store,
    session_id: str,
    entries: Sequence[tuple[bytes, Mapping[str, Any]]],
    *,
    agent: str | None = None,
) -> tuple[int, str, datetime]:
    """Append `entries` to the witnessed trail of `session_id`; the count and head hash
    held after, and now.

    `agent` is the posting token's bound agent (None: bound to none), whose trail of
    the session this is; a bound token posting the trail of a session whose stored
    report or ``session_start`` names another agent is refused (`ForeignTrail`).
    """
    try:
        return _witness(store, session_id, entries, agent)
    except IntegrityError:
        # Another post of the same session stored an index first (the lock above holds
        # rows, not their absence): once more, against what is now held.
        return _witness(store, session_id, entries, agent)


def _witness(
    store: Store,
    session_id: str,
    entries: Sequence[tuple[bytes, Mapping[str, Any]]],
    agent: str | None,
) -> tuple[int, str, datetime]:
    now = datetime.now(UTC)
    owner = agent or ""
    with store.transaction(write=True) as session:
        if agent is not None:
            reported = session.execute(
                select(SessionModel.agent_name).where(SessionModel.session_id == session_id)
            ).scalar_one_or_none()
            if reported is not None and reported != agent:
                raise ForeignTrail(
                    "Authorization",
                    f"the stored report of session {session_id!r} names agent {reported!r}; "
                    f"this token is bound to agent {agent!r}",
                )
        held = session.execute(
            select(WitnessedEntryModel.idx, WitnessedEntryModel.entry_hash)
            .where(WitnessedEntryModel.session_id == session_id, WitnessedEntryModel.agent == owner)
            .order_by(WitnessedEntryModel.idx)
            .with_for_update()
        ).all()
        hashes = [row.entry_hash for row in held]
        for raw, entry in entries:
            index = _index(entry, session_id, len(hashes))
            if agent is not None and entry.get("kind") == "session_start":
                named = entry.get("agent")
                if isinstance(named, Mapping):
                    named = named.get("name")
                if isinstance(named, str) and named != agent:
                    raise ForeignTrail(
                        "Authorization",
                        f"the trail's session_start names agent {named!r}; "
                        f"this token is bound to agent {agent!r}",
                    )
            computed = _hash(entry, index)
            if index < len(hashes):
                if hashes[index] != computed:
                    raise WitnessConflict(
                        index,
                        f"differs from the entry witnessed at this index (got hash {computed}, "
                        f"expected {hashes[index]})",
                    )
                continue
            link = hashes[-1] if hashes else genesis(session_id)
            if entry.get("prev") != link:
                raise WitnessConflict(
                    index,
                    f"does not link to the witnessed chain (got prev {entry.get('prev')!r}, "
                    f"expected {link})",
                )
            session.add(
                WitnessedEntryModel(
                    session_id=session_id,
                    agent=owner,
                    idx=index,
                    entry_hash=computed,
                    entry=raw,
                    received_at=now,
                )
            )
            hashes.append(computed)
        session.flush()
    if not hashes:  # pragma: no cover - parse_lines refuses an empty body
        raise BadRequest("entries", "no entries")
    return len(hashes), hashes[-1], now


def witnessed(
    store: Store, session_id: str, agent: str | None = None
) -> tuple[tuple[str, ...], tuple[datetime, ...]]:
    """The witnessed prefix a report of `agent` is held to: each entry's hash and when
    it arrived, in order (empty when nothing was witnessed).

    It is the trail posted under tokens bound to `agent`, else the one posted under
    tokens bound to no agent (which may post any agent's); never a trail posted under
    another agent's token. `agent` None: the unbound tokens' trail alone.
    """
    owners = trail_agents(store, session_id)
    owner = agent if agent is not None and agent in owners else ""
    with store.transaction() as session:
        rows = session.execute(
            select(WitnessedEntryModel.entry_hash, WitnessedEntryModel.received_at)
            .where(WitnessedEntryModel.session_id == session_id, WitnessedEntryModel.agent == owner)
            .order_by(WitnessedEntryModel.idx)
        ).all()
    return tuple(r.entry_hash for r in rows), tuple(r.received_at for r in rows)


def trail_agents(store: Store, session_id: str) -> tuple[str, ...]:
    """The agents whose tokens posted a trail under `session_id` ("" for unbound ones)."""
    with store.transaction() as session:
        found = session.execute(
            select(WitnessedEntryModel.agent)
            .where(WitnessedEntryModel.session_id == session_id)
            .distinct()
            .order_by(WitnessedEntryModel.agent)
        ).scalars()
        return tuple(found)


def _index(entry: Mapping[str, Any], session_id: str, held: int) -> int:
    seq = entry.get("seq")
    if type(seq) is not int or seq < 0:
        raise WitnessConflict(held, f"seq: got {seq!r}, expected an index from 0")
    if entry.get("session_id") != session_id:
        raise WitnessConflict(
            seq, f"session_id: got {entry.get('session_id')!r}, expected {session_id!r}"
        )
    if entry.get("kind") not in KINDS:
        raise WitnessConflict(
            seq, f"kind: got {entry.get('kind')!r}, expected one of {', '.join(KINDS)}"
        )
    if seq > held:
        raise WitnessConflict(held, f"missing: got entry {seq} next, expected entry {held}")
    return seq


def _hash(entry: Mapping[str, Any], index: int) -> str:
    try:
        computed = entry_hash(entry)
    except CanonicalizationError as exc:
        raise WitnessConflict(index, f"has no JCS form, so it cannot be hashed: {exc}") from None
    if entry.get("hash") != computed:
        raise WitnessConflict(
            index, f"hash: got {entry.get('hash')!r}, expected {computed} (its content's)"
        )
    return computed
