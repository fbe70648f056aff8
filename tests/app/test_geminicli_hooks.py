"""``verifier gemini-cli install`` / ``uninstall``: our hooks merged into a real repository's
``.gemini/settings.json`` and taken out again, the user's settings and git's exclude file
kept byte for byte."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
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
    repo = GitRepo(tmp_path / "r")
    repo.commit({"a.txt": "a\n"})
    (repo.path / ".gemini").mkdir()
    (repo.path / ".gemini" / "settings.json").write_bytes(USER_SETTINGS)
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
