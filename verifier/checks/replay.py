"""The replay check: the model's own requests, replayed on the base, against what was recorded.

A harness whose dispatcher misreads the model's vocabulary (skips a step, turns
a bounded replace into a whole-file write, overwrites the wrong range) and
records faithfully what it did leaves every hash in agreement: claims, audit
effects and repository. Only the model's requests tell the truth. Steps:

1. normalise every call with the report's tool profile; a call the profile
   does not know (or refuses) answered as successful leaves the check in error
   (`profile.unknown_call`): what it did cannot be verified;
2. choose the files to replay: every file a file action (write, bounded
   replace, replace by text, delete) asked for or changed, except those a
   command or another call changed as well (not replayable: said in the
   details, the hashes of the other checks decide); an absolute path is a
   repository path only under the workspace, with a profile that says so
   (`Profile.workspace_path`), and a successful call outside it fails
   (``replay.outside_workspace``);
3. for each, start from its blob at the base commit (bytes as git stores them,
   read through `Repository`, never the working tree's conversions), apply
   the requests in trajectory order (a turn's calls in part order) whose
   response the profile calls a success, honouring each bounded replace's
   expected text and range, and after each call compare with the effect the
   audit trail recorded for it; at the end, with the file at the head.

A function whose profile names matching rules (``match``) is applied by them
(`verifier.checks.editmatch`: gemini-cli's tolerant ``replace``); what they
applied other than the model asked is ``replay.tolerant_match`` or
``replay.corrected_edit``, a note or a failure by the repository's
``tolerant_edits``.

The work is bounded (`Budget`): the bytes joined, split, scanned and hashed,
a deadline, and the size of a file being replayed; running out of any is
``replay.budget_exceeded`` (inconclusive), naming the budget. A file is kept
as a list of lines that a bounded replace edits in place. It is hashed after
every recorded step while that costs little (steps x size up to
`Budget.exact_bytes`); beyond, only where a step needs a hash no recorded
effect gives: each effect's ``sha256_before`` is held to the hash the file is
known to have (computed, or the previous effect's ``sha256_after``), and the
last one, with the head, to the replayed bytes at the end, so the cost
follows the edits' size, not calls x file size. A disagreement replays the
file again, hashing after every step, to name the first call that diverges.

Lines are counted on bytes: a line ends with LF (a CRLF line with its LF); a
lone CR ends none. The model's text is UTF-8; where a ``text`` or ``eol``
attribute makes git store CRLF as LF, the model's text is converted the same
way, since the model saw the working tree and we replay on blobs.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.findings import Finding
from verifier._internal.deadline import check_deadline
from verifier._internal.git import Git
from verifier._internal.paths import EOL_AUTO, EOL_TEXT, UnsafeFile, hash_in_root, unsafe_reason
from verifier._internal.repository import Repository
from verifier.checks import editmatch
from verifier.checks.base import Context, HeadState
from verifier.contract.profiles import FILE_ACTIONS, Action, ActionKind, Profile, load_profile
from verifier.errors import ConfigError, InfrastructureError
from verifier.findings import CheckResult, CheckStatus

if TYPE_CHECKING:
    from verifier.contract.trajectory import ToolCall

NAME = "replay"
#: Bytes replay may join, split, scan and hash in one check, and the largest file it replays.
MAX_WORK_BYTES = 8 * 1024**3
MAX_FILE_BYTES = 64 * 1024**2
EXACT_BYTES = 256 * 1024**2
FAILING = {
    "replay.outside_workspace",
    "replay.tolerant_match",  # with tolerant_edits = "fail" only: else a note
    "replay.corrected_edit",
    "replay.expected_mismatch",
    "replay.mismatch",
    "replay.whole_file_write",
    "replay.skipped",
}


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


class BudgetExceeded(Exception):
    """Replay ran out of `budget` ("work", "deadline", "file size"); caught by `replay`."""

    def __init__(self, budget: str, detail: str) -> None:
        super().__init__(detail)
        self.budget, self.detail = budget, detail


@dataclass
class Budget:
    """What one replay may spend: bytes of work, a deadline, the size of one file.

    `spend` is called before each piece of whole-file work (a join, a split, a
    scan, a hash) with its size, and checks the clock: the check stops between
    two pieces, never in the middle of the report's worth.
    """

    work_bytes: int = MAX_WORK_BYTES
    max_file_bytes: int = MAX_FILE_BYTES
    deadline: float | None = None  # `time.monotonic`; None: none but the check's
    # Up to this much (steps x file size), a file is hashed after every step (`replay_file`).
    exact_bytes: int = EXACT_BYTES
    spent: int = 0

    def spend(self, size: int) -> None:
        self.spent += size
        if self.spent > self.work_bytes:
            raise BudgetExceeded(
                "work",
                f"more than {self.work_bytes} bytes joined, scanned and hashed "
                "(replay_max_work_bytes)",
            )
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise BudgetExceeded("deadline", "the check's deadline passed (check_deadline)")

    def hold(self, size: int) -> None:
        """Refuse a file that grows past `max_file_bytes`."""
        if size > self.max_file_bytes:
            raise BudgetExceeded(
                "file size",
                f"a file of {size} bytes, over {self.max_file_bytes} (replay_max_file_bytes)",
            )


@dataclass(frozen=True)
class Step:
    """One call as it concerns one file: the request (if it names the file) and its effect."""

    action: Action
    applies: bool  # the request names this file and its response says it succeeded
    recorded: bool  # the audit trail has an entry for the call
    effect: Mapping[str, Any] | None  # the entry's effect on this file, if any


@dataclass
class Plan:
    """What step 2 chose: the steps of each replayable file, and why the others are not."""

    steps: dict[str, list[Step]] = field(default_factory=dict)
    not_replayable: dict[str, str] = field(default_factory=dict)
    unknown: list[Finding] = field(default_factory=list)


class ReplayCheck:
    """Step 4 of the verdict: the model's requests replayed on the base commit's blobs."""

    name = NAME
    title = "Replay"
    prefixes: Mapping[str, str] = {
        "replay.": "the replay check: the model's edit requests replayed on the base files",
        "profile.": "the replay check's tool profile: a call it cannot read",
    }
    launches = False
    reads: tuple[str, ...] = ("changes",)

    def run(self, context: Context) -> CheckResult:
        state = context.fact(HeadState)
        if state is None or context.repo_path is None:
            return CheckResult(
                NAME,
                CheckStatus.SKIPPED,
                details={"reason": "the changes check established no head state to replay to"},
            )
        context.launched.wait()  # the trajectory loads the SDK: after the tests have started
        report = context.report
        name = report.doc.agent.tool_profile
        notes: tuple[str, ...] = ()
        try:
            profile = load_profile(context.config.profiles_dir, name)
        except ConfigError as exc:
            profile = Profile(name or "default")
            notes = (f"{exc}: every call is unknown",)
        calls, entries = report.trajectory.calls, report.doc.audit.entries
        budget = Budget(
            context.config.replay_max_work_bytes,
            context.config.replay_max_file_bytes,
            check_deadline(),
        )
        try:
            result = replay_session(
                context.repo_path,
                state,
                profile,
                calls,
                entries,
                report.trajectory.location,
                budget=budget,
                model=report.doc.agent.model,
                tolerant_edits=context.repo.tolerant_edits,
                workspace=report.doc.repo.path,
            )
        except InfrastructureError as exc:
            return CheckResult.error(NAME, "replay.git_failed", str(exc))
        return CheckResult(
            result.name,
            result.status,
            result.findings,
            result.details,
            notes=(*result.notes, *notes),
        )


CHECK = ReplayCheck()


def _contents_location(turn: int, part: int) -> str:
    return f"trajectory.contents.{turn}.parts.{part}"


def replay_session(
    path: Path,
    state: HeadState,
    profile: Profile,
    calls: Sequence[ToolCall],
    entries: Sequence[Mapping[str, Any]],
    location: Callable[[int, int], str] = _contents_location,
    *,
    budget: Budget | None = None,
    model: str | None = None,
    tolerant_edits: str = "note",
    workspace: str | None = None,
) -> CheckResult:
    """Steps 1 to 3 on the repository at `path`: the base's listing read while we plan.

    `location` names a call's place in the report (`Trajectory.location`);
    `budget` bounds the work (`Budget`'s defaults when None); `model` is the
    session's (a harness's matching rules may depend on it); `tolerant_edits`
    the repository's policy for what a harness applied other than asked
    (`replay`); `workspace` the harness's folder (`plan_replay`).
    """
    git = Git(path)
    with ThreadPoolExecutor(1, thread_name_prefix="ls-tree") as pool:
        listing = pool.submit(git.run, "ls-tree", "-r", "-z", "--full-tree", state.base_commit)
        plan = plan_replay(profile, calls, entries, location, workspace)
        files = _read_files(path, state, sorted(plan.steps), listing.result())
    files.model = model
    return replay(plan, files, profile.name, budget, tolerant_edits)


def succeeded(profile: Profile, call: ToolCall) -> bool:
    """Whether the harness answered `call` as a success (no response: it did not).

    An interaction's ``function_result`` may say ``is_error`` itself: then it fails.
    """
    response = call.response_object
    if response is None or call.is_error:
        return False
    return not profile.response_failed(response)


def plan_replay(
    profile: Profile,
    calls: Sequence[ToolCall],
    entries: Sequence[Mapping[str, Any]],
    location: Callable[[int, int], str] = _contents_location,
    workspace: str | None = None,
) -> Plan:
    """Steps 1 and 2: normalise the calls, and list each replayable file's steps.

    With the profile's ``absolute_paths = "workspace"``, an absolute path under
    `workspace` (the report's ``repo.path``) is the repository path below it; a
    successful call on one outside is ``replay.outside_workspace``.
    """
    effects: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        call_id = entry.get("call_id")
        if entry.get("kind") == "tool_call" and isinstance(call_id, str) and call_id not in effects:
            found = entry.get("effects")
            effects[call_id] = [e for e in found or () if isinstance(e, dict)]
    plan = Plan()
    touched: list[tuple[Action, bool, str | None, list[Mapping[str, Any]] | None]] = []
    for call in calls:
        action = profile.normalise(call)
        ok = succeeded(profile, call)
        file_action = action.kind in FILE_ACTIONS and not action.problems
        recorded = effects.get(call.call_id)
        if file_action:
            path = action.path
            if path is not None and profile.absolute_paths == "workspace":
                inside = profile.workspace_path(path, workspace)
                if inside is None and ok:
                    plan.unknown.append(_outside(profile, call, path, workspace, location))
                    continue
                path = inside
            touched.append((action, ok, path, recorded))
            continue
        where = f"call {call.call_id!r} ({call.name!r}, turn {call.turn} part {call.part})"
        if ok and (
            action.kind is ActionKind.UNKNOWN or (action.kind in FILE_ACTIONS and not file_action)
        ):
            reason = "; ".join(action.problems)
            plan.unknown.append(
                Finding(
                    "profile.unknown_call",
                    f"{where}: profile {profile.name!r} cannot verify it ({reason}), yet it was "
                    "answered as successful: what it did cannot be replayed",
                    path=location(call.turn, call.part),
                    found=call.name,
                )
            )
        for effect in recorded or ():
            path = effect.get("path")
            if isinstance(path, str):
                plan.not_replayable.setdefault(
                    path,
                    f"also changed by {where}, a {action.kind.value} action: the hashes decide",
                )
    for action, ok, path, recorded in touched:
        paths = dict.fromkeys([path] if path else [])
        paths.update((e["path"], None) for e in recorded or () if isinstance(e.get("path"), str))
        for p in paths:
            if p in plan.not_replayable:
                continue
            unsafe = unsafe_reason(p)
            if unsafe is not None:  # never opened: the changes check judges the claims
                plan.not_replayable[p] = f"not a safe path in the repository ({unsafe})"
                plan.steps.pop(p, None)
                continue
            mine: Mapping[str, Any] | None = None
            for e in recorded or ():
                if e.get("path") == p:
                    mine = e
                    break
            step = Step(action, ok and p == path, recorded is not None, mine)
            plan.steps.setdefault(p, []).append(step)
    return plan


def _outside(
    profile: Profile,
    call: ToolCall,
    path: str,
    workspace: str | None,
    location: Callable[[int, int], str],
) -> Finding:
    where = f"call {call.call_id!r} ({call.name!r}, turn {call.turn} part {call.part})"
    return Finding(
        "replay.outside_workspace",
        f"{where} was answered as successful on {path!r}, outside the workspace "
        f"{workspace!r} (the report's repo.path): profile {profile.name!r}'s harness refuses "
        "such a path, so what it wrote is not the repository's",
        path=location(call.turn, call.part),
        expected=f"a path under {workspace!r}" if workspace else "a path in the repository",
        found=path,
    )


@dataclass
class Files:
    """Each replayable file at the base (bytes, None: absent) and what the head holds.

    Commit mode: the head's blob ids (`HeadState.changed_blobs`, else the base's),
    compared with the replayed bytes' blob id, and the head's bytes read only to
    say where a file differs. Worktree mode: the SHA-256 of what git would store.
    """

    base: Mapping[str, bytes | None]
    head_oid: Mapping[str, str | None] = field(default_factory=dict)
    head_sha256: Mapping[str, str | None] = field(default_factory=dict)
    convert: Mapping[str, bool] = field(default_factory=dict)
    head_label: str = "head commit"
    read: Callable[[str], bytes] | None = None  # a blob's bytes by id
    _head: dict[str, bytes | None] = field(default_factory=dict)
    # The session's model: a harness's matching rules may depend on it (`editmatch`).
    model: str | None = None
    # What the harness applied other than the model asked, by (call id, path): kept once
    # though a file may be replayed twice (`replay_file`).
    tolerated: dict[tuple[str, str], Finding] = field(default_factory=dict)

    def at_head(self, path: str, data: bytes | None) -> bool:
        if self.read is None:
            return self.head_sha256.get(path) == _sha(data)
        return self.head_oid.get(path) == _oid(data, self.head_oid.get(path))

    def head(self, path: str) -> bytes | None:
        """The head's bytes (commit mode), read on first use: a failure's message needs them."""
        if self.read is None:
            return None
        if path not in self._head:
            oid = self.head_oid.get(path)
            self._head[path] = None if oid is None else self.read(oid)
        return self._head[path]

    def head_digest(self, path: str) -> str | None:
        return _sha(self.head(path)) if self.read is not None else self.head_sha256.get(path)


def _oid(data: bytes | None, like: str | None) -> str | None:
    """The git blob id of `data`, in the object format of `like` (SHA-1, or SHA-256)."""
    if data is None:
        return None
    digest = hashlib.sha256() if like is not None and len(like) == 64 else hashlib.sha1()
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


_LS_TREE = re.compile(rb"([0-7]+) ([a-z]+) ([0-9a-f]+)\t([^\0]*)\0")


def _read_files(path: Path, state: HeadState, paths: list[str], listing: bytes) -> Files:
    """Step 3's inputs: the base blobs, and the head's blob ids (commit) or hashes (worktree).

    `listing` is the base's ``git ls-tree -r -z --full-tree``; then one ``git
    cat-file --batch``, with the plumbing `Repository` uses (`Git`: our timeout,
    no inherited ``GIT_*``); a `Repository` is opened only for what needs one:
    the working tree, or the end-of-line attributes of a repository that has a
    ``.gitattributes``.
    """
    if not paths:
        return Files({})
    git = Git(path)
    tree = {
        p.decode("utf-8", "backslashreplace"): (mode.decode(), oid.decode())
        for mode, kind, oid, p in _LS_TREE.findall(listing)
        if kind == b"blob"
    }
    if len(tree) > listing.count(b"\0"):
        raise InfrastructureError("git ls-tree: output in an unexpected format")
    base_oid = {p: tree[p][1] for p in paths if p in tree and tree[p][0] in ("100644", "100755")}
    wanted = list(dict.fromkeys(base_oid.values()))
    blobs = dict(
        zip(
            wanted, (raw for _, raw in git.read_objects([(o, "blob") for o in wanted])), strict=True
        )
    )
    base = {p: blobs[base_oid[p]] if p in base_oid else None for p in paths}
    attributes = any(
        p == ".gitattributes" or p.endswith("/.gitattributes") for p in (*tree, *state.files)
    )
    worktree = state.head_commit is None
    repo = Repository(path) if worktree or attributes else None
    conversions: dict[str, str] = {}
    if repo is not None and attributes and not repo.bare:
        # `eol_conversions` asks git only when the set names a .gitattributes file.
        found = repo.eol_conversions({*paths, ".gitattributes"})
        conversions = {p: kind for p, kind in found.items() if p in base}
    convert = {
        p: kind == EOL_TEXT or (kind == EOL_AUTO and b"\r" not in (base[p] or b""))
        for p, kind in conversions.items()
    }
    if not worktree:
        head_oid = {
            p: state.changed_blobs.get(p) if p in state.changed else base_oid.get(p) for p in paths
        }

        def read(oid: str) -> bytes:
            return git.read_objects([(oid, "blob")])[0][1]

        return Files(base, head_oid=head_oid, convert=convert, read=read)
    assert repo is not None
    hashes: dict[str, str | None] = {}
    for p in paths:
        try:
            seen = hash_in_root(repo.root, p, conversions.get(p))
        except UnsafeFile:
            seen = None  # the changes check says what is wrong with it
        hashes[p] = None if seen is None else (seen.stored or (seen.sha256, ""))[0]
    return Files(base, head_sha256=hashes, convert=convert, head_label="working tree")


def replay(
    plan: Plan,
    files: Files,
    profile: str,
    budget: Budget | None = None,
    tolerant_edits: str = "note",
) -> CheckResult:
    """Step 3 on every replayable file; the result of the check.

    Out of `budget`, the check stops: ``replay.budget_exceeded`` names the
    budget and the file, and the session is inconclusive unless a file
    replayed before failed. What a harness applied other than the model asked
    (`Files.tolerated`: ``replay.tolerant_match``, ``replay.corrected_edit``)
    is a note and a detail with `tolerant_edits` ``note``, a failure with
    ``fail``.
    """
    budget = budget or Budget()
    findings: list[Finding] = []
    steps = 0
    for path, file_steps in list(plan.steps.items()):
        if (
            files.base.get(path) is None
            and files.at_head(path, None)
            and not any(s.effect for s in file_steps)
        ):
            # Effects and claims count only the files git sees: one it ignores (build/)
            # is written with no effect recorded, and is in no commit.
            plan.not_replayable[path] = (
                "absent at the base and the head, and no effect recorded: a file git does "
                "not see (ignored), left to the hashes"
            )
            del plan.steps[path]
            continue
        steps += len(file_steps)
        try:
            finding = replay_file(path, file_steps, files, budget)
        except BudgetExceeded as exc:
            findings.append(
                Finding(
                    "replay.budget_exceeded",
                    f"{path}: replay stopped, out of its {exc.budget} budget: {exc.detail}; "
                    "the model's requests could not all be replayed",
                    path=path,
                    found=exc.budget,
                )
            )
            break
        if finding is not None:
            findings.append(finding)
    findings.extend(plan.unknown)
    tolerated = list(files.tolerated.values())
    notes: tuple[str, ...] = ()
    if tolerant_edits == "fail":
        findings.extend(tolerated)
    else:
        notes = tuple(f"{f.code} (tolerant_edits = 'note'): {f.message}" for f in tolerated)
    details = {
        "profile": profile,
        "replayed": len(plan.steps),
        "steps": steps,
        "not_replayable": dict(sorted(plan.not_replayable.items())),
        "work_bytes": budget.spent,  # joined, split, scanned and hashed (`Budget`)
    }
    if tolerated:
        details["tolerated"] = [f.to_dict() for f in tolerated]
    if any(f.code in FAILING for f in findings):
        status = CheckStatus.FAIL
    else:
        status = CheckStatus.ERROR if findings else CheckStatus.PASS
    return CheckResult(NAME, status, tuple(findings), details, notes=notes)


class _State:
    """A file being replayed: its lines or its bytes, each made from the other when asked.

    Whole-file work (a join, a split, a hash) is paid from `budget`; a bounded
    replace edits the lines in place. `size` is kept as the file changes.
    """

    def __init__(self, data: bytes | None, budget: Budget) -> None:
        self.budget = budget
        self._data: bytes | None = data
        self._lines: list[bytes] | None = None
        self._sha: str | None = ""  # "": not computed yet
        self.size = 0 if data is None else len(data)
        budget.hold(self.size)

    @property
    def exists(self) -> bool:
        return self._data is not None or self._lines is not None

    @property
    def data(self) -> bytes | None:
        if self._data is None and self._lines is not None:
            self.budget.spend(self.size)
            self._data = b"".join(self._lines)
        return self._data

    @property
    def lines(self) -> list[bytes]:
        if self._lines is None:
            self.budget.spend(self.size)
            self._lines = split_lines(self._data or b"")
        return self._lines

    @property
    def sha(self) -> str | None:
        if self._sha == "":
            data = self.data
            self.budget.spend(self.size)
            self._sha = _sha(data)
        return self._sha

    def set(self, data: bytes | None) -> None:
        self._data, self._lines, self._sha = data, None, ""
        self.size = 0 if data is None else len(data)
        self.budget.hold(self.size)

    def edited(self, size: int) -> None:
        """The lines were edited in place; the file now holds `size` bytes."""
        self._data, self._sha, self.size = None, "", size
        self.budget.hold(size)


_UNKNOWN = "?"  # the file's hash is not known at this point


def replay_file(
    path: str, steps: Sequence[Step], files: Files, budget: Budget | None = None
) -> Finding | None:
    """Replay one file's steps; the first divergence, or None when all agrees.

    The exact pass (`_exact`) hashes the file after every recorded step: when
    that costs at most `Budget.exact_bytes` (steps x the file's size), it is
    the pass. Beyond, the quick pass (`_quick`) hashes only where it must and
    holds the effects to one another; when it finds a divergence, the exact
    pass names the first one, if the budget lets it, else the quick pass's
    finding stands.
    """
    budget = budget or Budget()
    size = len(files.base.get(path) or b"")
    if len(steps) * max(size, 1) <= budget.exact_bytes:
        return _exact(path, steps, files, budget)
    found = _quick(path, steps, files, budget)
    if found is None:
        return None
    try:
        return _exact(path, steps, files, budget) or found
    except BudgetExceeded:
        return found


def _quick(path: str, steps: Sequence[Step], files: Files, budget: Budget) -> Finding | None:
    """Replay with as few hashes as the effects allow; the first divergence seen, or None.

    `known` is the hash the file is taken to have: computed, or the last
    recorded ``sha256_after`` since the file last changed. Each effect's
    ``sha256_before`` must be it; a step that leaves the bytes as they were
    must record them unchanged; at the end the bytes must hash to the last
    effect's ``sha256_after`` and be the head's. An intermediate
    ``sha256_after`` that the next effect starts from is not hashed itself:
    what is held to the head is the end of the chain.
    """
    convert = files.convert.get(path, False)
    state = _State(files.base.get(path), budget)
    known: str | None = _UNKNOWN

    def mismatch(message: str, expected: str | None, found: Any) -> Finding:
        return Finding(
            "replay.mismatch",
            f"{path}: {message}",
            path=path,
            expected=expected or "absent",
            found=str(found or "absent"),
        )

    for step in steps:
        where = _where(step.action)
        if step.recorded and step.effect is not None and known == _UNKNOWN:
            known = state.sha
        before = known
        changed = False
        if step.applies:
            finding, changed = _apply(step.action, state, path, where, convert, files)
            if finding is not None:
                return finding
        if not step.recorded:
            known = _UNKNOWN if changed else known
            continue
        if step.effect is None:
            if changed:
                return Finding(
                    "replay.skipped",
                    f"{path}: {where} was answered as successful, but its audit entry records "
                    "no effect on the file, and the request changes it",
                    path=path,
                    expected=state.sha or "absent",
                    found="the bytes before the call",
                )
            continue
        recorded = step.effect.get("sha256_after")
        if step.effect.get("sha256_before") != before:
            return mismatch(
                f"before {where} the recorded effect starts from other bytes than the requests "
                "replayed from the base commit, and the effects before it, give",
                before,
                step.effect.get("sha256_before"),
            )
        if not changed and recorded != before:
            return mismatch(
                f"after {where} the recorded effect differs from the model's requests replayed "
                "from the base commit, which leave the file as it was",
                before,
                recorded,
            )
        if changed and (recorded is None) != (not state.exists):
            return mismatch(
                f"after {where} the recorded effect differs from the model's requests replayed "
                "from the base commit",
                state.sha,
                recorded,
            )
        known = recorded if isinstance(recorded, str) or recorded is None else _UNKNOWN
    data = state.data
    if known != _UNKNOWN and state.sha != known:
        return mismatch(
            "the last recorded effect differs from the model's requests replayed from the base "
            "commit",
            state.sha,
            known,
        )
    budget.spend(state.size)  # the head's blob id (or SHA-256) of the bytes
    if not files.at_head(path, data):
        return mismatch(
            f"the {files.head_label} differs from the model's requests replayed from the base "
            "commit",
            state.sha,
            files.head_digest(path),
        )
    return None


def _exact(path: str, steps: Sequence[Step], files: Files, budget: Budget) -> Finding | None:
    """Replay hashing before and after every recorded step; the first divergence, or None."""
    convert = files.convert.get(path, False)
    state = _State(files.base.get(path), budget)
    last: Action | None = None
    for step in steps:
        before = state.sha
        where = _where(step.action)
        if step.applies:
            finding, _ = _apply(step.action, state, path, where, convert, files)
            if finding is not None:
                return finding
            last = step.action
        if not step.recorded:
            continue  # the audit check reports the missing entry; the head still decides
        got = state.sha
        if step.effect is None:
            if got != before:
                return Finding(
                    "replay.skipped",
                    f"{path}: {where} was answered as successful, but its audit entry records "
                    "no effect on the file, and the request changes it",
                    path=path,
                    expected=got or "absent",
                    found=before or "absent",
                )
            continue
        if step.effect.get("sha256_before") != before:
            return Finding(
                "replay.mismatch",
                f"{path}: before {where} the recorded effect starts from other bytes than the "
                "requests replayed from the base commit give",
                path=path,
                expected=before or "absent",
                found=str(step.effect.get("sha256_before") or "absent"),
            )
        recorded = step.effect.get("sha256_after")
        if recorded != got:
            return _divergence(path, step.action, where, state, recorded, files, "recorded effect")
    if not files.at_head(path, state.data):
        found = files.head_digest(path)
        # Where the replay stands: after the last request applied (never "after the head
        # commit the head commit differs").
        where = "the last request" if last is None else _where(last)
        return _divergence(path, last, where, state, found, files, files.head_label)
    return None


def _divergence(
    path: str,
    action: Action | None,
    where: str,
    state: _State,
    found: Any,
    files: Files,
    against: str,
) -> Finding:
    """`replay.whole_file_write` when `found` is the replacement alone, else `replay.mismatch`."""
    if action is not None and action.kind is ActionKind.REPLACE and isinstance(found, str):
        alone = action.params.get("replacement", action.params.get("new_text"))
        if isinstance(alone, str) and _sha(_text(alone, files.convert.get(path, False))) == found:
            return Finding(
                "replay.whole_file_write",
                f"{path}: {where} asked to replace part of the file, but the {against} holds "
                "its replacement text alone: the whole file was written",
                path=path,
                expected=state.sha or "absent",
                found=found,
            )
    line = ""
    head = files.head(path)
    data = state.data
    if head is not None and data is not None and _sha(head) == found:
        line = f"; first differing line: {_first_difference(data, head)}"
    return Finding(
        "replay.mismatch",
        f"{path}: after {where} the {against} differs from the model's requests replayed "
        f"from the base commit{line}",
        path=path,
        expected=state.sha or "absent",
        found=str(found or "absent"),
    )


def _first_difference(ours: bytes, theirs: bytes) -> str:
    a, b = ours.split(b"\n"), theirs.split(b"\n")
    for n, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return f"{n} (replayed {_show(x)}, found {_show(y)})"
    n = min(len(a), len(b)) + 1
    return f"{n} ({'the replay' if len(a) > len(b) else 'the file found'} has more lines)"


def _show(line: bytes, limit: int = 60) -> str:
    text = line.decode("utf-8", "backslashreplace")
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _where(action: Action) -> str:
    call = action.call
    return f"call {call.call_id!r} ({call.name!r}, turn {call.turn} part {call.part})"


def _text(value: Any, convert: bool) -> bytes:
    data = str(value).encode("utf-8", "surrogatepass")
    return data.replace(b"\r\n", b"\n") if convert else data


def split_lines(data: bytes) -> list[bytes]:
    """The lines of `data`, each with its LF (a CRLF line keeps its CR); a lone CR ends none."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _apply(
    action: Action, state: _State, path: str, where: str, convert: bool, files: Files
) -> tuple[Finding | None, bool]:
    """Apply `action` to `state`: a finding when its request cannot apply to these bytes,
    and whether the bytes changed."""
    params = action.params
    if action.match is not None and not action.bounded:
        return _apply_matched(action, state, path, where, convert, files)
    if action.kind is ActionKind.DELETE:
        existed = state.exists
        state.set(None)
        return None, existed
    if action.kind is ActionKind.WRITE:
        content = _text(params["content"], convert)
        same = state.exists and state.size == len(content) and state.data == content
        state.set(content)
        return None, not same
    if not state.exists:
        return _mismatch_expected(path, where, "the file does not exist", "", "absent"), False
    if action.bounded:
        return _replace_lines(params, state, path, where, convert)
    old, new = _text(params["old_text"], convert), _text(params["new_text"], convert)
    data = state.data or b""
    state.budget.spend(len(data))
    count = data.count(old) if old else 0
    if count != 1:
        problem = f"the old text occurs {count} times, not once"
        return _mismatch_expected(path, where, problem, old, f"{count} occurrences"), False
    if old == new:
        return None, False
    state.budget.spend(len(data))
    state.set(data.replace(old, new, 1))
    return None, True


def _apply_matched(
    action: Action, state: _State, path: str, where: str, convert: bool, files: Files
) -> tuple[Finding | None, bool]:
    """A write or a replace by text under the harness's own rules (`editmatch`)."""
    params = action.params
    before = state.data if state.exists else None
    state.budget.spend(3 * (state.size + 1))  # decoded, matched, encoded
    if action.kind is ActionKind.WRITE:
        applied = editmatch.write_bytes(before, str(params["content"]), files.model)
    else:
        applied = editmatch.replace_bytes(
            before,
            str(params["old_text"]),
            str(params["new_text"]),
            params.get("allow_multiple") is True,
        )
    if applied.data is None:
        problem = f"gives an edit {action.match} refuses: {applied.error}"
        old = str(params.get("old_text", ""))
        return _mismatch_expected(path, where, problem, old, "refused"), False
    data = applied.data.replace(b"\r\n", b"\n") if convert else applied.data
    if applied.tolerance is not None:
        files.tolerated.setdefault(
            (action.call.call_id, path),
            Finding(
                applied.code,
                f"{path}: {where}: {applied.tolerance}",
                path=path,
                expected="the model's request applied as given",
                found=applied.strategy,
            ),
        )
    same = before == data
    state.set(data)
    return None, not same


def _replace_lines(
    params: Mapping[str, Any], state: _State, path: str, where: str, convert: bool
) -> tuple[Finding | None, bool]:
    """A bounded replace, on the lines in place: its cost is the edit's, not the file's.

    A replacement that joins a neighbour line (no LF at its end, a line after
    it; or a file whose last line has none, appended to) is split again with
    that one line: the lines are what splitting the whole new file would give.
    """
    start, end = params["start_line"], params["end_line"]
    expected = _text(params["expected"], convert)
    lines = state.lines
    if start - 1 > len(lines) or end > len(lines):
        problem = f"lines {start}..{end} are not in the file (it has {len(lines)} lines)"
        return _mismatch_expected(path, where, problem, expected, ""), False
    there = b"".join(lines[start - 1 : end])
    if there != expected:
        problem = f"the expected text is not at lines {start}..{end}"
        return _mismatch_expected(path, where, problem, expected, there), False
    replacement = _text(params["replacement"], convert)
    if replacement == there:
        return None, False
    size = state.size - len(there) + len(replacement)
    joins_next = replacement and not replacement.endswith(b"\n") and end < len(lines)
    joins_previous = start > len(lines) and lines and not lines[-1].endswith(b"\n")
    # (The profile refuses a range that ends before it starts: end >= start - 1.)
    if joins_next:
        lines[start - 1 : end + 1] = split_lines(replacement + lines[end])
        state.edited(size)
    elif joins_previous:
        lines[-1:] = split_lines(lines[-1] + replacement)
        state.edited(size)
    else:
        lines[start - 1 : end] = split_lines(replacement)
        state.edited(size)
    return None, True


def _mismatch_expected(
    path: str, where: str, problem: str, expected: bytes | str, found: bytes | str
) -> Finding:
    shown = [_show(v, 200) if isinstance(v, bytes) else v for v in (expected, found)]
    return Finding(
        "replay.expected_mismatch",
        f"{path}: {where} was answered as successful, but replayed from the base commit "
        f"{problem} (stale line numbers?)",
        path=path,
        expected=shown[0],
        found=shown[1],
    )


__all__ = [
    "CHECK",
    "NAME",
    "Budget",
    "Files",
    "Plan",
    "plan_replay",
    "replay",
    "replay_session",
    "split_lines",
    "succeeded",
]
