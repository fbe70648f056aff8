"""The changes check: every claimed file change is in the repository, and nothing else.

Steps of `check`:

1. open the repository (a work tree, or a bare repository in commit mode:
   worktree mode on a bare one is inconclusive) and resolve the base commit
   (missing: inconclusive),
   which must be the tip of the configured ``trusted_ref``, if any, or an
   ancestor at most ``trusted_max_behind`` commits behind it, the ref read in
   ``trusted_mirror`` (required in worktree mode); and,
   in commit mode, the head commit (missing: the work was never committed);
2. vet every claim: a safe relative path, an action that agrees with its hashes,
   no path claimed twice, no protected path;
3. list what git sees as changed from base to head (commit mode: the two trees;
   worktree mode: tracked changes plus untracked files that are not ignored),
   and, in commit mode, refuse what git's ``fsck --strict`` would: the trees
   of head (duplicate or unsorted entries, ``.git``-like names...) and the
   commits along base..head (`change.tree_invalid`, `change.commit_invalid`);
4. hash each safe claim's bytes (as git stores them: see `Repository`) at
   base and at head, and compare with the claimed ``sha256_before`` /
   ``sha256_after``, and its modes with ``mode_before`` / ``mode_after`` when
   the claim gives them (`change.mode_mismatch`);
5. every changed path must be claimed, otherwise ``change.undeclared``.

A `BlobDigestCache` (blob id -> SHA-256) may be passed: git blob ids are
content addresses, so a digest cached once holds for every repository, and a
re-verified session, or one on a base already seen, reads only new blobs.
Only full object ids of our own ``git ls-tree`` output reach the cache.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from audit.findings import Finding
from verifier._internal.git import BlobDigestCache, MemoryDigestCache
from verifier._internal.paths import (
    UnsafeFile,
    glob_matches,
    hash_in_root,
    unicode_variant,
    unsafe_reason,
)
from verifier._internal.repository import History, Repository, TreeEntry, changed_between
from verifier.checks.base import Context, HeadState, object_corrupt
from verifier.config import RepositoryConfig
from verifier.contract.report import ClaimedChange
from verifier.errors import InfrastructureError, ObjectCorrupt
from verifier.findings import CheckResult, CheckStatus

__all__ = ["NAME", "BlobDigestCache", "MemoryDigestCache", "check"]

NAME = "changes"
ABSENT = "absent"


@dataclass(frozen=True)
class Side:
    """One side of the comparison: a commit's tree, or the working tree."""

    label: str
    tree: dict[str, TreeEntry] | None  # None: the working tree
    repo: Repository
    # SHA-256 of the claimed blobs of `tree`, by blob sha (`Repository.blob_sha256s`).
    digests: Mapping[str, str] = field(default_factory=dict)
    # The working tree's files that git sees (tracked, or untracked and not ignored).
    visible: set[str] = field(default_factory=set)

    def sha256(self, path: str) -> tuple[str | None, Finding | None]:
        """The file's SHA-256 (None when absent), or a finding when it cannot be a file."""
        if self.tree is None:
            if path in self.repo.worktree_sha256:  # a regular file git sees, hashed already
                return self.repo.worktree_sha256[path], None
            try:
                hashes = hash_in_root(self.repo.root, path)
            except UnsafeFile as exc:
                return None, Finding(
                    exc.code, f"{path}: {exc.reason} in the working tree", path=path
                )
            if hashes is not None and path not in self.visible:
                return None, Finding(
                    "change.ignored",
                    f"{path}: git ignores this file in the working tree, so it is not "
                    "part of the repository's work",
                    path=path,
                )
            return (None if hashes is None else hashes.sha256), None
        entry = self.tree.get(path)
        if entry is None:
            return None, None
        if entry.is_link:
            return None, Finding(
                "change.symlink", f"{path}: is a symbolic link in the {self.label}", path=path
            )
        if not entry.is_file:
            return None, Finding(
                "change.not_a_file", f"{path}: is not a regular file in the {self.label}", path=path
            )
        return self.digests[entry.sha], None

    def mode(self, path: str) -> str | None:
        """The git mode of `path` on this side (``100644``...), None when it is not there."""
        if self.tree is None:
            state = self.repo.worktree_state.get(path)
            return None if state is None else state.partition(" ")[0]
        entry = self.tree.get(path)
        return None if entry is None else entry.mode

    def paths(self) -> set[str]:
        if self.tree is not None:
            return set(self.tree)
        return self.visible


class ChangesCheck:
    """Step 1 of the verdict: the claims against the repository."""

    name = NAME
    title = "Changes"
    prefixes: Mapping[str, str] = {
        "change.": "the changes check: claimed file changes against the git repository",
    }
    launches = False
    reads: tuple[str, ...] = ()

    def run(self, context: Context) -> CheckResult:
        doc = context.report.doc
        if context.repo_path is None and context.repo_problem is not None:
            return CheckResult.error(NAME, "change.fetch_failed", context.repo_problem)
        if context.repo_path is None:
            return CheckResult.error(
                NAME,
                "change.repo_unavailable",
                f"no repository for {doc.repo.name!r}: pass --repo or set "
                f"repositories.{doc.repo.name}.path (or .url) in the configuration",
            )
        result = check(
            context.repo_path,
            doc.repo.base_commit,
            doc.repo.head_commit,
            doc.changes,
            context.repo,
            cache=context.digest_cache,
        )
        read_only = context.task is not None and context.task.read_only
        if context.report.done and not read_only and _empty(result):
            return replace(result, status=CheckStatus.FAIL, findings=(*result.findings, EMPTY))
        return result


EMPTY = Finding(
    "change.empty_session",
    "the agent said done, but the session changed nothing: no claimed change, and the "
    "head is the base's tree; an empty session delivers nothing unless its task is "
    "declared read-only",
    expected="a change, or a task declared read-only",
    found="no change between base and head",
)


def _empty(result: CheckResult) -> bool:
    """Whether the check compared base and head and found neither a claim nor a change."""
    details = result.details
    return (
        result.status is not CheckStatus.ERROR
        and details.get("claimed") == 0
        and details.get("changed") == 0
    )


CHECK = ChangesCheck()


def check(
    repo_path: Path,
    base_commit: str,
    head_commit: str | None,
    claims: Sequence[ClaimedChange],
    repo_config: RepositoryConfig,
    *,
    cache: BlobDigestCache | None = None,
) -> CheckResult:
    """Hold the claimed changes against the repository; `cache` spares re-reading blobs."""
    # 1. Open the repository and resolve the commits.
    try:
        repo = Repository(repo_path, resolve=(base_commit, head_commit))
    except InfrastructureError as exc:
        return CheckResult.error(NAME, "change.repo_unavailable", str(exc))
    with repo:
        try:
            return _check(repo, base_commit, head_commit, claims, repo_config, cache)
        except ObjectCorrupt as exc:  # the store serves other bytes under an id: a failure
            return object_corrupt(NAME, exc)
        except InfrastructureError as exc:  # git failed or timed out half-way
            return CheckResult.error(NAME, "change.git_failed", str(exc))


def _check(
    repo: Repository,
    base_commit: str,
    head_commit: str | None,
    claims: Sequence[ClaimedChange],
    repo_config: RepositoryConfig,
    cache: BlobDigestCache | None,
) -> CheckResult:
    """Steps 1 to 5 on an open repository."""
    if head_commit is None and repo.bare:
        # Uncommitted work lives in a working tree; a bare repository (a mirror) has none.
        return CheckResult.error(
            NAME,
            "change.repo_unavailable",
            f"{str(repo.root)!r} is a bare repository: it holds commits but no working "
            "tree, and the report has no head_commit (worktree mode); verify this "
            "session against the repository the agent worked in",
        )
    base, head = repo.resolve_commits(base_commit, head_commit)
    if base is None:
        return CheckResult.error(
            NAME,
            "change.base_missing",
            f"base commit {base_commit} is not in {str(repo.root)!r}; "
            "fetch it or point --repo at the right repository",
        )
    if repo_config.trusted_ref is not None:
        untrusted = _untrusted_base(repo, base, repo_config, worktree=head_commit is None)
        if untrusted is not None:
            return untrusted
    if head_commit is not None and head is None:
        finding = Finding(
            "change.head_missing",
            f"head commit {head_commit} does not exist in the repository",
            expected=head_commit,
            found=ABSENT,
        )
        return CheckResult.from_findings(NAME, [finding], {"mode": "commit"})
    return _compare(repo, base, head, claims, repo_config, cache)


def _untrusted_base(
    repo: Repository, base: str, config: RepositoryConfig, *, worktree: bool
) -> CheckResult | None:
    """A result when the base is not one the trusted ref vouches for, else None.

    The rule: the base is the tip of ``trusted_ref`` or in its history, at most
    ``trusted_max_behind`` commits behind the tip (``git rev-list --count
    base..tip``). Without it a report could name as its base a commit of its
    own making (tests weakened, say), or an old one from before the tests
    existed. The ref is read in ``trusted_mirror`` when one is configured;
    otherwise in the repository itself, which in worktree mode the agent could
    have rewritten (it may move the ref): then the ref cannot be trusted and the
    check cannot decide.
    """
    ref = config.trusted_ref
    assert ref is not None
    if config.trusted_mirror is not None:
        history = History.mirror(config.trusted_mirror)
        where = f"the mirror {str(config.trusted_mirror)!r}"
    elif worktree:
        return CheckResult.error(
            NAME,
            "change.trusted_ref_untrustworthy",
            f"trusted_ref {ref!r} would be read in the working tree's own repository, which "
            "the session could write (it may move the ref): configure trusted_mirror, a "
            "repository the agent cannot write, to verify uncommitted work against it",
        )
    else:
        history, where = repo.history, "the repository"
    trusted = history.resolve_ref(ref)
    if trusted is None:
        return CheckResult.error(
            NAME,
            "change.trusted_ref_missing",
            f"the trusted ref {ref!r} of the configuration is not in {where}",
        )
    limit = config.trusted_max_behind
    expected = f"the tip of {ref} ({trusted}) or an ancestor at most {limit} commits behind it"
    if not history.has_commit(base) or not history.is_ancestor(base, trusted):
        finding = Finding(
            "change.base_untrusted",
            f"the base commit {base} is not in the history of {ref} in {where}",
            expected=expected,
            found=base,
        )
        return CheckResult.from_findings(NAME, [finding], {"trusted_ref": ref})
    behind = history.behind(base, trusted, limit)
    if behind > limit:
        finding = Finding(
            "change.base_untrusted",
            f"the base commit {base} is more than {limit} commits behind {ref} "
            "(trusted_max_behind)",
            expected=expected,
            found=f"{base}, more than {limit} commits behind",
        )
        return CheckResult.from_findings(NAME, [finding], {"trusted_ref": ref})
    return None


def _compare(
    repo: Repository,
    base: str,
    head: str | None,
    claims: Sequence[ClaimedChange],
    repo_config: RepositoryConfig,
    cache: BlobDigestCache | None,
) -> CheckResult:
    findings: list[Finding] = []
    # 2. Vet every claim before touching a file.
    safe: list[ClaimedChange] = []
    seen: set[str] = set()
    for claim in claims:
        reason = unsafe_reason(claim.path)
        if reason is not None:
            findings.append(
                Finding("change.path_unsafe", f"{claim.path!r}: {reason}", path=claim.path)
            )
            continue
        if claim.path in seen:
            findings.append(
                Finding("change.duplicate_claim", f"{claim.path}: claimed twice", path=claim.path)
            )
            continue
        seen.add(claim.path)
        findings.extend(_action_findings(claim))
        for pattern in repo_config.protected_paths:
            if glob_matches(pattern, claim.path):
                findings.append(
                    Finding(
                        "change.protected_path",
                        f"{claim.path}: matches protected pattern {pattern!r}",
                        path=claim.path,
                        expected=f"no change under {pattern}",
                    )
                )
        safe.append(claim)

    # 3. What git sees as changed from base to head.
    visible: set[str] = set()
    head_tree: dict[str, TreeEntry] | None
    if head is None:
        base_tree, head_tree = repo.tree(base), None
        visible = repo.worktree_paths()
        changed = repo.changed_in_worktree(base_tree, visible)
    else:
        base_tree, head_tree = repo.trees(base, head, since=base)
        changed = changed_between(base_tree, head_tree)

    with ThreadPoolExecutor(1, thread_name_prefix="objects") as pool:
        # The objects are read by their own git while the claims are hashed: the waits overlap.
        objects = pool.submit(_object_findings, repo, base, head)

        # 4. Hash each claim at base and head; every claimed blob is read in one batch.
        paths = [claim.path for claim in safe]
        try:
            digests = repo.blob_sha256s(
                list(_file_blobs(base_tree, paths)),
                list(_file_blobs(head_tree, paths)),
                cache=cache,
            )
        except ObjectCorrupt as exc:
            raise exc.at(_path_of(exc.oid, paths, base_tree, head_tree)) from None
        base_side = Side("base commit", base_tree, repo, digests)
        if head_tree is None:
            head_side = Side("working tree", None, repo, visible=visible)
        else:
            head_side = Side("head commit", head_tree, repo, digests)
        for claim in safe:
            findings.extend(_hash_findings(claim, base_side, head_side))
        findings.extend(objects.result())

    # 5. Every change must be claimed.
    for path in sorted(changed - seen):
        findings.append(
            Finding(
                "change.undeclared",
                f"{path}: changed between base and head but not claimed",
                path=path,
            )
        )
        if unsafe_reason(path) is None:
            protected = [p for p in repo_config.protected_paths if glob_matches(p, path)]
            findings.extend(
                Finding(
                    "change.protected_path",
                    f"{path}: matches protected pattern {p!r}",
                    path=path,
                    expected=f"no change under {p}",
                )
                for p in protected
            )
    details = {
        "mode": "worktree" if head is None else "commit",
        "base_commit": base,
        "head_commit": head,
        "claimed": len(claims),
        "changed": len(changed),
    }
    notes: tuple[str, ...] = ()
    if repo_config.on_change == "note":  # protected paths reported, not failed
        notes = tuple(f.message for f in findings if f.code == "change.protected_path")
        findings = [f for f in findings if f.code != "change.protected_path"]
    result = replace(CheckResult.from_findings(NAME, findings, details), notes=notes)
    mode = "worktree" if head is None else "commit"
    at_head = head_tree or {}
    blobs = {p: at_head[p].sha for p in changed if p in at_head and at_head[p].is_file}
    before = {p: base_tree[p].sha for p in changed if p in base_tree and base_tree[p].is_file}
    state = HeadState(
        mode, base, head, dict(repo.worktree_state), tuple(sorted(changed)), blobs, before
    )
    return replace(result, facts=(state,))


def _path_of(oid: str, paths: Sequence[str], *trees: Mapping[str, TreeEntry] | None) -> str:
    """The first of `paths` that names the blob `oid` in one of `trees` ("" if none)."""
    for tree in trees:
        for path in paths:
            entry = (tree or {}).get(path)
            if entry is not None and entry.sha == oid:
                return path
    return ""


def _object_findings(repo: Repository, base: str, head: str | None) -> list[Finding]:
    """A finding for each tree or commit git's ``fsck --strict`` would flag (commit mode).

    A tree listing ``calc.py`` twice is read one way here (the last entry) and
    another way by a checkout (the first): what we hash must be what is tested.
    Worktree mode tests the files on disk, which no tree describes. First, the
    base's commit and trees are read and checked against their ids
    (`Repository.verify_trees`; `ObjectCorrupt` when one is not what its id
    names): the tests take the base's test files from them.
    """
    repo.verify_trees(base)
    if head is None:
        return []
    findings: list[Finding] = []
    for problem in repo.object_problems(head):
        if problem.kind == "tree":
            where = f"folder {problem.path!r}" if problem.path else "the root folder"
            findings.append(
                Finding(
                    "change.tree_invalid",
                    f"{where} (tree {problem.oid}): git would refuse it: {problem.message}",
                    path=problem.path or None,
                    expected="a tree git accepts (git fsck --strict)",
                    found=problem.message,
                )
            )
        else:
            findings.append(
                Finding(
                    "change.commit_invalid",
                    f"commit {problem.oid}: git would refuse it: {problem.message}",
                    expected="a commit git accepts (git fsck --strict)",
                    found=problem.message,
                )
            )
    return findings


def _file_blobs(tree: Mapping[str, TreeEntry] | None, paths: Sequence[str]) -> Iterator[str]:
    """The blob sha of each path that is a regular file in `tree` (none for the working tree)."""
    if tree is None:
        return
    for path in paths:
        entry = tree.get(path)
        if entry is not None and entry.is_file and not entry.is_link:
            yield entry.sha


def _action_findings(claim: ClaimedChange) -> list[Finding]:
    problem = None
    if claim.action == "create" and claim.sha256_before is not None:
        problem = "a create must have sha256_before null"
    elif claim.action == "delete" and claim.sha256_after is not None:
        problem = "a delete must have sha256_after null"
    elif claim.action == "modify" and None in (claim.sha256_before, claim.sha256_after):
        problem = "a modify must have both hashes"
    elif claim.action == "create" and claim.mode_before is not None:
        problem = "a create must have no mode_before"
    elif claim.action == "delete" and claim.mode_after is not None:
        problem = "a delete must have no mode_after"
    if problem is None:
        return []
    found = f"before={claim.sha256_before}, after={claim.sha256_after}"
    if claim.mode_before is not None or claim.mode_after is not None:
        found += f", mode_before={claim.mode_before}, mode_after={claim.mode_after}"
    return [
        Finding(
            "change.action_inconsistent",
            f"{claim.path}: action {claim.action!r}, but {problem}",
            path=claim.path,
            expected=problem,
            found=found,
        )
    ]


def _mode_finding(
    claim: ClaimedChange, side: Side, which: str, claimed: str | None
) -> list[Finding]:
    """`change.mode_mismatch` when the claim gives a mode and the file, there, has another.

    A side where the file is absent is left to the hash findings, which say so.
    A claim without modes says nothing about them: a change of mode alone then
    passes as long as the hashes hold, as before modes could be claimed.
    """
    if claimed is None:
        return []
    found = side.mode(claim.path)
    if found is None or found == claimed:
        return []
    return [
        Finding(
            "change.mode_mismatch",
            f"{claim.path}: in the {side.label} the file's mode is {found}, "
            f"not the claimed {which} {claimed}",
            path=claim.path,
            expected=claimed,
            found=found,
        )
    ]


def _hash_findings(claim: ClaimedChange, base: Side, head: Side) -> list[Finding]:
    findings: list[Finding] = []
    before, problem = base.sha256(claim.path)
    if problem is not None:
        return [problem]
    findings += _mode_finding(claim, base, "mode_before", claim.mode_before)
    if before != claim.sha256_before:
        findings.append(
            Finding(
                "change.before_mismatch",
                f"{claim.path}: at the base commit the file "
                + ("does not exist" if before is None else "has other content than claimed"),
                path=claim.path,
                expected=claim.sha256_before or ABSENT,
                found=before or ABSENT,
            )
        )
    after, problem = head.sha256(claim.path)
    if problem is not None:
        return [*findings, problem]
    findings += _mode_finding(claim, head, "mode_after", claim.mode_after)
    if after == claim.sha256_after:
        return findings
    if after is None:
        message = f"{claim.path}: claimed in the {head.label} but not there"
        variant = unicode_variant(claim.path, head.paths())
        if variant:
            message += f"; {variant}"
        code = "change.missing"
    elif claim.sha256_after is None:
        message = f"{claim.path}: claimed deleted but still in the {head.label}"
        code = "change.delete_not_applied"
    else:
        message = f"{claim.path}: in the {head.label} the content differs from the claim"
        code = "change.hash_mismatch"
    findings.append(
        Finding(
            code,
            message,
            path=claim.path,
            expected=claim.sha256_after or ABSENT,
            found=after or ABSENT,
        )
    )
    return findings
