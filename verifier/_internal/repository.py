"""Read-only access to a git repository: git plumbing opens it and reads it.

The repository is the agent's work, so it is read as untrusted data. Every git
command goes through `verifier._internal.git` (argument list, timeout that kills, no
inherited ``GIT_*``, ``GIT_OPTIONAL_LOCKS=0``, no replace refs or grafts, the
repository's configuration denied the programs it could start). Even opening
it: ``git rev-parse`` tells what the folder is, under our timeout, where a
library parsing ``.git/config`` in our process (GitPython did) hangs forever
on a config that is a FIFO. Besides:

* the working tree is compared with the base commit by hashing its files
  ourselves, as the blobs git would store, never through the index: index
  flags (``--assume-unchanged``, ``--skip-worktree``) and clean filters would
  otherwise decide what we see, and filters are programs. The bytes git would
  store are the raw bytes, unless a ``text`` or ``eol`` attribute applies to
  the path (read with ``git check-attr``): then git's built-in CRLF-to-LF
  conversion, done here (`verifier._internal.paths.hash_in_root`);
* commits are resolved from hex only, never as ref names.

Paths come from ``-z`` output as bytes, decoded as UTF-8 (no normalisation);
bytes that are not UTF-8 are shown as ``\\xNN`` escapes, which no claim can
name.
"""

from __future__ import annotations

import hashlib
import os
import re
import string
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from verifier._internal.git import GIT_TIMEOUT_S, BlobDigestCache, CatFile, Git, is_object_id
from verifier._internal.paths import (
    EOL_AUTO,
    EOL_TEXT,
    FileHashes,
    UnsafeFile,
    hash_in_root,
    is_dotgit,
    worktree_state,
)
from verifier.errors import InfrastructureError, ObjectCorrupt

MODE_LINK = "120000"


class TreeEntry(NamedTuple):
    """One entry of a tree: its mode (``100644``...) and object id."""

    mode: str
    sha: str

    @property
    def is_link(self) -> bool:
        return self.mode == MODE_LINK

    @property
    def is_file(self) -> bool:
        return self.mode.startswith("100")


def changed_between(base: Mapping[str, TreeEntry], head: Mapping[str, TreeEntry]) -> set[str]:
    """Paths whose content or mode differs between two trees (``git diff-tree -r`` would name)."""
    return {path for path in base.keys() | head.keys() if base.get(path) != head.get(path)}


_TREE_RECORD = re.compile(rb"([0-7]+) ([a-z]+) ([0-9a-f]+)\t([^\0]*)\0")
_TREE_RECORD_TEXT = re.compile(r"([0-7]+) ([a-z]+) ([0-9a-f]+)\t([^\0]*)\0")


def _parse_tree(listing: bytes) -> tuple[dict[str, TreeEntry], list[tuple[str, str]]]:
    """``git ls-tree -r -t -z`` output as path -> entry, and the (path, id) of each folder.

    One regex pass: 1,000s of entries. A listing that is UTF-8 throughout (almost
    all) is decoded once: each path then reads as `_decode` would read it alone.
    """
    try:
        text = listing.decode("utf-8")
    except UnicodeDecodeError:
        records = [
            (mode.decode("ascii"), kind.decode("ascii"), sha.decode("ascii"), _decode(path))
            for mode, kind, sha, path in _TREE_RECORD.findall(listing)
        ]
    else:
        records = _TREE_RECORD_TEXT.findall(text)
    if len(records) != listing.count(b"\0"):  # never skip an entry we could not read
        raise InfrastructureError("git ls-tree: output in an unexpected format")
    entries: dict[str, TreeEntry] = {}
    folders: list[tuple[str, str]] = []
    for mode, kind, sha, path in records:
        if kind == "tree":
            folders.append((path, sha))
        else:
            entries[path] = TreeEntry(mode, sha)
    return entries, folders


_TREE_ENTRY = {n: re.compile(rb"([0-7]*) ([^\0]+)\0(.{%d})" % n, re.DOTALL) for n in (20, 32)}
_S_IFMT, _S_IFDIR, _S_IFREG, _S_IFLNK = 0o170000, 0o040000, 0o100000, 0o120000


def _tree_records(raw: bytes, oid: str) -> list[tuple[int, bytes, str]]:
    """The entries of one raw tree as git reads them: (canonical mode, name, object id).

    git's ``decode_tree_entry``: octal digits up to a space, a name that is not
    empty up to a NUL, the id; a tree it cannot read that way is one it refuses
    to list, and so do we. The mode is made canonical as git's ``canon_mode``
    does (``100664`` is read as ``100644``, anything unknown as a gitlink).
    """
    records: list[tuple[int, bytes, str]] = []
    pos = 0
    for match in _TREE_ENTRY[len(oid) // 2].finditer(raw):
        if match.start() != pos:
            break
        pos = match.end()
        digits, name, entry_id = match.groups()
        mode = int(digits or b"0", 8) & 0xFFFFFFFF
        kind = mode & _S_IFMT
        if kind == _S_IFREG:
            mode = 0o100755 if mode & 0o100 else 0o100644
        elif kind in (_S_IFLNK, _S_IFDIR):
            mode = kind
        else:
            mode = 0o160000
        records.append((mode, name, entry_id.hex()))
    if pos != len(raw):
        raise InfrastructureError(f"git: tree {oid} is corrupt: it cannot be read as a tree")
    return records


class ObjectProblem(NamedTuple):
    """A tree or commit git's ``fsck --strict`` would flag: which, where, git's message."""

    kind: str  # "tree" or "commit"
    oid: str
    path: str  # the tree's folder ("" for the root); the commit's id
    message: str  # git's message id and text: "duplicateEntries: contains duplicate..."


_TREE_MODES = frozenset((b"100644", b"100755", b"120000", b"40000", b"160000"))
_GIT_IDENT = re.compile(rb"[^<>\n]*<[^<>\n]*> [0-9]+ [+-][0-9]{4}")


def tree_problems(raw: bytes, id_bytes: int) -> list[str]:
    """git's fsck messages for one raw tree object, each once, in git's order of checks.

    The rules of git's ``fsck_tree`` with ``--strict``: names that are empty,
    hold a ``/``, are ``.``, ``..`` or taken for ``.git`` somewhere
    (`is_dotgit`); ids of zeros; modes git never writes (``100664``, padded
    ``040000``); entries out of git's order, or twice. A tree git would refuse
    to check out can give one checkout tool a file another does not see.
    """
    entry = re.compile(rb"([0-9]+) ([^\0]*)\0(.{%d})" % id_bytes, re.DOTALL)
    found: dict[str, None] = {}
    names: set[bytes] = set()
    previous = b""
    pos = 0
    null = bytes(id_bytes)
    for match in entry.finditer(raw):
        if match.start() != pos:
            break
        pos = match.end()
        mode, name, oid = match.groups()
        if not name:
            found["emptyName: contains empty pathname"] = None
        if b"/" in name:
            found["fullPathname: contains full pathnames"] = None
        if name == b".":
            found["hasDot: contains '.'"] = None
        if name == b"..":
            found["hasDotdot: contains '..'"] = None
        if is_dotgit(name.decode("utf-8", "replace")):
            found["hasDotgit: contains '.git'"] = None
        if oid == null:
            found["nullSha1: contains entries pointing to null sha1"] = None
        if mode.startswith(b"0"):
            found["zeroPaddedFilemode: contains zero-padded file modes"] = None
        elif mode not in _TREE_MODES:
            found["badFilemode: contains bad file modes"] = None
        key = name + b"/" if mode.lstrip(b"0") == b"40000" else name
        if name in names:
            found["duplicateEntries: contains duplicate file entries"] = None
        elif previous and key < previous:
            found["treeNotSorted: not properly sorted"] = None
        names.add(name)
        previous = key
    if pos != len(raw):
        found["badTree: cannot be parsed as a tree"] = None
    return list(found)


def commit_problems(raw: bytes) -> list[str]:
    """git's fsck messages for one raw commit's header (``fsck_commit``), each once.

    One ``tree`` line first, then ``parent`` lines, one ``author``, one
    ``committer``, each well formed, and no NUL in the header: a commit with
    two ``tree`` lines is read one way by one tool and another way by another.
    """
    header = raw.split(b"\n\n", 1)[0]
    found: dict[str, None] = {}
    if b"\0" in header:
        found["nulInHeader: NUL byte in the commit object header"] = None
    lines = header.split(b"\n")
    keys = [line.partition(b" ")[0] for line in lines]
    tree = lines[0].partition(b" ")[2] if lines else b""
    if keys[:1] != [b"tree"] or not is_object_id(tree.decode("ascii", "replace")):
        found["badTreeSha1: invalid 'tree' line format - bad sha1"] = None
    at = 1
    while at < len(keys) and keys[at] == b"tree":  # git reads the first, a parser may not
        found["badTree: more than one 'tree' line"] = None
        at += 1
    while at < len(keys) and keys[at] == b"parent":
        if not is_object_id(lines[at].partition(b" ")[2].decode("ascii", "replace")):
            found["badParentSha1: invalid 'parent' line format - bad sha1"] = None
        at += 1
    for role, missing in (
        (b"author", "missingAuthor: invalid format - expected 'author' line"),
        (b"committer", "missingCommitter: invalid format - expected 'committer' line"),
    ):
        if at >= len(keys) or keys[at] != role:
            found[missing] = None
            continue
        if not _GIT_IDENT.fullmatch(lines[at].partition(b" ")[2]):
            found[f"badIdent: invalid {role.decode()} line"] = None
        at += 1
        if role == b"author" and at < len(keys) and keys[at] == b"author":
            found["multipleAuthors: invalid format - multiple 'author' lines"] = None
    return list(found)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


class History:
    """Ancestry questions about commits, asked of one repository: ours, or a trusted mirror.

    Through `verifier._internal.git`, so no graft file, no commit-graph and no replace
    ref the agent wrote changes the answer.
    """

    def __init__(self, git: Git) -> None:
        self._git = git

    @classmethod
    def mirror(cls, path: Path) -> History:
        """The history of a mirror repository (bare or not); raises when it is not one."""
        git = Git(path)
        if not path.is_dir() or git.call("rev-parse", "--git-dir").returncode != 0:
            raise InfrastructureError(f"trusted_mirror {str(path)!r} is not a git repository")
        return cls(git)

    def resolve_ref(self, ref: str) -> str | None:
        """The commit a ref of our configuration names (``refs/remotes/origin/main``), or None."""
        done = self._git.call(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"
        )
        if done.returncode != 0:
            return None
        return done.stdout.decode("ascii", "replace").strip() or None

    def has_commit(self, oid: str) -> bool:
        """Whether the full commit id `oid` names a commit here."""
        done = self._git.call("cat-file", "-e", f"{oid}^{{commit}}")
        return is_object_id(oid) and done.returncode == 0

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether commit `ancestor` is `descendant` or in its history."""
        done = self._git.call("merge-base", "--is-ancestor", ancestor, descendant)
        if done.returncode not in (0, 1):
            error = done.stderr.decode("utf-8", "replace").strip()
            raise InfrastructureError(f"git merge-base failed: {error}")
        return done.returncode == 0

    def behind(self, base: str, tip: str, limit: int) -> int:
        """How many commits `tip` has that `base` has not (``rev-list --count base..tip``).

        Counted up to ``limit + 1`` only: the answer past the limit does not matter,
        and a long history costs nothing more.
        """
        out = self._git.run(
            "rev-list", "--count", f"--max-count={limit + 1}", "--end-of-options", tip, f"^{base}"
        )
        return int(out.decode("ascii").strip())


def _work_tree(git: Git, path: Path) -> tuple[Path, bool]:
    """The root of the repository at `path` and whether it is bare, or raise: not a
    repository, or a folder inside one.

    One ``git rev-parse``, under the timeout of `git`. Its answers come in the
    order asked, so a bare repository is told by the first line even though
    ``--show-toplevel`` then fails; its root is its git folder, which must be
    `path` itself (``objects/`` of a bare repository is not that repository).
    """
    done = git.call("rev-parse", "--is-bare-repository", "--git-dir", "--show-toplevel")
    lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    if lines[:1] == ["true"] and len(lines) >= 2:
        root = (path / lines[1]).resolve()
        if root != path.resolve():
            raise InfrastructureError(
                f"{str(path)!r} is not a git repository (it is inside {str(root)!r})"
            )
        return root, True
    if done.returncode != 0 or len(lines) != 3:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = "" if not said or "not a git repository" in said[0] else f" (git: {said[0]})"
        raise InfrastructureError(f"{str(path)!r} is not a git repository{why}")
    root = Path(lines[2]).resolve()
    if root != path.resolve():  # a folder inside a repository is not that repository
        raise InfrastructureError(
            f"{str(path)!r} is not a git repository (it is inside {str(root)!r})"
        )
    return root, False


def resolve_commits(git: Git, *revs: str | None) -> list[str | None]:
    """For each of `revs`, the full hash of the one commit whose hash starts with it.

    None where there is no such commit, or several, or the rev is None. Only
    object names are considered: a branch or tag named like a hash is not the
    commit that hash names. A full-length hash is checked as it is; a shorter
    one is expanded by ``rev-parse --disambiguate``; then one
    ``cat-file --batch-check`` tells the kind of every candidate.
    """
    candidates: list[list[str]] = []
    for rev in revs:
        prefix = (rev or "").lower()
        if not 4 <= len(prefix) <= 64 or prefix.strip(string.hexdigits):
            candidates.append([])
        elif is_object_id(prefix):
            candidates.append([prefix])
        else:
            done = git.call("rev-parse", f"--disambiguate={prefix}")
            names = done.stdout.decode("ascii", "replace").split()
            candidates.append(names if done.returncode == 0 else [])
    asked = [name for names in candidates for name in names]
    if not asked:
        return [None] * len(revs)
    kinds = git.run(
        "cat-file", "--batch-check=%(objectname) %(objecttype)",
        stdin="".join(f"{name}\n" for name in asked).encode("ascii"),
    ).decode("ascii", "replace").splitlines()  # fmt: skip
    # An answer counts only for the very name asked: not for a ref that name resolved to.
    commits = {name for name, line in zip(asked, kinds, strict=True) if line == f"{name} commit"}
    resolved: list[str | None] = []
    for names in candidates:
        found = [name for name in names if name in commits]
        resolved.append(found[0] if len(found) == 1 else None)
    return resolved


class Repository:
    """A repository we read and never write: a work tree, or a bare repository.

    A bare repository (a mirror the service fetches, `verifier._internal.mirror`) has
    commits and no working tree: commit mode reads it as it reads any other;
    what reads the working tree (`worktree_paths`, `changed_in_worktree`)
    raises. `bare` tells which.
    """

    def __init__(
        self, path: Path, *, timeout_s: float = GIT_TIMEOUT_S, resolve: Sequence[str | None] = ()
    ) -> None:
        """Open the repository at `path`; with `resolve`, resolve those revs at the same time.

        The commits (`resolve_commits`) are resolved by a git run beside the
        ``rev-parse`` that tells what `path` is, both with ``cwd`` `path`: the
        answer is kept only once `path` is known to be the work tree's root, and
        a failure of the resolution is raised by `resolve_commits`, as if run then.
        """
        if not path.is_dir():
            raise InfrastructureError(f"repository {str(path)!r} does not exist")
        git = Git(path, timeout_s=timeout_s)
        self._resolved: tuple[tuple[str | None, ...], Future[list[str | None]]] | None = None
        if resolve:
            with ThreadPoolExecutor(1, thread_name_prefix="resolve") as pool:
                resolving = pool.submit(resolve_commits, git, *resolve)
                # raised first: the resolution is not asked
                self.root, self.bare = _work_tree(git, path)
            self._resolved = (tuple(resolve), resolving)
        else:
            self.root, self.bare = _work_tree(git, path)
        self._git = Git(self.root, timeout_s=timeout_s)
        # SHA-256 of the regular files `changed_in_worktree` read, so none is read twice:
        # of the bytes git would store (end-of-line attributes applied), as claims are.
        self.worktree_sha256: dict[str, str] = {}
        # Every file and link `changed_in_worktree` read, as `worktree_state` gives it:
        # the raw bytes, as the copy for the tests holds them.
        self.worktree_state: dict[str, str] = {}
        # The folders of each commit's tree that `trees` listed: (path, tree id).
        self.folders: dict[str, list[tuple[str, str]]] = {}
        # The commits base..head that `trees` listed when given `since`.
        self.chain: list[str] = []
        # What `trees` read with `since`, for `object_problems`: by head commit, the
        # (id, raw) of each commit of `chain` and head, and the raw trees by id, root first.
        self._objects: dict[str, tuple[list[tuple[str, bytes]], dict[str, bytes]]] = {}

    def close(self) -> None:
        """Nothing is held open between git commands; kept for ``with``."""

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, *args: str, stdin: bytes | None = None) -> bytes:
        return self._git.run(*args, stdin=stdin)

    def _call(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return self._git.call(*args, stdin=stdin)

    def resolve_commit(self, rev: str) -> str | None:
        """The full hash of the one commit whose hash starts with `rev`, or None."""
        return self.resolve_commits(rev)[0]

    def resolve_commits(self, *revs: str | None) -> list[str | None]:
        """For each of `revs`, the full hash of the one commit it names (`resolve_commits`).

        Answered from the resolution `__init__` started when it was given these revs.
        """
        if self._resolved is not None and self._resolved[0] == revs:
            return self._resolved[1].result()
        return resolve_commits(self._git, *revs)

    @property
    def history(self) -> History:
        """Ancestry questions asked of this repository."""
        return History(self._git)

    def tree(self, commit: str) -> dict[str, TreeEntry]:
        """Every entry of the commit's tree, recursively: path -> (mode, blob sha)."""
        return self.trees(commit)[0]

    def trees(self, *commits: str, since: str | None = None) -> list[dict[str, TreeEntry]]:
        """`tree` of each commit, their ``git ls-tree`` run at the same time.

        The folders each listing names are kept (`folders`) for `object_problems`;
        with `since`, so are the commits ``since..<last commit>`` (`chain`),
        listed by a ``git rev-list`` run beside them. With `since`, the last
        commit's trees are read by a ``git cat-file --batch`` instead, beside
        the others (`_walk_tree`), and kept with its commits' objects: the
        checks of `object_problems` then read nothing again.
        """
        listed = commits if since is None else commits[:-1]
        commands: list[tuple[str, ...]] = [
            ("ls-tree", "-r", "-t", "-z", "--full-tree", c) for c in listed
        ]
        if since is None:
            outs = self._git.run_many(*commands)
        else:
            head = commits[-1]
            commands.append(("rev-list", "--end-of-options", head, f"^{since}"))
            with (
                ThreadPoolExecutor(1, thread_name_prefix="ls-tree") as pool,
                self._git.object_reader() as reader,
            ):
                listing = pool.submit(self._git.run_many, *commands)
                head_entries, head_folders, raws = self._walk_tree(reader, head)
                outs = listing.result()
                self.chain = outs.pop().decode("ascii", "replace").split()
                wanted = [(c, "commit") for c in dict.fromkeys([*self.chain, head])]
                self._objects[head] = (reader.read_objects(wanted), raws)
        parsed = [_parse_tree(out) for out in outs]
        if since is not None:
            parsed.append((head_entries, head_folders))
        for commit, (_, folders) in zip(commits, parsed, strict=True):
            self.folders[commit] = folders
        return [entries for entries, _ in parsed]

    def _walk_tree(
        self, reader: CatFile, head: str
    ) -> tuple[dict[str, TreeEntry], list[tuple[str, str]], dict[str, bytes]]:
        """`head`'s tree as ``git ls-tree -r -t`` lists it, from its raw trees; and those.

        The trees are read level by level from `reader`, each distinct tree
        once, then listed depth first in each tree's order, as ls-tree does: a
        path listed twice keeps its last entry. The listing stops at the git
        timeout, as ls-tree would be stopped (a few trees can name each other
        into an exponential listing).
        """
        deadline = time.monotonic() + self._git.timeout_s
        ((root, raw),) = reader.read_objects([(f"{head}^{{tree}}", "tree")])
        raws = {root: raw}
        parsed: dict[str, list[tuple[int, bytes, str]]] = {}
        where = {root: ""}  # a folder each tree is found at first: what a corrupt one names
        level = [root]
        while level:
            wanted: dict[str, None] = {}
            for oid in level:
                parsed[oid] = _tree_records(raws[oid], oid)
                for mode, name, sub in parsed[oid]:
                    if mode == _S_IFDIR and sub not in raws:
                        wanted[sub] = None
                        folder = where[oid] + "/" if where[oid] else ""
                        where.setdefault(sub, folder + _decode(name))
            level = list(wanted)
            try:
                raws.update(reader.read_objects([(oid, "tree") for oid in level]))
            except ObjectCorrupt as exc:
                raise exc.at(where.get(exc.oid, "")) from None
        entries: dict[str, TreeEntry] = {}
        folders: list[tuple[str, str]] = []
        stack: list[tuple[bytes, Iterator[tuple[int, bytes, str]]]] = [(b"", iter(parsed[root]))]
        listed = 0
        while stack:
            prefix, todo = stack[-1]
            for mode, name, oid in todo:
                path = prefix + name
                listed += 1
                if listed % 4096 == 0 and time.monotonic() > deadline:
                    raise InfrastructureError(
                        f"git ls-tree timed out after {self._git.timeout_s:g}s "
                        f"in {str(self.root)!r}"
                    )
                if mode == _S_IFDIR:
                    folders.append((_decode(path), oid))
                    stack.append((path + b"/", iter(parsed[oid])))
                    break
                entries[_decode(path)] = TreeEntry(f"{mode:06o}", oid)
            else:
                stack.pop()
        return entries, folders, raws

    def object_problems(self, head: str) -> list[ObjectProblem]:
        """What git's ``fsck --strict`` would flag in what the tests will run on.

        The commit objects of `chain` (``base..head``, as `trees` listed them
        with `since`) and `head`, and every tree of `head`: its root and each
        folder `trees` listed. All are read by one ``git cat-file --batch`` (the
        one `trees` read them with, given `since`) and checked by
        `commit_problems` and `tree_problems`, so the cost follows the size of
        the head state, never the repository's whole object store. The base's
        trees are not read: nothing of them is copied for the tests.
        """
        folders: dict[str, str] = {}
        for path, oid in self.folders.get(head, []):
            if is_object_id(oid):
                folders.setdefault(oid, path)
        kept = self._objects.get(head)
        if kept is None:
            commits = list(dict.fromkeys([*self.chain, head]))
            requests = [(c, "commit") for c in commits] + [(f"{head}^{{tree}}", "tree")]
            requests += [(oid, "tree") for oid in folders]
            objects = self._git.read_objects(requests)
            read = objects[: len(commits)], objects[len(commits) :]
        else:
            commit_objects, raws = kept
            root = next(iter(raws))  # `_walk_tree` reads the root first
            trees = [(root, raws[root])] + [(oid, raws[oid]) for oid in folders if oid != root]
            read = commit_objects, trees
        problems: list[ObjectProblem] = []
        for oid, raw in read[0]:
            problems += [ObjectProblem("commit", oid, oid, m) for m in commit_problems(raw)]
        for at, (oid, raw) in enumerate(read[1]):
            path = "" if at == 0 else folders[oid]
            problems += [
                ObjectProblem("tree", oid, path, m) for m in tree_problems(raw, len(oid) // 2)
            ]
        return problems

    def verify_trees(self, commit: str) -> None:
        """Read `commit` and every tree `trees` listed of it, each checked against its id.

        ``git ls-tree`` lists what git's trees say without checking that their
        bytes are those their ids name; read through `CatFile`, each object is
        (`ObjectCorrupt` when one is not): a base tree rewritten in place to
        name a weaker test blob is caught here. The head's trees `trees` read
        with `since` are checked already as they were read.
        """
        trees: dict[str, str] = {}
        for path, oid in self.folders.get(commit, []):
            if is_object_id(oid):
                trees.setdefault(oid, path)
        requests = [(commit, "commit"), (f"{commit}^{{tree}}", "tree")]
        try:
            self._git.read_objects(requests + [(oid, "tree") for oid in trees])
        except ObjectCorrupt as exc:
            raise exc.at(trees.get(exc.oid, "")) from None

    def blob_sha256s(
        self, *runs: Sequence[str], cache: BlobDigestCache | None = None
    ) -> dict[str, str]:
        """The SHA-256 of each blob's raw bytes: blob sha -> hex digest (`Git.blob_sha256s`)."""
        return self._git.blob_sha256s(*runs, cache=cache)

    def changed_in_worktree(self, base_tree: dict[str, TreeEntry], visible: set[str]) -> set[str]:
        """Paths git would see as changed from the base tree in the working tree.

        Every file git would see (tracked, or untracked and not ignored) is hashed
        as the blob git would store (`eol_conversions`) and compared with the
        base tree, mode included; a base file git no longer sees is a deletion.
        `visible` is `worktree_paths()`.
        """
        conversions = self.eol_conversions(visible)
        now: dict[str, TreeEntry | None] = {}
        auto: list[tuple[str, FileHashes]] = []
        for path in visible:
            # Created files are hashed too: the copy for the tests must hold them as read.
            now[path], hashes = self._worktree_entry(path, conversions.get(path))
            if (
                hashes is not None
                and hashes.stored is not None
                and conversions[path] == EOL_AUTO
                and path in base_tree
            ):
                auto.append((path, hashes))
        for path, hashes in self._keep_crlf(base_tree, auto):
            # git's "safer autocrlf": text=auto never converts a file whose blob holds a CR.
            now[path] = TreeEntry("100755" if hashes.executable else "100644", hashes.blob_sha1)
            self.worktree_sha256[path] = hashes.sha256
        changed = {path for path in base_tree if path not in visible}
        changed.update(
            path for path, entry in now.items() if path not in base_tree or entry != base_tree[path]
        )
        return changed

    def eol_conversions(self, paths: set[str]) -> dict[str, str]:
        """The end-of-line conversion git's attributes ask for each path that has one.

        ``git check-attr --stdin -z text eol``, as ``convert.c`` reads them: text
        set (or ``eol`` given) is `EOL_TEXT`; ``text=auto`` is `EOL_AUTO`; text
        unset, or neither attribute, converts nothing (``core.autocrlf`` is the
        agent's configuration, not the repository's attributes: not read). With
        no ``.gitattributes`` git sees and no ``info/attributes``, git is not
        asked: almost every repository.
        """
        info = self.root / ".git" / "info" / "attributes"
        if not paths or not (
            any(p == ".gitattributes" or p.endswith("/.gitattributes") for p in paths)
            or info.exists()
            or not (self.root / ".git").is_dir()  # a linked worktree: its info is elsewhere
        ):
            return {}
        listing = "".join(f"{path}\0" for path in sorted(paths)).encode("utf-8", "surrogateescape")
        out = self._run("check-attr", "--stdin", "-z", "text", "eol", stdin=listing)
        fields = out.split(b"\0")
        attrs: dict[str, dict[str, str]] = {}
        for at in range(0, len(fields) - 2, 3):
            path, name, value = (_decode(f) for f in fields[at : at + 3])
            attrs.setdefault(path, {})[name] = value
        conversions: dict[str, str] = {}
        for path, values in attrs.items():
            text, eol = values.get("text", "unspecified"), values.get("eol", "unspecified")
            if text == "unset":
                continue
            if text == "auto":
                conversions[path] = EOL_AUTO
            elif text in ("set", "input") or eol in ("lf", "crlf"):
                conversions[path] = EOL_TEXT
        return conversions

    def _keep_crlf(
        self, base_tree: Mapping[str, TreeEntry], auto: list[tuple[str, FileHashes]]
    ) -> list[tuple[str, FileHashes]]:
        """The `auto` files whose base blob holds a CR: git leaves those as they are.

        git asks the index; we never read it, and take the base commit's blob
        in its place (what an honest session's index holds for a file it did
        not re-add). Read only for ``text=auto`` files that hold a CRLF.
        """
        wanted = [(path, h) for path, h in auto if base_tree[path].is_file]
        if not wanted:
            return []
        blobs = self._git.read_objects([(base_tree[path].sha, "blob") for path, _ in wanted])
        return [
            (path, h) for (path, h), (_, raw) in zip(wanted, blobs, strict=True) if b"\r" in raw
        ]

    def worktree_paths(self) -> set[str]:
        """Tracked files plus untracked files that are not ignored."""
        if self.bare:
            raise InfrastructureError(f"{str(self.root)!r} is a bare repository: no working tree")
        out = self._run("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return {_decode(p) for p in out.split(b"\0") if p}

    def _worktree_entry(
        self, rel: str, eol: str | None = None
    ) -> tuple[TreeEntry | None, FileHashes | None]:
        """What git would record for `rel` now: its mode and blob sha (None if unreadable).

        With the hashes read, for a regular file: the raw bytes' go to
        `worktree_state`, what git would store (`eol` applied) to `worktree_sha256`.
        """
        try:
            hashes = hash_in_root(self.root, rel, eol)
        except UnsafeFile as exc:
            link = self.root / rel
            if exc.code != "change.symlink" or not link.is_symlink():
                return None, None  # a link on the way, or not a file: count it as changed
            target = os.readlink(link)
            self.worktree_state[rel] = worktree_state(MODE_LINK, target)
            raw = os.fsencode(target)
            blob = hashlib.sha1(f"blob {len(raw)}\0".encode(), usedforsecurity=False)
            blob.update(raw)
            return TreeEntry(MODE_LINK, blob.hexdigest()), None
        if hashes is None:
            return None, None
        mode = "100755" if hashes.executable else "100644"
        sha256, blob_sha1 = hashes.stored or (hashes.sha256, hashes.blob_sha1)
        self.worktree_sha256[rel] = sha256
        self.worktree_state[rel] = worktree_state(mode, hashes.sha256)
        return TreeEntry(mode, blob_sha1), hashes
