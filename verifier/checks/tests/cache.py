"""The tests check's cache: what decides a test run (`cache_key`), and its result kept and reused.

A tree tested once under the same command, environment and sandbox settings is
not tested again (`verifier.checks.base.TestResultCache`, which the store
keeps). The key is a SHA-256 over the tree of the copy as the tests see it
(`tree_digest`), the command, the environment, the sandbox settings and the
verifier's version. Only a conclusive result is kept: an error, or a run the
verifier killed while stopping, decided nothing, so the next verification runs
the tests again. A kept result that does not read as one is passed over: a
cache never decides.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import platform
import stat
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verifier import __version__
from verifier._internal.sandbox import runner
from verifier._internal.snapshot import SnapshotInfo
from verifier.checks.base import TestResultCache
from verifier.checks.tests import NAME
from verifier.checks.tests.judge import snapshot_details
from verifier.checks.tests.testinfra import is_test_infra
from verifier.config import Config, RepositoryConfig
from verifier.findings import CheckResult, CheckStatus, Finding

__all__ = ["Hit", "cache_key", "cached", "keep", "reused", "tree_digest"]

# The session first tested under a key, and its result as JSON data.
Hit = tuple[str, Mapping[str, Any]]


def tree_digest(work: Path, snapshot: SnapshotInfo, test_paths: Sequence[str]) -> str:
    """SHA-256 over every file and link of the copy as the tests will see it: its
    path, its permission bits and the SHA-256 of its bytes, or its link target.

    Read after the test infrastructure came from the base (`verifier.checks.tests.testinfra`),
    so two heads that differ only in tests that are not run are the same tree.
    A file the copy wrote is taken from `snapshot`'s digests; only test
    infrastructure (which the base may have replaced) and files it does not know
    are read again.
    """
    digest = hashlib.sha256()
    for folder, dirs, names in os.walk(work):
        dirs.sort()
        rel_folder = Path(folder).relative_to(work)
        for name in sorted([*names, *(d for d in dirs if (Path(folder) / d).is_symlink())]):
            path = Path(folder) / name
            rel = (rel_folder / name).as_posix()
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                entry = f"link {os.readlink(path)}"
            else:
                known = None if is_test_infra(rel, test_paths) else snapshot.digests.get(rel)
                if known is None:
                    with open(path, "rb") as fh:
                        known = hashlib.file_digest(fh, "sha256").hexdigest()
                entry = f"file {stat.S_IMODE(info.st_mode):o} {known}"
            digest.update(os.fsencode(rel) + b"\0" + entry.encode("utf-8", "surrogateescape"))
            digest.update(b"\0")
    return digest.hexdigest()


def cache_key(
    tree: str,
    command: Sequence[str],
    argv: Sequence[str],
    timeout_s: float,
    config: Config,
    repository: RepositoryConfig,
    *,
    watched: Sequence[str] = (),
    declared: Sequence[str] = (),
    per_test: bool = False,
) -> str:
    """SHA-256 over what decides a test run's result: the tree tested (`tree_digest`),
    what the monitor is told of the session (`watched`: its changed files and data),
    the command as configured and as run, its timeout and how its results are read,
    the plugins loaded (the repository's, the distributions the base `declared`),
    the environment (interpreters, their installed packages, PATH, the platform),
    the sandbox settings, the verifier's version, and whether each test's end is kept
    (`per_test`)."""
    interpreter = argv[0] if argv else ""
    decided = {
        "tree": tree,
        "watched": list(watched),
        "command": list(command),
        "argv": list(argv),
        "timeout_s": timeout_s,
        "results": [repository.results, list(repository.results_junit)],
        "pytest_plugins": repository.pytest_plugins,
        "declared_plugins": list(declared),
        # A result kept with each test's end is not the same record as one without.
        "per_test": per_test,
        "environment": {
            "python": interpreter,
            "python_resolved": os.path.realpath(interpreter) if interpreter else "",
            "verifier_python": [sys.executable, sys.version],
            "python_config": str(repository.python) if repository.python else None,
            "venv": str(repository.venv) if repository.venv else None,
            "site_packages": _site_packages(repository),
            "path": os.environ.get("PATH") or runner.DEFAULT_PATH,
            "platform": [platform.platform(), platform.machine()],
        },
        "sandbox": {
            "network_isolation": config.network_isolation,
            "limits": _limits(config),
            "read_only": [str(p) for p in (*config.sandbox_read_only, *repository.read_only_paths)],
            "output_excerpt_bytes": config.output_excerpt_bytes,
        },
        "verifier": __version__,
    }
    encoded = json.dumps(decided, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def _limits(config: Config) -> dict[str, int]:
    limits = config.limits
    return {
        "memory_mb": limits.memory_mb,
        "processes": limits.processes,
        "open_files": limits.open_files,
        "file_size_mb": limits.file_size_mb,
        "cpu_s": limits.cpu_s,
        "tmp_mb": limits.tmp_mb,
    }


def _site_packages(repository: RepositoryConfig) -> dict[str, int]:
    """When each interpreter's installed packages last changed (a folder's mtime moves
    when a package is installed or removed): a new dependency is a new environment."""
    if repository.venv is not None:
        folders = glob.glob(str(repository.venv / "lib" / "python*" / "site-packages"))
    else:
        folders = [sysconfig.get_paths()["purelib"]]
    stamps: dict[str, int] = {}
    for folder in sorted(folders):
        try:
            stamps[folder] = os.stat(folder).st_mtime_ns
        except OSError:
            stamps[folder] = -1
    return stamps


def cached(cache: TestResultCache, key: str) -> Hit | None:
    """A kept result that reads as one (`reused`), or None: a cache never decides."""
    hit = cache.get(key)
    if hit is None:
        return None
    session_id, kept = hit
    if not isinstance(kept, Mapping) or kept.get("status") not in ("pass", "fail"):
        return None
    findings = kept.get("findings")
    if not isinstance(findings, list) or not all(isinstance(f, Mapping) for f in findings):
        return None
    return session_id, kept


def reused(
    hit: Hit,
    mode: str,
    snapshot: SnapshotInfo,
    infra_notes: tuple[str, ...],
) -> CheckResult:
    """The result kept for this tree, with this copy's own facts and notes."""
    session_id, kept = hit
    findings = tuple(
        Finding(
            str(f["code"]),
            str(f["message"]),
            **{k: str(f[k]) for k in ("path", "expected", "found") if f.get(k) is not None},
        )
        for f in kept["findings"]
    )
    details = dict(kept.get("details") or {})
    details.update(mode=mode, snapshot=snapshot_details(snapshot), cached_from=session_id)
    note = (
        f"tests not run: this tree was tested under the same command, environment and "
        f"sandbox for session {session_id}, and its result is reused (cached_from)"
    )
    notes = tuple(str(n) for n in kept.get("notes") or ())
    return CheckResult(
        NAME, CheckStatus(kept["status"]), findings, details, notes=(*notes, *infra_notes, note)
    )


def keep(cache: TestResultCache, key: str, session_id: str, result: CheckResult) -> None:
    """Keep a conclusive result: a pass or a failure, never an error."""
    if result.status not in (CheckStatus.PASS, CheckStatus.FAIL):
        return
    kept = result.to_dict()
    # What this copy was: the next copy of the same tree says its own.
    kept["details"] = {k: v for k, v in kept["details"].items() if k not in ("mode", "snapshot")}
    cache.put(key, session_id, kept)
