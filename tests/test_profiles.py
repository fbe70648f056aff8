"""Tool profiles are data: the default one from config/, unknown calls kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.config import Config
from verifier.errors import ConfigError
from verifier.profiles import ActionKind, load_profile
from verifier.trajectory import load_trajectory

PROFILES = Config().profiles_dir


def _calls(*calls: tuple[str, dict[str, object]]):  # type: ignore[no-untyped-def]
    parts = [{"function_call": {"name": n, "args": a}} for n, a in calls]
    return load_trajectory([{"role": "model", "parts": parts}]).calls


def test_default_profile_maps_every_contract_function() -> None:
    profile = load_profile(PROFILES, None)
    calls = _calls(
        ("read_file", {"path": "a", "start_line": 1}),
        ("list_files", {"path": "."}),
        ("search", {"pattern": "x", "regex": True}),
        ("write_file", {"path": "a", "content": ""}),
        (
            "replace_lines",
            {"path": "a", "start_line": 1, "end_line": 1, "expected": "", "replacement": ""},
        ),
        ("edit_file", {"path": "a", "old_text": "x", "new_text": "y"}),
        ("delete_file", {"path": "a"}),
        ("run_command", {"command": "ls"}),
    )
    actions = [profile.normalise(c) for c in calls]
    assert [a.kind for a in actions] == [
        ActionKind.READ,
        ActionKind.LIST,
        ActionKind.SEARCH,
        ActionKind.WRITE,
        ActionKind.REPLACE,
        ActionKind.REPLACE,
        ActionKind.DELETE,
        ActionKind.RUN,
    ]
    assert all(a.problems == () for a in actions)
    assert actions[2].params["regex"] is True
    assert actions[0].call.name == "read_file"  # the raw call stays beside the action


def test_unknown_call_is_kept_and_reported() -> None:
    action = load_profile(PROFILES, "default").normalise(_calls(("fetch_url", {"u": 1}))[0])
    assert action.kind is ActionKind.UNKNOWN
    assert action.call.args == {"u": 1}
    assert "fetch_url" in action.problems[0]


def test_missing_required_argument_is_a_problem() -> None:
    action = load_profile(PROFILES, None).normalise(_calls(("write_file", {"path": "a"}))[0])
    assert action.problems == ("missing argument 'content'",)


def test_another_profile_is_configuration_not_code(tmp_path: Path) -> None:
    (tmp_path / "shell.toml").write_text(
        'name = "shell"\n[functions.bash]\naction = "run"\nargs = { command = "cmd" }\n'
        'required = ["command"]\n[functions.fetch]\naction = "web"\nargs = { url = "url" }\n'
    )
    profile = load_profile(tmp_path, "shell")
    run, web = (
        profile.normalise(c) for c in _calls(("bash", {"cmd": "ls"}), ("fetch", {"url": "u"}))
    )
    assert (run.kind, run.params) == (ActionKind.RUN, {"command": "ls"})
    assert web.kind is ActionKind.WEB


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[functions.x]\naction = "teleport"\n', "functions.x.action"),
        ('[functions.x]\naction = "read"\nargs = { path = 1 }\n', "functions.x.args"),
        ('[functions.x]\naction = "read"\nrequired = ["path"]\n', "functions.x.required"),
        ("not toml [", "cannot read"),
    ],
)
def test_bad_profile_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_profile(tmp_path, "bad")


def test_missing_profile_and_odd_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no file"):
        load_profile(tmp_path, "absent")
    with pytest.raises(ConfigError, match="a name is"):
        load_profile(tmp_path, "../etc/passwd")
