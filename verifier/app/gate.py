"""The merge gate: may this be merged? Which sessions are selected, and the decision on them.

`verifier gate` is `judge`, which takes these steps, each one call here:

1. `resolve_selection`: the sessions wanted, by id, by head commit (a full SHA,
   or an abbreviated one or a ref resolved in the local repository), by
   branch, or by ``BASE..HEAD`` ranges (their commits listed by ``git
   rev-list`` in the local repository, read-only); every option may be
   repeated and everything selected is judged together;
2. `StoreSource` or `ServerSource` reads the selected sessions, from the
   local store opened read-only or from a service's API, into frozen
   `GateSession` values; a source that cannot be read is `SourceUnavailable`;
3. `watch` reads them again while any is still pending, none is there yet, or
   the store does not exist yet, up to ``--wait``;
4. when nothing is selected, `knows_repository` asks the source whether it holds
   any session of this repository's recent history: a store that holds none is
   the wrong store (or a repository never verified), never a pass;
5. `decide` judges each session on its effective status (a standing override
   wins, the computed verdict stays beside it) and picks the exit code.

The gate fails closed: a store that is missing or unreadable, a server that does
not answer or answers wrongly, a store with no session of this repository are
exit 3 (undecided) with the problem said, in every format, ``--allow-empty`` or
not. ``--allow-empty`` only lets through an empty selection from a source that
holds sessions of this repository.

Nothing here formats output: `verifier.formats.gate` renders a `Decision`.
"""

from __future__ import annotations

import enum
import operator
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol
from urllib.parse import quote

from verifier.app import Notice
from verifier.config import Config, mask_url
from verifier.errors import ConfigError, InfrastructureError, SourceUnavailable, VerifierError
from verifier.findings import Finding, deciding_order, trail_note

if TYPE_CHECKING:  # SQLAlchemy and httpx load only when a source is made
    import httpx

    from verifier._internal.git import Git
    from verifier.store.gate_reads import GateReads

# Where `judge` finds the read token of a --server.
TOKEN_ENV = "VERIFIER_TOKEN"
# Exit codes of the gate (the table in docs/cli.md): 2 is a usage error, raised as one.
PASSED = 0
BLOCKED = 1
UNDECIDED = 3

INCONCLUSIVE_POLICIES = ("fail", "pass")
# A session named with --session that no store or server holds.
MISSING = "missing"
# How often `watch` reads again while sessions are pending, in seconds.
POLL_S = 1.0
# The longest one git command over the local repository may take.
GIT_TIMEOUT_S = 60.0
# Head commits (or ids) per SQL IN list, and per request to a server (a URL of about
# 2.6 kB).
COMMITS_PER_QUERY = 1000
COMMITS_PER_REQUEST = 50
PAGE = 500
# How far back `knows_repository` looks: sessions whose head is one of the last commits of
# the repository's history (from the heads selected, or HEAD) show the source holds it.
HISTORY = 1000


class Verdict(enum.StrEnum):
    """What the gate makes of a session."""

    PASS = "pass"  # delivered
    FAIL = "fail"  # not delivered, or not stored at all
    UNDECIDED = "undecided"  # inconclusive, or still pending


@dataclass(frozen=True)
class GateSelection:
    """The sessions the gate is asked about; sessions matching any part are selected."""

    session_ids: tuple[str, ...] = ()
    # Full object ids, resolved from --commit.
    commits: tuple[str, ...] = ()
    branches: tuple[str, ...] = ()
    # Each BASE..HEAD as given, and the commits git listed for them all (each once).
    rev_ranges: tuple[str, ...] = ()
    range_commits: tuple[str, ...] = ()

    @property
    def head_commits(self) -> tuple[str, ...]:
        """Every commit a selected session may have as its head, each once."""
        return tuple(dict.fromkeys((*self.commits, *self.range_commits)))

    @property
    def empty(self) -> bool:
        """True when no option selects anything (an empty range still counts as asked)."""
        return not (self.session_ids or self.commits or self.branches or self.rev_ranges)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_ids": list(self.session_ids),
            "commits": list(self.commits),
            "branches": list(self.branches),
            "rev_ranges": list(self.rev_ranges),
            "range_commits": len(self.range_commits),
        }


@dataclass(frozen=True)
class StandingOverride:
    """A person's verdict standing over the computed one; author and reason when known."""

    status: str
    author: str | None = None
    reason: str | None = None


# How many not-delivered sessions the gate reads the classification of (text shows a few).
CLASSIFIED_SESSIONS = 20
# Where a run's result keeps the tests check's classification.
CLASSIFICATION = ("checks", "tests", "details", "classification")


def classification_of(checks: object) -> dict[str, Any] | None:
    """The tests check's classification from a run's ``checks`` (stored or as the API
    answers), None when the run made none."""
    tests = checks.get("tests") if isinstance(checks, dict) else None
    details = tests.get("details") if isinstance(tests, dict) else None
    found = details.get("classification") if isinstance(details, dict) else None
    return found if isinstance(found, dict) else None


class GateSession(NamedTuple):
    """One selected session as the gate sees it, from a store or a server.

    A named tuple, not a frozen dataclass: a gate makes one per selected session, and a
    tuple is made in a fifth of the time (a thousand sessions: 3 ms of CPU less)."""

    session_id: str
    # delivered, not_delivered, inconclusive, pending, or `MISSING` (not stored).
    computed_status: str
    override: StandingOverride | None = None
    repo_name: str | None = None
    head_commit: str | None = None
    branch: str | None = None
    agent_status: str | None = None
    done: bool | None = None
    ended_at: datetime | None = None
    # The run the verdict comes from (the latest conclusive, else the latest) and its findings.
    run_id: int | None = None
    findings: tuple[Finding, ...] = ()
    # The tests check's classification against the base in that run (a differential run
    # or a task's acceptance tests), read for the sessions that did not simply pass.
    classification: dict[str, Any] | None = None
    # What the verdict rests on when the report had no trail and its repository accepts
    # that (``trail = "optional"``): the audit check's note (`verifier.findings.trail_note`).
    trail_note: str | None = None

    @property
    def effective_status(self) -> str:
        """The override when one stands, else the computed status: what the gate decides on."""
        return self.override.status if self.override is not None else self.computed_status

    @classmethod
    def missing(cls, session_id: str) -> GateSession:
        return cls(session_id=session_id, computed_status=MISSING)


class SessionDecision(NamedTuple):
    session: GateSession
    verdict: Verdict
    blocks: bool

    @property
    def status(self) -> str:
        return self.session.effective_status

    @property
    def decided_by(self) -> str:
        """``override`` when a person's verdict stands, else ``verifier``."""
        return "verifier" if self.session.override is None else "override"


@dataclass(frozen=True)
class Decision:
    """The gate's answer: every selected session judged, and the exit code."""

    sessions: tuple[SessionDecision, ...]
    selection: GateSelection
    exit_code: int
    reason: str
    inconclusive: str = "fail"
    allow_empty: bool = False
    source: str = ""
    waited_s: float | None = None
    # Why the verdicts could not be read (exit 3), when they could not.
    unavailable: str | None = None
    # The service read, when it was one (the next steps name its pages).
    server: str | None = None

    @property
    def passed(self) -> bool:
        return self.exit_code == PASSED

    @property
    def outcome(self) -> str:
        """passed, blocked (exit 1) or undecided (exit 3)."""
        return {PASSED: "passed", BLOCKED: "blocked"}.get(self.exit_code, "undecided")

    def count(self, status: str) -> int:
        return sum(1 for d in self.sessions if d.status == status)

    @property
    def overridden(self) -> int:
        return sum(1 for d in self.sessions if d.decided_by == "override")


def decide(
    sessions: Sequence[GateSession],
    selection: GateSelection,
    *,
    inconclusive: str = "fail",
    allow_empty: bool = False,
    source: str = "",
    waited_s: float | None = None,
    unavailable: str | None = None,
    server: str | None = None,
) -> Decision:
    """Judge each session on its effective status; not delivered wins over inconclusive.

    Exit 3 when the verdicts could not be read (`unavailable` says why), whatever
    else; 1 when any session is not delivered (or was named and is not stored),
    or when none is selected (0 with `allow_empty`); otherwise 3 when any is
    inconclusive or still pending, unless `inconclusive` is ``pass``; else 0.
    """
    if inconclusive not in INCONCLUSIVE_POLICIES:
        raise ConfigError(f"--inconclusive: got {inconclusive!r}, expected fail or pass")
    # Each session judged on its effective status, in one loop (a call and a property per
    # session cost more than the judging).
    judged: list[SessionDecision] = []
    for s in sessions:
        status = s.computed_status if s.override is None else s.override.status
        if status == "delivered":
            judged.append(SessionDecision(s, Verdict.PASS, False))
        elif status in ("inconclusive", "pending"):
            judged.append(SessionDecision(s, Verdict.UNDECIDED, inconclusive == "fail"))
        else:
            judged.append(SessionDecision(s, Verdict.FAIL, True))
    decisions = tuple(judged)
    failed = [d for d in decisions if d.verdict is Verdict.FAIL]
    undecided = [d for d in decisions if d.verdict is Verdict.UNDECIDED]
    n = len(decisions)
    if unavailable is not None:
        code, reason = UNDECIDED, f"the verdicts cannot be read: {unavailable}"
    elif failed:
        code, reason = BLOCKED, f"{len(failed)} of {n} {_sessions(n)} not delivered"
    elif undecided and inconclusive == "fail":
        code = UNDECIDED
        reason = f"{len(undecided)} of {n} {_sessions(n)} inconclusive or still pending"
    elif not decisions:
        code = PASSED if allow_empty else BLOCKED
        reason = "no session selected" + (" (--allow-empty)" if allow_empty else "")
    else:
        code, delivered = PASSED, n - len(undecided)
        reason = f"{delivered} of {n} {_sessions(n)} delivered"
        if undecided:
            reason += f", {len(undecided)} inconclusive or pending (--inconclusive=pass)"
    return Decision(
        sessions=decisions,
        selection=selection,
        exit_code=code,
        reason=reason,
        inconclusive=inconclusive,
        allow_empty=allow_empty,
        source=source,
        waited_s=waited_s,
        unavailable=unavailable,
        server=server,
    )


def _sessions(n: int) -> str:
    return "session" if n == 1 else "sessions"


def repository_path(finding: Finding) -> str | None:
    """The finding's path when it names a file of the repository (changes, replay, a
    tampering suspect); audit and profile findings name a place in the report instead."""
    if finding.path and (
        finding.code.startswith(("change.", "replay."))
        or finding.code == "tests.tampering_suspected"
    ):
        return finding.path
    return None


# -- 1. the selection ---------------------------------------------------------------------


def resolve_selection(
    *,
    session_ids: Sequence[str] = (),
    commits: Sequence[str] = (),
    branches: Sequence[str] = (),
    rev_ranges: Sequence[str] = (),
    repo: Path | None = None,
) -> GateSelection:
    """The selection, with --commit refs and every --rev-range resolved in `repo`.

    A full object id needs no repository; an abbreviated SHA, a ref or a range is
    read from `repo` with git, which changes nothing there. Repeated ranges select
    the commits of each (a commit in two ranges is selected once).
    """
    for name, values in (("--session", session_ids), ("--branch", branches)):
        for value in values:
            if not value.strip() or "\x00" in value:
                raise ConfigError(f"{name}: got {value!r}, expected a non-empty name")
    resolved = tuple(dict.fromkeys(_resolve_commit(c, repo) for c in commits))
    ranges = tuple(dict.fromkeys(rev_ranges))
    in_range = tuple(dict.fromkeys(c for r in ranges for c in _commits_in_range(r, repo)))
    return GateSelection(
        session_ids=tuple(dict.fromkeys(session_ids)),
        commits=resolved,
        branches=tuple(dict.fromkeys(branches)),
        rev_ranges=ranges,
        range_commits=in_range,
    )


def _git(repo: Path | None, option: str) -> Git:
    """Git in the local repository (`repo`, or the current folder), not yet known to be one:
    the commands below run first and ask `_not_a_repository` only when one fails, so a
    range of two full ids costs one git process."""
    from verifier._internal.git import Git

    where = repo if repo is not None else Path.cwd()
    if not where.is_dir():
        raise ConfigError(f"{option}: --repo {str(where)!r} is not a folder")
    return Git(where, timeout_s=GIT_TIMEOUT_S)


def _not_a_repository(git: Git, option: str) -> ConfigError | None:
    """The usage error when `git`'s folder is not in a git repository, else None."""
    if _call(git, "rev-parse", "--git-dir").returncode != 0:
        return ConfigError(
            f"{option}: {str(git.cwd)!r} is not a git repository (give --repo, or a full SHA)"
        )
    return None


def _call(git: Git, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``git args`` in the local repository; git that cannot run is a usage error here (the
    gate reads the caller's own checkout, not a session's repository)."""
    try:
        return git.call(*args)
    except InfrastructureError as exc:
        raise ConfigError(f"--repo: {exc}") from None


def _resolve_commit(ref: str, repo: Path | None, option: str = "--commit") -> str:
    from verifier._internal.git import is_object_id

    if is_object_id(ref.lower()):
        return ref.lower()
    if not ref or ref.startswith("-") or "\x00" in ref:
        raise ConfigError(f"{option}: got {ref!r}, expected a commit SHA or a ref")
    git = _git(repo, option)
    done = _call(git, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if done.returncode != 0:
        raise _not_a_repository(git, option) or ConfigError(
            f"{option}: {ref!r} does not name a commit in {str(git.cwd)!r}"
        )
    return str(done.stdout.decode().strip())


def _commits_in_range(rev_range: str, repo: Path | None) -> tuple[str, ...]:
    base, dots, head = rev_range.partition("..")
    if not dots or not base or not head or head.startswith("."):
        raise ConfigError(
            f"--rev-range: got {rev_range!r}, expected BASE..HEAD (two commits or refs)"
        )
    base_id = _resolve_commit(base, repo, "--rev-range")
    head_id = _resolve_commit(head, repo, "--rev-range")
    git = _git(repo, "--rev-range")
    # Both ends are object ids now: git reads nothing from the caller's text. Each must
    # be a commit (`^{commit}`: rev-list takes a tree or a blob as an end without a word);
    # when the listing fails, the ends are looked at one by one to say which is wrong.
    listed = _call(git, "rev-list", f"{base_id}^{{commit}}..{head_id}^{{commit}}", "--")
    if listed.returncode == 0:
        return tuple(listed.stdout.decode().split())
    not_one = _not_a_repository(git, "--rev-range")
    if not_one is not None:
        raise not_one
    for end, object_id in ((base, base_id), (head, head_id)):
        if _call(git, "cat-file", "-e", f"{object_id}^{{commit}}").returncode != 0:
            raise ConfigError(f"--rev-range: {end!r} is not a commit in {str(git.cwd)!r}")
    problem = listed.stderr.decode("utf-8", "replace").strip()
    raise ConfigError(f"--rev-range: git rev-list {rev_range} failed: {problem}")


def recent_history(selection: GateSelection, repo: Path | None) -> tuple[str, ...] | None:
    """The last `HISTORY` commits of the repository's history: from the heads selected, or
    from HEAD of `repo`; None when there is no git repository there to read."""
    from verifier._internal.git import Git

    where = repo if repo is not None else Path.cwd()
    if not where.is_dir():
        return None
    git = Git(where, timeout_s=GIT_TIMEOUT_S)
    starts = selection.head_commits or ("HEAD",)
    try:
        # A selected commit this checkout does not have is passed over, not an error.
        listed = git.call("rev-list", "--ignore-missing", f"--max-count={HISTORY}", *starts, "--")
    except InfrastructureError:
        return None
    if listed.returncode != 0:
        return None
    return tuple(listed.stdout.decode().split())


# -- 2. the sources -------------------------------------------------------------------------


class StoreSource:
    """The selected sessions from the store at `url`, opened read-only once it exists.

    A store not there yet holds nothing (`absent` says why; `notice` hears it once);
    a store that cannot be read (not a database, not migrated, not reachable) is
    `SourceUnavailable`. Read with `verifier.store.gate_reads` (text SQL on the
    driver's cursor), which gives what the `Store`'s queries give.
    """

    def __init__(self, url: str, notice: Notice | None = None) -> None:
        self.url = url
        self.description = f"store {mask_url(url)}"
        self.absent: str | None = None
        self._notice = notice
        self._reads: GateReads | None = None

    def close(self) -> None:
        if self._reads is not None:
            self._reads.close()
            self._reads = None

    def _opened(self) -> GateReads | None:
        from verifier.store import NoStore
        from verifier.store.gate_reads import GateReads

        if self._reads is None:
            try:
                self._reads = GateReads.open(self.url)
            except NoStore as exc:
                if self.absent is None and self._notice is not None:
                    self._notice(f"{exc}: looking again while waiting")
                self.absent = str(exc)
                return None
            except VerifierError as exc:
                raise self._unreadable(exc) from None
            self.absent = None
        return self._reads

    def _unreadable(self, exc: VerifierError) -> SourceUnavailable:
        return SourceUnavailable(f"the {self.description} cannot be read: {exc}")

    def read(self, selection: GateSelection) -> list[GateSession]:
        """The selected sessions (none while the store does not exist)."""
        reads = self._opened()
        if reads is None:
            return []
        try:
            return self._read(reads, selection)
        except SourceUnavailable:
            raise
        except VerifierError as exc:
            raise self._unreadable(exc) from None

    def _read(self, reads: GateReads, selection: GateSelection) -> list[GateSession]:
        """Their rows in one query per 1,000 ids or commits, with their findings and the
        audit result of those verified without a trail (for its note); then the author and
        reason of the overrides that stand, and the classification of the few a person is
        shown."""
        rows = reads.gate_lines(
            session_ids=selection.session_ids,
            head_commits=selection.head_commits,
            branches=selection.branches,
            per_query=COMMITS_PER_QUERY,
        )
        # A row: `verifier.store.gate_reads.GATE_LINE`.
        overridden = reads.last_overrides([row[0] for row in rows.values() if row[2] is not None])
        # The classification is in the run's result, read only for the sessions that ended
        # last of those not delivered (a person is shown a few): the decision never needs it.
        unclear = sorted(
            (row for row in rows.values() if row[9] is not None and row[1] != "delivered"),
            key=lambda row: (row[8], row[0]),
            reverse=True,
        )[:CLASSIFIED_SESSIONS]
        classified = reads.result_values([row[9] for row in unclear], CLASSIFICATION)
        found: dict[str, GateSession] = {}
        make, nothing = GateSession._make, (None, None)
        for sid, row in rows.items():
            run, override, audit = row[9], row[2], row[11]
            if override is None and audit is None and run not in classified:
                # Nearly every session: its line is the session's first eleven fields.
                found[sid] = make(row[:11] + nothing)
                continue
            found[sid] = GateSession(
                sid,
                row[1],
                None
                if override is None
                else StandingOverride(override, *overridden.get(sid, (None, None))),
                row[3],  # repo_name
                row[4],  # head_commit
                row[5],  # branch
                row[6],  # agent_status
                row[7],  # done
                row[8],  # ended_at
                run,
                row[10],  # findings
                None if run is None else _mapping(classified.get(run)),
                None if audit is None else trail_note({"audit": audit}),
            )
        return _complete(found, selection)

    def knows_repository(self, history: Sequence[str]) -> bool:
        """Whether any stored session has one of `history`'s commits as its head."""
        reads = self._opened()
        if reads is None:
            return False
        try:
            return reads.holds_any(history, COMMITS_PER_QUERY)
        except VerifierError as exc:
            raise self._unreadable(exc) from None


def _mapping(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _complete(found: dict[str, GateSession], selection: GateSelection) -> list[GateSession]:
    """The sessions found, oldest ended first, and each named session not found as missing."""
    for session_id in selection.session_ids:
        found.setdefault(session_id, GateSession.missing(session_id))
    # Those with an end by it, then those without (the missing) by id: keys read in C.
    ended = [s for s in found.values() if s.ended_at is not None]
    ended.sort(key=_BY_END)
    unended = sorted((s for s in found.values() if s.ended_at is None), key=_BY_ID)
    return ended + unended


_BY_END = operator.attrgetter("ended_at", "session_id")
_BY_ID = operator.attrgetter("session_id")


class ServerSource:
    """The selected sessions from a verifier service, read with a token of the read scope.

    A server that cannot be reached, refuses the token, or answers something that
    is not the API's raises `SourceUnavailable` naming the problem (the gate exits 3);
    a URL that is not one, or an empty token, is a `ConfigError` (a usage error, 2).
    """

    def __init__(self, url: str, token: str, client: httpx.Client | None = None) -> None:
        import httpx

        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"--server: got {url!r}, expected an http:// or https:// URL")
        if not token.strip():
            raise ConfigError("VERIFIER_TOKEN is empty: give the server's read token there")
        self.url = url.rstrip("/")
        self.description = f"server {self.url}"
        self.absent: str | None = None
        self._client = client or httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token.strip()}"},
            timeout=httpx.Timeout(30.0, connect=10.0),
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def read(self, selection: GateSelection) -> list[GateSession]:
        found: dict[str, GateSession] = {}
        details: set[str] = set()
        for session_id in selection.session_ids:
            body = self._get(f"/v1/sessions/{quote(session_id, safe='')}", missing_ok=True)
            if body is not None:
                found[session_id] = session_from_api(body, with_findings=True)
                details.add(session_id)
        commits = selection.head_commits
        for i in range(0, len(commits), COMMITS_PER_REQUEST):
            chunk = commits[i : i + COMMITS_PER_REQUEST]
            self._list(found, [("head_commit", c) for c in chunk])
        for branch in selection.branches:
            self._list(found, [("branch", branch)])
        for session_id, session in list(found.items()):
            # Findings come with a session's page: only those that may be shown are read.
            if session_id not in details and (
                session.computed_status in ("not_delivered", "inconclusive")
                or session.override is not None
            ):
                body = self._get(f"/v1/sessions/{quote(session_id, safe='')}")
                if body is not None:
                    found[session_id] = session_from_api(body, with_findings=True)
        return _complete(found, selection)

    def knows_repository(self, history: Sequence[str]) -> bool:
        """Whether the service holds any session whose head is one of `history`'s commits."""
        for i in range(0, len(history), COMMITS_PER_REQUEST):
            params = [("head_commit", c) for c in history[i : i + COMMITS_PER_REQUEST]]
            body = self._get("/v1/sessions", params=[*params, ("limit", "1")])
            assert body is not None
            sessions = body.get("sessions")
            if not isinstance(sessions, list):
                raise self._strange("/v1/sessions", "no list of sessions")
            if sessions:
                return True
        return False

    def _list(self, found: dict[str, GateSession], params: list[tuple[str, str]]) -> None:
        cursor: str | None = None
        while True:
            query = [*params, ("limit", str(PAGE))]
            if cursor is not None:
                query.append(("cursor", cursor))
            body = self._get("/v1/sessions", params=query)
            assert body is not None
            sessions = body.get("sessions")
            if not isinstance(sessions, list):
                raise self._strange("/v1/sessions", "no list of sessions")
            for item in sessions:
                session = session_from_api(item, with_findings=False)
                found.setdefault(session.session_id, session)
            cursor = body.get("next_cursor")
            if not cursor:
                return

    def _get(
        self,
        path: str,
        *,
        params: list[tuple[str, str]] | None = None,
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        import httpx

        try:
            response = self._client.get(
                path, params=None if params is None else httpx.QueryParams(tuple(params))
            )
        except httpx.HTTPError as exc:
            raise SourceUnavailable(
                f"--server: {self.url} cannot be reached ({type(exc).__name__}: {exc})"
            ) from None
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code in (401, 403):
            what = "refused" if response.status_code == 401 else "lacks the read scope for"
            raise SourceUnavailable(
                f"VERIFIER_TOKEN: the server {self.url} {what} this token "
                f"({response.status_code}: {_problem(response)})"
            )
        if response.status_code != 200:
            raise SourceUnavailable(
                f"--server: {self.url} answered {response.status_code} to GET {path}: "
                f"{_problem(response)}"
            )
        try:
            body = response.json()
        except ValueError:
            raise self._strange(path, "a body that is not JSON") from None
        if not isinstance(body, dict):
            raise self._strange(path, "a body that is not an object")
        return body

    def _strange(self, path: str, what: str) -> SourceUnavailable:
        return SourceUnavailable(
            f"--server: {self.url} answered GET {path} with {what}: is it a verifier service?"
        )


def _problem(response: httpx.Response) -> str:
    try:
        error = response.json()["error"]
        return f"{error['code']}: {error['problem']}"
    except (ValueError, KeyError, TypeError):
        return response.text[:200] or response.reason_phrase


def session_from_api(body: dict[str, Any], *, with_findings: bool) -> GateSession:
    """A session from the API's summary or detail; keys it does not know are ignored.

    A standing override is ``override_status``; a detail's ``overrides`` (oldest
    first) gives its author and reason. A server without overrides has neither key.
    """
    try:
        repo = body.get("repo") or {}
        override_status = body.get("override_status")
        override = None
        if override_status:
            history = body.get("overrides") or []
            last = history[-1] if history and isinstance(history[-1], dict) else {}
            said = last.get("status") == override_status
            override = StandingOverride(
                str(override_status),
                last.get("author") if said else None,
                last.get("reason") if said else None,
            )
        findings: list[Finding] = []
        if with_findings:
            # The deciding finding first, as the store gives them (`deciding_order`).
            findings = deciding_order(
                (
                    str(check.get("status", "")),
                    [
                        Finding(
                            str(item["code"]),
                            str(item.get("message", "")),
                            item.get("path"),
                            item.get("expected"),
                            item.get("found"),
                        )
                        for item in check.get("findings", [])
                    ],
                )
                for check in (body.get("checks") or {}).values()
            )
        ended = body.get("ended_at")
        run_id = body.get("verdict_run_id") or body.get("latest_run_id")
        checks = body.get("checks") if with_findings else None
        note = body.get("trail_note")
        return GateSession(
            session_id=str(body["session_id"]),
            computed_status=str(body["delivery_status"]),
            override=override,
            repo_name=repo.get("name"),
            head_commit=repo.get("head_commit"),
            branch=repo.get("branch"),
            agent_status=body.get("agent_status"),
            done=body.get("done"),
            ended_at=None if not ended else datetime.fromisoformat(str(ended)),
            run_id=run_id if isinstance(run_id, int) else None,
            findings=tuple(findings),
            classification=classification_of(checks),
            # the API's summary says it (since it has the field); an older server's checks
            trail_note=note if isinstance(note, str) else trail_note(checks),
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise SourceUnavailable(
            f"--server: a session in the answer is not the API's shape ({type(exc).__name__}: "
            f"{exc})"
        ) from None


# -- 3. waiting -----------------------------------------------------------------------------

WAITED_FOR = ("pending", MISSING)


@dataclass(frozen=True)
class Watched:
    sessions: list[GateSession] = field(default_factory=list)
    waited_s: float = 0.0


def watch(
    read: Callable[[], list[GateSession]],
    wait_s: float,
    *,
    progress: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = POLL_S,
) -> Watched:
    """Read the sessions, and again every `poll_s` while any is pending (or named and not
    stored yet) or none is there at all (its report may not be posted yet), for at most
    `wait_s` seconds; the last reading is returned."""
    start = clock()
    while True:
        sessions = read()
        waiting = [s.session_id for s in sessions if s.effective_status in WAITED_FOR]
        elapsed = clock() - start
        if (sessions and not waiting) or elapsed >= wait_s:
            return Watched(sessions, elapsed)
        if progress is not None:
            if not sessions:
                progress(f"waiting for a session to be posted: {elapsed:.0f}s of {wait_s:g}s")
            else:
                shown = ", ".join(waiting[:5]) + (
                    f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
                )
                progress(
                    f"waiting for {len(waiting)} of {len(sessions)} {_sessions(len(sessions))} "
                    f"still pending ({shown}): {elapsed:.0f}s of {wait_s:g}s"
                )
        sleep(min(poll_s, max(wait_s - elapsed, 0.0)))


# -- 4. is it the right source? --------------------------------------------------------------


class Source(Protocol):
    description: str
    # Why there is nothing to read yet (a store not created), or None.
    absent: str | None

    def read(self, selection: GateSelection) -> list[GateSession]: ...

    def knows_repository(self, history: Sequence[str]) -> bool: ...


def unknown_repository(
    source: Source, selection: GateSelection, repo: Path | None, *, allow_empty: bool
) -> str | None:
    """Why an empty selection cannot be judged, or None when it can (exit 1, or 0 with
    `allow_empty`): the source holds no session of this repository's recent history, so
    it is the wrong store, or the repository was never verified into it."""
    history = recent_history(selection, repo)
    where = str(repo if repo is not None else Path.cwd())
    if history is None:
        if allow_empty:
            raise ConfigError(
                f"--allow-empty: {where!r} is not a git repository, so the gate cannot tell "
                "whether the sessions of this repository are there (give --repo)"
            )
        return None
    if source.knows_repository(history):
        return None
    return (
        f"the {source.description} holds no session of the repository at {where!r} (none "
        f"whose head is one of its last {len(history)} commits): it is not where the "
        "verifier records this repository's sessions, or none was ever posted"
    )


# -- the command ----------------------------------------------------------------------------


def judge(
    config: Callable[[], Config],
    *,
    session_ids: Sequence[str] = (),
    commits: Sequence[str] = (),
    branches: Sequence[str] = (),
    rev_ranges: Sequence[str] = (),
    repo: Path | None = None,
    server: str | None = None,
    token: str | None = None,
    wait_s: float = 0.0,
    inconclusive: str = "fail",
    allow_empty: bool = False,
    progress: Callable[[str], None] | None = None,
    notice: Notice | None = None,
) -> Decision:
    """May this be merged? The steps of this module's docstring, one call each.

    The sessions are read from `server` (with the read `token`, from
    ``$VERIFIER_TOKEN``) or else from the configured store, opened read-only; a
    store that does not exist is looked for again while waiting, then is exit 3.
    `config` is called only to read the store: a gate that reads a server needs no
    configuration.
    """
    selection = resolve_selection(
        session_ids=session_ids,
        commits=commits,
        branches=branches,
        rev_ranges=rev_ranges,
        repo=repo,
    )
    if server is not None:
        if token is None:
            raise ConfigError(f"--server: ${TOKEN_ENV} is not set: put the read token there")
        source = ServerSource(server, token)
        try:
            watched, unavailable = _gather(source, selection, repo, wait_s, progress, allow_empty)
        finally:
            source.close()
        described = source.description
    else:
        watched, unavailable, described = _from_store(
            config(), selection, repo, wait_s, progress, notice, allow_empty
        )
    return decide(
        watched.sessions,
        selection,
        inconclusive=inconclusive,
        allow_empty=allow_empty,
        source=described,
        waited_s=watched.waited_s if wait_s else None,
        unavailable=unavailable,
        server=None if server is None else server.rstrip("/"),
    )


def _gather(
    source: Source,
    selection: GateSelection,
    repo: Path | None,
    wait_s: float,
    progress: Callable[[str], None] | None,
    allow_empty: bool,
) -> tuple[Watched, str | None]:
    """The sessions read (waiting as `watch` does), and why they cannot be judged, if so."""
    try:
        watched = watch(lambda: source.read(selection), wait_s, progress=progress)
        if watched.sessions or source.absent is not None:
            return watched, None
        return watched, unknown_repository(source, selection, repo, allow_empty=allow_empty)
    except SourceUnavailable as exc:
        return Watched(), str(exc)


def _from_store(
    config: Config,
    selection: GateSelection,
    repo: Path | None,
    wait_s: float,
    progress: Callable[[str], None] | None,
    notice: Notice | None,
    allow_empty: bool,
) -> tuple[Watched, str | None, str]:
    """The selected sessions from the configured store; a store still absent after the
    wait is a store the verifier does not record into: the verdicts cannot be read."""
    source = StoreSource(config.database_url, notice if wait_s else None)
    try:
        watched, unavailable = _gather(source, selection, repo, wait_s, progress, allow_empty)
        if source.absent is not None:
            unavailable = (
                f"{source.absent}: is this the configuration the verifier records into "
                "(--config, $VERIFIER_CONFIG, $VERIFIER_DATABASE_URL)?"
            )
        return watched, unavailable, source.description
    finally:
        source.close()
