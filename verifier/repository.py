"""Read-only access to a git repository, through GitPython.

Every git command runs with ``GIT_OPTIONAL_LOCKS=0`` and plumbing only, so
nothing we do writes to the repository (not even an index refresh). Paths come
from ``-z`` output as bytes and are decoded as UTF-8 with surrogateescape:
byte for byte, no normalisation.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import git
import gitdb.exc

from verifier.errors import InfrastructureError
from verifier.paths import UnsafeFile, read_in_root

NULL_SHA = "0" * 40
MODE_LINK = "120000"
MODE_GITLINK = "160000"


@dataclass(frozen=True, slots=True)
class TreeEntry:
    mode: str
    sha: str

    @property
    def is_link(self) -> bool:
        return self.mode == MODE_LINK

    @property
    def is_file(self) -> bool:
        return self.mode.startswith("100")


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class Repository:
    """A repository we read and never write."""

    def __init__(self, path: Path) -> None:
        if not path.is_dir():
            raise InfrastructureError(f"repository {str(path)!r} does not exist")
        try:
            self._repo = git.Repo(path, search_parent_directories=False)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise InfrastructureError(f"{str(path)!r} is not a git repository") from None
        if self._repo.bare:
            raise InfrastructureError(f"{str(path)!r} is a bare repository: no working tree")
        self.root = Path(self._repo.working_tree_dir or path).resolve()
        self._repo.git.update_environment(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")

    def close(self) -> None:
        self._repo.close()

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, *args: str) -> bytes:
        try:
            out = self._repo.git.execute(
                ["git", "-c", "core.quotepath=false", *args],
                stdout_as_string=False,
                strip_newline_in_stdout=False,
            )
        except git.GitCommandError as exc:
            raise InfrastructureError(f"git {args[0]} failed: {exc.stderr.strip()}") from None
        assert isinstance(out, bytes)
        return out

    def resolve_commit(self, rev: str) -> str | None:
        """The full hash of commit `rev`, or None when the repository lacks it."""
        try:
            return str(self._repo.commit(rev).hexsha)
        except (ValueError, gitdb.exc.BadName, gitdb.exc.BadObject, git.BadName):
            return None

    def tree(self, commit: str) -> dict[str, TreeEntry]:
        """Every entry of the commit's tree, recursively: path -> (mode, blob sha)."""
        out = self._run("ls-tree", "-r", "-z", "--full-tree", commit)
        entries: dict[str, TreeEntry] = {}
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            mode, _kind, sha = meta.split(b" ")
            entries[_decode(path)] = TreeEntry(mode.decode(), sha.decode())
        return entries

    def blob(self, sha: str) -> bytes:
        """The raw bytes of a blob."""
        return bytes(self._repo.odb.stream(bytes.fromhex(sha)).read())

    def changed_between(self, base: str, head: str) -> set[str]:
        """Paths whose content or mode differs between two commits."""
        out = self._run("diff-tree", "-r", "-z", "--no-renames", "--name-only", base, head)
        return {_decode(p) for p in out.split(b"\0") if p}

    def changed_in_worktree(self, base: str, base_tree: dict[str, TreeEntry]) -> set[str]:
        """Paths git would see as changed from `base` in the working tree.

        Tracked changes come from ``diff-index`` against the base commit; an entry
        git reports only because its stat data is stale (null worktree hash) is
        confirmed by hashing the file as a git blob. Untracked files that are not
        ignored count as changes too.
        """
        changed: set[str] = set()
        out = self._run("diff-index", "-z", "--no-renames", "--raw", base)
        fields = out.split(b"\0")
        for meta, raw_path in zip(fields[0::2], fields[1::2], strict=False):
            if not meta:
                continue
            old_mode, new_mode, _old_sha, new_sha, _status = meta.lstrip(b":").split(b" ")
            path = _decode(raw_path)
            if new_sha.decode() == NULL_SHA and old_mode == new_mode:
                entry = base_tree.get(path)
                if entry is not None and self._worktree_blob_sha(path) == entry.sha:
                    continue
            changed.add(path)
        changed.update(self.untracked())
        return changed

    def worktree_paths(self) -> set[str]:
        """Tracked files plus untracked files that are not ignored."""
        out = self._run("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return {_decode(p) for p in out.split(b"\0") if p}

    def untracked(self) -> list[str]:
        out = self._run("ls-files", "-z", "--others", "--exclude-standard")
        return [_decode(p) for p in out.split(b"\0") if p]

    def _worktree_blob_sha(self, rel: str) -> str | None:
        try:
            data = read_in_root(self.root, rel)
        except (UnsafeFile, OSError):
            return None  # a link or an odd file: count it as changed
        if data is None:
            return None
        header = f"blob {len(data)}\0".encode()
        return hashlib.sha1(header + data, usedforsecurity=False).hexdigest()
