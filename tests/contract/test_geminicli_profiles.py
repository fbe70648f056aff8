"""The gemini-cli 0.61 tool profiles: one per model family, every built-in tool covered."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.config import Config
from verifier.contract.profiles import ActionKind, Permission, load_profile
from verifier.contract.trajectory import load_trajectory
from verifier.errors import ConfigError

PROFILES = Config().profiles_dir
FAMILIES = ("gemini-cli-0.61-legacy", "gemini-cli-0.61-gemini-3")


def _call(name: str, **args: object):  # type: ignore[no-untyped-def]
    parts = [{"function_call": {"id": "c1", "name": name, "args": args}}]
    return load_trajectory([{"role": "model", "parts": parts}]).calls[0]


def test_the_two_families_differ_by_write_todos_alone() -> None:
    # write_todos is registered for Gemini 2 models only (seen: a Gemini 3 model's call is
    # "not found"); update_topic is declared to Gemini 3 models alone but run for every one.
    legacy, gemini3 = (load_profile(PROFILES, name) for name in FAMILIES)
    assert set(legacy.functions) - set(gemini3.functions) == {"write_todos"}
    assert set(gemini3.functions) < set(legacy.functions)
    assert all(legacy.functions[n] == gemini3.functions[n] for n in gemini3.functions)
    assert legacy.patterns == gemini3.patterns
    assert legacy.functions["update_topic"].action is ActionKind.SESSION
    assert "save_memory" not in gemini3.functions  # 0.61 has none


@pytest.mark.parametrize("name", FAMILIES)
def test_edits_writes_and_commands_read_as_gemini_cli_declares_them(name: str) -> None:
    profile = load_profile(PROFILES, name)
    edit = profile.normalise(
        _call(
            "replace",
            file_path="calc.py",
            old_string="a - b",
            new_string="a + b",
            instruction="fix",
            allow_multiple=False,
        )
    )
    assert edit.kind is ActionKind.REPLACE and not edit.problems
    assert (edit.params["path"], edit.params["old_text"], edit.params["new_text"]) == (
        "calc.py",
        "a - b",
        "a + b",
    )
    no_instruction = profile.normalise(
        _call("replace", file_path="calc.py", old_string="a", new_string="b")
    )
    assert no_instruction.problems == ("missing argument 'instruction'",)
    write = profile.normalise(_call("write_file", file_path="n.md", content="x\n"))
    assert write.kind is ActionKind.WRITE and write.params == {"path": "n.md", "content": "x\n"}
    shell = profile.normalise(_call("run_shell_command", command="pytest -q", description="t"))
    assert shell.kind is ActionKind.RUN and shell.permission is Permission.EXECUTE
    assert shell.extra == ("description",)


@pytest.mark.parametrize("name", FAMILIES)
def test_todos_plans_and_questions_are_session_actions_needing_no_permission(name: str) -> None:
    profile = load_profile(PROFILES, name)
    for tool in ("update_topic", "ask_user", "enter_plan_mode", "activate_skill"):
        action = profile.normalise(_call(tool, todos=[]))
        assert action.kind is ActionKind.SESSION and action.permission is None
    assert profile.normalise(_call("save_memory", fact="x")).kind is ActionKind.UNKNOWN


def test_a_failed_call_is_gemini_clis_error_response() -> None:
    profile = load_profile(PROFILES, FAMILIES[0])
    assert profile.response_failed({"error": "Failed to edit, 0 occurrences found"})
    assert not profile.response_failed({"output": "Exit Code: 1"})


def test_the_edit_tools_name_gemini_clis_matching_rules() -> None:
    profile = load_profile(PROFILES, FAMILIES[1])
    assert profile.functions["replace"].match == "gemini-cli-0.61"
    assert profile.functions["write_file"].match == "gemini-cli-0.61"
    edit = profile.normalise(
        _call(
            "replace",
            file_path="a.py",
            old_string="x",
            new_string="y",
            instruction="i",
            allow_multiple=True,
        )
    )
    assert edit.match == "gemini-cli-0.61" and edit.params["allow_multiple"] is True


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ('action = "replace"\nmatch = "sed"', "match: expected one of"),
        ('action = "run"\nmatch = "gemini-cli-0.61"', "only a replace or a write"),
    ],
)
def test_matching_rules_are_known_ones_on_edits_only(
    tmp_path: Path, spec: str, message: str
) -> None:
    (tmp_path / "bad.toml").write_text(f"[functions.f]\n{spec}\n")
    with pytest.raises(ConfigError, match=message) as caught:
        load_profile(tmp_path, "bad")
    assert "functions.f.match" in str(caught.value)


def test_absolute_paths_inside_the_workspace_are_repository_paths() -> None:
    profile = load_profile(PROFILES, FAMILIES[0])
    assert profile.absolute_paths == "workspace"
    assert profile.workspace_path("/w/repo/src/a.py", "/w/repo") == "src/a.py"
    assert profile.workspace_path("/w/repo/./src//a.py", "/w/repo/") == "src/a.py"
    assert profile.workspace_path("src/a.py", "/w/repo") == "src/a.py"  # relative: as given
    for outside in ("/w/repo2/a.py", "/w/repo/../other/a.py", "/w/repo", "/etc/passwd"):
        assert profile.workspace_path(outside, "/w/repo") is None, outside
    assert profile.workspace_path("/w/repo/a.py", None) is None  # no workspace known
    default = load_profile(PROFILES, "default")
    assert default.workspace_path("/w/repo/a.py", "/w/repo") is None  # refused


def test_mcp_tools_are_commands_by_their_name_pattern() -> None:
    profile = load_profile(PROFILES, FAMILIES[1])
    action = profile.normalise(_call("mcp_github_create_issue", title="x"))
    assert action.kind is ActionKind.RUN and action.permission is Permission.EXECUTE
    assert profile.normalise(_call("github_create_issue")).kind is ActionKind.UNKNOWN


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('absolute_paths = "everywhere"', "absolute_paths: expected 'refuse' or 'workspace'"),
        ('colour = "blue"', "colour: unknown key"),
        ('[patterns."mcp_*"]\naction = "teleport"', "patterns.mcp_\\*.action: expected one of"),
    ],
)
def test_a_bad_profile_key_is_named(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bad.toml").write_text(text + "\n")
    with pytest.raises(ConfigError, match=message):
        load_profile(tmp_path, "bad")
