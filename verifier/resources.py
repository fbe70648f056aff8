"""Where the files the verifier ships with are: migrations, default configuration, profiles.

Every other module asks here, so that a checkout and an installed wheel find
them the same way.

A checkout keeps them at its top level (``migrations/``, ``config/``), where
the project layout wants them. The wheel carries the same folders inside the
package: ``pyproject.toml`` maps ``migrations/`` onto ``verifier/_migrations/``
and ``config/`` onto ``verifier/_config/`` (setuptools ``package-dir``), so there
is one copy of each file in the source and nothing to keep in step. An
installed wheel therefore finds them beside this module; a checkout (an
editable install, or tests run from the source tree) has no such folder and
finds them at the top of the tree.

The answers are real directories, not `importlib.resources` traversables:
Alembic reads its script directory from the file system, and a profile
directory is a place a configuration may point at.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_CHECKOUT = _PACKAGE.parent


def _shipped(packaged: str, top_level: str) -> Path:
    """`verifier/<packaged>` when installed from a wheel, else `<top_level>` of the checkout.

    When neither exists (a broken install) the packaged path is returned, so
    that the error of whoever reads it names where an installed verifier looks.
    """
    inside = _PACKAGE / packaged
    if inside.exists():
        return inside
    source = _CHECKOUT / top_level
    if source.exists() and (_CHECKOUT / "pyproject.toml").is_file():
        return source
    return inside


def report_schema_file() -> Path:
    """The published JSON Schema of session report v1 (``make schema`` writes it)."""
    return _PACKAGE / "contract" / "report.schema.json"


def migrations_dir() -> Path:
    """The Alembic script directory of the store (``migrations/``)."""
    return _shipped("_migrations", "migrations")


def default_config_file() -> Path:
    """The packaged default configuration (``config/verifier.toml``)."""
    return _shipped("_config", "config") / "verifier.toml"


def profiles_dir() -> Path:
    """The packaged tool profiles (``config/profiles/*.toml``)."""
    return _shipped("_config", "config") / "profiles"


def tampering_patterns_file() -> Path:
    """The packaged patterns of code reaching into the test machinery (``tampering.toml``)."""
    return _shipped("_config", "config") / "tampering.toml"
