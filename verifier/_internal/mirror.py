"""Bare mirrors of repositories given by url: how a worker on another machine gets the commits.

A configured repository may give ``url`` instead of ``path``. Each worker then
keeps a bare mirror of it in its cache folder (``mirror_cache``: one
``<sha256 of the url>.git`` per url, a ``.lock`` file beside it), and before a
session is verified fetches into it the commits that session needs: its base
and head. The checks then read the mirror as they read any repository in
commit mode (`verifier._internal.repository` opens bare repositories); a session in
worktree mode has no working tree to read there, and is inconclusive.

Why these choices:

* The mirror is the verifier's own cache, not the checked repository: the
  repository at the url is only read (``git fetch`` asks it for objects).
* A fetch happens only when a commit is missing, or when the repository has a
  ``trusted_ref`` (its tip must be the remote's current one): re-verifying a
  session costs no round trip. The remote's branches and tags are fetched as
  they are (``refs/heads/*``, ``refs/tags/*``, pruned; the branches also as
  ``refs/remotes/origin/*``, where a clone keeps them), then any commit still
  missing is asked for by its id (a commit no branch holds any more).
* One fetch at a time per mirror: an exclusive ``flock`` on the lock file,
  held while git fetches. Readers take no lock: git adds objects and moves refs
  atomically, and the mirror never collects garbage (``gc.auto = 0``, no
  automatic maintenance), so no object a running verification reads vanishes.
  The cost is a mirror that only grows; delete the folder to start over.
* Git runs through `verifier._internal.git` (argument list, a timeout that kills its
  process group, no inherited ``GIT_*``, no prompt): a remote that hangs
  cannot hold a worker. Every failure is a `MirrorError`, an infrastructure
  error: the verdict is inconclusive, never a failure. A commit the remote does
  not have is one too: it may not be pushed yet, and an inconclusive session
  is verified again later.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from verifier._internal.git import Git
from verifier._internal.repository import resolve_commits
from verifier.config import DEFAULT_FETCH_TIMEOUT_S, mask_url
from verifier.errors import InfrastructureError

__all__ = ["Mirror", "MirrorError"]

log = logging.getLogger(
    "verifier.mirror"
)  # its name before the move: logging configurations select by it

# The remote's branches and tags as they are there, and its branches again as a clone
# names them: a trusted_ref reads the same ("refs/remotes/origin/main") in a checkout
# given by path and in a mirror.
REFSPECS = (
    "+refs/heads/*:refs/heads/*",
    "+refs/tags/*:refs/tags/*",
    "+refs/heads/*:refs/remotes/origin/*",
)
# Set in every mirror: nothing is ever collected under a verification reading it.
_MIRROR_CONFIG = (
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("core.logAllRefUpdates", "false"),
)
_FETCH = ("fetch", "--quiet", "--no-tags", "--no-auto-gc", "--no-write-fetch-head")


class MirrorError(InfrastructureError):
    """The mirror could not be made to hold the commits a session needs."""

    code = "mirror"


class Mirror:
    """The bare mirror of one url in one cache folder."""

    def __init__(
        self, url: str, cache: Path, *, timeout_s: float = DEFAULT_FETCH_TIMEOUT_S
    ) -> None:
        self.url = url
        self.cache = cache
        self.timeout_s = timeout_s
        name = hashlib.sha256(url.encode("utf-8")).hexdigest()
        self.path = cache / f"{name}.git"
        self.lock_path = cache / f"{name}.lock"

    def ensure(self, commits: Sequence[str], *, refresh: bool = False) -> Path:
        """The mirror's path, once it holds every one of `commits` (full or abbreviated ids).

        Fetched only when one is missing, or with `refresh` (the branches must be
        the remote's current ones: a ``trusted_ref``). Raises `MirrorError` when
        git fails, times out, or the remote has no such commit.
        """
        if not refresh and self.path.is_dir() and not self._missing(commits):
            return self.path
        with self.locked():
            # Another worker may have fetched them while we waited for the lock.
            if not self.path.is_dir():
                self._create()
            elif not refresh and not self._missing(commits):
                return self.path
            self.fetch(commits)
        return self.path

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold this mirror's lock: no other process fetches into it meanwhile."""
        try:
            self.cache.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise MirrorError(
                f"cannot open the mirror lock {str(self.lock_path)!r}: {exc}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def fetch(self, commits: Sequence[str]) -> None:
        """Fetch the remote's branches and tags, then each of `commits` still missing by id.

        The caller holds the lock (`locked`).
        """
        git = self._git()
        shown = mask_url(self.url)
        log.info("fetching %s into %s", shown, self.path)
        self._run(git, *_FETCH, "--prune", "--end-of-options", self.url, *REFSPECS)
        for commit in self._missing(commits):
            # A commit no branch or tag holds (a deleted branch, a pull request's ref) is
            # asked for by its full id; an abbreviated one cannot be.
            if len(commit) in (40, 64):
                done = git.call(*_FETCH, "--end-of-options", self.url, commit)
                if done.returncode == 0:
                    continue
            raise MirrorError(
                f"commit {commit} is not in {shown} (fetched into {str(self.path)!r}): "
                "not pushed yet, or not in that repository"
            )
        log.info("fetched %s into %s", shown, self.path)

    def _git(self) -> Git:
        return Git(self.path, timeout_s=self.timeout_s, error=MirrorError)

    def _missing(self, commits: Sequence[str]) -> list[str]:
        """Those of `commits` that name no commit of the mirror (`resolve_commits`)."""
        wanted = [c for c in dict.fromkeys(commits) if c]
        if not wanted:
            return []
        resolved = resolve_commits(self._git(), *wanted)
        return [c for c, full in zip(wanted, resolved, strict=True) if full is None]

    def _create(self) -> None:
        """An empty bare repository, made aside and moved in place whole (the lock is held)."""
        aside = self.path.with_name(f"{self.path.name}.new-{os.getpid()}")
        shutil.rmtree(aside, ignore_errors=True)
        aside.mkdir(parents=True)
        git = Git(aside, timeout_s=self.timeout_s, error=MirrorError)
        self._run(git, "init", "--quiet", "--bare")
        for key, value in (*_MIRROR_CONFIG, ("remote.origin.url", self.url)):
            self._run(git, "config", key, value)
        try:
            aside.rename(self.path)
        except OSError as exc:
            shutil.rmtree(aside, ignore_errors=True)
            raise MirrorError(f"cannot create the mirror {str(self.path)!r}: {exc}") from None

    def _run(self, git: Git, *args: str) -> None:
        done = git.call(*args)
        if done.returncode != 0:
            said = (
                done.stderr.decode("utf-8", "replace").strip().replace(self.url, mask_url(self.url))
            )
            raise MirrorError(
                f"git {args[0]} of {mask_url(self.url)} into {str(self.path)!r} failed "
                f"(exit {done.returncode}): {said}"
            )
