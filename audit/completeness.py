"""Completeness: the audit trail against the trajectory's calls and the claimed changes.

Every function call in the trajectory has exactly one `tool_call` entry with
the same call id, tool name and arguments hash, and every such entry has its
call; every call has its response and the response hash agrees; denied calls
changed nothing; and the entries' effects, composed in order, explain exactly
the claimed changes. Modes (``mode_before`` / ``mode_after``, optional on both
sides) take part where they are given: an effect whose hashes are equal and
whose modes differ is a change of mode alone (``chmod +x``), and a claimed mode
must be the trail's where the trail records one.

Malformed entries never make this check raise: what cannot be read is skipped,
and `verify_chain` reports the malformation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from audit._collect import Findings
from audit.findings import Finding
from audit.jcs import CanonicalizationError, jcs_sha256

__all__ = ["Call", "Change", "check_completeness"]

_DENIED = ("deny", "refused")


@dataclass(frozen=True, slots=True)
class Call:
    """A function call from the trajectory; `response` is None when it has none."""

    call_id: str
    tool: str
    args: Mapping[str, Any]
    response: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Change:
    """A file change: a claim, or the net effect of a trail on one path.

    A None hash means the file does not exist on that side; a None mode that
    the mode is not given (``"100644"``, ``"100755"``, ``"120000"`` otherwise).
    """

    path: str
    sha256_before: str | None
    sha256_after: str | None
    mode_before: str | None = None
    mode_after: str | None = None


def check_completeness(
    entries: Sequence[Any], calls: Sequence[Call], claims: Sequence[Change]
) -> list[Finding]:
    """Hold the `tool_call` entries against `calls`, and their effects against `claims`."""
    out = Findings()
    index = _index(entries)
    _check_calls(out, entries, index, calls)
    net = _compose_effects(out, index.with_effects)
    _check_claims(out, net, claims)
    return out.result()


@dataclass(slots=True)
class _Index:
    """The `tool_call` entries, gathered in one pass over the trail.

    `first` holds the index of each call id's first entry and `extra` the later
    ones (rare: most ids have one entry, and a list per id would cost a list per
    call); `with_effects` the entries that record effects, in trail order.
    """

    first: dict[str, int]
    extra: dict[str, list[int]]
    with_effects: list[tuple[int, Mapping[str, Any], list[Any]]]

    def at(self, call_id: str) -> list[int]:
        """Indexes of the entries of `call_id`, in trail order (empty if none)."""
        first = self.first.get(call_id)
        if first is None:
            return []
        return [first, *self.extra.get(call_id, ())]


def _index(entries: Sequence[Any]) -> _Index:
    first: dict[str, int] = {}
    extra: dict[str, list[int]] = {}
    with_effects: list[tuple[int, Mapping[str, Any], list[Any]]] = []
    for i, entry in enumerate(entries):
        # `type(...) is dict` first: an ABC's isinstance is slow, and nearly every entry is a dict.
        if not (type(entry) is dict or isinstance(entry, Mapping)):
            continue
        if entry.get("kind") != "tool_call":
            continue
        call_id = entry.get("call_id")
        if isinstance(call_id, str) and first.setdefault(call_id, i) != i:
            extra.setdefault(call_id, []).append(i)
        effects = entry.get("effects")
        if isinstance(effects, list) and effects:
            with_effects.append((i, entry, effects))
    return _Index(first, extra, with_effects)


def _check_calls(
    out: Findings,
    entries: Sequence[Any],
    index: _Index,
    calls: Sequence[Call],
) -> None:
    seen: set[str] = set()
    first, extras = index.first, index.extra
    for call in calls:
        call_id = call.call_id
        if call_id in seen:
            # Two calls with one id is the trajectory's fault; its check reports it.
            continue
        seen.add(call_id)
        if call.response is None:
            out.add(
                "audit.response_missing",
                f"call {call_id} ({call.tool}) has no function_response",
                expected=call_id,
            )
        i = first.get(call_id)
        if i is None:
            out.add(
                "audit.call_without_entry",
                f"call {call_id} ({call.tool}) has no tool_call entry in the audit trail",
                expected=call_id,
            )
            continue
        if extras:
            for extra in extras.get(call_id, ()):
                out.add(
                    "audit.duplicate_entry",
                    f"call {call_id} has another tool_call entry, entry {i} being the first",
                    f"audit.entries[{extra}]",
                    expected=f"one entry, audit.entries[{i}]",
                    found=call_id,
                )
        # The entry against its call (inlined: this loop runs once per call).
        entry = entries[i]
        tool = entry.get("tool")
        if tool != call.tool and isinstance(tool, str):
            out.add(
                "audit.tool_mismatch",
                f"entry {i} names another tool than call {call_id}",
                f"audit.entries[{i}].tool",
                expected=call.tool,
                found=tool,
            )
        _check_digest(out, entry, i, "args_sha256", call.args, "audit.args_mismatch", call)
        if call.response is not None:
            _check_digest(
                out, entry, i, "result_sha256", call.response, "audit.result_mismatch", call
            )

    for call_id in index.first:
        if call_id not in seen:
            for i in index.at(call_id):
                out.add(
                    "audit.entry_without_call",
                    f"entry {i} records call {call_id}, which the trajectory does not hold",
                    f"audit.entries[{i}].call_id",
                    found=call_id,
                )


def _check_digest(
    out: Findings,
    entry: Mapping[str, Any],
    i: int,
    field: str,
    value: Mapping[str, Any],
    code: str,
    call: Call,
) -> None:
    stated = entry.get(field)
    if not isinstance(stated, str):
        return
    try:
        want = jcs_sha256(value)
    except CanonicalizationError as exc:
        what = "arguments" if field == "args_sha256" else "response"
        out.add(
            code,
            f"the {what} of call {call.call_id} have no JCS form, so no hash can match: {exc}",
            f"audit.entries[{i}].{field}",
            found=stated,
        )
        return
    if stated != want:
        what = "arguments" if field == "args_sha256" else "response"
        out.add(
            code,
            f"audit.entries[{i}].{field} is not the hash of the {what} of call {call.call_id}",
            f"audit.entries[{i}].{field}",
            expected=want,
            found=stated,
        )


def _compose_effects(
    out: Findings, with_effects: list[tuple[int, Mapping[str, Any], list[Any]]]
) -> dict[str, list[str | None]]:
    """The net `[before, after, mode_before, mode_after]` per path over all effects, in order.

    Trail order is seq order when the chain holds; when it does not, the chain
    check already fails the trail. A mode an effect does not give is unknown
    (None) from there on: the net mode after is the last effect's.
    """
    net: dict[str, list[str | None]] = {}
    for i, entry, effects in with_effects:
        if entry.get("decision") in _DENIED:
            out.add(
                "audit.denied_with_effects",
                f"entry {i} was not executed ({entry.get('decision')}) yet records effects",
                f"audit.entries[{i}].effects",
                expected="[]",
                found=f"{len(effects)} effect(s)",
            )
        for j, effect in enumerate(effects):
            if not isinstance(effect, Mapping):
                continue
            path = effect.get("path")
            before = effect.get("sha256_before")
            after = effect.get("sha256_after")
            if not (
                isinstance(path, str)
                and (before is None or isinstance(before, str))
                and (after is None or isinstance(after, str))
            ):
                continue
            mode_before = effect.get("mode_before")
            mode_after = effect.get("mode_after")
            if not isinstance(mode_before, str):
                mode_before = None
            if not isinstance(mode_after, str):
                mode_after = None
            state = net.get(path)
            if state is None:
                net[path] = [before, after, mode_before, mode_after]
                continue
            if before != state[1]:
                out.add(
                    "audit.effect_discontinuity",
                    f"{path}: this effect starts from another state than the previous one left",
                    f"audit.entries[{i}].effects[{j}].sha256_before",
                    expected=_h(state[1]),
                    found=_h(before),
                )
            elif mode_before is not None and state[3] is not None and mode_before != state[3]:
                out.add(
                    "audit.effect_discontinuity",
                    f"{path}: this effect starts from another mode than the previous one left",
                    f"audit.entries[{i}].effects[{j}].mode_before",
                    expected=state[3],
                    found=mode_before,
                )
            state[1] = after
            state[3] = mode_after
    return net


def _changed(state: list[str | None]) -> bool:
    """Whether a net state changes its path: its bytes, or its mode where both are known."""
    before, after, mode_before, mode_after = state
    return before != after or (
        mode_before is not None and mode_after is not None and mode_before != mode_after
    )


def _modes_differ(claim: Change, state: list[str | None]) -> bool:
    """Whether a mode the claim gives is not the one the trail records (where it records one)."""
    return any(
        claimed is not None and recorded is not None and claimed != recorded
        for claimed, recorded in ((claim.mode_before, state[2]), (claim.mode_after, state[3]))
    )


def _check_claims(
    out: Findings, net: dict[str, list[str | None]], claims: Sequence[Change]
) -> None:
    first: dict[str, Change] = {}
    for claim in claims:
        # A path claimed twice is reported by the changes check; compare the first.
        first.setdefault(claim.path, claim)

    for path, claim in first.items():
        state = net.get(path)
        claimed = _pair(
            claim.sha256_before, claim.sha256_after, claim.mode_before, claim.mode_after
        )
        if state is None or not _changed(state):
            out.add(
                "audit.claim_unexplained",
                f"{path}: claimed as changed, but no effect in the trail changes it",
                path,
                expected=claimed,
                found="no effect" if state is None else f"no net change ({_pair(*state)})",
            )
        elif (state[0], state[1]) != (claim.sha256_before, claim.sha256_after) or _modes_differ(
            claim, state
        ):
            out.add(
                "audit.effect_mismatch",
                f"{path}: the trail's net effect differs from the claim",
                path,
                expected=claimed,
                found=_pair(*state),
            )

    for path, state in net.items():
        if path not in first and _changed(state):
            out.add(
                "audit.effect_undeclared",
                f"{path}: changed by the trail but not claimed",
                path,
                expected="no change",
                found=_pair(*state),
            )


def _h(digest: str | None) -> str:
    return "null" if digest is None else digest


def _pair(
    before: str | None,
    after: str | None,
    mode_before: str | None = None,
    mode_after: str | None = None,
) -> str:
    """``before -> after``, each with its mode in brackets when one is given."""
    return f"{_side(before, mode_before)} -> {_side(after, mode_after)}"


def _side(digest: str | None, mode: str | None) -> str:
    return _h(digest) if mode is None else f"{_h(digest)} ({mode})"
