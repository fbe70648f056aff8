"""The chain's fast path for plain entries against its general path.

`verify_chain` judges an entry that is a `dict` holding exactly its kind's
fields, each of the type the field checks want, once (`_Shapes.plain_kind`),
and then skips the field checks and the encoder's walk (a str subclass may
pass: orjson is told to refuse it when hashing, and the library decides). The
same entries behind a read-only mapping (`MappingProxyType`) are not dicts, so
they take the general path: the field checks, then `canonicalize`. These tests
mutate sealed trails in seeded ways (types, missing and extra fields,
subclasses, unsafe integers, lone surrogates, timestamps, links, cut ends) and
require the same findings, in the same order, from both paths. The timestamp
key is held to the former parser the same way.
"""

from __future__ import annotations

import itertools
import random
import re
from datetime import datetime
from types import MappingProxyType
from typing import Any

import pytest
import rfc8785

from audit import chain, jcs
from audit.chain import _Shapes, _ts_key, seal, verify_chain
from audit.findings import Finding
from audit.jcs import CanonicalizationError

SID = "s-fast-path"
MAX = 2**53 - 1


class Text(str):
    """A str subclass: checked like a str, but never plain."""


def trail(rng: random.Random, size: int) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = [{"kind": "session_start", "ts": "2026-11-01T10:00:00Z"}]
    for i in range(1, size - 1):
        effects = [
            {"path": f"f{j}.py", "sha256_before": None, "sha256_after": "ab" * 32}
            for j in range(rng.randrange(3))
        ]
        bodies.append(
            {
                "kind": "tool_call",
                "ts": f"2026-11-01T10:00:{i:02d}Z",
                "call_id": f"c{i}",
                "tool": "write_file",
                "args_sha256": "12" * 32,
                "decision": rng.choice(["allow", "confirmed"]),
                "checkpoint": rng.choice([None, f"stash@{{{i}}}"]),
                "result_sha256": "34" * 32,
                "effects": effects,
            }
        )
    bodies.append({"kind": "session_end", "ts": "2026-11-01T10:01:00Z", "status": "done"})
    return seal(SID, bodies)


VALUES: list[Any] = [
    None,
    True,
    0,
    1,
    2,
    -1,
    MAX,
    MAX + 1,
    -(MAX + 1),
    1.0,
    0.5,
    "",
    "x",
    Text("allow"),
    Text("tool_call"),
    "lone \ud800",
    [],
    {},
    ("a",),
    "allow",
    "deny",
    "maybe",
    "session_start",
    "session_end",
    "tool_call",
    "2026-11-01T10:00:30Z",
    "2026-02-29T10:00:00Z",
    "2026-11-01T10:00:60Z",
    "0000-01-01T00:00:00Z",
]
FIELDS = [
    "v",
    "session_id",
    "seq",
    "ts",
    "kind",
    "prev",
    "hash",
    "call_id",
    "tool",
    "args_sha256",
    "decision",
    "checkpoint",
    "result_sha256",
    "effects",
    "status",
]


def mutate(rng: random.Random, entries: list[dict[str, Any]]) -> None:
    """One to three seeded edits that a harness could get wrong (or a forger make)."""
    for _ in range(rng.randint(1, 3)):
        entry = rng.choice(entries)
        pick = rng.randrange(7)
        field = rng.choice(FIELDS)
        if pick == 0:
            entry[field] = rng.choice(VALUES)
        elif pick == 1:
            entry.pop(field, None)
        elif pick == 2:
            entry[rng.choice(["extra", "note", "\u00e9"])] = rng.choice(VALUES)
        elif pick == 3 and entry.get("effects"):
            effect = rng.choice(entry["effects"])
            key = rng.choice(["path", "sha256_before", "sha256_after", "extra"])
            if rng.random() < 0.3:
                effect.pop(key, None)
            else:
                effect[key] = rng.choice(VALUES)
        elif pick == 4 and isinstance(entry.get("effects"), list):
            entry["effects"].append(rng.choice(VALUES))
        elif pick == 5 and len(entries) > 1:
            # A trail cut at either end: a tool_call becomes the first or last entry.
            entries.remove(rng.choice([entries[0], entries[-1]]))
        else:
            # Reorder the fields: shapes are keyed by key order, so a new shape.
            items = list(entry.items())
            rng.shuffle(items)
            entry.clear()
            entry.update(items)


def both_paths(entries: list[Any]) -> tuple[list[Finding], list[Finding]]:
    count, head = len(entries), entries[-1].get("hash") if entries else None
    fast = verify_chain(entries, session_id=SID, count=count, head=head)
    proxied = [MappingProxyType(e) if isinstance(e, dict) else e for e in entries]
    general = verify_chain(proxied, session_id=SID, count=count, head=head)
    return fast, general


def test_sealed_entries_are_plain() -> None:
    shapes = _Shapes()
    kinds = [shapes.plain_kind(e) for e in trail(random.Random(0), 6)]
    assert kinds == ["session_start", *["tool_call"] * 4, "session_end"]
    assert shapes.plain_kind(MappingProxyType(trail(random.Random(0), 3)[0])) is None


@pytest.mark.parametrize(
    "edit",
    [
        lambda e: e.update(v=True),
        lambda e: e.update(seq=MAX + 1),
        lambda e: e.update(ts=5),
        lambda e: e.update(kind=Text("session_end")),
        lambda e: e.update(extra=1),
        lambda e: e.pop("status"),
        lambda e: e.update(kind="session_start"),
        lambda e: e.update(kind="tool_call"),
    ],
)
def test_entries_that_are_not_exactly_their_kind_are_not_plain(edit: Any) -> None:
    entry = trail(random.Random(0), 3)[-1]
    edit(entry)
    assert _Shapes().plain_kind(entry) is None


def test_str_subclass_in_a_plain_entry_is_hashed_by_the_library() -> None:
    entries = trail(random.Random(4), 3)
    entries[1]["tool"] = Text(entries[1]["tool"])
    assert _Shapes().plain_kind(entries[1]) == "tool_call"
    assert jcs.canonicalize_plain({"t": Text("x")}) == rfc8785.dumps({"t": "x"})
    fast, general = both_paths(entries)
    assert fast == general == []


@pytest.mark.parametrize(
    "value",
    [
        {"n": MAX, "m": -MAX, "s": "\u2028\x7f", "l": [None, True, {"k": []}]},
        {"n": MAX + 1},
        {"s": "lone \ud800"},
        {"s": Text("x"), "l": [Text("y")]},
    ],
)
def test_canonicalize_plain_agrees_with_the_library(value: dict[str, Any]) -> None:
    try:
        expected: bytes | type[Exception] = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:
        expected = CanonicalizationError
    try:
        got: bytes | type[Exception] = jcs.canonicalize_plain(value)
    except CanonicalizationError:
        got = CanonicalizationError
    assert got == expected


@pytest.mark.parametrize("block", range(8))
def test_mutated_trails_give_the_same_findings_on_both_paths(block: int) -> None:
    for seed in range(block * 50, block * 50 + 50):
        rng = random.Random(seed)
        entries = trail(rng, rng.randint(2, 8))
        mutate(rng, entries)
        fast, general = both_paths(entries)
        assert fast == general, seed


@pytest.mark.parametrize("cut", [0, -1])
def test_boundary_tool_call_with_unknown_decision_reports_in_the_same_order(cut: int) -> None:
    entries = trail(random.Random(2), 4)
    del entries[cut]
    entries[cut]["decision"] = "maybe"
    fast, general = both_paths(entries)
    assert fast == general
    boundary = "audit.first_not_start" if cut == 0 else "audit.last_not_end"
    assert [f.code for f in fast][:2] == ["audit.entry_malformed", boundary]


def test_sealed_trail_has_no_finding_on_either_path() -> None:
    fast, general = both_paths(trail(random.Random(1), 30))
    assert fast == general == []


# -- the timestamp key ---------------------------------------------------------

_FORMER = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|\+00:00)", re.ASCII
)


def former_key(ts: str) -> tuple[int, int, int, int, int, int, str] | None:
    """The parser `_ts_key` replaced: integers and `datetime`."""
    m = _FORMER.fullmatch(ts)
    if m is None:
        return None
    year, month, day, hour, minute, second = map(int, m.group(1, 2, 3, 4, 5, 6))
    if second > 60:
        return None
    try:
        datetime(year, month, day, hour, minute, min(second, 59))
    except ValueError:
        return None
    return (year, month, day, hour, minute, second, (m.group(7) or "").rstrip("0"))


def random_ts(rng: random.Random) -> str:
    def two(hi: int) -> str:
        return f"{rng.randrange(hi):02d}"

    year = rng.choice(["0000", "0001", "1900", "2000", "2024", "2026", "2100", "9999"])
    date = f"{year}-{two(14)}-{two(33)}"
    time = f"{two(26)}:{two(62)}:{two(63)}"
    fraction = rng.choice(["", "", ".0", ".5", ".50", ".123456", ".", ".1x"])
    zone = rng.choice(["Z", "z", "+00:00", "-00:00", "+01:00", ""])
    sep = rng.choice("TTt ")
    return f"{date}{sep}{time}{fraction}{zone}"


def test_timestamp_key_accepts_and_orders_as_the_former_parser() -> None:
    rng = random.Random(3339)
    stamps = [random_ts(rng) for _ in range(20_000)]
    stamps += ["2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2100-02-29T00:00:00Z"]
    valid = []
    for ts in stamps:
        assert (_ts_key(ts) is None) == (former_key(ts) is None), ts
        if _ts_key(ts) is not None:
            valid.append(ts)
    assert len(valid) > 1_000  # the generator reaches valid stamps too
    for a, b in itertools.pairwise(valid):
        ka, kb, fa, fb = _ts_key(a), _ts_key(b), former_key(a), former_key(b)
        assert ka is not None and kb is not None and fa is not None and fb is not None
        assert (ka < kb, ka == kb) == (fa < fb, fa == fb), (a, b)


def test_timestamp_day_check_is_cached_per_day() -> None:
    chain._real_date.cache_clear()
    for second in range(10):
        assert _ts_key(f"2026-10-31T10:00:0{second}Z") is not None
        assert _ts_key(f"2026-11-01T10:00:0{second}Z") is not None  # the 28th or before
    assert chain._real_date.cache_info().misses == 1
    assert _ts_key("2026-11-31T10:00:00Z") is None
