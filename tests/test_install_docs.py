"""Every install line of the docs installs this project, by its distribution name.

The name ``verifier`` on the package index belongs to an unrelated project (1.0.0,
2019): a workflow copied from the docs with ``pip install verifier`` would run a
stranger's code. Ours is ``agent-delivery-verifier``; the import package and the
console script stay ``verifier``.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from tests.support.paths import ROOT

DISTRIBUTION = "agent-delivery-verifier"
# `pip install`, `python -m pip install`, `uv pip install`, `pipx install`.
INSTALL = re.compile(r"\b(?:pip3?|pipx|uv pip)\s+install\b(?P<rest>[^`\n|]*)")
# What may be installed: our distribution (with extras or a version), the checkout, our wheel.
OURS = re.compile(
    r"""^(?:
        agent-delivery-verifier(?:\[[\w,-]+\])?(?:[=<>~!]=?[\w.*]+)?
      | \.(?:\[[\w,-]+\])?
      | (?:\S*/)?agent_delivery_verifier-[\w.*-]+\.whl
    )$""",
    re.VERBOSE,
)
# Options whose value is not a thing to install: a requirements file (a project's own,
# as docs/runners.md shows for the repository under test), an index, a target folder.
TAKES_VALUE = {"-r", "--requirement", "-c", "--constraint", "--index-url", "-i", "--target"}


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def install_targets(text: str) -> list[tuple[int, str]]:
    """(line, target) for each thing a ``pip install`` line of `text` installs."""
    found: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in INSTALL.finditer(line):
            rest = match["rest"].split("#", 1)[0]
            try:
                words = shlex.split(rest)
            except ValueError:
                words = rest.split()
            skip = False
            for word in words:
                if skip:
                    skip = False
                elif word in TAKES_VALUE:
                    skip = True
                elif word in ("&&", ";", "||"):
                    break
                elif not word.startswith("-"):
                    found.append((number, word))
    return found


def test_the_distribution_is_named_agent_delivery_verifier() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["name"] == DISTRIBUTION
    # The import package and the command keep their name.
    assert project["scripts"] == {"verifier": "verifier.cli:entry"}


def test_the_installed_distribution_is_ours() -> None:
    dist = metadata.distribution(DISTRIBUTION)
    scripts = {e.name: e.value for e in dist.entry_points if e.group == "console_scripts"}
    assert scripts == {"verifier": "verifier.cli:entry"}


@pytest.mark.parametrize("document", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_install_line_of_the_docs_names_the_distribution(document: Path) -> None:
    wrong = [
        f"{document.relative_to(ROOT)}:{line}: installs {target!r}"
        for line, target in install_targets(document.read_text("utf-8"))
        if not OURS.match(target)
    ]
    assert not wrong, f"install {DISTRIBUTION} (or the checkout, or its wheel): {wrong}"


def test_the_ci_workflow_installs_it_by_name() -> None:
    targets = [t for _, t in install_targets((ROOT / "docs" / "ci.md").read_text("utf-8"))]
    assert DISTRIBUTION in targets


@pytest.mark.parametrize(
    ("line", "targets"),
    [
        ("run: python -m pip install verifier", ["verifier"]),
        ("pip install -U verifier==1.0.0  # old", ["verifier==1.0.0"]),
        ("`pip install .` or `pip install agent-delivery-verifier`", [".", DISTRIBUTION]),
        ("/srv/env/bin/pip install -r requirements.txt", []),
        ("uv pip install ./dist/agent_delivery_verifier-0.1.0-py3-none-any.whl", None),
    ],
)
def test_the_scanner_reads_the_targets_of_a_line(line: str, targets: list[str] | None) -> None:
    found = [t for _, t in install_targets(line)]
    if targets is None:
        assert len(found) == 1 and OURS.match(found[0])
    else:
        assert found == targets
    assert not OURS.match("verifier") and not OURS.match("verifier==1.0.0")
