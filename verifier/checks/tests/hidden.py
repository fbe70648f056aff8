"""What the sandbox covers while the tests run: the checked repository, our configuration
and database, every repository's mirror, and the user's credential files.

The run works on a copy; the original, and what would let the code under test
reach the verifier or the user's accounts, are covered by empty read-only mounts
(`verifier._internal.sandbox.runner.run`'s ``hide``; docs/findings.md, Limits).
A path that holds what the run needs (the interpreter, the copy) is never covered.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote

from verifier.config import Config

__all__ = ["CREDENTIALS", "hidden_paths"]

# Credentials of the verifier's user that the code under test has no business reading.
CREDENTIALS = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".docker",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".config/git",
    ".pgpass",
    ".netrc",
    ".git-credentials",
    ".gitconfig",
    ".pypirc",
)


def hidden_paths(repo_path: Path, config: Config, keep: Sequence[Path]) -> list[Path]:
    """What the sandbox covers: the checked repository, our configuration and database,
    and the user's credential files; never a path that holds what the run needs."""
    candidates = [
        repo_path.resolve(),
        Path.home() / ".local" / "share" / "verifier",
        config.mirror_cache.resolve(),  # every repository's mirror, not only this one
    ]
    if config.source is not None:
        candidates.append(config.source.resolve())
    scheme, _, rest = config.database_url.partition(":///")
    db_name = rest.split("?")[0]
    if db_name.startswith("file:"):  # SQLite's URI form (`?uri=true`): file:/a, file:///a, file:a
        db_name = unquote(db_name.removeprefix("file:"))
        db_name = "/" + db_name[2:].partition("/")[2] if db_name.startswith("//") else db_name
    if scheme.split("+")[0] == "sqlite" and db_name and not db_name.startswith(":memory:"):
        database = Path(db_name).resolve()  # relative: to our working folder
        candidates += [database, Path(f"{database}-wal"), Path(f"{database}-shm")]
    candidates += [Path.home() / name for name in CREDENTIALS]
    needed = [
        p.resolve() for p in (*keep, Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix))
    ]
    return [c for c in candidates if not any(n == c or n.is_relative_to(c) for n in needed)]
