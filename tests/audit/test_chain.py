"""The audit trail's hash chain: the contract's vectors, and every way to break it."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from audit.chain import GENESIS_PREFIX, entry_hash, genesis, seal, verify_chain
from audit.findings import Finding
from tests.support.paths import VECTORS

# The contract's own vectors: the project's copy is the reference.
ASSET = VECTORS / "audit-chain-v1.json"
VECTORS = json.loads(ASSET.read_text(encoding="utf-8"))
SID = VECTORS["session_id"]
SEALED_FIELDS = ("v", "session_id", "seq", "prev", "hash")


def vector_entries() -> list[dict[str, Any]]:
    return copy.deepcopy(VECTORS["entries"])


def bodies_of(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in SEALED_FIELDS} for e in entries]


def relink(entries: list[Any], session_id: str = SID) -> list[Any]:
    """Recompute every `prev` and `hash` in place, as a forger would after an edit."""
    prev = genesis(session_id)
    for entry in entries:
        if isinstance(entry, dict):
            entry["prev"] = prev
            entry["hash"] = prev = entry_hash(entry)
    return entries


def verify(entries: list[Any], session_id: str = SID, **audit: Any) -> list[Finding]:
    count = audit.get("count", len(entries))
    head = audit.get("head", entries[-1]["hash"] if entries else None)
    return verify_chain(entries, session_id=session_id, count=count, head=head)


def codes(findings: list[Finding]) -> set[str]:
    return {f.code for f in findings}


# -- the contract's vectors --------------------------------------------------


def test_genesis_reproduces_vector() -> None:
    assert genesis(SID) == VECTORS["genesis_prev"]
    assert GENESIS_PREFIX == "audit-genesis/v1:"


@pytest.mark.parametrize("i", range(len(VECTORS["entries"])))
def test_entry_hash_reproduces_vector(i: int) -> None:
    entry = VECTORS["entries"][i]
    assert entry_hash(entry) == entry["hash"]


def test_vector_chain_verifies_without_finding() -> None:
    audit = VECTORS["audit"]
    entries = vector_entries()
    assert audit["count"] == len(entries)
    assert audit["head"] == entries[-1]["hash"]
    assert verify_chain(entries, session_id=SID, count=audit["count"], head=audit["head"]) == []


def test_seal_rebuilds_vector_chain_from_bodies() -> None:
    assert seal(SID, bodies_of(vector_entries())) == VECTORS["entries"]


def test_seal_replaces_chain_fields_given_in_bodies() -> None:
    bodies = [
        dict(b, v=9, seq=7, session_id="x", prev="p", hash="h") for b in bodies_of(vector_entries())
    ]
    assert seal(SID, bodies) == VECTORS["entries"]


# -- links, hashes, order ----------------------------------------------------


def test_edited_field_is_caught_by_hash() -> None:
    entries = vector_entries()
    entries[1]["tool"] = "write_file"
    findings = verify(entries)
    assert codes(findings) == {"audit.hash_mismatch"}
    (f,) = findings
    assert f.path == "audit.entries[1].hash"
    assert f.found == VECTORS["entries"][1]["hash"]
    assert f.expected == entry_hash(entries[1])


def test_rehashed_edited_entry_breaks_the_next_link() -> None:
    entries = vector_entries()
    entries[1]["decision"] = "deny"
    entries[1]["hash"] = entry_hash(entries[1])
    findings = verify(entries)
    assert [(f.code, f.path) for f in findings] == [
        ("audit.prev_mismatch", "audit.entries[2].prev")
    ]
    assert findings[0].expected == entries[1]["hash"]


def test_edited_hash_field_is_caught_by_hash_and_next_link() -> None:
    entries = vector_entries()
    entries[2]["hash"] = "0" * 64
    assert codes(verify(entries)) == {"audit.hash_mismatch", "audit.prev_mismatch"}


def test_dropped_middle_entry_is_caught_by_seq_link_and_count() -> None:
    entries = vector_entries()
    del entries[1]
    findings = verify(entries, count=VECTORS["audit"]["count"])
    assert codes(findings) == {"audit.seq_gap", "audit.prev_mismatch", "audit.count_mismatch"}
    gap = next(f for f in findings if f.code == "audit.seq_gap")
    assert (gap.path, gap.expected, gap.found) == ("audit.entries[1].seq", "1", "2")


def test_trail_cut_at_end_is_caught_by_count_and_head() -> None:
    entries = vector_entries()[:-1]
    findings = verify(entries, count=VECTORS["audit"]["count"], head=VECTORS["audit"]["head"])
    assert codes(findings) == {
        "audit.count_mismatch",
        "audit.head_mismatch",
        "audit.last_not_end",
    }
    count = next(f for f in findings if f.code == "audit.count_mismatch")
    assert (count.expected, count.found) == ("3", "4")


def test_trail_cut_at_end_with_consistent_count_and_head_is_caught_by_missing_end() -> None:
    entries = vector_entries()[:-1]
    findings = verify(entries)  # count and head rewritten to match the cut trail
    assert codes(findings) == {"audit.last_not_end"}
    assert findings[0].found == "tool_call"


def test_swapped_entries_are_caught_by_seq_link_and_time() -> None:
    entries = vector_entries()
    entries[1], entries[2] = entries[2], entries[1]
    assert codes(verify(entries)) == {
        "audit.seq_gap",
        "audit.prev_mismatch",
        "audit.ts_backwards",
    }


def test_swapped_and_resealed_entries_are_caught_by_time() -> None:
    entries = vector_entries()
    entries[1], entries[2] = entries[2], entries[1]
    entries[1]["seq"], entries[2]["seq"] = 1, 2
    findings = verify(relink(entries))
    assert [(f.code, f.path) for f in findings] == [("audit.ts_backwards", "audit.entries[2].ts")]
    assert findings[0].found == "2026-11-01T10:00:05Z"
    assert findings[0].expected == ">= 2026-11-01T10:00:09Z"


def test_duplicated_entry_is_caught_by_seq_link_and_count() -> None:
    entries = vector_entries()
    entries.insert(2, copy.deepcopy(entries[1]))
    findings = verify(entries, count=4, head=VECTORS["audit"]["head"])
    assert codes(findings) == {"audit.seq_gap", "audit.prev_mismatch", "audit.count_mismatch"}


def test_head_naming_another_entry_is_caught() -> None:
    entries = vector_entries()
    findings = verify(entries, head=entries[2]["hash"])
    assert codes(findings) == {"audit.head_mismatch"}
    assert findings[0].expected == entries[-1]["hash"]


@pytest.mark.parametrize("count", [None, "4", 4.0, True, 5, -1])
def test_count_that_is_not_the_entry_number_is_caught(count: Any) -> None:
    assert codes(verify(vector_entries(), count=count)) == {"audit.count_mismatch"}


@pytest.mark.parametrize(
    "head", [None, 42, "", "4802F13E0B95976D6D7EF7AC666284616931D8D00915EFB9F7126CFCF4B334F9"]
)
def test_head_that_is_not_the_last_hash_is_caught(head: Any) -> None:
    assert codes(verify(vector_entries(), head=head)) == {"audit.head_mismatch"}


# -- session -----------------------------------------------------------------


def test_trail_of_another_session_is_caught_by_session_and_genesis() -> None:
    findings = verify(vector_entries(), session_id="other-session")
    assert codes(findings) == {"audit.session_mismatch", "audit.prev_mismatch"}
    assert [f.path for f in findings if f.code == "audit.prev_mismatch"] == [
        "audit.entries[0].prev"
    ]
    assert sum(f.code == "audit.session_mismatch" for f in findings) == 4


def test_resealed_trail_of_another_session_is_caught_by_session() -> None:
    entries = seal("other-session", bodies_of(vector_entries()))
    findings = verify(relink(entries))
    assert codes(findings) == {"audit.session_mismatch"}
    assert (findings[0].expected, findings[0].found) == (SID, "other-session")


def test_one_entry_naming_another_session_is_caught() -> None:
    entries = vector_entries()
    entries[2]["session_id"] = "vector-session-2"
    findings = verify(relink(entries))
    assert [(f.code, f.path) for f in findings] == [
        ("audit.session_mismatch", "audit.entries[2].session_id")
    ]


def test_cause_repeated_over_a_long_trail_is_listed_twenty_times_then_totalled() -> None:
    bodies = [{"kind": "session_start", "ts": "2026-11-01T10:00:00Z"}]
    bodies += [tool_body(f"c{i}") for i in range(98)]
    bodies.append({"kind": "session_end", "ts": "2026-11-01T11:00:00Z", "status": "done"})
    entries = seal("other-session", bodies)
    findings = verify(relink(entries))
    assert codes(findings) == {"audit.session_mismatch"}
    assert len(findings) == 21
    assert findings[-1].path is None
    assert "80 more" in findings[-1].message


# -- start, end, timestamps --------------------------------------------------


def test_empty_trail_is_caught() -> None:
    findings = verify_chain([], session_id=SID, count=0, head=None)
    assert codes(findings) == {"audit.empty_trail"}


def test_empty_trail_with_nonzero_count_is_caught_twice() -> None:
    findings = verify_chain([], session_id=SID, count=4, head=VECTORS["audit"]["head"])
    assert codes(findings) == {"audit.empty_trail", "audit.count_mismatch"}


def test_trail_without_start_is_caught() -> None:
    entries = seal(SID, bodies_of(vector_entries())[1:])
    assert codes(verify(entries)) == {"audit.first_not_start"}


def test_lone_start_entry_is_caught_as_missing_end() -> None:
    entries = seal(SID, bodies_of(vector_entries())[:1])
    assert codes(verify(entries)) == {"audit.last_not_end"}


def test_lone_tool_call_is_caught_as_missing_start_and_end() -> None:
    entries = seal(SID, bodies_of(vector_entries())[1:2])
    assert codes(verify(entries)) == {"audit.first_not_start", "audit.last_not_end"}


@pytest.mark.parametrize("kind", ["session_start", "session_end"])
def test_start_or_end_inside_the_trail_is_caught(kind: str) -> None:
    bodies = bodies_of(vector_entries())
    bodies.insert(2, {"kind": kind, "ts": "2026-11-01T10:00:06Z", "status": "done"})
    findings = verify(seal(SID, bodies))
    assert [(f.code, f.path, f.found) for f in findings] == [
        ("audit.misplaced_boundary", "audit.entries[2].kind", kind)
    ]


@pytest.mark.parametrize(
    "earlier, later",
    [
        ("2026-11-01T10:00:05Z", "2026-11-01T10:00:04Z"),
        ("2026-11-01T10:00:05.5Z", "2026-11-01T10:00:05.45Z"),
        ("2026-11-01T10:00:05.100Z", "2026-11-01T10:00:05.09Z"),
        ("2026-11-02T00:00:00Z", "2026-11-01T23:59:59.999999Z"),
    ],
)
def test_timestamp_going_backwards_is_caught(earlier: str, later: str) -> None:
    entries = vector_entries()
    entries[1]["ts"], entries[2]["ts"] = earlier, later
    entries[3]["ts"] = "2026-11-02T00:00:00Z"
    findings = verify(relink(entries))
    assert [(f.code, f.path, f.found) for f in findings] == [
        ("audit.ts_backwards", "audit.entries[2].ts", later)
    ]


@pytest.mark.parametrize(
    "earlier, later",
    [
        ("2026-11-01T10:00:05Z", "2026-11-01T10:00:05Z"),
        ("2026-11-01T10:00:05.5Z", "2026-11-01T10:00:05.50Z"),
        ("2026-11-01T10:00:05Z", "2026-11-01T10:00:05.000001Z"),
        ("2026-11-01T10:00:05z", "2026-11-01t10:00:06+00:00"),
        ("2026-11-01T10:00:05Z", "2026-11-01T10:00:60Z"),
    ],
)
def test_equal_or_increasing_utc_timestamps_pass(earlier: str, later: str) -> None:
    entries = vector_entries()
    entries[1]["ts"], entries[2]["ts"] = earlier, later
    entries[3]["ts"] = "2026-11-02T00:00:00Z"
    assert verify(relink(entries)) == []


@pytest.mark.parametrize(
    "ts",
    [
        "2026-11-01 10:00:06Z",
        "2026-11-01T10:00:06",
        "2026-11-01T10:00:06+01:00",
        "2026-11-01T10:00:06-00:00",
        "2026-02-30T10:00:06Z",
        "2026-11-01T24:00:06Z",
        "2026-11-01T10:00:61Z",
        "2026-11-01T10:00:06.Z",
        "2026-11-01",
        "20261101T100006Z",
        "２０２６-11-01T10:00:06Z",
        "",
    ],
)
def test_timestamp_not_rfc3339_utc_is_malformed(ts: str) -> None:
    entries = vector_entries()
    entries[2]["ts"] = ts
    findings = verify(relink(entries))
    assert [(f.code, f.path) for f in findings] == [
        ("audit.entry_malformed", "audit.entries[2].ts")
    ]


# -- malformed entries ---------------------------------------------------------


@pytest.mark.parametrize(
    "index, field",
    [
        (0, "v"),
        (0, "session_id"),
        (0, "seq"),
        (0, "ts"),
        (0, "kind"),
        (1, "call_id"),
        (1, "tool"),
        (1, "args_sha256"),
        (1, "decision"),
        (1, "checkpoint"),
        (1, "result_sha256"),
        (1, "effects"),
        (3, "status"),
    ],
)
def test_missing_field_is_malformed(index: int, field: str) -> None:
    entries = vector_entries()
    del entries[index][field]
    findings = verify(relink(entries))
    assert f"audit.entries[{index}].{field}" in {
        f.path for f in findings if f.code == "audit.entry_malformed"
    }
    # An unreadable field is reported once, not again by the rules that read it.
    assert codes(findings) == {"audit.entry_malformed"}


def test_missing_prev_and_hash_are_malformed() -> None:
    entries = vector_entries()
    del entries[1]["prev"]
    del entries[1]["hash"]
    findings = verify(entries)
    assert [(f.code, f.path) for f in findings] == [
        ("audit.entry_malformed", "audit.entries[1].prev"),
        ("audit.entry_malformed", "audit.entries[1].hash"),
        ("audit.prev_mismatch", "audit.entries[2].prev"),
    ]


@pytest.mark.parametrize(
    "field, value",
    [
        ("v", "1"),
        ("v", True),
        ("v", 2),
        ("seq", "1"),
        ("seq", 1.0),
        ("session_id", None),
        ("ts", 1700000000),
        ("kind", "tool-call"),
        ("decision", "maybe"),
        ("decision", None),
        ("checkpoint", 3),
        ("effects", {}),
        ("effects", ["src/données.py"]),
        ("effects", [{"path": None, "sha256_before": None, "sha256_after": "ab"}]),
        ("effects", [{"path": "a", "sha256_before": 1, "sha256_after": None}]),
        ("effects", [{"path": "a", "sha256_before": None}]),
        ("tool", ["read_file"]),
    ],
)
def test_field_of_wrong_type_or_value_is_malformed(field: str, value: Any) -> None:
    entries = vector_entries()
    entries[1][field] = value
    findings = verify(relink(entries))
    assert codes(findings) == {"audit.entry_malformed"}
    assert findings[0].path is not None
    assert findings[0].path.startswith(f"audit.entries[1].{field}")


def test_entry_that_is_not_an_object_is_malformed_without_cascade() -> None:
    entries: list[Any] = vector_entries()
    entries[1] = "tool_call c1"
    findings = verify(entries)
    assert [(f.code, f.path, f.found) for f in findings] == [
        ("audit.entry_malformed", "audit.entries[1]", "string")
    ]


def test_entry_without_jcs_form_is_malformed() -> None:
    entries = vector_entries()
    entries[1]["extra"] = float("nan")
    findings = verify(entries)
    assert [(f.code, f.path) for f in findings] == [("audit.entry_malformed", "audit.entries[1]")]


def test_unknown_extra_fields_are_covered_by_the_hash() -> None:
    bodies = bodies_of(vector_entries())
    bodies[1]["extensions"] = {"latency_ms": 12.5}
    entries = seal(SID, bodies)
    assert verify(entries) == []
    entries[1]["extensions"]["latency_ms"] = 12.6
    assert codes(verify(entries)) == {"audit.hash_mismatch"}


# -- properties over sealed trails -------------------------------------------


def tool_body(call_id: str, rng: random.Random | None = None) -> dict[str, Any]:
    rng = rng or random.Random(call_id)
    digest = lambda: f"{rng.getrandbits(256):064x}"  # noqa: E731
    effects = [
        {
            "path": rng.choice(["a.py", "src/b.py", "dоc.md"]),
            "sha256_before": rng.choice([None, digest()]),
            "sha256_after": rng.choice([None, digest()]),
        }
        for _ in range(rng.randrange(3))
    ]
    return {
        "ts": "2026-11-01T10:30:00Z",
        "kind": "tool_call",
        "call_id": call_id,
        "tool": rng.choice(["read_file", "write_file", "run_command"]),
        "args_sha256": digest(),
        "decision": rng.choice(["allow", "confirmed"]),
        "checkpoint": rng.choice([None, f"ckpt-{call_id}"]),
        "result_sha256": digest(),
        "effects": effects,
    }


def random_trail(seed: int) -> tuple[str, list[dict[str, Any]]]:
    rng = random.Random(seed)
    session_id = f"s-{seed}"
    bodies: list[dict[str, Any]] = [{"kind": "session_start", "ts": "2026-11-01T10:00:00Z"}]
    for n in range(rng.randrange(6)):
        body = tool_body(f"c{n}", rng)
        body["ts"] = f"2026-11-01T10:{10 + n:02d}:{rng.randrange(60):02d}.{rng.randrange(1000)}Z"
        bodies.append(body)
    bodies.append({"kind": "session_end", "ts": "2026-11-01T11:00:00Z", "status": "done"})
    return session_id, seal(session_id, bodies)


def different(value: Any) -> Iterator[Any]:
    """Values unequal to `value`: one of the same type, one of another."""
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int):
        yield value + 1
    elif isinstance(value, str):
        yield value + "0"
        yield value[:-1]
    elif isinstance(value, list):
        yield [*value, {"path": "x", "sha256_before": None, "sha256_after": None}]
        yield value[:-1] if value else None
    yield None if value is not None else "x"


def single_edits(entry: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Copies of `entry` with one field, or one field of one effect, changed."""
    for key, value in entry.items():
        for new in different(value):
            if new != value:
                yield key, {**entry, key: new}
    for j, effect in enumerate(entry.get("effects", [])):
        for key, value in effect.items():
            for new in different(value):
                if new != value:
                    effects = copy.deepcopy(entry["effects"])
                    effects[j][key] = new
                    yield f"effects[{j}].{key}", {**entry, "effects": effects}


SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_sealed_trail_verifies_clean(seed: int) -> None:
    session_id, entries = random_trail(seed)
    assert verify(entries, session_id=session_id) == []


@pytest.mark.parametrize("seed", SEEDS)
def test_any_single_field_change_in_a_sealed_trail_is_caught(seed: int) -> None:
    session_id, entries = random_trail(seed)
    count, head = len(entries), entries[-1]["hash"]
    for i, entry in enumerate(entries):
        for what, edited in single_edits(entry):
            trail = [*entries[:i], edited, *entries[i + 1 :]]
            findings = verify_chain(trail, session_id=session_id, count=count, head=head)
            assert findings, f"editing entries[{i}].{what} went unnoticed"
