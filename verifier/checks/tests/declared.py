"""The distributions the base declares as dependencies: the pytest plugins loaded by default.

pytest runs with plugin autoloading off and loads the ``pytest11`` plugins of trusted
distributions by name only (`verifier.checks.tests.entries.pytest_entry`). A suite uses a
plugin's fixture (pytest-mock's ``mocker``, anyio's ``anyio_backend``) without naming the
plugin in its pytest configuration: the name is in its dependency declarations. So, by
default, a trusted distribution the base declares also loads its plugins.

`declared_distributions` reads the declarations from the base commit (or the trusted
ref's tip, as the test infrastructure is), never from the head: every blob through
``git cat-file``, checked against its id. The head's declarations decide nothing. Read:

* ``pyproject.toml``: ``[project]`` ``dependencies`` and ``optional-dependencies``,
  ``[dependency-groups]`` (PEP 735: every group, so ``include-group`` adds nothing),
  ``[tool.poetry]`` ``dependencies``/``dev-dependencies``/``group.*.dependencies``,
  ``[tool.pdm] dev-dependencies``, ``[tool.hatch.envs.*]``
  ``dependencies``/``extra-dependencies``;
* ``setup.cfg``: ``[options]`` ``install_requires``/``tests_require``,
  ``[options.extras_require]``;
* ``tox.ini``: ``deps`` of ``[testenv]`` and ``[testenv:*]``;
* requirements files at the root (``*requirements*.txt``/``.in``) and in ``requirements/``,
  with the ``-r``/``-c`` files they (or ``tox.ini``'s ``deps``) include, one level deep.

Names are PEP 503 normalised; only the leading name of a requirement counts (PEP 508),
options lines and URLs are skipped. Reading is cheap: a handful of small blobs.
"""

from __future__ import annotations

import configparser
import os
import posixpath
import re
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from verifier._internal.git import Git
from verifier.checks.tests.testinfra import TestInfraError

__all__ = ["declared_distributions", "names_in_pyproject", "names_in_requirements"]

_MAX_BLOB = 1 << 20  # a declaration file larger than this is not read
_MAX_FILES = 64
# PEP 508: a name, then the end or what may follow a name.
_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?=$|[\[(<>=!~;@,\s])")
_INCLUDE = re.compile(r"^(?:-r|-c|--requirement|--constraint)(?:\s*=?\s*)(\S+)")
_TOX_FACTORS = re.compile(r"^[A-Za-z0-9_.,!-]+:\s+")


def canonical(name: str) -> str:
    """PEP 503's normal form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _name(requirement: str) -> str | None:
    match = _NAME.match(requirement)
    return canonical(match.group(1)) if match else None


def names_in_requirements(text: str) -> tuple[list[str], list[str]]:
    """The requirement names of a requirements file (or of ``deps``), and the files it
    includes (``-r``/``-c``, as written); comments, options and URLs are skipped."""
    names: list[str] = []
    includes: list[str] = []
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*", "", raw).strip()
        if not line:
            continue
        include = _INCLUDE.match(line)
        if include:
            includes.append(include.group(1))
            continue
        if line.startswith("-") or "://" in line.split(" @ ")[0] or "{" in line:
            continue  # an option, a URL or a tox substitution
        name = _name(line)
        if name is not None:
            names.append(name)
    return names, includes


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        yield from (v for v in value if isinstance(v, str))


def _tables(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield from (v for v in value.values() if isinstance(v, dict))


def names_in_pyproject(data: dict[str, Any]) -> list[str]:
    """Every distribution a parsed ``pyproject.toml`` declares, in the tables the module
    names."""
    requirements: list[str] = []
    keys: list[str] = []
    project = data.get("project", {})
    if isinstance(project, dict):
        requirements += _strings(project.get("dependencies"))
        for extra in (project.get("optional-dependencies") or {}).values():
            requirements += _strings(extra)
    for group in (data.get("dependency-groups") or {}).values():
        requirements += _strings(group)  # include-group tables: every group is read anyway
    tool = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
    poetry = tool.get("poetry", {})
    if isinstance(poetry, dict):
        for table in (poetry.get("dependencies"), poetry.get("dev-dependencies")):
            keys += table if isinstance(table, dict) else []
        for group in _tables(poetry.get("group")):
            table = group.get("dependencies")
            keys += table if isinstance(table, dict) else []
    pdm = tool.get("pdm", {})
    if isinstance(pdm, dict):
        for group in (pdm.get("dev-dependencies") or {}).values():
            requirements += _strings(group)
    hatch = tool.get("hatch", {})
    for env in _tables(hatch.get("envs") if isinstance(hatch, dict) else None):
        requirements += _strings(env.get("dependencies"))
        requirements += _strings(env.get("extra-dependencies"))
    names = [n for n in map(_name, requirements) if n is not None]
    return names + [canonical(k) for k in keys if isinstance(k, str) and k != "python"]


def _names_in_setup_cfg(text: str) -> list[str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    values: list[str] = []
    if parser.has_section("options"):
        values += [
            parser.get("options", k, fallback="") for k in ("install_requires", "tests_require")
        ]
    if parser.has_section("options.extras_require"):
        values += [v for _, v in parser.items("options.extras_require")]
    names: list[str] = []
    for value in values:
        for part in re.split(r"[\n;]", value):
            name = _name(part.strip())
            if name is not None:
                names.append(name)
    return names


def _tox_deps(text: str) -> str:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    deps = [
        parser.get(section, "deps", fallback="")
        for section in parser.sections()
        if section == "testenv" or section.startswith("testenv:")
    ]
    return "\n".join(_TOX_FACTORS.sub("", line.strip()) for d in deps for line in d.splitlines())


def _is_requirements(path: str) -> bool:
    folder, name = posixpath.split(path)
    if not name.endswith((".txt", ".in")):
        return False
    return (folder == "" and "requirements" in name.lower()) or folder == "requirements"


class _Base:
    """The blobs of one commit, read by path (the root's files and ``requirements/``)."""

    def __init__(self, git: Git, commit: str) -> None:
        self.git, self.commit = git, commit
        self.blobs: dict[str, str] = {}
        self._list(".", "requirements/")

    def _list(self, *paths: str) -> None:
        listing = self.git.run("ls-tree", "-z", "--full-tree", self.commit, "--", *paths)
        self._add(listing)

    def _add(self, listing: bytes) -> None:
        for record in listing.split(b"\0"):
            meta, _, raw = record.partition(b"\t")
            parts = meta.decode("ascii", "replace").split(" ")
            if len(parts) == 3 and parts[1] == "blob" and parts[0] != "120000":
                self.blobs[os.fsdecode(raw)] = parts[2]

    def read(self, paths: Iterable[str]) -> dict[str, str]:
        """The text of each of `paths` the commit has (a large or undecodable one left out)."""
        paths = list(dict.fromkeys(paths))[:_MAX_FILES]
        elsewhere = [p for p in paths if p not in self.blobs and p.split("/")[0] not in ("", "..")]
        if elsewhere:  # an include's path: one git cannot list (a pathspec's error) is absent
            listed = self.git.call("ls-tree", "-z", "--full-tree", self.commit, "--", *elsewhere)
            self._add(listed.stdout if listed.returncode == 0 else b"")
        wanted = [p for p in paths if p in self.blobs]
        if not wanted:
            return {}
        sizes = self.git.run("cat-file", "--batch-check=%(objectsize)", stdin=_ids(self, wanted))
        small = [p for p, s in zip(wanted, sizes.split(), strict=False) if int(s) <= _MAX_BLOB]
        texts: dict[str, str] = {}
        with self.git.cat_file([self.blobs[p] for p in small]) as batch:
            for path in small:
                texts[path] = batch.read(self.blobs[path]).decode("utf-8", "replace")
        return texts


def _ids(base: _Base, paths: list[str]) -> bytes:
    return "".join(f"{base.blobs[p]}\n" for p in paths).encode("ascii")


def declared_distributions(repo_path: Path, commit: str) -> tuple[str, ...]:
    """The distributions `commit` declares as dependencies (sorted, normalised), read from
    its blobs. A file that does not parse declares nothing. Raises `TestInfraError` when
    git cannot read the commit, `ObjectCorrupt` when a blob is not its id's bytes."""
    git = Git(repo_path, error=TestInfraError)
    base = _Base(git, commit)
    first = ["pyproject.toml", "setup.cfg", "tox.ini", *filter(_is_requirements, base.blobs)]
    texts = base.read(first)
    names: list[str] = []
    included: list[str] = []
    for path, text in texts.items():
        try:
            if path == "pyproject.toml":
                names += names_in_pyproject(tomllib.loads(text))
                continue
            if path == "setup.cfg":
                names += _names_in_setup_cfg(text)
                continue
            found, includes = names_in_requirements(_tox_deps(text) if path == "tox.ini" else text)
        except (tomllib.TOMLDecodeError, configparser.Error, AttributeError, TypeError):
            continue  # not a file of the shape we read: it declares nothing here
        names += found
        folder = posixpath.dirname(path)
        included += [posixpath.normpath(posixpath.join(folder, p)) for p in includes]
    for text in base.read(p for p in included if p not in texts).values():
        names += names_in_requirements(text)[0]  # one level: its own includes are not read
    return tuple(sorted(set(names)))
