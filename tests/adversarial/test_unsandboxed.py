"""A run that ended with no sandbox proves nothing about code that could reach the host.

Under ``network_isolation = "auto"`` (the default) the runner falls back from
bubblewrap to unshare to no sandbox at all. A pass without one is inconclusive
(`tests.unsandboxed`, naming why each sandbox was passed over); a failure stays
a failure; ``"off"``, the operator's explicit choice, passes with a note. The
fallback is forced as on a machine with neither sandbox: `bwrap` and `unshare`
hidden from the verifier's PATH.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, fix_turns, fixed_session, to_bytes
from verifier.config import Config, RepositoryConfig
from verifier.contract.report import parse_report
from verifier.findings import CheckStatus, DeliveryStatus, Verification
from verifier.verify import verify

NOTHING_ISOLATED = 'network_isolation = "off": nothing was isolated'


def path_without(programs: Sequence[str], shadow: Path) -> str:
    """PATH with the folders holding `programs` replaced by links to everything else."""
    shadow.mkdir()
    folders = []
    for folder in os.environ["PATH"].split(os.pathsep):
        if not any((Path(folder) / p).exists() for p in programs):
            folders.append(folder)
            continue
        for entry in Path(folder).iterdir():
            if entry.name not in programs and not (shadow / entry.name).exists():
                (shadow / entry.name).symlink_to(entry)
        folders.append(str(shadow))
    return os.pathsep.join(dict.fromkeys(folders))


@pytest.fixture
def no_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Neither `bwrap` nor `unshare` on the PATH the runner searches."""
    monkeypatch.setenv("PATH", path_without(("bwrap", "unshare"), tmp_path / "shadow-path"))
    yield


def verdict(repo: GitRepo, report: dict[str, Any], isolation: str = "auto") -> Verification:
    calc = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    config = Config(network_isolation=isolation, repositories={"calc": calc})  # type: ignore[arg-type]
    return verify(parse_report(to_bytes(report)), config)


def test_a_pass_with_no_sandbox_under_auto_is_inconclusive(repo: GitRepo, no_sandbox: None) -> None:
    v = verdict(repo, fixed_session(repo).report())

    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE, v.to_dict()
    tests = v.checks["tests"]
    assert tests.status is CheckStatus.ERROR
    (finding,) = tests.findings
    assert (finding.code, finding.expected, finding.found) == (
        "tests.unsandboxed",
        "a run in the bwrap or unshare sandbox",
        "no sandbox",
    )
    assert "neither `bwrap` nor `unshare` is installed" in finding.message
    assert tests.details["sandbox"] == "none"
    assert tests.details["exit_code"] == 0  # the tests did pass: the verdict is withheld


def test_the_message_names_why_each_sandbox_was_passed_over(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both installed but refused by the kernel, as in a container without user namespaces.
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    for name in ("bwrap", "unshare"):
        refusal = f"echo '{name}: Operation not permitted' >&2"
        (fakes / name).write_text(f"#!/bin/sh\n{refusal}\nexit 1\n")
        (fakes / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fakes}{os.pathsep}{os.environ['PATH']}")

    v = verdict(repo, fixed_session(repo).report())

    assert v.delivery_status is DeliveryStatus.INCONCLUSIVE, v.to_dict()
    (finding,) = v.checks["tests"].findings
    assert finding.code == "tests.unsandboxed"
    assert "the bwrap sandbox did not start: bwrap: Operation not permitted" in finding.message
    assert "the unshare sandbox did not start: unshare: Operation not permitted" in finding.message


def test_a_failing_run_with_no_sandbox_stays_not_delivered(repo: GitRepo, no_sandbox: None) -> None:
    broken = fixed_session(repo, turns=fix_turns("    return b - a\n")).report()

    v = verdict(repo, broken)

    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED, v.to_dict()
    assert [f.code for f in v.checks["tests"].findings] == ["tests.failed"]


def test_off_is_the_operators_choice_and_passes_with_a_note(
    repo: GitRepo, no_sandbox: None
) -> None:
    v = verdict(repo, fixed_session(repo).report(), isolation="off")

    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    tests = v.checks["tests"]
    assert (tests.details["sandbox"], tests.findings) == ("none", ())
    assert NOTHING_ISOLATED in tests.notes


def test_a_sandboxed_run_carries_no_such_note(repo: GitRepo) -> None:
    v = verdict(repo, fixed_session(repo).report())

    if v.checks["tests"].details["sandbox"] == "none":
        pytest.skip("no sandbox works here")
    assert v.delivery_status is DeliveryStatus.DELIVERED, v.to_dict()
    assert NOTHING_ISOLATED not in v.checks["tests"].notes
