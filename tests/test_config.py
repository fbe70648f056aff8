"""Configuration: one typed object from TOML and the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.config import Config, parse_command
from verifier.errors import ConfigError


def test_project_default_config_loads() -> None:
    config = Config.load(environ={})
    assert config.test_timeout_s == 600
    assert config.network_isolation == "auto"
    assert (config.profiles_dir / "default.toml").is_file()
    assert config.database_url.startswith("sqlite:///")


def test_environment_selects_the_database() -> None:
    config = Config.load(environ={"VERIFIER_DATABASE_URL": "postgresql+psycopg://h/db"})
    assert config.database_url == "postgresql+psycopg://h/db"


def test_repository_table_is_read_with_relative_paths(tmp_path: Path) -> None:
    path = tmp_path / "v.toml"
    path.write_text(
        '[repositories.calc]\npath = "repo"\ntest_command = "pytest -q \'a b\' ;"\n'
        'test_timeout = 5\nprotected_paths = ["tests/**"]\n'
        'trusted_ref = "refs/remotes/origin/main"\n'
    )
    repo = Config.load(path, environ={}).repository("calc")
    assert repo.path == tmp_path / "repo"
    assert repo.test_command == ("pytest", "-q", "a b", ";")
    assert repo.test_timeout_s == 5.0
    assert repo.protected_paths == ("tests/**",)
    assert repo.trusted_ref == "refs/remotes/origin/main"


def test_an_unregistered_repository_has_no_command() -> None:
    assert Config().repository("nope").test_command == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[verifier]\ntest_timeout = -1\n", "verifier.test_timeout"),
        ("[verifier]\nnetwork_isolation = 'sometimes'\n", "verifier.network_isolation"),
        ("[verifier]\ncolour = 1\n", "unknown keys"),
        ("[repositories.calc]\ntest_command = 3\n", "repositories.calc.test_command"),
        ("[repositories.calc]\nprotected_paths = 'tests'\n", "repositories.calc.protected_paths"),
        ("[repositories.calc]\nhost = 'x'\n", "unknown keys"),
        ("this is = not toml =", "cannot be read"),
    ],
)
def test_bad_configuration_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "v.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        Config.load(path, environ={})


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Config.load(tmp_path / "absent.toml", environ={})


def test_shell_metacharacters_stay_literal_arguments() -> None:
    assert parse_command("pytest; rm -rf / | tee $(x) && `y`", "cmd") == (
        "pytest;",
        "rm",
        "-rf",
        "/",
        "|",
        "tee",
        "$(x)",
        "&&",
        "`y`",
    )
    with pytest.raises(ConfigError, match="cannot split"):
        parse_command("pytest 'unclosed", "cmd")
