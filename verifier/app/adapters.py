"""Migrating tool vocabularies: shadow two profiles over stored sessions, and take inventory.

A profile change is the quiet way a harness goes wrong: an argument renamed, an
operation the new dispatcher does not know, a line base that moved. Before a
team switches profiles, `shadow` runs both over every call the store holds,
executing nothing, and lists each difference (`compare`); `inventory` lists
every function name and argument shape seen, with counts, and which profiles
cover each.

Policy and plumbing apart: `compare` and `shape` are pure functions of calls
and profiles; `stored_calls` is the one place that reads the store (pruned
sessions are skipped and counted). The views are in `verifier.formats.render`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit import json_type
from verifier.app import Notice
from verifier.config import Config
from verifier.contract.profiles import Action, ActionKind, Profile, load_profile
from verifier.contract.report import parse_report
from verifier.errors import ConfigError, InvalidReport, NotFound, ReportPruned
from verifier.store import NoStore, SessionFilter, Store
from verifier.store.rows import MAX_PAGE

if TYPE_CHECKING:
    from verifier.contract.trajectory import ToolCall

# What a difference is about; every kind but `unrecognised_by_both` is a disagreement.
KINDS = (
    "unrecognised",  # one profile knows the function name, the other does not
    "unrecognised_by_both",  # neither knows it: they agree, and the call is reported
    "action",  # different internal actions
    "missing_field",  # a field one profile requires is missing for it, not for the other
    "extra_field",  # a field of the call one profile reads and the other ignores
    "value",  # a normalised parameter differs (or exists on one side only)
    "refusal",  # one profile refuses the call (a problem), the other does not
    "permission",  # the permission the action needs differs
)


@dataclass(frozen=True)
class Difference:
    """One way two profiles read a call differently; `matters` makes shadow mode fail."""

    kind: str
    field: str | None
    old: Any
    new: Any
    matters: bool = True


@dataclass(frozen=True)
class CallDiff:
    """A call the two profiles read differently, with both readings."""

    session_id: str
    call_id: str
    name: str
    location: str
    old: Action
    new: Action
    differences: tuple[Difference, ...]

    @property
    def matters(self) -> bool:
        return any(d.matters for d in self.differences)


@dataclass
class Scan:
    """What was read from the store: sessions, and those set aside with the reason."""

    sessions: int = 0
    calls: int = 0
    pruned: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Shadow:
    old: str
    new: str
    scan: Scan
    diffs: tuple[CallDiff, ...]

    @property
    def disagreements(self) -> int:
        """Calls on which the profiles disagree in a way that matters."""
        return sum(1 for d in self.diffs if d.matters)

    @property
    def exit_code(self) -> int:
        """1 when the profiles disagree on anything that matters, 0 otherwise."""
        return 1 if self.disagreements else 0


@dataclass
class ShapeCount:
    """One function name with one argument shape, as seen in the store."""

    name: str
    shape: tuple[str, ...]
    calls: int = 0
    sessions: set[str] = field(default_factory=set)
    known_by: tuple[str, ...] = ()
    covered_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Inventory:
    profiles: tuple[str, ...]
    scan: Scan
    shapes: tuple[ShapeCount, ...]


# -- policy: pure functions of calls and profiles --------------------------------------


def compare(old: Profile, new: Profile, call: ToolCall) -> tuple[Action, Action, list[Difference]]:
    """Both profiles' readings of `call` and every difference between them."""
    a, b = old.normalise(call), new.normalise(call)
    unknown_a, unknown_b = a.kind is ActionKind.UNKNOWN, b.kind is ActionKind.UNKNOWN
    if unknown_a and unknown_b:
        return a, b, [Difference("unrecognised_by_both", None, call.name, call.name, False)]
    if unknown_a or unknown_b:
        return a, b, [Difference("unrecognised", None, a.kind.value, b.kind.value)]
    out: list[Difference] = []
    if a.kind is not b.kind:
        out.append(Difference("action", None, a.kind.value, b.kind.value))
    missing_a, missing_b = _missing(old, call), _missing(new, call)
    for name in sorted(missing_a ^ missing_b):
        out.append(
            Difference("missing_field", name, _state(name in missing_a), _state(name in missing_b))
        )
    read_a, read_b = _read_fields(old, call), _read_fields(new, call)
    for name in sorted((read_a ^ read_b) & set(call.args)):
        out.append(Difference("extra_field", name, _use(name in read_a), _use(name in read_b)))
    for param in sorted(set(a.params) | set(b.params)):
        va, vb = a.params.get(param, _ABSENT), b.params.get(param, _ABSENT)
        if not _same(va, vb):
            out.append(Difference("value", param, _shown(va), _shown(vb)))
    explained = bool(missing_a ^ missing_b)  # a missing field already says why one refuses
    if not explained and set(a.problems) != set(b.problems):
        out.append(Difference("refusal", None, list(a.problems), list(b.problems)))
    perm_a, perm_b = permission(a), permission(b)
    if perm_a != perm_b:
        out.append(Difference("permission", None, perm_a, perm_b))
    return a, b, out


def _state(missing: bool) -> str:
    return "missing" if missing else "present"


def _use(read: bool) -> str:
    return "read" if read else "ignored"


def permission(action: Action) -> str | None:
    """The permission `action` needs, or None where the profile has no notion of one.

    The hook for profiles that declare permissions (``Action.permission``): read
    through `getattr` so that shadow mode compares what exists in either version.
    """
    value = getattr(action, "permission", None)
    return None if value is None else str(value)


def shape(args: Mapping[str, Any]) -> tuple[str, ...]:
    """The argument shape of a call: each argument's name and JSON type, sorted."""
    return tuple(sorted(f"{k}:{json_type(v)}" for k, v in args.items()))


_ABSENT = object()


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: ``1`` and ``True`` differ, as they do for a harness."""
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return type(a) is type(b) and a == b


def _shown(value: Any) -> Any:
    return "(absent)" if value is _ABSENT else value


def _names(profile: Profile, name: str) -> dict[str, tuple[str, ...]]:
    """Each parameter of function `name` with the external names it is read from."""
    spec = profile.spec(name)
    if spec is None:
        return {}
    names = getattr(spec, "names", None)  # profiles with field aliases
    return {p: tuple(names(p)) if names else (theirs,) for p, theirs in spec.args.items()}


def _read_fields(profile: Profile, call: ToolCall) -> set[str]:
    """The call's fields that `profile` reads (any alias of any parameter)."""
    return {n for names in _names(profile, call.name).values() for n in names}


def _missing(profile: Profile, call: ToolCall) -> set[str]:
    """The required parameters of `profile` that `call` does not carry, by external name."""
    spec = profile.spec(call.name)
    if spec is None:
        return set()
    names = _names(profile, call.name)
    return {names[p][0] for p in spec.required if not any(n in call.args for n in names.get(p, ()))}


def shadow_calls(
    old: Profile, new: Profile, sessions: Iterable[tuple[str, Sequence[ToolCall], Any]]
) -> list[CallDiff]:
    """The calls of `sessions` (id, calls, trajectory) the two profiles read differently."""
    diffs: list[CallDiff] = []
    for session_id, calls, trajectory in sessions:
        for call in calls:
            a, b, differences = compare(old, new, call)
            if differences:
                where = trajectory.location(call.turn, call.part)
                diffs.append(
                    CallDiff(session_id, call.call_id, call.name, where, a, b, tuple(differences))
                )
    return diffs


def take_inventory(
    profiles: Mapping[str, Profile], sessions: Iterable[tuple[str, Sequence[ToolCall], Any]]
) -> list[ShapeCount]:
    """Every (function name, argument shape) seen, with counts and the profiles covering it.

    A profile *knows* a shape when it declares the function; it *covers* it when
    every call of that shape normalises without a problem.
    """
    counts: dict[tuple[str, tuple[str, ...]], ShapeCount] = {}
    refused: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for session_id, calls, _ in sessions:
        for call in calls:
            key = (call.name, shape(call.args))
            entry = counts.get(key)
            if entry is None:
                entry = counts[key] = ShapeCount(call.name, key[1])
                refused[key] = set()
            entry.calls += 1
            entry.sessions.add(session_id)
            for pname, profile in profiles.items():
                if pname not in refused[key] and profile.normalise(call).problems:
                    refused[key].add(pname)
    out = []
    for key, entry in counts.items():
        entry.known_by = tuple(n for n, p in profiles.items() if p.spec(entry.name) is not None)
        entry.covered_by = tuple(n for n in entry.known_by if n not in refused[key])
        out.append(entry)
    return sorted(out, key=lambda e: (-e.calls, e.name, e.shape))


# -- plumbing: profiles and the store ------------------------------------------------------


def load_profiles(profiles_dir: Path) -> dict[str, Profile]:
    """Every profile of `profiles_dir` (each ``*.toml``), by name."""
    try:
        files = sorted(profiles_dir.glob("*.toml"))
    except OSError as exc:
        raise ConfigError(f"tool profiles: cannot read {str(profiles_dir)!r}: {exc}") from None
    return {f.stem: load_profile(profiles_dir, f.stem) for f in files}


def stored_calls(
    store: Store | None,
    scan: Scan,
    session_ids: Sequence[str] = (),
    since: datetime | None = None,
) -> Iterator[tuple[str, Sequence[ToolCall], Any]]:
    """Each stored session's calls, read from its report bytes, newest ended first.

    `session_ids` names sessions (an unknown one is `NotFound`); otherwise every
    session that ended at or after `since`. Pruned sessions have no report left:
    they are skipped and counted in `scan`, as are reports that no longer read.
    No store (nothing stored yet) yields nothing.
    """
    if store is None:
        return

    for session_id in _selected(store, session_ids, since):
        try:
            raw = store.report_bytes(session_id)
        except ReportPruned:
            scan.pruned.append(session_id)
            continue
        try:
            report = parse_report(raw)
            trajectory = report.trajectory
        except InvalidReport as exc:  # stored before this verifier's contract: say so, go on
            scan.unreadable[session_id] = str(exc)
            continue
        scan.sessions += 1
        scan.calls += len(trajectory.calls)
        yield session_id, trajectory.calls, trajectory


def _selected(store: Store, session_ids: Sequence[str], since: datetime | None) -> Iterator[str]:
    if session_ids:
        for session_id in dict.fromkeys(session_ids):
            store.get_session(session_id)  # NotFound names it
            yield session_id
        return
    cursor: str | None = None
    while True:
        page = store.find_sessions(SessionFilter(ended_from=since), limit=MAX_PAGE, cursor=cursor)
        for listed in page.items:
            yield listed.session.session_id
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def shadow(
    config: Config,
    old: str,
    new: str,
    session_ids: Sequence[str] = (),
    since: datetime | None = None,
    *,
    notice: Notice | None = None,
) -> Shadow:
    """Run profiles `old` and `new` over the stored sessions (these ids, or those that
    ended at or after `since`); nothing is executed. Nothing stored yet: no session
    read (`notice` says why), and a session named is `NotFound`."""
    try:
        with Store.open(config.database_url, read_only=True) as store:
            return shadow_store(store, config.profiles_dir, old, new, session_ids, since)
    except NoStore as exc:
        if session_ids:
            raise NotFound(f"session {session_ids[0]!r} is not stored: {exc}") from None
        if notice is not None:
            notice(str(exc))
        return shadow_store(None, config.profiles_dir, old, new)


def inventory(config: Config, *, notice: Notice | None = None) -> Inventory:
    """Every function name and argument shape in the configured store, and the profiles
    of the configuration covering each; nothing stored yet: no session (`notice` says so)."""
    try:
        with Store.open(config.database_url, read_only=True) as store:
            return inventory_store(store, config.profiles_dir)
    except NoStore as exc:
        if notice is not None:
            notice(str(exc))
        return inventory_store(None, config.profiles_dir)


def shadow_store(
    store: Store | None,
    profiles_dir: Path,
    old: str,
    new: str,
    session_ids: Sequence[str] = (),
    since: datetime | None = None,
) -> Shadow:
    """`shadow` over an open store (None: nothing stored)."""
    old_profile, new_profile = load_profile(profiles_dir, old), load_profile(profiles_dir, new)
    scan = Scan()
    diffs = shadow_calls(old_profile, new_profile, stored_calls(store, scan, session_ids, since))
    return Shadow(old_profile.name, new_profile.name, scan, tuple(diffs))


def inventory_store(store: Store | None, profiles_dir: Path) -> Inventory:
    """`inventory` over an open store (None: nothing stored) and the profiles of a folder."""
    profiles = load_profiles(profiles_dir)
    scan = Scan()
    shapes = take_inventory(profiles, stored_calls(store, scan))
    return Inventory(tuple(profiles), scan, tuple(shapes))


__all__ = [
    "KINDS",
    "CallDiff",
    "Difference",
    "Inventory",
    "Scan",
    "Shadow",
    "ShapeCount",
    "compare",
    "inventory",
    "inventory_store",
    "load_profiles",
    "permission",
    "shadow",
    "shadow_store",
    "shape",
    "stored_calls",
    "take_inventory",
]
