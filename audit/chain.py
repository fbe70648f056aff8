"""The hash chain of an audit trail: sealing entries and verifying them.

Each entry names its session, its position (`seq`) and the hash of the entry
before it (`prev`; a genesis value for the first), and carries its own `hash`
over everything else. `count` and `head` beside the entries pin the length and
the last hash, so a trail cut short at its end is seen too.
"""

from __future__ import annotations

import functools
import hashlib
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from typing import Any

from audit._collect import Findings, json_type, show
from audit.findings import Finding
from audit.jcs import CanonicalizationError, canonicalize, canonicalize_plain

__all__ = [
    "DECISIONS",
    "ENTRY_DOMAIN",
    "GENESIS_PREFIX",
    "KINDS",
    "entry_hash",
    "genesis",
    "seal",
    "verify_chain",
]

GENESIS_PREFIX = "audit-genesis/v1:"
ENTRY_DOMAIN = b"audit-entry/v1\x00"
KINDS = ("session_start", "tool_call", "session_end")
DECISIONS = ("allow", "deny", "confirmed", "refused")

_SEALED = frozenset(("v", "session_id", "seq", "prev", "hash"))
_MISSING = object()
_INT = "integer"
_STR = "string"
_STR_OR_NULL = "string or null"

# RFC 3339 date-time in UTC: `Z` (either case) or a `+00:00` offset. Year (from
# 1, as `datetime`), month, day, hour, minute and second (60 being a leap second)
# are range-checked here; whether a day past the 28th exists in its month is
# left to `_real_date`.
_TS = re.compile(
    r"((?!0000)\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01]))[Tt]"
    r"((?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60))(?:\.(\d+))?(?:[Zz]|\+00:00)",
    re.ASCII,
)
_MAX_SAFE_INT = 2**53 - 1

_COMMON_FIELDS = (
    ("v", _INT),
    ("session_id", _STR),
    ("seq", _INT),
    ("ts", _STR),
    ("kind", _STR),
    ("prev", _STR),
    ("hash", _STR),
)
_KIND_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "session_start": (),
    "tool_call": (
        ("call_id", _STR),
        ("tool", _STR),
        ("args_sha256", _STR),
        ("decision", _STR),
        ("checkpoint", _STR_OR_NULL),
        ("result_sha256", _STR),
        ("effects", "array"),
    ),
    "session_end": (("status", _STR),),
}
_EFFECT_FIELDS = (("path", _STR), ("sha256_before", _STR_OR_NULL), ("sha256_after", _STR_OR_NULL))
# Optional in an effect: the git mode on each side, null or absent when not recorded.
_EFFECT_MODE_FIELDS = ("mode_before", "mode_after")
MODES = ("100644", "100755", "120000")

# What `_Shapes` looks at: each kind's field names, its string fields (one getter),
# and an effect's fields.
_KIND_KEYS = {
    kind: frozenset(name for name, _ in _COMMON_FIELDS + fields)
    for kind, fields in _KIND_FIELDS.items()
}
_STRINGS = {
    kind: operator.itemgetter(*(name for name, want in _COMMON_FIELDS + fields if want == _STR))
    for kind, fields in _KIND_FIELDS.items()
}
_EFFECT_KEYS = frozenset(name for name, _ in _EFFECT_FIELDS)
_EFFECT_KEYS_MODES = _EFFECT_KEYS | frozenset(_EFFECT_MODE_FIELDS)
_EFFECT_VALUES = operator.itemgetter(*(name for name, _ in _EFFECT_FIELDS))


def genesis(session_id: str) -> str:
    """The `prev` of entry 0: SHA-256 hex of `"audit-genesis/v1:" + session_id`."""
    return hashlib.sha256((GENESIS_PREFIX + session_id).encode("utf-8")).hexdigest()


def entry_hash(entry: Mapping[str, Any]) -> str:
    """SHA-256 hex of `ENTRY_DOMAIN` + JCS(entry without `hash`).

    Raises `CanonicalizationError` when the entry has no JCS form.
    """
    body = dict(entry)
    body.pop("hash", None)
    return hashlib.sha256(ENTRY_DOMAIN + canonicalize(body)).hexdigest()


def seal(session_id: str, bodies: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chain entry bodies (`kind`, `ts`, ...) into a trail for `session_id`.

    Sets `v`, `session_id`, `seq`, `prev` and `hash` on a copy of each body,
    replacing any value the body had for them.
    """
    trail: list[dict[str, Any]] = []
    prev = genesis(session_id)
    for seq, body in enumerate(bodies):
        entry: dict[str, Any] = {"v": 1, "session_id": session_id, "seq": seq}
        entry.update((k, v) for k, v in body.items() if k not in _SEALED)
        entry["prev"] = prev
        entry["hash"] = prev = entry_hash(entry)
        trail.append(entry)
    return trail


def verify_chain(
    entries: Sequence[Any], *, session_id: str, count: object, head: object
) -> list[Finding]:
    """Check the trail's shape, links, hashes, order and its `count` and `head`.

    Every problem is reported, at most `MAX_PER_CODE` per code plus a total.
    `count` and `head` are taken as found in the report (any type).
    """
    out = Findings()
    n = len(entries)
    if n == 0:
        out.add(
            "audit.empty_trail",
            "the audit trail has no entries; a session has at least a start and an end",
            "audit.entries",
            expected="session_start ... session_end",
            found="no entries",
        )
        _check_count(out, count, 0)
        return out.result()

    link: str | None = genesis(session_id)  # the `prev` the next entry must carry
    last_seq: int | None = None
    last_seq_at = -1
    last_ts: str | None = None
    last_ts_key: tuple[str, str, str] | None = None
    shapes = _Shapes()

    for i, entry in enumerate(entries):
        plain = shapes.plain_kind(entry)
        if plain is not None:
            # Every field present with its exact type: no shape finding is possible.
            # `where` is only built for a finding: most entries have none.
            if plain == "tool_call" and entry["decision"] not in DECISIONS:
                _check_decision(out, entry["decision"], f"audit.entries[{i}]")
            if plain != "tool_call" or not 0 < i < n - 1:
                _check_position(out, plain, i, n, f"audit.entries[{i}]")
        elif not isinstance(entry, Mapping):
            out.add(
                "audit.entry_malformed",
                f"entry {i} is not an object",
                f"audit.entries[{i}]",
                expected="object",
                found=json_type(entry),
            )
            link = None
            continue
        else:
            _check_shape(out, entry, i, n, f"audit.entries[{i}]")

        v = entry.get("v")
        if type(v) is int and v != 1:
            out.add(
                "audit.entry_malformed",
                f"entry {i} has an unsupported version",
                f"audit.entries[{i}].v",
                expected="1",
                found=str(v),
            )

        sid = entry.get("session_id")
        if isinstance(sid, str) and sid != session_id:
            out.add(
                "audit.session_mismatch",
                f"entry {i} names another session",
                f"audit.entries[{i}].session_id",
                expected=session_id,
                found=sid,
            )

        seq = entry.get("seq")
        if type(seq) is int:
            want = i if last_seq is None else last_seq + (i - last_seq_at)
            if seq != want:
                out.add(
                    "audit.seq_gap",
                    f"entry {i} has seq {seq} where {want} follows",
                    f"audit.entries[{i}].seq",
                    expected=str(want),
                    found=str(seq),
                )
            last_seq, last_seq_at = seq, i

        ts = entry.get("ts")
        if isinstance(ts, str):
            key = _ts_key(ts)
            if key is None:
                out.add(
                    "audit.entry_malformed",
                    f"entry {i} has a timestamp that is not RFC 3339 UTC",
                    f"audit.entries[{i}].ts",
                    expected="RFC 3339 UTC date-time",
                    found=show(ts),
                )
            else:
                if last_ts_key is not None and key < last_ts_key:
                    out.add(
                        "audit.ts_backwards",
                        f"entry {i} is timestamped before the entry preceding it",
                        f"audit.entries[{i}].ts",
                        expected=f">= {last_ts}",
                        found=ts,
                    )
                last_ts, last_ts_key = ts, key

        prev = entry.get("prev")
        if link is not None and isinstance(prev, str) and prev != link:
            before = "the genesis value" if i == 0 else f"entry {i - 1}'s hash"
            out.add(
                "audit.prev_mismatch",
                f"entry {i} does not link to {before}",
                f"audit.entries[{i}].prev",
                expected=link,
                found=prev,
            )

        try:
            computed: str | None = _plain_hash(entry) if plain is not None else entry_hash(entry)
        except CanonicalizationError as exc:
            computed = None
            out.add(
                "audit.entry_malformed",
                f"entry {i} has no JCS form, so it cannot be hashed: {exc}",
                f"audit.entries[{i}]",
                expected="a JSON object with a JCS form",
                found=str(exc),
            )
        stated = entry.get("hash")
        if isinstance(stated, str):
            if computed is not None and stated != computed:
                out.add(
                    "audit.hash_mismatch",
                    f"entry {i}'s hash does not match its content",
                    f"audit.entries[{i}].hash",
                    expected=computed,
                    found=stated,
                )
            link = stated
        else:
            link = computed

    _check_count(out, count, n)
    # `link` is now the last entry's hash (stated, else recomputed), None when unknown.
    if link is not None and head != link:
        out.add(
            "audit.head_mismatch",
            "audit.head is not the hash of the last entry",
            "audit.head",
            expected=link,
            found=head if isinstance(head, str) else show(head),
        )
    return out.result()


def _plain_hash(entry: Mapping[str, Any]) -> str:
    """`entry_hash` of an entry `_Shapes.plain_kind` admitted, without walking it again."""
    body = dict(entry)
    del body["hash"]
    return hashlib.sha256(ENTRY_DOMAIN + canonicalize_plain(body)).hexdigest()


class _Shapes:
    """Which entries are plain: a dict holding exactly the fields of its kind,
    each of the type `_check_fields` wants, with safe integers, and effects that
    are plain too.

    A plain entry has no shape finding, and orjson writes its JCS form (see
    `audit.jcs.canonicalize_plain`), so one look at it replaces both the field
    checks and the encoder's walk. The key set is judged once per key order
    (a trail has a few); the values are checked with as few Python steps as
    possible, since this runs on every entry: the string fields at once with
    `str.join`, which refuses anything else.
    """

    def __init__(self) -> None:
        self._kinds: dict[tuple[Any, ...], str | None] = {}

    def plain_kind(self, entry: object) -> str | None:
        """The kind of `entry` when it is plain, else None."""
        if type(entry) is not dict:
            return None
        keys = tuple(entry)
        try:
            kind = self._kinds[keys]
        except KeyError:
            kind = self._kinds[keys] = _kind_of_keys(keys)
        if kind is None:
            return None
        stated = entry["kind"]
        if type(stated) is not str or stated != kind:
            return None
        try:
            "".join(_STRINGS[kind](entry))
        except TypeError:
            return None
        v, seq = entry["v"], entry["seq"]
        if (
            type(v) is not int
            or type(seq) is not int
            or not -_MAX_SAFE_INT <= v <= _MAX_SAFE_INT
            or not -_MAX_SAFE_INT <= seq <= _MAX_SAFE_INT
        ):
            return None
        if kind == "tool_call":
            checkpoint, effects = entry["checkpoint"], entry["effects"]
            if checkpoint is not None and not isinstance(checkpoint, str):
                return None
            if type(effects) is not list:
                return None
            for effect in effects:
                if type(effect) is not dict:
                    return None
                effect_keys = effect.keys()
                if effect_keys != _EFFECT_KEYS and (
                    effect_keys != _EFFECT_KEYS_MODES
                    or effect["mode_before"] not in _PLAIN_MODES
                    or effect["mode_after"] not in _PLAIN_MODES
                ):
                    return None
                path, before, after = _EFFECT_VALUES(effect)
                if not (
                    isinstance(path, str)
                    and (before is None or isinstance(before, str))
                    and (after is None or isinstance(after, str))
                ):
                    return None
        return kind


_PLAIN_MODES = (None, *MODES)


def _kind_of_keys(keys: tuple[Any, ...]) -> str | None:
    """The kind whose fields are exactly `keys`; None if none."""
    for kind, names in _KIND_KEYS.items():
        if len(keys) == len(names) and set(keys) == names:
            return kind
    return None


def _check_shape(out: Findings, entry: Mapping[str, Any], i: int, n: int, where: str) -> None:
    """The field checks of an entry that is not plain: every missing or mistyped field."""
    _check_fields(out, entry, where, _COMMON_FIELDS)
    kind = entry.get("kind")
    if isinstance(kind, str):
        kind_fields = _KIND_FIELDS.get(kind)
        if kind_fields is None:
            out.add(
                "audit.entry_malformed",
                f"entry {i} has an unknown kind",
                f"{where}.kind",
                expected=" | ".join(KINDS),
                found=show(kind),
            )
        else:
            _check_fields(out, entry, where, kind_fields)
            if kind == "tool_call":
                _check_tool_call(out, entry, where)
        _check_position(out, kind, i, n, where)


def _check_count(out: Findings, count: object, n: int) -> None:
    if type(count) is not int or count != n:
        out.add(
            "audit.count_mismatch",
            f"audit.count does not match the {n} entries present",
            "audit.count",
            expected=str(n),
            found=show(count),
        )


def _check_fields(
    out: Findings, obj: Mapping[str, Any], where: str, fields: tuple[tuple[str, str], ...]
) -> None:
    for name, want in fields:
        value = obj.get(name, _MISSING)
        if want == _STR:
            ok = isinstance(value, str)
        elif want == _INT:
            ok = type(value) is int
        elif want == _STR_OR_NULL:
            ok = value is None or isinstance(value, str)
        else:  # array
            ok = isinstance(value, list)
        if not ok:
            out.add(
                "audit.entry_malformed",
                f"{where}.{name} is {'missing' if value is _MISSING else 'of the wrong type'}",
                f"{where}.{name}",
                expected=want,
                found="missing" if value is _MISSING else json_type(value),
            )


def _check_decision(out: Findings, decision: object, where: str) -> None:
    if isinstance(decision, str) and decision not in DECISIONS:
        out.add(
            "audit.entry_malformed",
            f"{where}.decision is not a known decision",
            f"{where}.decision",
            expected=" | ".join(DECISIONS),
            found=show(decision),
        )


def _check_tool_call(out: Findings, entry: Mapping[str, Any], where: str) -> None:
    _check_decision(out, entry.get("decision"), where)
    effects = entry.get("effects")
    if isinstance(effects, list):
        for j, effect in enumerate(effects):
            at = f"{where}.effects[{j}]"
            if isinstance(effect, Mapping):
                _check_fields(out, effect, at, _EFFECT_FIELDS)
                for name in _EFFECT_MODE_FIELDS:
                    mode = effect.get(name)
                    if mode is not None and (type(mode) is not str or mode not in MODES):
                        out.add(
                            "audit.entry_malformed",
                            f"{at}.{name} is not a git mode",
                            f"{at}.{name}",
                            expected="null | " + " | ".join(MODES),
                            found=show(mode),
                        )
            else:
                out.add(
                    "audit.entry_malformed",
                    f"{at} is not an object",
                    at,
                    expected="object",
                    found=json_type(effect),
                )


def _check_position(out: Findings, kind: str, i: int, n: int, where: str) -> None:
    if i == 0 and kind != "session_start":
        out.add(
            "audit.first_not_start",
            "the first entry is not session_start",
            f"{where}.kind",
            expected="session_start",
            found=kind,
        )
    if i == n - 1 and kind != "session_end":
        out.add(
            "audit.last_not_end",
            "the last entry is not session_end: the trail may be cut short",
            f"{where}.kind",
            expected="session_end",
            found=kind,
        )
    if 0 < i < n - 1 and kind in ("session_start", "session_end"):
        out.add(
            "audit.misplaced_boundary",
            f"entry {i} is a {kind} inside the trail",
            f"{where}.kind",
            expected="tool_call",
            found=kind,
        )


def _ts_key(ts: str) -> tuple[str, str, str] | None:
    """A sort key for an RFC 3339 UTC timestamp, or None when `ts` is not one.

    The date and the time are fixed-width digits, so as strings they sort as the
    instants they name; fraction digits without trailing zeros compare as
    strings like the numbers they are.
    """
    m = _TS.fullmatch(ts)
    if m is None:
        return None
    day, time, fraction = m.groups("")
    if day[8:] > "28" and not _real_date(day):
        return None
    return (day, time, fraction.rstrip("0"))


@functools.lru_cache(maxsize=1024)
def _real_date(day: str) -> bool:
    """Whether `YYYY-MM-DD` (year, month and day in range) names a day of the calendar.

    Cached: the entries of a trail share a few days.
    """
    try:
        date(int(day[:4]), int(day[5:7]), int(day[8:]))
    except ValueError:
        return False
    return True
