"""The pytest plugins of the distributions the base declares load by default; the head's
declarations decide nothing.

pytest runs with plugin autoloading off (`verifier.checks.tests.entries.pytest_entry`). A
suite that uses a plugin's fixture without naming the plugin in its pytest configuration
(pytest-xdist's ``worker_id``, anyio's ``anyio_backend``) is honest and must stay
delivered: the plugins of the distributions the BASE declares as dependencies load
(`verifier.checks.tests.declared`). A session that adds the declaration only at the head
loads nothing: the run fails as at the base, and the note names the plugin not loaded.
Real repositories, real pytest, the default configuration (only a test command).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, to_bytes
from verifier.agent.harness import ScriptedModel, call, model_turn, run_session
from verifier.checks.tests.declared import (
    declared_distributions,
    names_in_pyproject,
    names_in_requirements,
)
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.errors import ConfigError
from verifier.findings import DeliveryStatus, Verification
from verifier.verify import verify

BROKEN = "def subtract(a, b):\n    return a + b\n"
RIGHT = "def subtract(a, b):\n    return a - b\n"
# Uses pytest-xdist's fixture without naming the plugin anywhere in pytest's configuration.
WORKER_TESTS = (
    "from calc import subtract\n\n\ndef test_subtract(worker_id):\n"
    "    assert worker_id == 'master'\n    assert subtract(5, 3) == 2\n"
)
# Uses anyio's pytest plugin (its marker and its anyio_backend fixture).
ANYIO_TESTS = (
    "import pytest\n\nfrom calc import subtract\n\n\n@pytest.mark.anyio\n"
    "async def test_subtract(anyio_backend):\n    assert subtract(5, 3) == 2\n"
)
INI = "[pytest]\npythonpath = .\n"
XDIST_PYPROJECT = (
    '[project]\nname = "calc"\nversion = "0"\n'
    '[project.optional-dependencies]\ntest = ["pytest>=8", "pytest-xdist[psutil]>=3"]\n'
)

needs_anyio = pytest.mark.skipif(
    importlib.util.find_spec("anyio") is None, reason="anyio is not installed"
)


def repo_with(tmp_path: Path, files: dict[str, str]) -> GitRepo:
    repo = GitRepo(tmp_path / "calc")
    repo.commit({"calc.py": BROKEN, "pytest.ini": INI, ".gitignore": "__pycache__/\n", **files})
    return repo


def session(repo: GitRepo, writes: dict[str, str]) -> dict[str, Any]:
    turns = [
        model_turn(call("write_file", f"w{n}", path=path, content=text))
        for n, (path, text) in enumerate(writes.items())
    ]
    turns.append(model_turn("Fixed subtract()."))
    done = run_session(repo.path, "s-plugins", "Fix subtract.", ScriptedModel(turns), commit=True)
    return done.report()


def verdict(repo: GitRepo, report: dict[str, Any], **keys: Any) -> Verification:
    repository = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60, **keys
    )
    return verify(parse_report(to_bytes(report)), Config(repositories={"calc": repository}))


def codes(v: Verification) -> list[str]:
    return [f.code for f in v.checks["tests"].findings]


def output(v: Verification) -> str:
    return str(v.checks["tests"].details.get("output_excerpt", ""))


def not_loaded(v: Verification) -> str:
    notes = [n for n in v.checks["tests"].notes if "installed but not loaded" in n]
    assert len(notes) == 1, v.checks["tests"].notes
    return notes[0]


# -- reading the declarations -----------------------------------------------------------


def test_every_table_of_pyproject_declares() -> None:
    data = {
        "project": {
            "dependencies": ["Requests[socks]>=2; python_version > '3'"],
            "optional-dependencies": {"test": ["pytest_xdist>=3", "anyio @ https://x/a.whl"]},
        },
        "dependency-groups": {
            "dev": ["Pytest.Mock", {"include-group": "test"}],
            "test": ["hypothesis"],
        },
        "tool": {
            "poetry": {
                "dependencies": {"python": "^3.11", "attrs": "*"},
                "dev-dependencies": {"pytest-cov": "*"},
                "group": {"lint": {"dependencies": {"ruff": "*"}}},
            },
            "pdm": {"dev-dependencies": {"test": ["pytest-timeout"]}},
            "hatch": {
                "envs": {
                    "default": {"dependencies": ["coverage"]},
                    "t": {"extra-dependencies": ["pytest-randomly"]},
                }
            },
        },
    }
    assert sorted(names_in_pyproject(data)) == [
        "anyio",
        "attrs",
        "coverage",
        "hypothesis",
        "pytest-cov",
        "pytest-mock",
        "pytest-randomly",
        "pytest-timeout",
        "pytest-xdist",
        "requests",
        "ruff",
    ]


def test_a_requirements_file_gives_names_and_includes_and_skips_the_rest() -> None:
    text = (
        "# a comment\npytest-xdist==3.5 # pinned\n-r base.txt\n--constraint=c.txt\n"
        "-e .\n--index-url https://example.org/simple\n"
        "git+https://github.com/x/y.git#egg=y\nPyTest_Mock[extra]>=1 ; python_version>'3'\n"
        "./local/path\n{[testenv]deps}\n"
    )
    assert names_in_requirements(text) == (["pytest-xdist", "pytest-mock"], ["base.txt", "c.txt"])


def test_the_declarations_are_the_commits_not_the_working_trees(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    base = repo.commit(
        {
            "pyproject.toml": XDIST_PYPROJECT,
            "setup.cfg": (
                "[options]\ninstall_requires =\n    attrs\ntests_require = pytest-timeout\n"
                "[options.extras_require]\ntest =\n    hypothesis>=6\n"
            ),
            "tox.ini": (
                "[tox]\nenvlist = py\n[testenv]\ndeps =\n    py311: coverage\n"
                "    -r requirements/tox.txt\n[testenv:lint]\ndeps = ruff\n"
            ),
            "requirements-dev.txt": "pytest-mock\n-r requirements/base.txt\n",
            "requirements/base.txt": "anyio\n-r deeper.txt\n",
            "requirements/deeper.txt": "deeper\n",
            "requirements/tox.txt": "pytest-randomly\n",
            "docs/requirements.txt": "sphinx\n",  # not at the root: not read
        }
    )
    repo.commit({"requirements-dev.txt": "pytest-mock\nheads-only\n"}, "head")
    (repo.path / "requirements-extra.txt").write_text("untracked\n")
    assert declared_distributions(repo.path, base) == (
        "anyio",
        "attrs",
        "coverage",
        "deeper",
        "hypothesis",
        "pytest",
        "pytest-mock",
        "pytest-randomly",
        "pytest-timeout",
        "pytest-xdist",
        "ruff",
    )
    assert "heads-only" in declared_distributions(repo.path, "HEAD")


def test_an_include_is_followed_one_level_only(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    base = repo.commit(
        {
            "requirements-dev.txt": "-r ci/test.txt\n",
            "ci/test.txt": "pytest-mock\n-r deeper.txt\n",
            "ci/deeper.txt": "hypothesis\n",
        }
    )
    assert declared_distributions(repo.path, base) == ("pytest-mock",)


def test_a_file_that_does_not_parse_declares_nothing(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    base = repo.commit(
        {"pyproject.toml": "this is = not toml =", "setup.cfg": "no section\n", "tox.ini": "["}
    )
    assert declared_distributions(repo.path, base) == ()


# -- the configuration key --------------------------------------------------------------


def test_pytest_plugins_is_all_or_a_list_of_names(tmp_path: Path) -> None:
    path = tmp_path / "v.toml"
    path.write_text('[repositories.calc]\npytest_plugins = "all"\n')
    assert Config.load(path, environ={}).repository("calc").pytest_plugins == "all"
    path.write_text('[repositories.calc]\npytest_plugins = ["xdist", "pytest-mock"]\n')
    assert Config.load(path, environ={}).repository("calc").pytest_plugins == (
        "xdist",
        "pytest-mock",
    )
    for bad in ('"every"', '"xdist"', '["-p xdist"]', "true"):
        path.write_text(f"[repositories.calc]\npytest_plugins = {bad}\n")
        with pytest.raises(ConfigError, match=r"repositories\.calc\.pytest_plugins.*\"all\""):
            Config.load(path, environ={})


# -- honest sessions: the base declares the plugin's distribution -----------------------


def test_a_fixture_of_a_plugin_the_pyproject_declares_is_there(tmp_path: Path) -> None:
    """pytest-xdist in ``[project.optional-dependencies]``: ``worker_id`` exists."""
    repo = repo_with(
        tmp_path, {"tests/test_calc.py": WORKER_TESTS, "pyproject.toml": XDIST_PYPROJECT}
    )
    v = verdict(repo, session(repo, {"calc.py": RIGHT}))
    assert v.delivery_status is DeliveryStatus.DELIVERED, output(v)
    assert v.checks["tests"].details["counts"]["passed"] == 1


def test_a_fixture_of_a_plugin_a_dependency_group_declares_is_there(tmp_path: Path) -> None:
    pyproject = (
        '[dependency-groups]\ntest = ["pytest"]\ndev = [{include-group = "test"}, "pytest-xdist"]\n'
    )
    repo = repo_with(tmp_path, {"tests/test_calc.py": WORKER_TESTS, "pyproject.toml": pyproject})
    v = verdict(repo, session(repo, {"calc.py": RIGHT}))
    assert v.delivery_status is DeliveryStatus.DELIVERED, output(v)


@needs_anyio
def test_a_plugin_a_root_requirements_file_declares_is_loaded(tmp_path: Path) -> None:
    """anyio in the base's ``requirements-dev.txt``: its marker and fixture work."""
    repo = repo_with(
        tmp_path, {"tests/test_calc.py": ANYIO_TESTS, "requirements-dev.txt": "anyio>=4\n"}
    )
    v = verdict(repo, session(repo, {"calc.py": RIGHT}))
    assert v.delivery_status is DeliveryStatus.DELIVERED, output(v)
    assert v.checks["tests"].details["counts"]["passed"] >= 1


def test_the_all_policy_loads_every_trusted_plugin_without_a_declaration(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {"tests/test_calc.py": WORKER_TESTS})
    report = session(repo, {"calc.py": RIGHT})
    v = verdict(repo, report, pytest_plugins="all")
    assert v.delivery_status is DeliveryStatus.DELIVERED, output(v)


def test_an_explicit_list_is_all_that_loads(tmp_path: Path) -> None:
    """The repository's list replaces the declarations: xdist declared, not listed."""
    repo = repo_with(
        tmp_path, {"tests/test_calc.py": WORKER_TESTS, "pyproject.toml": XDIST_PYPROJECT}
    )
    v = verdict(repo, session(repo, {"calc.py": RIGHT}), pytest_plugins=())
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert codes(v) == ["tests.failed"]
    assert "fixture 'worker_id' not found" in output(v)


# -- the head's declarations decide nothing ---------------------------------------------


@pytest.mark.parametrize(
    "writes",
    [
        {"requirements-dev.txt": "pytest-xdist\n"},  # the example: a new root file
        {"requirements/test.txt": "pytest-xdist>=3\n"},  # a new file in requirements/
        {"pyproject.toml": XDIST_PYPROJECT},  # the declaration added to pyproject.toml
        {"tox.ini": "[testenv]\ndeps = pytest-xdist\n"},  # ... to tox.ini's deps
    ],
    ids=["requirements-dev", "requirements-folder", "pyproject", "tox"],
)
def test_a_declaration_only_the_head_adds_loads_nothing(
    tmp_path: Path, writes: dict[str, str]
) -> None:
    """The run fails as at the base (the fixture does not exist), and the note names the
    trusted plugin that was not loaded and the key that loads it."""
    repo = repo_with(tmp_path, {"tests/test_calc.py": WORKER_TESTS, "requirements-dev.txt": "\n"})
    v = verdict(repo, session(repo, {"calc.py": RIGHT, **writes}))
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED, v.to_dict()
    assert codes(v) == ["tests.failed"], output(v)
    assert "fixture 'worker_id' not found" in output(v)
    note = not_loaded(v)
    assert "xdist (pytest-xdist)" in note
    assert "pytest_plugins" in note


@needs_anyio
def test_the_failure_note_lists_only_what_was_not_loaded(tmp_path: Path) -> None:
    """xdist declared (loaded), anyio not: ``anyio_backend`` is not found, and the note
    names anyio, not xdist."""
    tests = WORKER_TESTS + "\n\n" + ANYIO_TESTS.replace("test_subtract", "test_async")
    repo = repo_with(tmp_path, {"tests/test_calc.py": tests, "pyproject.toml": XDIST_PYPROJECT})
    v = verdict(repo, session(repo, {"calc.py": RIGHT}))
    assert codes(v) == ["tests.failed"], output(v)
    assert "fixture 'anyio_backend' not found" in output(v)
    note = not_loaded(v)
    assert "anyio (anyio)" in note
    assert "(pytest-xdist)" not in note


def test_no_note_when_the_failure_is_no_missing_plugins(tmp_path: Path) -> None:
    """A plain assertion failure, and a pass: no note about plugins."""
    failing = WORKER_TESTS.replace("== 2", "== 3")
    repo = repo_with(tmp_path, {"tests/test_calc.py": failing, "pyproject.toml": XDIST_PYPROJECT})
    v = verdict(repo, session(repo, {"calc.py": RIGHT}))
    assert codes(v) == ["tests.failed"], output(v)
    assert "assert 2 == 3" in output(v)
    assert not [n for n in v.checks["tests"].notes if "installed but not loaded" in n]
    honest = repo_with(
        tmp_path / "h", {"tests/test_calc.py": WORKER_TESTS, "pyproject.toml": XDIST_PYPROJECT}
    )
    ok = verdict(honest, session(honest, {"calc.py": RIGHT}))
    assert ok.delivery_status is DeliveryStatus.DELIVERED, output(ok)
    assert not [n for n in ok.checks["tests"].notes if "installed but not loaded" in n]


def test_a_declared_distribution_the_tree_provides_is_not_trusted(tmp_path: Path) -> None:
    """The base declares ``calc-tools``; the session commits a ``calc_tools`` dist-info with
    a ``pytest11`` plugin marking every test passed, and a wrong fix: the declaration loads
    only distributions installed outside the copy, so the wrong fix fails."""
    tests = "from calc import subtract\n\n\ndef test_subtract():\n    assert subtract(5, 3) == 2\n"
    repo = repo_with(
        tmp_path, {"tests/test_calc.py": tests, "requirements-dev.txt": "calc-tools\n"}
    )
    plugin = (
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
    )
    folder = "calc_tools-0.1.dist-info"
    writes = {
        "calc.py": "def subtract(a, b):\n    return b - a\n",
        "calc_tools_plugin.py": plugin,
        f"{folder}/METADATA": "Metadata-Version: 2.1\nName: calc-tools\nVersion: 0.1\n",
        f"{folder}/entry_points.txt": "[pytest11]\ncalc_tools = calc_tools_plugin\n",
        f"{folder}/RECORD": "",
    }
    v = verdict(repo, session(repo, writes))
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED, v.to_dict()
    assert codes(v) == ["tests.failed"], output(v)
    assert "test_subtract" in output(v)
    assert "1 failed" in output(v)  # not reported passed by the tree's plugin
    assert not any("calc_tools" in n for n in v.checks["tests"].notes)


def test_an_include_outside_the_repository_or_absent_is_left_out(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    base = repo.commit(
        {
            "requirements.txt": (
                "-r ..\n-r ../up.txt\n-r /etc/passwd\n-r :(glob)*\n-r gone.txt\nattrs\n"
            )
        }
    )
    assert declared_distributions(repo.path, base) == ("attrs",)


@needs_anyio
def test_xdist_workers_load_the_declared_plugins_too(tmp_path: Path) -> None:
    """``addopts = -n 2`` with pytest-xdist and anyio declared: the workers, which start
    pytest without our entry, get the plugins we loaded by name (``-p``)."""
    pyproject = (
        '[project]\nname = "calc"\nversion = "0"\ndependencies = ["pytest-xdist", "anyio"]\n'
    )
    ini = "[pytest]\npythonpath = .\naddopts = -n 2\n"
    files = {"tests/test_calc.py": ANYIO_TESTS, "pyproject.toml": pyproject, "pytest.ini": ini}
    repo = repo_with(tmp_path, files)
    v = verdict(repo, session(repo, {"calc.py": RIGHT}))
    assert v.delivery_status is DeliveryStatus.DELIVERED, output(v)
    assert v.checks["tests"].details["counts"]["passed"] == 1


# -- the entry's side (verifier/checks/tests/entries/pytest_entry.py) -------------------


def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of the interpreter's path with one distribution, ``tree-plugin``, whose
    ``pytest11`` entry point is ``treeplug``."""
    site = tmp_path / "site"
    folder = site / "tree_plugin-0.1.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text("Metadata-Version: 2.1\nName: Tree_Plugin\nVersion: 0.1\n")
    (folder / "entry_points.txt").write_text("[pytest11]\ntreeplug = tree_plugin_mod\n")
    (site / "tree_plugin_mod.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "tree_plugin_mod", raising=False)
    return site


def names(found: list[tuple[Any, Any, Any]]) -> set[str]:
    return {ep.name for ep, _, _ in found}


def test_a_declared_distribution_loads_its_plugins_by_distribution_name_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verifier.checks.tests.entries import pytest_entry

    site = plugin_site(tmp_path, monkeypatch)
    copy = str(tmp_path / "copy")
    assert "treeplug" in names(pytest_entry._trusted_plugins([], copy, declared=["tree-plugin"]))
    # A declaration names a distribution, not an entry point.
    assert "treeplug" not in names(pytest_entry._trusted_plugins([], copy, declared=["treeplug"]))
    assert "treeplug" in names(pytest_entry._trusted_plugins("all", copy))
    # Inside the copy or the checked repository: never, whatever names it.
    assert "treeplug" not in names(pytest_entry._trusted_plugins("all", str(site)))
    assert "treeplug" not in names(
        pytest_entry._trusted_plugins([], "/nowhere", [str(site)], declared=["tree-plugin"])
    )


def test_the_workers_get_every_loaded_plugin_but_a_blocked_one() -> None:
    from verifier.checks.tests.entries import pytest_entry

    class Point:
        def __init__(self, name: str) -> None:
            self.name = name

    loaded = [(Point(n), None, None) for n in ("xdist", "anyio", "pytest_mock")]
    settings = {"addopts": "-p no:anyio -q"}
    assert pytest_entry._for_workers(loaded, settings, ["-pno:pytest_mock"]) == ["-p", "xdist"]
    assert pytest_entry._for_workers(loaded, {}, []) == [
        "-p",
        "xdist",
        "-p",
        "anyio",
        "-p",
        "pytest_mock",
    ]
    assert pytest_entry._for_workers(loaded[1:], {}, []) == []  # no xdist: no workers
