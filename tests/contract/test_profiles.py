"""Tool profiles are data: the default one from config/, unknown calls kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.config import Config
from verifier.contract.profiles import ActionKind, Permission, load_profile
from verifier.contract.trajectory import load_trajectory
from verifier.errors import ConfigError

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


# -- issue 8: aliases, types, line numbers, permissions, failed responses ----------------


def _one(profile_name: str, name: str, args: dict[str, object]):  # type: ignore[no-untyped-def]
    return load_profile(PROFILES, profile_name).normalise(_calls((name, args))[0])


def test_the_three_shipped_profiles_load() -> None:
    for name in ("default", "legacy-write", "v2"):
        assert load_profile(PROFILES, name).name == name


def test_default_keeps_the_contract_table() -> None:
    """docs/contract/session-report-v1.md's table of the default profile, function by function."""
    profile = load_profile(PROFILES, "default")
    table = {
        "read_file": ("read", {"path", "start_line", "end_line"}),
        "list_files": ("list", {"path"}),
        "search": ("search", {"pattern", "path", "regex"}),
        "write_file": ("write", {"path", "content"}),
        "replace_lines": ("replace", {"path", "start_line", "end_line", "expected", "replacement"}),
        "edit_file": ("replace", {"path", "old_text", "new_text"}),
        "delete_file": ("delete", {"path"}),
        "run_command": ("run", {"command"}),
    }
    assert {n: (s.action.value, set(s.args)) for n, s in profile.functions.items()} == table
    assert all(s.args[p] == p for s in profile.functions.values() for p in s.args)
    action = _one("default", "replace_lines", {**_RANGE, "start_line": 2, "end_line": 3})
    assert (action.params["start_line"], action.params["end_line"]) == (2, 3)


_RANGE = {"path": "a", "start_line": 1, "end_line": 1, "expected": "x\n", "replacement": "y\n"}


def test_v2_ranges_become_one_based_and_inclusive() -> None:
    action = _one(
        "v2",
        "replace_range",
        {"filePath": "a.py", "startLine": 3, "endLine": 5, "oldText": "x", "newText": "y"},
    )
    assert action.kind is ActionKind.REPLACE and action.bounded
    assert action.problems == ()
    assert dict(action.params) == {
        "path": "a.py",
        "start_line": 4,
        "end_line": 5,
        "expected": "x",
        "replacement": "y",
    }
    assert action.permission is Permission.WRITE


def test_v2_insertion_and_a_range_before_the_file_start() -> None:
    insert = _one(
        "v2",
        "replace_range",
        {"filePath": "a", "startLine": 2, "endLine": 2, "oldText": "", "newText": "n\n"},
    )
    assert (insert.params["start_line"], insert.params["end_line"], insert.problems) == (3, 2, ())
    before = _one(
        "v2",
        "replace_range",
        {"filePath": "a", "startLine": -1, "endLine": 1, "oldText": "", "newText": ""},
    )
    assert before.problems == ("start line -1 is before the first line",)
    backwards = _one("default", "replace_lines", {**_RANGE, "start_line": 5, "end_line": 2})
    assert backwards.problems == ("the range ends before it starts (lines 5..2, 1-based)",)


def test_aliases_are_one_parameter_and_must_agree() -> None:
    for key in ("filePath", "path", "file_path"):
        action = _one("v2", "delete_file", {key: "a.py"})
        assert (action.path, action.problems) == ("a.py", ())
    both = _one("v2", "delete_file", {"filePath": "a.py", "path": "b.py"})
    assert both.problems == ("arguments ['filePath', 'path'] (all 'path') differ",)
    assert _one("v2", "delete_file", {"filePath": "a.py", "path": "a.py"}).problems == ()


def test_types_are_checked_and_integral_floats_are_integers() -> None:
    wrong = _one("default", "replace_lines", {**_RANGE, "start_line": "3"})
    assert wrong.problems == ("argument 'start_line': expected integer, got str",)
    flag = _one("default", "replace_lines", {**_RANGE, "end_line": True})
    assert flag.problems == ("argument 'end_line': expected integer, got bool",)
    floated = _one("default", "replace_lines", {**_RANGE, "start_line": 1.0})
    assert (floated.params["start_line"], floated.problems) == (1, ())
    half = _one("default", "replace_lines", {**_RANGE, "start_line": 1.5})
    assert half.problems == ("argument 'start_line': expected integer, got float",)
    listed = _one("default", "run_command", {"command": ["ls", "-l"]})
    assert listed.problems == ()
    mixed = _one("default", "run_command", {"command": ["ls", 1]})
    assert mixed.problems == ("argument 'command': expected string or string_list, got list",)


def test_extra_arguments_are_kept_and_listed() -> None:
    action = _one("default", "delete_file", {"path": "a", "force": True})
    assert (action.extra, action.problems, action.call.args["force"]) == (("force",), (), True)


def test_a_bounded_replace_never_becomes_a_whole_file_write(tmp_path: Path) -> None:
    """A profile that maps a range without its expected text: refused, still a replace."""
    (tmp_path / "loose.toml").write_text(
        '[functions.patch]\naction = "replace"\n'
        'args = { path = "p", start_line = "s", end_line = "e", replacement = "r" }\n'
    )
    action = load_profile(tmp_path, "loose").normalise(
        _calls(("patch", {"p": "a", "s": 1, "e": 2, "r": "x"}))[0]
    )
    assert action.kind is ActionKind.REPLACE
    assert action.problems == ("a bounded replace without expected cannot be proved safe",)


def test_legacy_write_has_whole_file_writes_only() -> None:
    profile = load_profile(PROFILES, "legacy-write")
    assert {s.action for s in profile.functions.values()} >= {ActionKind.WRITE}
    assert ActionKind.REPLACE not in {s.action for s in profile.functions.values()}
    write = _one("legacy-write", "write_file", {"file_path": "a", "content": "x"})
    assert (write.kind, write.path, write.problems) == (ActionKind.WRITE, "a", ())
    assert _one("legacy-write", "replace_lines", _RANGE).kind is ActionKind.UNKNOWN


def test_permissions_default_to_the_action_and_may_be_declared(tmp_path: Path) -> None:
    assert _one("default", "read_file", {"path": "a"}).permission is Permission.READ
    assert _one("default", "run_command", {"command": "ls"}).permission is Permission.EXECUTE
    assert _one("v2", "fetch_webpage", {"url": "u"}).permission is Permission.NETWORK
    (tmp_path / "p.toml").write_text(
        '[functions.git_status]\naction = "read"\npermission = "execute"\n'
    )
    action = load_profile(tmp_path, "p").normalise(_calls(("git_status", {}))[0])
    assert action.permission is Permission.EXECUTE


@pytest.mark.parametrize(
    ("profile", "response", "failed"),
    [
        ("default", {"ok": True}, False),
        ("default", {"output": "x"}, False),
        ("default", {"ok": False}, True),
        ("default", {"error": "no such file"}, True),
        ("default", {"error": None, "ok": True}, False),
        ("default", {"isError": True}, False),
        ("v2", {"isError": True}, True),
        ("v2", {"isError": False, "content": "ok"}, False),
        ("legacy-write", {"error": ""}, True),
    ],
)
def test_each_profile_says_what_a_failed_response_is(
    profile: str, response: dict[str, object], failed: bool
) -> None:
    assert load_profile(PROFILES, profile).response_failed(response) is failed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[functions.x]\naction = "read"\nargs = { path = ["a", 1] }\n', "functions.x.args.path"),
        (
            '[functions.x]\naction = "read"\nargs = { p = "p" }\ntypes = { p = "int" }\n',
            "functions.x.types.p",
        ),
        ('[functions.x]\naction = "read"\ntypes = { p = "string" }\n', "functions.x.types.p"),
        ('[functions.x]\naction = "read"\nline_base = 2\n', "functions.x.line_base"),
        ('[functions.x]\naction = "read"\nend_inclusive = "yes"\n', "functions.x.end_inclusive"),
        ('[functions.x]\naction = "read"\npermission = "root"\n', "functions.x.permission"),
        ('[functions.x]\naction = "read"\naliases = {}\n', "functions.x.aliases"),
        ('[response]\nerror_keys = "error"\n', "response.error_keys"),
        ("[response]\nfailed_when = []\n", "response.failed_when"),
        ("functions = 3\n", "functions: expected a table"),
    ],
)
def test_a_bad_profile_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_profile(tmp_path, "bad")
