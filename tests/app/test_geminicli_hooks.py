"""``verifier gemini-cli install`` / ``uninstall``: our hooks merged into a real repository's
``.gemini/settings.json`` and taken out again, the user's settings and git's exclude file
kept byte for byte."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.trust import ed25519_pem
from verifier.app import geminicli_hooks as hooks
from verifier.errors import ConfigError

USER_SETTINGS = (
    b'{\n  "model": {"name": "gemini-2.5-pro"},\n'
    b'  "hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": '
    b'[{"type": "command", "command": "./lint.sh"}]}]}\n}\n'
)


def _settings(repo: GitRepo) -> dict:
    return json.loads((repo.path / ".gemini" / "settings.json").read_text())


def _status(repo: GitRepo) -> str:
    return repo.git("status", "--porcelain", "--untracked-files=all")


def test_install_writes_every_event_and_hides_the_file_from_git(repo: GitRepo) -> None:
    done = hooks.install(repo.path)
    settings = _settings(repo)
    assert done.settings_action == "created" and done.exclude_action == "added"
    assert sorted(settings["hooks"]) == sorted(hooks.EVENTS)
    for event in hooks.EVENTS:
        (entry,) = settings["hooks"][event]
        (hook,) = entry["hooks"]
        assert hook["name"] == hooks.HOOK_NAME and hook["type"] == "command"
        assert shlex.split(hook["command"]) == [sys.executable, "-I", "-m", "audit.geminicli.hook"]
    assert _status(repo) == ""  # our file is not the agent's change
    exclude = (repo.path / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count(hooks.EXCLUDE_LINE) == 1


def test_install_merges_with_the_users_settings_and_uninstall_restores_them_exactly(
    tmp_path: Path,
) -> None:
    repo = _with_user_settings(tmp_path)
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    exclude = repo.path / ".git" / "info" / "exclude"
    exclude.write_bytes(b"# mine\n*.log")  # no final newline: kept as it was
    hooks.install(repo.path)
    settings = _settings(repo)
    assert settings["model"] == {"name": "gemini-2.5-pro"}
    before_tool = settings["hooks"]["BeforeTool"]
    assert before_tool[0]["hooks"][0]["command"] == "./lint.sh"  # the user's first, kept
    assert before_tool[1]["hooks"][0]["name"] == hooks.HOOK_NAME
    assert exclude.read_bytes() == b"# mine\n*.log\n/.gemini/settings.json\n"

    hooks.install(repo.path)  # again: ours replaced, not doubled; the first state kept
    assert len(_settings(repo)["hooks"]["BeforeTool"]) == 2
    assert exclude.read_bytes().count(b"/.gemini/settings.json") == 1

    done = hooks.uninstall(repo.path)
    assert (done.settings_action, done.exclude_action) == ("restored", "restored")
    assert (repo.path / ".gemini" / "settings.json").read_bytes() == USER_SETTINGS
    assert exclude.read_bytes() == b"# mine\n*.log"
    assert not done.state.exists()


def test_uninstall_removes_what_install_created_and_nothing_else(repo: GitRepo) -> None:
    exclude = repo.path / ".git" / "info" / "exclude"
    before = exclude.read_bytes() if exclude.exists() else None
    hooks.install(repo.path)
    done = hooks.uninstall(repo.path)
    assert done.settings_action == "removed"
    assert not (repo.path / ".gemini").exists()
    assert (exclude.read_bytes() if exclude.exists() else None) == before


def test_uninstall_after_the_user_edited_the_settings_takes_out_only_ours(repo: GitRepo) -> None:
    hooks.install(repo.path)
    settings = _settings(repo)
    settings["ui"] = {"theme": "dark"}
    settings["hooks"]["AfterTool"].append(
        {"matcher": "*", "hooks": [{"type": "command", "command": "./notify.sh"}]}
    )
    (repo.path / ".gemini" / "settings.json").write_text(json.dumps(settings))
    exclude = repo.path / ".git" / "info" / "exclude"
    exclude.write_text(exclude.read_text() + "build/\n")
    done = hooks.uninstall(repo.path)
    assert (done.settings_action, done.exclude_action) == ("merged", "removed")
    notify = {"matcher": "*", "hooks": [{"type": "command", "command": "./notify.sh"}]}
    assert _settings(repo) == {"ui": {"theme": "dark"}, "hooks": {"AfterTool": [notify]}}
    lines = exclude.read_text().splitlines()
    assert hooks.EXCLUDE_LINE not in lines and "build/" in lines


def test_a_settings_file_with_comments_is_refused_untouched(repo: GitRepo) -> None:
    path = repo.path / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_bytes(b'{ // mine\n "model": {} }\n')
    with pytest.raises(ConfigError, match=r"settings\.json: not plain JSON"):
        hooks.install(repo.path)
    assert path.read_bytes() == b'{ // mine\n "model": {} }\n'
    assert not (repo.path / ".git" / "verifier" / "install.json").exists()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"[1]", "got a JSON list, expected an object"),
        (b'{"hooks": []}', "hooks: got a JSON list, expected an object"),
        (b'{"hooks": {"BeforeTool": {}}}', "hooks.BeforeTool: got a JSON dict, expected an array"),
    ],
)
def test_a_settings_file_of_the_wrong_shape_is_refused_naming_the_field(
    repo: GitRepo, content: bytes, problem: str
) -> None:
    path = repo.path / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=problem):
        hooks.install(repo.path)
    assert path.read_bytes() == content


def test_a_tracked_settings_file_is_refused(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.commit({".gemini/settings.json": "{}\n"})
    with pytest.raises(ConfigError, match="the repository tracks this file"):
        hooks.install(repo.path)
    assert (repo.path / ".gemini" / "settings.json").read_text() == "{}\n"


def test_not_a_repository_and_not_installed_are_clear_errors(tmp_path: Path, repo: GitRepo) -> None:
    with pytest.raises(ConfigError, match="not a git work tree"):
        hooks.install(tmp_path)
    with pytest.raises(ConfigError, match="not installed"):
        hooks.uninstall(repo.path)


def test_a_linked_worktree_gets_the_exclude_of_its_common_git_dir(
    tmp_path: Path, repo: GitRepo
) -> None:
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", str(linked), "-b", "side")
    done = hooks.install(linked)
    assert done.exclude == (repo.path / ".git" / "info" / "exclude").resolve()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=linked,
        capture_output=True,
        check=True,
    ).stdout
    assert status == b""
    hooks.uninstall(linked)
    assert not (linked / ".gemini").exists()


def test_install_writes_the_repository_name_the_hook_will_report_and_uninstall_removes_it(
    repo: GitRepo,
) -> None:
    done = hooks.install(repo.path, repo_name="calc-main")
    settings = repo.path / ".git" / "verifier" / "hook.json"
    assert json.loads(settings.read_text()) == {"v": 1, "repo_name": "calc-main"}
    assert done.reports == repo.path / ".git" / "verifier"
    hooks.uninstall(repo.path)
    assert not settings.exists()


def _ed25519_pem(path: Path, mode: int = 0o600) -> Path:
    ed25519_pem(path, mode)
    return path


def _with_user_settings(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "r")
    repo.commit({"a.txt": "a\n"})
    (repo.path / ".gemini").mkdir()
    (repo.path / ".gemini" / "settings.json").write_bytes(USER_SETTINGS)
    return repo


def test_install_with_a_server_writes_its_url_and_the_tokens_variable_name_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    repo = _with_user_settings(tmp_path)
    key = _ed25519_pem(tmp_path / "gemini-cli.pem")
    done = hooks.install(
        repo.path,
        repo_name="calc",
        server="https://verifier.example/",
        token_env="GEMINI_CLI_VERIFIER_TOKEN",
        signing_key=key,
        key_id="laptop-1",
    )
    assert (done.server, done.token_env, done.signing_key) == (
        "https://verifier.example",
        "GEMINI_CLI_VERIFIER_TOKEN",
        key.resolve(),
    )
    hook_settings = repo.path / ".git" / "verifier" / "hook.json"
    assert json.loads(hook_settings.read_text()) == {
        "v": 1,
        "repo_name": "calc",
        "server": {"url": "https://verifier.example", "token_env": "GEMINI_CLI_VERIFIER_TOKEN"},
        "signing": {"key": str(key.resolve()), "key_id": "laptop-1"},
    }
    settings = _settings(repo)
    assert settings["model"] == {"name": "gemini-2.5-pro"}  # the user's, kept
    assert settings["hooks"]["BeforeTool"][0]["hooks"][0]["command"] == "./lint.sh"
    assert "verifier.example" not in json.dumps(settings)  # the server is the hook's setting
    hooks.uninstall(repo.path)
    assert (repo.path / ".gemini" / "settings.json").read_bytes() == USER_SETTINGS
    assert not hook_settings.exists()


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"server": "https://v.example"}, "--token-env VAR: missing"),
        ({"token_env": "T"}, "--server URL: missing"),
        ({"server": "ftp://v.example", "token_env": "T"}, "expected http(s)://"),
        ({"server": "https://u:p@v.example", "token_env": "T"}, "holds credentials"),
        ({"server": "https://v.example", "token_env": "A-B"}, "not an environment variable"),
        ({"key_id": "k"}, "--key-id: needs --key PATH"),
        ({"signing_key": Path("k.pem"), "hmac_env": "H"}, "--key and --hmac-env: one or"),
        ({"hmac_env": "1H"}, "--hmac-env '1H': not an environment variable"),
    ],
)
def test_server_options_that_cannot_work_are_refused_before_anything_is_written(
    repo: GitRepo, options: dict, problem: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        hooks.install(repo.path, **options)
    assert not (repo.path / ".gemini").exists()


def test_a_signing_key_the_hook_could_not_use_is_refused_at_install(
    repo: GitRepo, tmp_path: Path
) -> None:
    open_key = _ed25519_pem(tmp_path / "open.pem", mode=0o644)
    with pytest.raises(ConfigError, match=r"--key .*readable by others \(mode 0644"):
        hooks.install(repo.path, signing_key=open_key)
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    not_pem.chmod(0o600)
    with pytest.raises(ConfigError, match="not an unencrypted PEM private key"):
        hooks.install(repo.path, signing_key=not_pem)
    with pytest.raises(ConfigError, match="cannot be read"):
        hooks.install(repo.path, signing_key=tmp_path / "missing.pem")


def _cli(repo: GitRepo, *options: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "verifier",
            "gemini-cli",
            "install",
            "--repo",
            str(repo.path),
            *options,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_cli_refuses_a_token_variable_that_is_not_set_naming_the_option(
    repo: GitRepo,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GEMINI_CLI_VERIFIER_TOKEN"}
    server = ("--server", "http://127.0.0.1:9")
    done = _cli(repo, *server, "--token-env", "GEMINI_CLI_VERIFIER_TOKEN", env=env)
    assert done.returncode == 2
    assert "'--token-env'" in done.stderr and "$GEMINI_CLI_VERIFIER_TOKEN is not set" in done.stderr
    assert not (repo.path / ".gemini").exists()
    # Set, it installs; a name gemini-cli may withhold from hooks gets a note.
    done = _cli(repo, *server, "--token-env", "MY_TOKEN", env={**env, "MY_TOKEN": "vrf_x"})
    assert done.returncode == 0, done.stderr
    assert "withholds $MY_TOKEN" in done.stderr
    assert "vrf_x" not in (repo.path / ".git" / "verifier" / "hook.json").read_text()
