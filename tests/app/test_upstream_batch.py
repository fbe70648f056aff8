"""A SWE-bench-style batch on a real upstream bug fix: six's a611f60 ("Make add_metaclass
copy `__qualname__` from the original class", issue #259), its test patch as the task's
acceptance test, and the sessions a person would judge by hand: the real fix resolved, an
empty session and a wrong fix not, a task whose acceptance test already passes at the base
inconclusive, a report naming a task nobody declared refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.app.batch import verify_batch
from verifier.config import Config, RepositoryConfig

UPSTREAM = Path(__file__).parent.parent / "fixtures" / "upstream"
SIX = (UPSTREAM / "six.py.txt").read_text(encoding="utf-8")
TESTS = (UPSTREAM / "test_six_metaclass.py.txt").read_text(encoding="utf-8")
# The line after which a611f60 adds its two, and the two.
ANCHOR = "        orig_vars.pop('__weakref__', None)\n"
FIX = (
    "        if hasattr(cls, '__qualname__'):\n"
    "            orig_vars['__qualname__'] = cls.__qualname__\n"
)
# A fix a hurried agent might write: the class's own name, not its qualified name.
WRONG = "        orig_vars['__qualname__'] = cls.__name__\n"
NESTED = "tests/test_six_metaclass.py::test_add_metaclass_nested"
PLAIN = "tests/test_six_metaclass.py::test_add_metaclass"
LAZY = "tests/test_six_metaclass.py::test_lazy"
TASKS = f"""
[tasks.six-259]
repository = "six"
fail_to_pass = ["{NESTED}"]
pass_to_pass = ["{PLAIN}", "{LAZY}"]

# Broken on purpose: its acceptance test passes before any fix (SWE-bench's issue 24).
[tasks.six-broken]
repository = "six"
fail_to_pass = ["{PLAIN}"]
"""


def session(repo: GitRepo, sid: str, task_id: str, added: str | None) -> dict[str, Any]:
    """A session on the base: `added` after the anchor line of add_metaclass, or no edit
    at all (the agent says it is done all the same)."""
    line = SIX[: SIX.index(ANCHOR)].count("\n") + 1
    turns = [model_turn(call("read_file", "r0", path="six.py"))]
    if added is not None:
        edit = call(
            "replace_lines",
            "e0",
            path="six.py",
            start_line=line,
            end_line=line,
            expected=ANCHOR,
            replacement=ANCHOR + added,
        )
        turns.append(model_turn(edit))
    turns.append(model_turn("Made add_metaclass keep __qualname__."))
    base = repo.head()
    report = run_session(
        repo.path, sid, "Fix #259.", ScriptedModel(turns), commit=True, repo_name="six"
    ).report()
    repo.git("reset", "-q", "--hard", base)
    report["task_id"] = task_id
    return report


def test_an_upstream_fix_batch_gets_the_answers_a_person_would_give(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "six")
    repo.commit(
        {
            "six.py": SIX,
            "tests/test_six_metaclass.py": TESTS,
            "pytest.ini": "[pytest]\npythonpath = .\n",
            ".gitignore": "__pycache__/\n.pytest_cache/\n",
        },
        "base: six at b4eb516, the parent of a611f60",
    )
    (tmp_path / "tasks.toml").write_text(TASKS, encoding="utf-8")
    config = Config(
        database_url=f"sqlite:///{tmp_path / 'batch.sqlite3'}",
        repositories={
            "six": RepositoryConfig(
                "six", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=120
            )
        },
        source=tmp_path / "verifier.toml",
    )
    reports = [
        session(repo, "six-fixed", "six-259", FIX),
        session(repo, "six-empty", "six-259", None),
        session(repo, "six-wrong", "six-259", WRONG),
        session(repo, "six-broken-task", "six-broken", FIX),
        session(repo, "six-fixed-again", "six-259", FIX),
        session(repo, "six-unknown", "six-999", FIX),
    ]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(to_bytes(r).decode() + "\n" for r in reports), encoding="utf-8")

    done = verify_batch(config, batch, jobs=2)

    answers = {}
    for result in done.results:
        first = None if result.outcome is None else result.outcome.verification.first_finding
        code = result.error.code if result.error is not None else first and first.code
        answers[result.entry.session_id] = (result.status, code, first and first.path)
    assert answers == {
        "six-fixed": ("delivered", None, None),
        "six-empty": ("not_delivered", "change.empty_session", None),
        "six-wrong": ("not_delivered", "tests.acceptance_not_fixed", NESTED),
        "six-broken-task": ("inconclusive", "tests.acceptance_passes_at_base", PLAIN),
        "six-fixed-again": ("delivered", None, None),
        "six-unknown": ("refused", "unknown_task", None),
    }
    summary = done.to_dict()
    assert (summary["resolved"], summary["unresolved"], summary["inconclusive"]) == (2, 2, 1)
    assert summary["tasks"] == {
        "six-259": {"sessions": 4, "resolved": 2},
        "six-broken": {"sessions": 1, "resolved": 0},
    }
    fixed = next(r for r in summary["results"] if r["session_id"] == "six-fixed")
    assert NESTED in json.dumps(fixed["classification"])
    # One base for five judged sessions: the first tested it, the others found its run kept.
    bases = [
        r["classification"]["base"]["cached_from"]
        for r in summary["results"]
        if isinstance(r.get("classification"), dict)
    ]
    assert bases.count(None) == 1 and len(bases) >= 3, bases
