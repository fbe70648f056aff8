"""Benchmark 1: the changes check of 1,000 claimed files against git and hashlib doing the reads.

The data: a real git repository in a temp dir with 1,000 text files of 4-16 KiB
(sizes drawn uniformly, seeded) in 20 folders, a base commit, and a head commit
that modifies every file (and is checked out, so the working tree holds the
head contents). The session claims the 1,000 modifications with correct hashes.

The subject is `verifier.checks.changes.check` in commit mode (base and head
commits) and in worktree mode (head commit null: the working tree is the head),
first on loose objects (as fresh commits are), then after ``git repack -adq``
(packed, as a fetched or garbage-collected repository is).

The raw operation is what the check cannot beat: one ``git cat-file --batch``
handing over the same blobs, each hashed with hashlib SHA-256 as it streams
(commit mode: the 2,000 blobs of both sides; worktree mode: the 1,000 base
blobs, plus hashlib over the 1,000 working-tree files). Then the cache: the
same commit-mode check with a `MemoryDigestCache` already filled by a first
run, against the check without it (target: at most a tenth).
"""

from __future__ import annotations

import hashlib
import random
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.benchmarks.timing import Result, Row, measure
from tests.support.gitrepo import GitRepo
from verifier.checks import changes
from verifier.checks.changes import MemoryDigestCache
from verifier.config import RepositoryConfig
from verifier.contract.report import ClaimedChange
from verifier.findings import CheckStatus

FILES = 1_000
MIN_SIZE = 4 << 10
MAX_SIZE = 16 << 10
TARGET = 1.2
CACHE_TARGET = 0.1

_VOCABULARY = (
    "self value result return items index count path data config error check "
    "commit tree blob hash line text name open close read write None True False "
    "def class import from for in if else elif while try except raise with as"
)
_WORDS = _VOCABULARY.split()


def _source(rng: random.Random, size: int) -> bytes:
    """Python-looking text of exactly `size` bytes."""
    lines: list[str] = []
    total = 0
    while total < size:
        indent = "    " * rng.randrange(3)
        line = indent + " ".join(rng.choices(_WORDS, k=rng.randrange(3, 12))) + "\n"
        lines.append(line)
        total += len(line)
    return "".join(lines).encode()[:size]


def build(root: Path) -> tuple[GitRepo, str, str, list[ClaimedChange], list[str]]:
    """The repository, its base and head commits, the claims and the file paths."""
    rng = random.Random(8785)
    repo = GitRepo(root)
    paths = [f"src/pkg{i % 20:02d}/module_{i:04d}.py" for i in range(FILES)]
    before = {p: _source(rng, rng.randint(MIN_SIZE, MAX_SIZE)) for p in paths}
    base = repo.commit(before, "base")
    after = {p: data + f"\n# edited by the agent ({p})\n".encode() for p, data in before.items()}
    head = repo.commit(after, "head: modify every file")
    claims = [
        ClaimedChange(
            path=p,
            action="modify",
            sha256_before=hashlib.sha256(before[p]).hexdigest(),
            sha256_after=hashlib.sha256(after[p]).hexdigest(),
        )
        for p in paths
    ]
    return repo, base, head, claims, paths


def cat_file_sha256(repo: Path, ids_file: Path, count: int) -> list[str]:
    """The raw operation: one `git cat-file --batch`, each blob hashed as it streams."""
    digests = []
    with (
        ids_file.open("rb") as stdin,
        subprocess.Popen(
            ["git", "cat-file", "--batch"], stdin=stdin, stdout=subprocess.PIPE, cwd=repo
        ) as proc,
    ):
        out = proc.stdout
        assert out is not None
        for _ in range(count):
            size = int(out.readline().split()[2])
            digests.append(hashlib.sha256(out.read(size)).hexdigest())
            out.read(1)
    return digests


def files_sha256(root: Path, paths: Sequence[str]) -> list[str]:
    """hashlib over files read whole: the working-tree half of worktree mode's raw operation."""
    return [hashlib.sha256((root / p).read_bytes()).hexdigest() for p in paths]


def run(tmp: Path, repeat: int) -> Result:
    repo, base, head, claims, paths = build(tmp / "changes-repo")
    config = RepositoryConfig(name="bench")

    # The check must still see a wrong hash, in both modes, before it is timed.
    wrong = [*claims[:-1], claims[-1].model_copy(update={"sha256_after": "0" * 64})]
    for mode_head in (head, None):
        found = changes.check(repo.path, base, mode_head, wrong, config).findings
        assert [f.code for f in found] == ["change.hash_mismatch"], found

    def commit_mode() -> None:
        result = changes.check(repo.path, base, head, claims, config)
        assert result.status is CheckStatus.PASS, result.findings[:3]

    def worktree_mode() -> None:
        result = changes.check(repo.path, base, None, claims, config)
        assert result.status is CheckStatus.PASS, result.findings[:3]

    cache = MemoryDigestCache()

    def commit_mode_cached() -> None:
        result = changes.check(repo.path, base, head, claims, config, cache=cache)
        assert result.status is CheckStatus.PASS, result.findings[:3]

    both = tmp / "blob-ids"
    both.write_text(repo.git("rev-parse", *(f"{c}:{p}" for c in (base, head) for p in paths)))
    base_only = tmp / "base-blob-ids"
    base_only.write_text(repo.git("rev-parse", *(f"{base}:{p}" for p in paths)))
    expected = [c.sha256_before for c in claims] + [c.sha256_after for c in claims]
    assert cat_file_sha256(repo.path, both, 2 * FILES) == expected

    def raw_commit() -> None:
        cat_file_sha256(repo.path, both, 2 * FILES)

    def raw_worktree() -> None:
        cat_file_sha256(repo.path, base_only, FILES)
        files_sha256(repo.path, paths)

    raw_c = f"cat-file --batch + hashlib of {2 * FILES:,} blobs"
    raw_w = f"cat-file + hashlib of {FILES:,} blobs, hashlib of {FILES:,} files"
    target = f"<= {TARGET:g}x"
    rows: list[Row] = []
    for storage in ("loose", "packed"):
        if storage == "packed":
            repo.git("repack", "-adq")
            repo.git("prune-packed")
        runs = {
            "commit": commit_mode,
            "raw_c": raw_commit,
            "worktree": worktree_mode,
            "raw_w": raw_worktree,
        }
        t = measure(runs, repeat)
        rows += [
            Row(
                "changes", f"check, commit mode, {storage}", t["commit"], raw_c, t["raw_c"],
                target, TARGET * t["raw_c"],
            ),
            Row(
                "changes", f"check, worktree mode, {storage}", t["worktree"], raw_w, t["raw_w"],
                target, TARGET * t["raw_w"],
            ),
        ]  # fmt: skip
    commit_mode_cached()  # the first run fills the cache
    t = measure({"cached": commit_mode_cached, "first": commit_mode}, repeat)
    rows.append(
        Row(
            "changes", "check, commit mode, cache filled (packed)", t["cached"],
            "the same check with no cache", t["first"], f"<= {CACHE_TARGET:g}x",
            CACHE_TARGET * t["first"],
        )
    )  # fmt: skip
    size = sum((repo.path / p).stat().st_size for p in paths)
    facts = {
        "files": f"{FILES:,} text files of 4-16 KiB, {size / (1 << 20):.1f} MiB at head",
        "commits": "base, and head modifying all 1,000; loose objects, then `git repack -adq`",
        "cache": f"{len(cache.digests):,} blob digests after the first cached run",
    }
    return Result(rows, facts)
