"""`verifier.app.settings`: which file was read, where one was looked for, what it holds."""

from __future__ import annotations

from pathlib import Path

from verifier.app import settings
from verifier.config import Config


def test_the_file_read_and_its_settings_with_the_password_masked(tmp_path: Path) -> None:
    path = tmp_path / "v.toml"
    path.write_text('[verifier]\ndatabase_url = "postgresql+psycopg://bob:hunter2@db/v"\n')
    shown = settings.settings(Config.load(path, environ={}), environ={"XDG_CONFIG_HOME": "/x"})
    data = shown.to_dict()
    assert data["file"] == str(path)
    assert data["searched"][0] == "/x/verifier/verifier.toml"
    assert data["settings"]["database_url"] == "postgresql+psycopg://bob:***@db/v"


def test_no_file_read_is_none() -> None:
    shown = settings.settings(Config.load(None, environ={}, system_dir=Path("/nonexistent")))
    assert shown.file is None and shown.to_dict()["file"] is None
