"""Resources a repository or a report can make the verifier spend are bounded, with the
default configuration: 200,000 files are not copied, a 200 MB report is not read whole."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, fixed_session, to_bytes
from verifier.app.pipeline import KEPT_BYTES
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckStatus, DeliveryStatus
from verifier.verify import verify

MANY = 200_000


def test_a_base_of_200000_files_is_inconclusive_without_being_copied(
    repo: GitRepo, tmp_path: Path
) -> None:
    # The 200,000 empty files are in the base, so the session's own change is clean; they
    # are never checked out (sparse), only listed by git, as a commit the verifier reads.
    (tmp_path / "empty").write_bytes(b"")
    empty = repo.git("hash-object", "-w", str(tmp_path / "empty"))
    listing = "".join(f"100644 blob {empty}\tf{i:06}\n" for i in range(MANY))
    data = subprocess.run(
        ["git", "mktree"], cwd=repo.path, input=listing, capture_output=True, text=True, check=True
    ).stdout.strip()
    root = repo.git("ls-tree", "HEAD") + f"\n040000 tree {data}\tdata\n"
    tree = subprocess.run(
        ["git", "mktree"], cwd=repo.path, input=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    base = repo.git("commit-tree", tree, "-p", "HEAD", "-m", "200,000 empty files")
    repo.git("sparse-checkout", "set", "--no-cone", "/*", "!/data/")
    repo.git("reset", "-q", "--hard", base)
    assert not (repo.path / "data").exists()

    report = fixed_session(repo).report()
    calc = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    config = Config(repositories={"calc": calc})
    assert config.max_snapshot_files == 100_000  # the default
    v = verify(parse_report(to_bytes(report)), config)

    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE, v.to_dict()
    assert v.checks["changes"].status is CheckStatus.PASS
    tests = v.checks["tests"]
    assert tests.status is CheckStatus.ERROR
    (finding,) = tests.findings
    assert finding.code == "tests.snapshot_failed"
    assert "more than 100000 files (max_snapshot_files)" in finding.message


def test_a_200_mb_report_is_refused_without_being_read_whole(tmp_path: Path) -> None:
    # A valid-looking start, then 200 MB of padding (a sparse file: cheap to make).
    head = json.dumps({"schema_version": "1", "task": ""})[:-2].encode()
    path = tmp_path / "huge.json"
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(200_000_000)
    # The verifier in a child of a child: the grandchild's peak memory is measured alone.
    probe = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "sys.stderr.buffer.write(done.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(done.returncode)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, sys.executable, "-m", "verifier", "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 2, done.stderr  # an invalid report, not a verdict
    assert "report is 200000000 bytes, over the limit of 20000000 bytes" in done.stderr
    peak_kib = int(done.stdout.strip())
    assert peak_kib < 150_000, f"peak {peak_kib} KiB: the report was held whole"
    with sqlite3.connect(tmp_path / "store.sqlite3") as conn:
        kept, digest, size = conn.execute(
            "select report, report_sha256, report_size from rejected_reports"
        ).fetchone()
    assert (len(kept), size) == (KEPT_BYTES, 200_000_000)  # the head and the size, not it all
    with path.open("rb") as fh:
        assert kept == fh.read(KEPT_BYTES)
        fh.seek(0)
        assert digest == hashlib.file_digest(fh, "sha256").hexdigest()
