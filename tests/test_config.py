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
        ("[verifier]\ncolour = 1\n", "verifier.colour: unknown key"),
        ("[repositories.calc]\ntest_command = 3\n", "repositories.calc.test_command"),
        ("[repositories.calc]\nprotected_paths = 'tests'\n", "repositories.calc.protected_paths"),
        ("[repositories.calc]\nhost = 'x'\n", "repositories.calc.host: unknown key"),
        ("[repositories.calc]\ntest_timeout = true\n", "repositories.calc.test_timeout"),
        ("[verifier]\nmax_snapshot_bytes = '1'\n", "verifier.max_snapshot_bytes"),
        ("[verfier]\n", "unknown tables"),
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


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_search_order_is_flag_env_xdg_then_system(tmp_path: Path) -> None:
    system = tmp_path / "etc"
    xdg = tmp_path / "xdg"
    env = {"XDG_CONFIG_HOME": str(xdg)}
    assert Config.load(environ=env, system_dir=system).source is None
    sys_file = _write(system / "verifier.toml", "[verifier]\ntest_timeout = 4\n")
    assert Config.load(environ=env, system_dir=system).source == sys_file
    xdg_file = _write(xdg / "verifier" / "verifier.toml", "[verifier]\ntest_timeout = 3\n")
    assert Config.load(environ=env, system_dir=system).test_timeout_s == 3
    named = _write(tmp_path / "named.toml", "[verifier]\ntest_timeout = 2\n")
    env_named = {**env, "VERIFIER_CONFIG": str(named)}
    assert Config.load(environ=env_named, system_dir=system).source == named
    flag = _write(tmp_path / "flag.toml", "[verifier]\ntest_timeout = 1\n")
    assert Config.load(flag, environ=env_named, system_dir=system).test_timeout_s == 1
    assert xdg_file.is_file()


def test_a_verifier_toml_in_the_current_directory_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path / "verifier.toml", "[verifier]\nnetwork_isolation = 'off'\n")
    _write(tmp_path / "config" / "verifier.toml", "[verifier]\nnetwork_isolation = 'off'\n")
    monkeypatch.chdir(tmp_path)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "none")}
    config = Config.load(environ=env, system_dir=tmp_path / "none")
    assert config.network_isolation == "auto"
    assert config.source is None


def test_the_packaged_defaults_fill_what_the_file_leaves_out(tmp_path: Path) -> None:
    path = _write(tmp_path / "v.toml", "[verifier]\ntest_timeout = 7\n")
    config = Config.load(path, environ={})
    assert config.test_timeout_s == 7
    assert config.network_isolation == "auto"
    assert (config.profiles_dir / "default.toml").is_file()


def test_the_packaged_file_says_what_the_code_defaults_are() -> None:
    """Security defaults live in code; the packaged file only documents them."""
    packaged = Config.load(environ={}, system_dir=Path("/nonexistent"))
    assert packaged.settings() == Config().settings()


def test_settings_mask_the_database_password() -> None:
    config = Config.load(
        environ={"VERIFIER_DATABASE_URL": "postgresql+psycopg://bob:s3cret@db:5432/v"}
    )
    assert config.settings()["database_url"] == "postgresql+psycopg://bob:***@db:5432/v"
    assert "s3cret" not in repr(config.settings())


def test_a_config_file_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a file"):
        Config.load(tmp_path, environ={})


def test_the_tasks_file_lies_beside_the_configuration_unless_one_is_named(
    tmp_path: Path,
) -> None:
    assert Config().tasks_location() == (None, False)
    beside = tmp_path / "v.toml"
    beside.write_text("[verifier]\n", encoding="utf-8")
    assert Config.load(beside, environ={}).tasks_location() == (tmp_path / "tasks.toml", False)
    named = tmp_path / "named.toml"
    named.write_text('[verifier]\ntasks_file = "ops/tasks.toml"\n', encoding="utf-8")
    # Named, it must exist (`verifier.app.tasks.file_tasks`), relative to its file's folder.
    assert Config.load(named, environ={}).tasks_location() == (
        tmp_path / "ops" / "tasks.toml",
        True,
    )


def test_a_reports_read_only_claim_counts_only_where_the_policy_allows_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v.toml"
    path.write_text(
        "[repositories.calc]\nallow_read_only_claims = true\n[repositories.other]\n",
        encoding="utf-8",
    )
    config = Config.load(path, environ={})
    assert config.repository("calc").allow_read_only_claims
    assert not config.repository("other").allow_read_only_claims
    assert not config.repository("unconfigured").allow_read_only_claims
    path.write_text('[repositories.calc]\nallow_read_only_claims = "yes"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"repositories\.calc\.allow_read_only_claims"):
        Config.load(path, environ={})
