"""Sessions for tests, built the way the contract describes: a scripted model,
the reference harness, a real git repository."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from tests.support.gitrepo import GitRepo
from verifier.agent.harness import ScriptedModel, Session, call, model_turn, run_session

CALC = "def add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n    return a + b\n"
TESTS = (
    "from calc import add, subtract\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_subtract():\n    assert subtract(5, 3) == 2\n"
)
BASE = {
    "calc.py": CALC,
    "tests/test_calc.py": TESTS,
    "pytest.ini": "[pytest]\npythonpath = .\n",
    ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\nbuild/\n",
}
FIX = {
    "path": "calc.py",
    "start_line": 6,
    "end_line": 6,
    "expected": "    return a + b\n",
    "replacement": "    return a - b\n",
}
PYTEST = ["{python}", "-m", "pytest", "-q"]


def calc_repo(path: Path) -> GitRepo:
    repo = GitRepo(path)
    repo.commit(BASE, "base")
    return repo


def fix_turns(replacement: str = FIX["replacement"]) -> list[Any]:
    return [
        model_turn(call("read_file", "c1", path="calc.py")),
        model_turn(call("replace_lines", "c2", **{**FIX, "replacement": replacement})),
        model_turn("Fixed subtract()."),
    ]


def fixed_session(repo: GitRepo, sid: str = "s-1", *, commit: bool = True, **kw: Any) -> Session:
    """A clean session that fixes subtract(); committed unless commit=False."""
    turns = kw.pop("turns", None) or fix_turns()
    return run_session(repo.path, sid, "Fix subtract.", ScriptedModel(turns), commit=commit, **kw)


def to_bytes(report: dict[str, Any]) -> bytes:
    return json.dumps(report, ensure_ascii=False).encode("utf-8")


def config_toml(tmp: Path, repo: GitRepo, **repo_keys: Any) -> Path:
    """A configuration file registering `repo` as `calc`, with a real pytest command."""
    keys = {"path": str(repo.path), "test_command": PYTEST, "test_timeout": 60, **repo_keys}
    lines = ["[verifier]", "test_timeout = 60", "", "[repositories.calc]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    path = tmp / "verifier.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


PYTHON = sys.executable


def to_interaction(report: dict[str, Any]) -> dict[str, Any]:
    """`report` with its ``gemini-contents`` trajectory written as interaction steps.

    A call without an id gets its positional id (``t<i>.p<j>``), the id the
    audit trail already names it by; its response gets the same id.
    """
    steps: list[dict[str, Any]] = []
    contents = report["trajectory"]["contents"]
    for i, content in enumerate(contents):
        positional: dict[str, list[str]] = {}
        if i > 0:  # the calls this turn answers, by name, for responses without an id
            for j, part in enumerate(contents[i - 1].get("parts", [])):
                fc = part.get("function_call")
                if fc is not None and not fc.get("id"):
                    positional.setdefault(fc["name"], []).append(f"t{i - 1}.p{j}")
        for j, part in enumerate(content.get("parts", [])):
            if "function_call" in part:
                fc = part["function_call"]
                steps.append(
                    {
                        "type": "function_call",
                        "id": fc.get("id") or f"t{i}.p{j}",
                        "name": fc["name"],
                        "arguments": fc.get("args", {}),
                    }
                )
            elif "function_response" in part:
                fr = part["function_response"]
                call_id = fr.get("id") or positional[fr["name"]].pop(0)
                steps.append(
                    {
                        "type": "function_result",
                        "call_id": call_id,
                        "name": fr["name"],
                        "result": fr.get("response", {}),
                    }
                )
            elif part.get("thought"):
                steps.append(
                    {"type": "thought", "summary": [{"type": "text", "text": part["text"]}]}
                )
            elif "text" in part:
                kind = "model_output" if content.get("role") == "model" else "user_input"
                steps.append({"type": kind, "content": [{"type": "text", "text": part["text"]}]})
    converted = copy.deepcopy(report)
    converted["trajectory"] = {
        "format": "gemini-interaction",
        "interaction": {"id": "v1_interaction-0001", "status": "completed", "steps": steps},
    }
    return converted
