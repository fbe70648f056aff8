"""Worktree mode: a process the session left behind flips a tracked symlink while the
copy for the tests is made, so the tests see a state the changes check never read.

The changes check reads the link pointing at the failing data (unchanged from the
base: nothing to claim); while the copy is made the link points at the passing
data, and afterwards back again. With the default configuration the verdict is
`inconclusive` (`tests.head_moved`): the snapshot describes every link by its
target and holds it against what the changes check read.
"""

from __future__ import annotations

import os

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, fixed_session, to_bytes
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckStatus, DeliveryStatus
from verifier.verify import verify

DATA_TEST = (
    "from pathlib import Path\n\n\ndef test_data():\n"
    "    assert Path('expected.txt').read_text() == '5\\n'\n"
)


def point(repo: GitRepo, target: str) -> None:
    os.remove(repo.path / "expected.txt")
    os.symlink(target, repo.path / "expected.txt")


def test_a_symlink_flipped_while_the_copy_is_made_is_inconclusive(repo: GitRepo) -> None:
    repo.write({"good.txt": "5\n", "bad.txt": "8\n", "tests/test_data.py": DATA_TEST})
    os.symlink("bad.txt", repo.path / "expected.txt")
    repo.commit(msg="data through a link: test_data fails")
    report = fixed_session(repo, commit=False).report()  # fixes calc.py, link untouched
    flips: list[str] = []

    def leftover_process(line: str) -> None:
        # The moment the tests check starts its copy, and once the run has started.
        if line.startswith("copying the head state"):
            point(repo, "good.txt")
            flips.append("good")
        elif line.startswith("running tests") and flips:
            point(repo, "bad.txt")
            flips.append("bad")

    calc = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    config = Config(repositories={"calc": calc})
    v = verify(parse_report(to_bytes(report)), config, progress=leftover_process)

    assert flips[:1] == ["good"], "the flip never happened: the test proves nothing"
    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE, v.to_dict()
    assert v.checks["changes"].status is CheckStatus.PASS  # it read the link at bad.txt
    tests = v.checks["tests"]
    assert [f.code for f in tests.findings] == ["tests.head_moved"]
    assert "expected.txt" in tests.findings[0].message


def test_without_the_flip_the_same_session_is_not_delivered(repo: GitRepo) -> None:
    repo.write({"good.txt": "5\n", "bad.txt": "8\n", "tests/test_data.py": DATA_TEST})
    os.symlink("bad.txt", repo.path / "expected.txt")
    repo.commit(msg="data through a link: test_data fails")
    report = fixed_session(repo, commit=False).report()
    calc = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)

    v = verify(parse_report(to_bytes(report)), Config(repositories={"calc": calc}))

    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED, v.to_dict()
    assert [f.code for f in v.checks["tests"].findings] == ["tests.failed"]
