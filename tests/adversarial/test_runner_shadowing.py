"""A repository that tries to choose what runs its tests: a `pytest/` package, an
`argparse.py`, `sitecustomize.py`, `usercustomize.py` or a `.pth` file at its root.

Under ``python -m pytest`` the working folder comes first on `sys.path`, so each of
these would run in place of ours; through our entry
(`verifier.checks.tests.entries.pytest_entry`) they change nothing. And the honest
layouts that ``-m pytest`` makes work (a flat ``calc.py`` beside ``tests/`` without
``__init__.py``, a package) keep passing. Each on the calc repository (subtract is
broken at its base), default configuration.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST
from verifier.checks.tests.check import check
from verifier.config import Config
from verifier.findings import CheckResult, CheckStatus

DEFAULT = Config()
FIXED = "def add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n    return a - b\n"
# Prints its mark, then claims success before anything of ours could run.
SUCCESS = "import os\n\nprint('SHADOW RAN', flush=True)\nos._exit(0)\n"
FAKE_PYTEST = {
    "pytest/__init__.py": SUCCESS + "\n\ndef main(*a, **k):\n    return 0\n",
    "pytest/__main__.py": SUCCESS,
}


def _codes(result: CheckResult) -> list[str]:
    return [f.code for f in result.findings]


@pytest.mark.parametrize(
    "files",
    [
        FAKE_PYTEST,
        {"argparse.py": SUCCESS},
        {"sitecustomize.py": SUCCESS},
        {"usercustomize.py": SUCCESS},
        {"zz-shadow.pth": "import os; print('SHADOW RAN', flush=True); os._exit(0)\n"},
        # pytest puts the test folder first on the path: modules it imports late.
        {"tests/difflib.py": SUCCESS, "tests/doctest.py": SUCCESS, "tests/pdb.py": SUCCESS},
    ],
    ids=["pytest-package", "argparse", "sitecustomize", "usercustomize", "pth", "test-folder"],
)
def test_a_runner_or_start_up_module_at_the_root_changes_nothing(
    repo: GitRepo, files: dict[str, str]
) -> None:
    """The broken subtract still fails, by our pytest, and the repository's module
    never ran."""
    commit = repo.commit(files, msg="the agent's runner")

    result = check(repo.path, commit, PYTEST, 60, DEFAULT)

    assert result.status is CheckStatus.FAIL, result.details["output_excerpt"]
    assert _codes(result) == ["tests.failed"]
    assert result.details["counts"] == {"passed": 1, "failed": 1, "errors": 0, "skipped": 0}
    assert "SHADOW RAN" not in result.details["output_excerpt"]


def test_a_pytest_package_at_the_root_cannot_pass_a_broken_change_through_the_script(
    repo: GitRepo,
) -> None:
    commit = repo.commit(FAKE_PYTEST, msg="the agent's runner")
    script = str(Path(sys.executable).with_name("pytest"))

    result = check(repo.path, commit, [script, "-q"], 60, DEFAULT)

    assert result.status is CheckStatus.FAIL, result.details["output_excerpt"]
    assert _codes(result) == ["tests.failed"]
    assert "SHADOW RAN" not in result.details["output_excerpt"]


@pytest.mark.parametrize("ini", [None, "[pytest]\n", "[pytest]\npythonpath = .\n"])
def test_an_honest_flat_layout_passes_with_or_without_pythonpath(
    tmp_path: Path, ini: str | None
) -> None:
    """calc.py at the root, tests/test_calc.py doing `import calc`, no __init__.py."""
    repo = GitRepo(tmp_path / "flat")
    files = {
        "calc.py": FIXED,
        "tests/test_calc.py": "import calc\n\n\n"
        "def test_subtract():\n    assert calc.subtract(5, 3) == 2\n",
    }
    commit = repo.commit({**files, **({"pytest.ini": ini} if ini is not None else {})})

    result = check(repo.path, commit, PYTEST, 60, DEFAULT)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert result.details["counts"]["passed"] == 1


def test_an_honest_flat_layout_passes_through_the_pytest_script(repo: GitRepo) -> None:
    commit = repo.commit({"calc.py": FIXED})
    script = str(Path(sys.executable).with_name("pytest"))

    result = check(repo.path, commit, [script, "-q"], 60, DEFAULT)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert result.details["argv"][0] == sys.executable or Path(
        result.details["argv"][0]
    ).name.startswith("python")
    assert result.details["counts"]["passed"] == 2


def test_an_honest_package_layout_passes(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "pkg")
    commit = repo.commit(
        {
            "src/calc/__init__.py": FIXED,
            "tests/__init__.py": "",
            "tests/test_calc.py": "from calc import subtract\n\n\n"
            "def test_subtract():\n    assert subtract(5, 3) == 2\n",
            "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\n',
        }
    )

    result = check(repo.path, commit, PYTEST, 60, DEFAULT)

    assert result.status is CheckStatus.PASS, result.details["output_excerpt"]
    assert result.details["counts"]["passed"] == 1
