"""Benchmark 1: the changes check of 1,000 claimed files against `sha256sum` of those files.

The data: a real git repository in a temp dir with 1,000 text files of 4-16 KiB
(sizes drawn uniformly, seeded) in 20 folders, a base commit, and a head commit
that modifies every file (and is checked out, so the working tree holds the
head contents). The session claims the 1,000 modifications with correct hashes.

The subject is `verifier.checks.changes.check` in commit mode (base and head
commits) and in worktree mode (head commit null: the working tree is the head).
The raw operation is one ``sha256sum`` process over the same 1,000 files in the
working tree.
"""

from __future__ import annotations

import hashlib
import random
import subprocess
from pathlib import Path

from tests.benchmarks.timing import Result, Row, measure
from tests.gitrepo import GitRepo
from verifier.checks import changes
from verifier.config import RepositoryConfig
from verifier.contract import ClaimedChange
from verifier.findings import CheckStatus

FILES = 1_000
MIN_SIZE = 4 << 10
MAX_SIZE = 16 << 10
TARGET = 1.5

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

    def sha256sum() -> None:
        subprocess.run(["sha256sum", *paths], cwd=repo.path, check=True, capture_output=True)

    # What git alone spends to hand over the blobs commit mode must hash.
    ids = tmp / "blob-ids"
    ids.write_text(repo.git("rev-parse", *(f"{c}:{p}" for c in (base, head) for p in paths)) + "\n")

    def cat_file() -> None:
        with ids.open("rb") as stdin:
            subprocess.run(
                ["git", "cat-file", "--batch"],
                stdin=stdin,
                cwd=repo.path,
                check=True,
                stdout=subprocess.DEVNULL,
            )

    runs = {"commit": commit_mode, "worktree": worktree_mode, "git": cat_file, "raw": sha256sum}
    t = measure(runs, repeat)
    raw = f"sha256sum of the {FILES:,} files"
    bound = TARGET * t["raw"]
    target = f"<= {TARGET:g}x"
    rows = [
        Row("changes", "check, commit mode", t["commit"], raw, t["raw"], target, bound),
        Row("changes", "check, worktree mode", t["worktree"], raw, t["raw"], target, bound),
        Row("changes", f"git cat-file --batch of {2 * FILES:,} blobs", t["git"], raw, t["raw"]),
    ]
    size = sum((repo.path / p).stat().st_size for p in paths)
    facts = {
        "files": f"{FILES:,} text files of 4-16 KiB, {size / (1 << 20):.1f} MiB at head",
        "commits": "base, and head modifying all 1,000 (loose objects, as fresh commits are)",
    }
    return Result(rows, facts)
