"""The configuration in force, as ``verifier config show`` reports it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.config import Config, config_candidates


@dataclass(frozen=True)
class Settings:
    """Which file was read (None: the packaged defaults alone), where one was looked for,
    and the effective settings with their secrets masked."""

    file: Path | None
    searched: tuple[Path, ...]
    settings: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": None if self.file is None else str(self.file),
            "searched": [str(p) for p in self.searched],
            "settings": self.settings,
        }


def settings(config: Config, environ: Mapping[str, str] | None = None) -> Settings:
    """What `config` was read from and what it holds."""
    searched = config_candidates(os.environ if environ is None else environ)
    return Settings(config.source, tuple(searched), config.settings())
