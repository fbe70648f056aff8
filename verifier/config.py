"""The verifier's configuration: one typed object, built once and passed in.

Sources, later ones winning: the defaults below, ``config/verifier.toml`` of
this project (or the file given with ``--config`` / ``VERIFIER_CONFIG``), and
the environment (``VERIFIER_DATABASE_URL``). Nothing here is a module global
that callers reassign.
"""

from __future__ import annotations

import os
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from verifier import resources
from verifier.errors import ConfigError

DEFAULT_CONFIG_FILE = resources.default_config_file()
DEFAULT_TEST_TIMEOUT_S = 600.0


def default_database_url() -> str:
    """The embedded default: a SQLite file in the user's data directory."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return f"sqlite:///{Path(base) / 'verifier' / 'verifier.sqlite3'}"


@dataclass(frozen=True)
class RepositoryConfig:
    """What we know about one repository, by the name reports use for it."""

    name: str
    path: Path | None = None
    test_command: tuple[str, ...] = ()
    test_timeout_s: float | None = None
    protected_paths: tuple[str, ...] = ()
    # A ref only people update (e.g. refs/remotes/origin/main): the base must be in its history.
    trusted_ref: str | None = None
    # How a run's results are read (docs/runners.md): "auto" (pytest and unittest are
    # counted, other runners are not), "junit" (the files of `results_junit`), "exit-code".
    results: str = "auto"
    results_junit: tuple[str, ...] = ()
    # The repository's own interpreter, or virtual environment: `{python}` and PATH use it.
    python: Path | None = None
    venv: Path | None = None


@dataclass(frozen=True)
class Config:
    database_url: str = field(default_factory=default_database_url)
    test_timeout_s: float = DEFAULT_TEST_TIMEOUT_S
    network_isolation: str = "auto"  # auto | required | off
    output_excerpt_bytes: int = 8192
    max_snapshot_bytes: int = 2 * 1024**3
    profiles_dir: Path = field(default_factory=resources.profiles_dir)
    repositories: Mapping[str, RepositoryConfig] = field(default_factory=dict)
    source: Path | None = None

    @classmethod
    def load(cls, path: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
        """Build the configuration from a TOML file and the environment."""
        env = os.environ if environ is None else environ
        if path is None and env.get("VERIFIER_CONFIG"):
            path = Path(env["VERIFIER_CONFIG"])
        if path is None and DEFAULT_CONFIG_FILE.is_file():
            path = DEFAULT_CONFIG_FILE
        config = cls() if path is None else cls.from_toml(path)
        if env.get("VERIFIER_DATABASE_URL"):
            config = replace(config, database_url=env["VERIFIER_DATABASE_URL"])
        return config

    @classmethod
    def from_toml(cls, path: Path) -> Config:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {str(path)!r} does not exist") from None
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}") from None
        return cls.from_mapping(data, base_dir=path.resolve().parent, source=path)

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], base_dir: Path, source: Path | None = None
    ) -> Config:
        """Validate the TOML document; relative paths are relative to its folder."""
        main = _table(data, "verifier")
        unknown = set(main) - {
            "database_url",
            "test_timeout",
            "network_isolation",
            "output_excerpt_bytes",
            "max_snapshot_bytes",
            "profiles_dir",
        }
        if unknown:
            raise ConfigError(f"verifier: unknown keys {sorted(unknown)}")
        kwargs: dict[str, Any] = {"source": source}
        if main.get("database_url"):
            kwargs["database_url"] = _str(main, "database_url", "verifier")
        if "test_timeout" in main:
            kwargs["test_timeout_s"] = _timeout(main["test_timeout"], "verifier.test_timeout")
        if "network_isolation" in main:
            mode = _str(main, "network_isolation", "verifier")
            if mode not in {"auto", "required", "off"}:
                raise ConfigError(
                    f"verifier.network_isolation: expected auto, required or off, got {mode!r}"
                )
            kwargs["network_isolation"] = mode
        for key in ("output_excerpt_bytes", "max_snapshot_bytes"):
            if key in main:
                value = main[key]
                if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                    raise ConfigError(f"verifier.{key}: expected a positive integer, got {value!r}")
                kwargs[key] = value
        if "profiles_dir" in main:
            kwargs["profiles_dir"] = base_dir / _str(main, "profiles_dir", "verifier")
        repos = {}
        for name, table in _table(data, "repositories").items():
            if not isinstance(table, Mapping):
                raise ConfigError(f"repositories.{name}: expected a table")
            repos[name] = _repository(name, table, base_dir)
        kwargs["repositories"] = repos
        return cls(**kwargs)

    def repository(self, name: str) -> RepositoryConfig:
        """The configuration of repository `name`, empty when it is not registered."""
        return self.repositories.get(name) or RepositoryConfig(name=name)


def parse_command(value: Any, where: str) -> tuple[str, ...]:
    """A command is an argument list, or a string split like a shell would, never run by one."""
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise ConfigError(f"{where}: cannot split {value!r}: {exc}") from None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: expected a string or a list of strings, got {value!r}")


def _repository(name: str, table: Mapping[str, Any], base_dir: Path) -> RepositoryConfig:
    where = f"repositories.{name}"
    unknown = set(table) - {
        "path",
        "test_command",
        "test_timeout",
        "protected_paths",
        "trusted_ref",
        "results",
        "python",
        "venv",
    }
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    path = base_dir / _str(table, "path", where) if "path" in table else None
    command = (
        parse_command(table["test_command"], f"{where}.test_command")
        if ("test_command" in table)
        else ()
    )
    timeout = (
        _timeout(table["test_timeout"], f"{where}.test_timeout")
        if ("test_timeout" in table)
        else None
    )
    protected = table.get("protected_paths", [])
    if not isinstance(protected, list) or not all(isinstance(p, str) for p in protected):
        raise ConfigError(f"{where}.protected_paths: expected a list of glob strings")
    trusted = _str(table, "trusted_ref", where) if "trusted_ref" in table else None
    results, junit = _results(table.get("results", "auto"), f"{where}.results")
    if "python" in table and "venv" in table:
        raise ConfigError(f"{where}: give python or venv, not both")
    python = base_dir / _str(table, "python", where) if "python" in table else None
    venv = base_dir / _str(table, "venv", where) if "venv" in table else None
    return RepositoryConfig(
        name, path, command, timeout, tuple(protected), trusted, results, junit, python, venv
    )


def _results(value: Any, where: str) -> tuple[str, tuple[str, ...]]:
    """``"auto"``, ``"exit-code"``, or ``{ junit = [globs] }`` with globs inside the copy."""
    if value in ("auto", "exit-code"):
        return value, ()
    if not isinstance(value, Mapping) or set(value) != {"junit"}:
        raise ConfigError(
            f'{where}: expected "auto", "exit-code" or {{ junit = [globs] }}, got {value!r}'
        )
    globs = value["junit"]
    if not isinstance(globs, list) or not globs or not all(isinstance(g, str) for g in globs):
        raise ConfigError(f"{where}.junit: expected a list of glob strings, got {globs!r}")
    for glob in globs:
        parts = glob.replace("\\", "/").split("/")
        if not glob or glob.startswith("/") or ".." in parts or "\0" in glob:
            raise ConfigError(
                f"{where}.junit: {glob!r} is not a relative path inside the repository"
            )
    return "junit", tuple(globs)


def _table(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected a table")
    return value


def _str(table: Mapping[str, Any], key: str, where: str) -> str:
    value = table[key]
    if not isinstance(value, str):
        raise ConfigError(f"{where}.{key}: expected a string, got {value!r}")
    return value


def _timeout(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}: expected a positive number of seconds, got {value!r}")
    return float(value)
