"""Where the files the verifier ships with are: migrations, default configuration, profiles.

Every other module asks here, so that a checkout and an installed wheel find
them the same way.
"""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def migrations_dir() -> Path:
    """The Alembic script directory of the store."""
    return _ROOT / "migrations"


def default_config_file() -> Path:
    """The packaged default configuration (``config/verifier.toml``)."""
    return _ROOT / "config" / "verifier.toml"


def profiles_dir() -> Path:
    """The packaged tool profiles (``config/profiles/*.toml``)."""
    return _ROOT / "config" / "profiles"
