"""The README and the pages of docs/ say what the code does: help texts, config keys,
links, and the README's tour run as written."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import cli_reference
from tests.support.paths import ROOT
from verifier import config as config_module
from verifier.demo import run as demo

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def test_cli_help_in_the_cli_page_matches_the_code() -> None:
    block = cli_reference.page_block(cli_reference.PAGE.read_text(encoding="utf-8"))
    assert block is not None, "docs/cli.md lost its cli-help markers"
    assert block == cli_reference.help_block(), "run `make docs` to update docs/cli.md"


def test_readme_gives_the_two_commands_and_ci_runs_make_test() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci and "VERIFIER_TEST_POSTGRES_URL" in ci


def test_the_readme_maps_every_page_of_docs() -> None:
    text = README.read_text(encoding="utf-8")
    unmapped = [p.name for p in PAGES[1:] if f"](docs/{p.name})" not in text]
    assert not unmapped, f"README.md's map of docs/ lacks {unmapped}"


def _config_classes() -> list[type]:
    return [
        config_module.Config,
        config_module.SandboxLimits,
        config_module.RepositoryConfig,
        config_module.ServiceConfig,
        config_module.EvidenceConfig,
        config_module.WebhookConfig,
        config_module.AgentConfig,
    ]


def _config_keys() -> set[str]:
    """Every key a configuration file may set: the dataclasses' fields, by their alias."""
    keys = set()
    for cls in _config_classes():
        for f in dataclasses.fields(cls):
            alias = getattr(f.default, "alias", None)
            keys.add(alias or f.name)
    return keys - {"source"}


def test_the_configuration_page_names_every_key() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = sorted(k for k in _config_keys() if not re.search(rf"\b{re.escape(k)}\b", text))
    assert not missing, f"docs/configuration.md does not name {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_of_the_pages_resolve(page: Path) -> None:
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text("utf-8"))
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert not missing, f"{page.name} links to files that do not exist: {missing}"


TOUR = re.compile(r"<!-- tour:start -->\n(.*?)<!-- tour:end -->", re.S)
STEP = re.compile(r"^\.venv/bin/verifier (.+?)\s+# (?:exit (\d+)|until Ctrl-C)$")


def tour_steps() -> list[tuple[list[str], int | None]]:
    """The README tour's commands with the exit code each promises (None: runs until stopped)."""
    tour = TOUR.search(README.read_text(encoding="utf-8"))
    assert tour is not None, "the README lost its tour markers"
    steps = []
    for block in re.findall(r"```sh\n(.*?)```", tour.group(1), re.S):
        for line in block.splitlines():
            match = STEP.match(line)
            assert match is not None, f"a tour line without its exit code: {line!r}"
            code = None if match.group(2) is None else int(match.group(2))
            steps.append((shlex.split(match.group(1)), code))
    return steps


def test_the_readme_tour_runs_as_written_after_make_demo(tmp_path: Path) -> None:
    """Each command from the checkout's folder, after the demo, with a home of its own that
    must stay empty: the tour writes only into demo-out/."""
    with contextlib.redirect_stdout(io.StringIO()):
        demo.run(tmp_path / "demo-out", "text", progress=lambda _: None)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERIFIER_", "XDG_"))}
    env["HOME"] = str(home)
    verifier = str(Path(sys.executable).with_name("verifier"))
    steps = tour_steps()
    assert {args[0] for args, _ in steps} >= {"verify", "serve", "gate", "keys", "evidence"}
    for args, code in steps:
        if code is None:
            continue
        done = subprocess.run(
            [verifier, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == code, (args, done.stdout, done.stderr)
    assert not any(home.iterdir()), "the tour wrote into the home directory"


ARCHITECTURE = ROOT / "docs" / "architecture.md"
# Being split from `verifier/service/api.py` into this package: the page names it already.
API_PACKAGE = ("bodies", "errors", "deps", "views", "openapi", "routers", "sessions", "reports")


def _named(text: str, word: str) -> bool:
    return re.search(rf"`[^`\n]*\b{re.escape(word)}\b[^`\n]*`", text) is not None


def test_the_architecture_page_names_every_module_and_layer() -> None:
    """A new module must be placed on the page: every package and module of verifier/ is
    named there, and every layer of the import-linter `layers` contract."""
    import tomllib

    text = ARCHITECTURE.read_text(encoding="utf-8")
    package = ROOT / "verifier"
    unnamed = []
    for path in sorted(package.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(ROOT).as_posix()
        if path.is_dir() and (path / "__init__.py").exists():
            if f"{path.name}/" not in text:
                unnamed.append(rel + "/")
        elif path.suffix == ".py" and path.stem not in ("__init__", "__main__"):
            if path.parent == package:
                if f"`{rel}`" not in text:
                    unnamed.append(rel)
            elif not _named(text, path.stem):
                unnamed.append(rel)
    assert not unnamed, f"docs/architecture.md does not place {unnamed}"
    assert "verifier/service/api/" in text
    assert all(_named(text, name) for name in API_PACKAGE)

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layered = [
        c for c in contracts["tool"]["importlinter"]["contracts"] if c.get("type") == "layers"
    ]
    assert layered, "pyproject.toml lost its layers contract"
    for contract in layered:
        for line in contract["layers"]:
            for layer in re.split(r"\s*[|:]\s*", line):
                name = layer.strip().strip("()")
                assert name and _named(text, name.removeprefix("verifier.")), (
                    f"docs/architecture.md does not name the layer {name}"
                )


def test_the_dependencies_page_gives_each_dependency_a_reason() -> None:
    """One line per dependency of pyproject.toml (runtime and dev) on docs/dependencies.md."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    names = {re.split(r"[\[<>=!~ ]", spec, maxsplit=1)[0].lower() for spec in wanted}
    text = (ROOT / "docs" / "dependencies.md").read_text(encoding="utf-8").lower()
    rows = {
        row.split("|")[1].strip().split(" ")[0] for row in text.splitlines() if row.startswith("| ")
    }
    missing = sorted(names - rows)
    assert not missing, f"docs/dependencies.md gives no reason for {missing}"
