"""Contract fixtures: tool-call payloads and the exact action or refusal each must produce.

``tests/fixtures/contract/<profile>/*.json`` holds, for each tool profile that
has a folder, calls in the shape a harness records them, each with what the
adapter must produce: the internal action (kind and normalised parameters) or
the refusal (its problem text). Every fixture of every folder runs here through
``load_profile(...).normalise``, the path the checks take, with the calls of a
fixture loaded as one model turn (the trajectory's own loader gives them ids).

Where the outcome is a check's rather than the adapter's (a path outside the
root is refused by the changes check's path rule), the fixture says what the
adapter produces and, in ``path_rule``, what `verifier._internal.paths.unsafe_reason`
says of its path (null: a path the rule accepts).

A fixture file::

    {"case": "...", "why": "...", "provenance": "...",
     "calls": [{"name": "...", "id": "...", "args": {...},
                "expect": {"kind": "...", "params": {...}, "problems": [...]},
                "path_rule": "..."}]}
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import FIXTURES
from verifier import resources
from verifier._internal.paths import unsafe_reason
from verifier.contract.profiles import ActionKind, load_profile
from verifier.contract.trajectory import load_trajectory

CONTRACT_FIXTURES = FIXTURES / "contract"
CASES = sorted(CONTRACT_FIXTURES.glob("*/*.json"))
# The cases the issue lists for the `default` profile: each has its fixture file.
REQUIRED_DEFAULT = {
    "missing file",
    "mixed line endings",
    "stale line numbers",
    "duplicate targets in one turn",
    "Unicode",
    "generated files",
    "edits outside the root",
    "commands: empty",
    "commands: shell metacharacters",
    "commands: directory escape",
    "commands: unknown binary",
    "commands: timeout",
}


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def canonical(value: Any) -> str:
    """Equal as JSON, types included (``1`` is not ``1.0`` is not ``true``)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_fixture_call_normalises_to_its_expected_action(path: Path) -> None:
    profile = load_profile(resources.profiles_dir(), path.parent.name)
    fixture = read(path)
    turn = {
        "role": "model",
        "parts": [
            {"function_call": {"id": c["id"], "name": c["name"], "args": c["args"]}}
            for c in fixture["calls"]
        ],
    }
    calls = load_trajectory([turn]).calls
    assert [c.call_id for c in calls] == [c["id"] for c in fixture["calls"]]

    for call, case in zip(calls, fixture["calls"], strict=True):
        action = profile.normalise(call)
        expect = case["expect"]
        where = f"{path.name} call {case['id']}"
        assert action.kind is ActionKind(expect["kind"]), where
        assert canonical(dict(action.params)) == canonical(expect["params"]), where
        assert list(action.problems) == expect["problems"], where
        assert canonical(dict(action.call.args)) == canonical(case["args"]), (
            f"{where}: the raw call must stay beside the action"
        )
        if "path_rule" in case:
            assert unsafe_reason(action.path or "") == case["path_rule"], where


def test_every_fixture_folder_names_a_shipped_profile() -> None:
    folders = sorted(p.name for p in CONTRACT_FIXTURES.iterdir() if p.is_dir())
    assert "default" in folders
    for name in folders:
        assert load_profile(resources.profiles_dir(), name).name == name


def test_the_default_profile_has_a_fixture_for_each_listed_case() -> None:
    cases = {read(p)["case"] for p in CONTRACT_FIXTURES.glob("default/*.json")}
    assert cases >= REQUIRED_DEFAULT, sorted(REQUIRED_DEFAULT - cases)


def test_two_calls_of_one_turn_on_one_file_stay_two_actions() -> None:
    fixture = read(CONTRACT_FIXTURES / "default" / "duplicate_targets_one_turn.json")
    paths = [c["args"]["path"] for c in fixture["calls"]]
    assert len(set(paths)) == 1 and len(paths) == 3


# What a secret or a real repository looks like: none may appear in a fixture.
SECRETS = re.compile(
    r"AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|gh[pousr]_[0-9A-Za-z]{20,}|sk-[0-9A-Za-z]{20,}"
    r"|xox[abpr]-|-----BEGIN [A-Z ]*PRIVATE KEY|[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[a-z]{2,}"
    r"|github\.com|gitlab\.com|bitbucket\.org|https?://(?!example\.invalid)"
)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixtures_hold_no_secret_address_or_real_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert SECRETS.search(text) is None, SECRETS.search(text)
    assert read(path)["provenance"]
