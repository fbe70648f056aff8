"""Completeness: the audit trail against the trajectory's calls and the claimed changes.

Every function call in the trajectory has exactly one `tool_call` entry with
the same call id, tool name and arguments hash, and every such entry has its
call; every call has its response and the response hash agrees; denied calls
changed nothing; and the entries' effects, composed in order, explain exactly
the claimed changes.

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

    A None hash means the file does not exist on that side.
    """

    path: str
    sha256_before: str | None
    sha256_after: str | None


def check_completeness(
    entries: Sequence[Any], calls: Sequence[Call], claims: Sequence[Change]
) -> list[Finding]:
    """Hold the `tool_call` entries against `calls`, and their effects against `claims`."""
    out = Findings()
    by_call = _tool_calls_by_id(entries)
    _check_calls(out, entries, by_call, calls)
    net = _compose_effects(out, entries)
    _check_claims(out, net, claims)
    return out.result()


def _tool_calls_by_id(entries: Sequence[Any]) -> dict[str, list[int]]:
    """Indexes of the `tool_call` entries, by call id, in trail order."""
    by_call: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        if isinstance(entry, Mapping) and entry.get("kind") == "tool_call":
            call_id = entry.get("call_id")
            if isinstance(call_id, str):
                by_call.setdefault(call_id, []).append(i)
    return by_call


def _check_calls(
    out: Findings,
    entries: Sequence[Any],
    by_call: dict[str, list[int]],
    calls: Sequence[Call],
) -> None:
    seen: set[str] = set()
    for call in calls:
        if call.call_id in seen:
            # Two calls with one id is the trajectory's fault; its check reports it.
            continue
        seen.add(call.call_id)
        if call.response is None:
            out.add(
                "audit.response_missing",
                f"call {call.call_id} ({call.tool}) has no function_response",
                expected=call.call_id,
            )
        at = by_call.get(call.call_id)
        if not at:
            out.add(
                "audit.call_without_entry",
                f"call {call.call_id} ({call.tool}) has no tool_call entry in the audit trail",
                expected=call.call_id,
            )
            continue
        for extra in at[1:]:
            out.add(
                "audit.duplicate_entry",
                f"call {call.call_id} has another tool_call entry, entry {at[0]} being the first",
                f"audit.entries[{extra}]",
                expected=f"one entry, audit.entries[{at[0]}]",
                found=call.call_id,
            )
        _check_entry(out, entries[at[0]], at[0], call)

    for call_id, at in by_call.items():
        if call_id not in seen:
            for i in at:
                out.add(
                    "audit.entry_without_call",
                    f"entry {i} records call {call_id}, which the trajectory does not hold",
                    f"audit.entries[{i}].call_id",
                    found=call_id,
                )


def _check_entry(out: Findings, entry: Mapping[str, Any], i: int, call: Call) -> None:
    where = f"audit.entries[{i}]"
    tool = entry.get("tool")
    if isinstance(tool, str) and tool != call.tool:
        out.add(
            "audit.tool_mismatch",
            f"entry {i} names another tool than call {call.call_id}",
            f"{where}.tool",
            expected=call.tool,
            found=tool,
        )
    _check_digest(out, entry, where, "args_sha256", call.args, "audit.args_mismatch", call)
    if call.response is not None:
        _check_digest(
            out, entry, where, "result_sha256", call.response, "audit.result_mismatch", call
        )


def _check_digest(
    out: Findings,
    entry: Mapping[str, Any],
    where: str,
    field: str,
    value: Mapping[str, Any],
    code: str,
    call: Call,
) -> None:
    stated = entry.get(field)
    if not isinstance(stated, str):
        return
    what = "arguments" if field == "args_sha256" else "response"
    try:
        want = jcs_sha256(value)
    except CanonicalizationError as exc:
        out.add(
            code,
            f"the {what} of call {call.call_id} have no JCS form, so no hash can match: {exc}",
            f"{where}.{field}",
            found=stated,
        )
        return
    if stated != want:
        out.add(
            code,
            f"{where}.{field} is not the hash of the {what} of call {call.call_id}",
            f"{where}.{field}",
            expected=want,
            found=stated,
        )


def _compose_effects(out: Findings, entries: Sequence[Any]) -> dict[str, list[str | None]]:
    """The net `[before, after]` per path over all effects, in trail order.

    Trail order is seq order when the chain holds; when it does not, the chain
    check already fails the trail.
    """
    net: dict[str, list[str | None]] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or entry.get("kind") != "tool_call":
            continue
        effects = entry.get("effects")
        if not isinstance(effects, list) or not effects:
            continue
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
            state = net.get(path)
            if state is None:
                net[path] = [before, after]
                continue
            if before != state[1]:
                out.add(
                    "audit.effect_discontinuity",
                    f"{path}: this effect starts from another state than the previous one left",
                    f"audit.entries[{i}].effects[{j}].sha256_before",
                    expected=_h(state[1]),
                    found=_h(before),
                )
            state[1] = after
    return net


def _check_claims(
    out: Findings, net: dict[str, list[str | None]], claims: Sequence[Change]
) -> None:
    first: dict[str, Change] = {}
    for claim in claims:
        # A path claimed twice is reported by the changes check; compare the first.
        first.setdefault(claim.path, claim)

    for path, claim in first.items():
        state = net.get(path)
        claimed = _pair(claim.sha256_before, claim.sha256_after)
        if state is None or state[0] == state[1]:
            out.add(
                "audit.claim_unexplained",
                f"{path}: claimed as changed, but no effect in the trail changes it",
                path,
                expected=claimed,
                found="no effect" if state is None else f"no net change ({_pair(*state)})",
            )
        elif (state[0], state[1]) != (claim.sha256_before, claim.sha256_after):
            out.add(
                "audit.effect_mismatch",
                f"{path}: the trail's net effect differs from the claim",
                path,
                expected=claimed,
                found=_pair(*state),
            )

    for path, (before, after) in net.items():
        if before != after and path not in first:
            out.add(
                "audit.effect_undeclared",
                f"{path}: changed by the trail but not claimed",
                path,
                expected="no change",
                found=_pair(before, after),
            )


def _h(digest: str | None) -> str:
    return "null" if digest is None else digest


def _pair(before: str | None, after: str | None) -> str:
    return f"{_h(before)} -> {_h(after)}"
