"""Real git repositories for tests, built in temp dirs with the git binary.

Commits get fixed dates and author so the same calls give the same hashes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.invalid",
    "GIT_AUTHOR_DATE": "2026-11-01T10:00:00Z",
    "GIT_COMMITTER_DATE": "2026-11-01T10:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class GitRepo:
    """A throwaway repository: write files, commit, read hashes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        env = {**os.environ, **_ENV}
        out = subprocess.run(
            ["git", "-c", "core.quotepath=false", *args],
            cwd=self.path,
            env=env,
            check=True,
            capture_output=True,
        )
        return out.stdout.decode("utf-8", "surrogateescape").strip()

    def write(self, files: Mapping[str, bytes | str | None]) -> None:
        """Write (bytes or str), or delete (None), files in the working tree."""
        for rel, content in files.items():
            target = self.path / rel
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)

    def commit(self, files: Mapping[str, bytes | str | None] | None = None, msg: str = "c") -> str:
        """Write `files`, stage everything, commit; return the commit hash."""
        if files:
            self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", msg)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def snapshot(self) -> dict[str, str]:
        """sha256 of every file under the repository, .git included: proof of no change."""
        result = {}
        for root, dirs, files in os.walk(self.path):
            dirs.sort()
            for name in sorted(files):
                full = Path(root) / name
                key = str(full.relative_to(self.path))
                result[key] = (
                    "link:" + os.readlink(full) if full.is_symlink() else sha256(full.read_bytes())
                )
        return result
