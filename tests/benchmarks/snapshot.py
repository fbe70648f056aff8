"""Benchmark 4: the copy of a 10,000-file head state for the tests, against git writing it.

The data: a real git repository in a temp dir with 10,000 small text files of
200 B-4 KiB (sizes drawn uniformly, seeded) in 100 folders, one commit (loose
objects, as a fresh commit is), then the same after ``git repack -adq``.

The subject is `verifier._internal.snapshot.materialize` in commit mode, writing into a
fresh folder under `verifier._internal.snapshot.temp_parent` (``/dev/shm`` when it has
room, else the system's temp folder). Target: at most 2 s.

The raw operation is the floor of any copy made from git: one ``git cat-file
--batch`` fed the same 10,000 blob ids (listed beforehand), each blob written
to its own file at its path under a fresh folder of the same parent, its
folders made on the way. It does what `materialize` cannot skip; it leaves out
what the copy adds for safety: resolving the commit, ``git ls-tree``, the
path rule, ``O_EXCL|O_NOFOLLOW`` opens, permission bits, the size cap, the
SHA-256 of every file, and the check of the links.
"""

from __future__ import annotations

import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.benchmarks.changes import _source
from tests.benchmarks.timing import Result, Row
from tests.support.gitrepo import GitRepo
from verifier._internal.snapshot import materialize, temp_parent

FILES = 10_000
FOLDERS = 100
MIN_SIZE = 200
MAX_SIZE = 4 << 10
TARGET_S = 2.0


def build(root: Path) -> tuple[GitRepo, str, dict[str, bytes]]:
    rng = random.Random(1010)
    repo = GitRepo(root)
    files = {
        f"pkg{i % FOLDERS:03d}/sub{i % 7}/mod_{i:05d}.py": _source(
            rng, rng.randint(MIN_SIZE, MAX_SIZE)
        )
        for i in range(FILES)
    }
    return repo, repo.commit(files, "10,000 files"), files


def raw_copy(repo: Path, ids_file: Path, paths: list[str], dest: Path) -> None:
    """One `git cat-file --batch`, each blob written to its path: the floor of a copy."""
    made: set[Path] = set()
    with (
        ids_file.open("rb") as stdin,
        subprocess.Popen(
            ["git", "cat-file", "--batch"], stdin=stdin, stdout=subprocess.PIPE, cwd=repo
        ) as proc,
    ):
        out = proc.stdout
        assert out is not None
        for rel in paths:
            size = int(out.readline().split()[2])
            target = dest / rel
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            with open(target, "wb") as fh:
                fh.write(out.read(size))
            out.read(1)


def run(tmp: Path, repeat: int) -> Result:
    repo, commit, files = build(tmp / "snapshot-repo")
    paths = sorted(files)  # ls-tree order for these ASCII names
    ids = repo.git("rev-parse", *(f"{commit}:{p}" for p in paths)).split()
    ids_file = tmp / "blob-ids"
    ids_file.write_text("\n".join(ids) + "\n")
    parent = temp_parent(2 * sum(map(len, files.values())))
    where = str(parent) if parent else f"{tempfile.gettempdir()} (no room in /dev/shm)"

    # The copy must be exact before it is timed.
    with tempfile.TemporaryDirectory(dir=parent) as check_dir:
        info = materialize(repo.path, commit, Path(check_dir) / "copy")
        assert info.files == FILES and not info.skipped, info
        assert all((Path(check_dir) / "copy" / p).read_bytes() == files[p] for p in paths)

    rows: list[Row] = []
    raw = f"cat-file --batch of {FILES:,} blobs, each written to its file"
    for storage in ("loose", "packed"):
        if storage == "packed":
            repo.git("repack", "-adq")
            repo.git("prune-packed")
        runs: dict[str, Callable[[Path], object]] = {
            "subject": lambda dest: materialize(repo.path, commit, dest),
            "raw": lambda dest: raw_copy(repo.path, ids_file, paths, dest),
        }
        t = _measure(runs, repeat, parent)
        rows.append(
            Row(
                "snapshot", f"materialize, commit mode, {storage}", t["subject"], raw, t["raw"],
                f"<= {TARGET_S:g} s", TARGET_S,
            )
        )  # fmt: skip
    size = sum(map(len, files.values()))
    facts = {
        "files": f"{FILES:,} text files of 200 B-4 KiB in {FOLDERS} folders, "
        f"{size / (1 << 20):.1f} MiB",
        "written to": where,
    }
    return Result(rows, facts)


def _measure(
    runs: dict[str, Callable[[Path], object]], repeat: int, parent: Path | None
) -> dict[str, float]:
    """Like `timing.measure`, each run into a fresh folder, removed after, untimed."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for turn in range(repeat + 1):  # turn 0 is the warm-up
        for name, copy in runs.items():
            with tempfile.TemporaryDirectory(dir=parent) as td:
                dest = Path(td) / "copy"
                start = time.perf_counter()
                copy(dest)
                elapsed = time.perf_counter() - start
                shutil.rmtree(dest)
            if turn:
                times[name].append(elapsed)
    return {name: statistics.median(t) for name, t in times.items()}
