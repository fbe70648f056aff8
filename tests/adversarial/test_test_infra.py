"""An agent that changes the tests, rather than the code, to make them pass.

By default the copy for the tests holds pytest's configuration, every
``conftest.py`` and the test files as they are at the base commit
(`verifier.checks.tests.testinfra`): what the agent did there is a note, and the tests run
as the base wrote them. The controls with ``test_infra_from_base = false``
show each attack works when that is off.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import BASE, FIX, PYTEST, TESTS, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.checks.tests.check import check as run_tests
from verifier.checks.tests.testinfra import is_test_infra, use_base_test_infra
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckStatus, DeliveryStatus, Verification
from verifier.verify import verify

BROKEN = "    return b - a\n"
WEAKENED = TESTS.replace("assert subtract(5, 3) == 2", "assert True")
SKIP_ALL = (
    "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
    "    for item in items:\n        item.add_marker(pytest.mark.skip(reason='later'))\n"
)
ALL_PASS = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)
PYPROJECT = '[project]\nname = "calc"\nversion = "0.1"\ndependencies = []\n'


def session(repo: GitRepo, *writes: tuple[str, str], fix: str = FIX["replacement"]) -> Any:
    """A committed session that writes `writes` (path, text) and edits subtract() to `fix`."""
    turns = [
        model_turn(call("write_file", f"w{n}", path=path, content=text))
        for n, (path, text) in enumerate(writes)
    ]
    turns += [
        model_turn(call("replace_lines", "fix", **{**FIX, "replacement": fix})),
        model_turn("Done."),
    ]
    return run_session(repo.path, "s-infra", "Fix subtract.", ScriptedModel(turns), commit=True)


def verdict(repo: GitRepo, report: dict[str, Any], **repo_keys: Any) -> Verification:
    repo_config = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60, **repo_keys
    )
    before = repo.snapshot()
    result = verify(parse_report(to_bytes(report)), Config(repositories={"calc": repo_config}))
    assert repo.snapshot() == before, "verify modified the repository"
    return result


def notes_of(v: Verification) -> list[str]:
    return list(v.checks["tests"].notes)


def test_a_weakened_test_with_broken_code_is_not_delivered(repo: GitRepo) -> None:
    report = session(repo, ("tests/test_calc.py", WEAKENED), fix=BROKEN).report()
    v = verdict(repo, report)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED, v.to_dict()
    assert v.checks["changes"].status is CheckStatus.PASS
    assert {f.code for f in v.checks["tests"].findings} == {"tests.failed"}
    assert notes_of(v) == ["tests/test_calc.py: changed from the base commit, used as it is there"]
    control = verdict(repo, report, test_infra_from_base=False)
    assert control.delivery_status is DeliveryStatus.DELIVERED  # the attack, unanswered


@pytest.mark.parametrize(
    ("conftest", "control_status"),
    [(SKIP_ALL, DeliveryStatus.NOT_DELIVERED), (ALL_PASS, DeliveryStatus.DELIVERED)],
    ids=["skips-everything", "reports-every-test-passed"],
)
def test_a_conftest_added_by_the_agent_is_not_used(
    repo: GitRepo, conftest: str, control_status: DeliveryStatus
) -> None:
    report = session(repo, ("tests/conftest.py", conftest), fix=BROKEN).report()
    v = verdict(repo, report)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED, v.to_dict()
    assert {f.code for f in v.checks["tests"].findings} == {"tests.failed"}
    assert notes_of(v) == ["tests/conftest.py: test configuration not in the base commit, not used"]
    # Skipping every test already fails (all skipped is no pass); faking passes did not.
    assert verdict(repo, report, test_infra_from_base=False).delivery_status is control_status


def test_an_honest_session_adding_a_dependency_is_delivered_with_a_note(repo: GitRepo) -> None:
    repo.commit({"pyproject.toml": PYPROJECT}, "packaging")
    added = PYPROJECT.replace("dependencies = []", 'dependencies = ["requests>=2"]')
    v = verdict(repo, session(repo, ("pyproject.toml", added)).report())
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    assert notes_of(v) == ["pyproject.toml: changed from the base commit, used as it is there"]


def test_an_honest_session_adding_a_test_is_delivered_and_its_test_not_run(
    repo: GitRepo,
) -> None:
    more = "from calc import subtract\n\n\ndef test_more():\n    assert subtract(9, 4) == 5\n"
    v = verdict(repo, session(repo, ("tests/test_more.py", more)).report())
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    assert v.checks["tests"].details["counts"]["passed"] == 2  # test_calc.py's two
    assert notes_of(v) == ["tests/test_more.py: test not in the base commit, not run"]


def test_with_test_infra_from_base_off_the_agents_tests_run(repo: GitRepo) -> None:
    more = "def test_more():\n    assert True\n"
    v = verdict(
        repo, session(repo, ("tests/test_more.py", more)).report(), test_infra_from_base=False
    )
    assert v.delivery_status is DeliveryStatus.DELIVERED
    assert v.checks["tests"].details["counts"]["passed"] == 3
    assert notes_of(v) == []


def test_the_trusted_ref_supplies_the_test_infrastructure(repo: GitRepo) -> None:
    # Any ancestor of the trusted ref is an acceptable base: the agent picks one from
    # before the tests were strengthened, and the trusted ref's tests still apply.
    old = repo.commit({"tests/test_calc.py": WEAKENED}, "weak tests")
    repo.commit({"tests/test_calc.py": TESTS}, "strong tests")
    repo.git("update-ref", "refs/remotes/origin/main", repo.head())
    repo.git("checkout", "-q", "--detach", old)
    report = session(repo, fix=BROKEN).report()
    assert verdict(repo, report).delivery_status is DeliveryStatus.DELIVERED  # base was bent
    v = verdict(repo, report, trusted_ref="refs/remotes/origin/main")
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED, v.to_dict()
    (note,) = notes_of(v)
    assert note.startswith("tests/test_calc.py: changed from refs/remotes/origin/main (")


def test_protected_paths_fail_by_default_and_note_on_request(repo: GitRepo) -> None:
    repo.commit({"pyproject.toml": PYPROJECT}, "packaging")
    added = PYPROJECT.replace("dependencies = []", 'dependencies = ["requests>=2"]')
    report = session(repo, ("pyproject.toml", added)).report()
    failed = verdict(repo, report, protected_paths=("pyproject.toml",))
    assert failed.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert {f.code for f in failed.checks["changes"].findings} == {"change.protected_path"}
    noted = verdict(repo, report, protected_paths=("pyproject.toml",), on_change="note")
    assert noted.delivery_status is DeliveryStatus.DELIVERED, noted.to_dict()
    assert noted.checks["changes"].notes == (
        "pyproject.toml: matches protected pattern 'pyproject.toml'",
    )


# --- the rewrite itself, on a copy -------------------------------------------------------


def _copy_of(repo: GitRepo, dest: Path) -> Path:
    repo.git("worktree", "add", "--detach", str(dest))
    return dest


def test_deleted_tests_are_restored_and_links_in_their_way_removed(
    repo: GitRepo, tmp_path: Path
) -> None:
    base = repo.head()
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "calc.py").write_text(BASE["calc.py"])
    (copy / "elsewhere").mkdir()
    os.symlink("elsewhere", copy / "tests")  # the tests folder made a link to another
    infra = use_base_test_infra(repo.path, base, copy)
    assert (copy / "tests").is_dir() and not (copy / "tests").is_symlink()
    assert (copy / "tests" / "test_calc.py").read_text() == TESTS
    assert (copy / "pytest.ini").read_text() == BASE["pytest.ini"]
    assert not list((copy / "elsewhere").iterdir())
    assert sorted(infra.notes) == [
        "pytest.ini: missing at the head, restored from the base commit",
        "tests/test_calc.py: missing at the head, restored from the base commit",
    ]
    # What the tampering scan leaves out: every path taken from the base, or removed.
    assert infra.paths == {"pytest.ini", "tests/test_calc.py"}


def test_an_unchanged_copy_is_left_alone(repo: GitRepo, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    for path, text in BASE.items():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_text(text)
    infra = use_base_test_infra(repo.path, repo.head(), copy)
    assert infra.notes == ()
    assert infra.paths == {"pytest.ini", "tests/test_calc.py"}  # as at the base already


@pytest.mark.parametrize(
    ("path", "infra"),
    [
        ("tests/test_calc.py", True),
        ("tests/data/input.txt", True),
        ("test/x.py", True),
        ("src/pkg/test_util.py", True),
        ("src/pkg/util_test.py", True),
        ("a/b/conftest.py", True),
        ("sub/pyproject.toml", True),
        (".pytest.ini", True),
        ("calc.py", False),
        ("src/testing.py", False),
        ("docs/tests.md", False),
    ],
)
def test_what_counts_as_test_infrastructure(path: str, infra: bool) -> None:
    assert is_test_infra(path) is infra


def test_a_base_that_cannot_be_read_is_an_error_of_the_tests_check(
    repo: GitRepo, tmp_path: Path
) -> None:
    result = run_tests(
        repo.path,
        repo.head(),
        tuple(PYTEST),
        60,
        Config(),
        base_commit="0" * 40,
        repository=RepositoryConfig("calc"),
    )
    assert result.status is CheckStatus.ERROR
    assert [f.code for f in result.findings] == ["tests.base_infra_failed"]
    assert "is not a commit" in result.findings[0].message
