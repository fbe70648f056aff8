"""Two more real upstream changes of six, each with its own test patch, judged as a
person would on this Python (3.7+):

- ebb0db5 ("Add support for PEP 560", #305): `with_metaclass` resolves `__mro_entries__`.
  Its two new tests fail at the parent and pass with the real change: resolved; a session
  that edits nothing is not, nor one that only half-applies it.
- 1988faf ("Fix wraps handing of missing attrs", #251): the fix is for Python < 3.4 only;
  on this Python `six.wraps` is `functools.wraps` already, so its test passes at the parent
  and a task naming it proves nothing: inconclusive (SWE-bench's issue 24), whatever the
  session did.

The parents' `six.py` and the tests, as published, are in tests/fixtures/upstream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.app.batch import verify_batch
from verifier.config import Config, RepositoryConfig

UPSTREAM = Path(__file__).parent.parent / "fixtures" / "upstream"


def _read(name: str) -> str:
    return (UPSTREAM / name).read_text(encoding="utf-8")


PEP560_OLD = "            return meta(name, bases, d)\n"
# ebb0db5's change to with_metaclass, as committed.
PEP560_NEW = (
    "            if sys.version_info[:2] >= (3, 7):\n"
    "                # This version introduced PEP 560 that requires a bit\n"
    "                # of extra care (we mimic what is done by __build_class__).\n"
    "                resolved_bases = types.resolve_bases(bases)\n"
    "                if resolved_bases is not bases:\n"
    "                    d['__orig_bases__'] = bases\n"
    "            else:\n"
    "                resolved_bases = bases\n"
    "            return meta(name, resolved_bases, d)\n"
)
# Half of it: the bases resolved, __orig_bases__ never kept (test_with_metaclass_pep_560
# then passes its isinstance checks and fails on __orig_bases__).
PEP560_HALF = "            return meta(name, types.resolve_bases(bases), d)\n"
WRAPS_OLD_FIRST, WRAPS_OLD_LINES = 810, 8
# 1988faf's change to wraps, as committed.
WRAPS_NEW = (
    "if sys.version_info[0:2] < (3, 4):\n"
    "    # This does exactly the same what the :func:`py3:functools.update_wrapper`\n"
    "    # function does on Python versions after 3.2. It sets the ``__wrapped__``\n"
    "    # attribute on ``wrapper`` object and it doesn't raise an error if any of\n"
    "    # the attributes mentioned in ``assigned`` and ``updated`` are missing on\n"
    "    # ``wrapped`` object.\n"
    "    def _update_wrapper(wrapper, wrapped,\n"
    "                        assigned=functools.WRAPPER_ASSIGNMENTS,\n"
    "                        updated=functools.WRAPPER_UPDATES):\n"
    "        for attr in assigned:\n"
    "            try:\n"
    "                value = getattr(wrapped, attr)\n"
    "            except AttributeError:\n"
    "                continue\n"
    "            else:\n"
    "                setattr(wrapper, attr, value)\n"
    "        for attr in updated:\n"
    "            getattr(wrapper, attr).update(getattr(wrapped, attr, {}))\n"
    "        wrapper.__wrapped__ = wrapped\n"
    "        return wrapper\n"
    "    _update_wrapper.__doc__ = functools.update_wrapper.__doc__\n"
    "\n"
    "    def wraps(wrapped, assigned=functools.WRAPPER_ASSIGNMENTS,\n"
    "              updated=functools.WRAPPER_UPDATES):\n"
    "        return functools.partial(_update_wrapper, wrapped=wrapped,\n"
    "                                 assigned=assigned, updated=updated)\n"
    "    wraps.__doc__ = functools.wraps.__doc__\n"
    "\n"
)

TASKS = """
[tasks.six-305]
repository = "six"
fail_to_pass = [
    "tests/test_six_pep560.py::test_with_metaclass_typing",
    "tests/test_six_pep560.py::test_with_metaclass_pep_560",
]
pass_to_pass = ["tests/test_six_pep560.py::test_with_metaclass"]

[tasks.six-251]
repository = "six"
fail_to_pass = ["tests/test_six_wraps.py::test_wraps"]
"""


def _repo(root: Path, six: str, tests: dict[str, str], what: str) -> GitRepo:
    repo = GitRepo(root)
    files = {
        "six.py": six,
        "pytest.ini": "[pytest]\npythonpath = .\n",
        ".gitignore": "__pycache__/\n.pytest_cache/\n",
    }
    repo.commit({**files, **tests}, what)
    return repo


def _session(
    repo: GitRepo, sid: str, task_id: str, first: int, old: list[str], new: str | None
) -> dict[str, Any]:
    """A session replacing lines `first`.. (`old`) of six.py by `new`, or editing nothing."""
    turns = [model_turn(call("read_file", "r0", path="six.py"))]
    if new is not None:
        edit = call(
            "replace_lines",
            "e0",
            path="six.py",
            start_line=first,
            end_line=first + len(old) - 1,
            expected="".join(old),
            replacement=new,
        )
        turns.append(model_turn(edit))
    turns.append(model_turn("Done."))
    base = repo.head()
    report = run_session(
        repo.path, sid, f"Fix {task_id}.", ScriptedModel(turns), commit=True, repo_name="six"
    ).report()
    repo.git("reset", "-q", "--hard", base)
    report["task_id"] = task_id
    return report


def _config(tmp_path: Path, repo: GitRepo) -> Config:
    (tmp_path / "tasks.toml").write_text(TASKS, encoding="utf-8")
    six = RepositoryConfig("six", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=120)
    return Config(
        database_url=f"sqlite:///{tmp_path / 'batch.sqlite3'}",
        repositories={"six": six},
        source=tmp_path / "verifier.toml",
    )


def _answers(config: Config, tmp_path: Path, reports: list[dict[str, Any]]) -> dict[str, Any]:
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(to_bytes(r).decode() + "\n" for r in reports), encoding="utf-8")
    answers = {}
    for result in verify_batch(config, batch, jobs=2).results:
        assert result.outcome is not None, result
        first = result.outcome.verification.first_finding
        answers[result.entry.session_id] = (result.status, first and first.code)
    return answers


def test_pep_560_support_resolved_only_when_really_made(tmp_path: Path) -> None:
    six = _read("six-ebb0db5-parent.py.txt")
    tests = {"tests/test_six_pep560.py": _read("test_six_pep560.py.txt")}
    repo = _repo(tmp_path / "six", six, tests, "six at ebb0db5's parent")
    lines = six.splitlines(True)
    first = lines.index(PEP560_OLD) + 1
    old = [PEP560_OLD]
    reports = [
        _session(repo, "pep560-real", "six-305", first, old, PEP560_NEW),
        _session(repo, "pep560-none", "six-305", first, old, None),
        _session(repo, "pep560-half", "six-305", first, old, PEP560_HALF),
    ]

    assert _answers(_config(tmp_path, repo), tmp_path, reports) == {
        "pep560-real": ("delivered", None),
        "pep560-none": ("not_delivered", "change.empty_session"),
        "pep560-half": ("not_delivered", "tests.acceptance_not_fixed"),
    }


def test_a_fix_for_old_pythons_only_is_a_task_that_proves_nothing_here(tmp_path: Path) -> None:
    six = _read("six-1988faf-parent.py.txt")
    tests = {"tests/test_six_wraps.py": _read("test_six_wraps.py.txt")}
    repo = _repo(tmp_path / "six", six, tests, "six at 1988faf's parent")
    old = six.splitlines(True)[WRAPS_OLD_FIRST - 1 : WRAPS_OLD_FIRST - 1 + WRAPS_OLD_LINES]
    assert old[0].startswith("if sys.version_info[0:2] < (3, 4):")
    reports = [_session(repo, "wraps-real", "six-251", WRAPS_OLD_FIRST, old, WRAPS_NEW)]

    assert _answers(_config(tmp_path, repo), tmp_path, reports) == {
        "wraps-real": ("inconclusive", "tests.acceptance_passes_at_base"),
    }
