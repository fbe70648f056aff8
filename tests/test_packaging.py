"""The wheel is a whole verifier: built, installed into a fresh venv, run from elsewhere.

One wheel is built per run and shared by the xdist workers (from a copy of the source
tree, so the checkout gets no `build/` folder), and installed with its dependencies from
PyPI (pip's cache makes that quick the second time). The installed `verifier` then
migrates a store, runs the demo and verifies one of its reports with its
working directory outside the source tree, and nothing it loads comes from the
checkout.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import ROOT

EXIT = {"delivered": 0, "not_delivered": 1, "inconclusive": 3}
# Where pyproject.toml maps the top-level folders in the wheel (see verifier/resources.py).
MAPPED = {"migrations": "verifier/_migrations", "config": "verifier/_config"}
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "demo-out", "var"
)


@dataclass(frozen=True)
class Installed:
    wheel: Path
    build_output: str
    venv: Path
    home: Path

    @property
    def verifier(self) -> Path:
        return self.venv / "bin" / "verifier"

    def env(self) -> dict[str, str]:
        """A user's environment: no checkout on the path, a store of this test's own."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("VERIFIER_", "PYTHON", "VIRTUAL_ENV"))
        }
        env.update(
            HOME=str(self.home),
            XDG_DATA_HOME=str(self.home / "data"),
            VERIFIER_DATABASE_URL=f"sqlite:///{self.home / 'store.sqlite3'}",
        )
        return env

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args],
            cwd=self.home,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=600,
        )


def _pip(*args: str | Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _build_and_install(tmp: Path) -> tuple[Path, str, Path]:
    """The wheel built and installed into a venv under `tmp`, once for all the workers of
    a run: the first to ask builds it under a lock, the others wait and use it (a build
    and install costs tens of seconds of CPU, and xdist spreads this module's tests)."""
    tmp.mkdir(exist_ok=True)
    made, venv = tmp / "made.json", tmp / "venv"
    with (tmp / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if made.is_file():
            wheel, output = json.loads(made.read_text("utf-8"))
            return Path(wheel), output, venv
        source = tmp / "source"
        shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
        output = _pip("wheel", "--no-deps", "--wheel-dir", tmp / "dist", source)
        (wheel,) = (tmp / "dist").glob("agent_delivery_verifier-*.whl")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
        # The wheel alone: pytest, which runs the demo's tests, comes as its dependency. Not
        # compiled at install: the runs below compile what they import (about half the CPU
        # of the install went to compiling modules nothing here imports).
        _pip("--python", venv / "bin" / "python", "install", "--quiet", "--no-compile", wheel)
        made.write_text(json.dumps([str(wheel), output]), "utf-8")
        return wheel, output, venv


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    run = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = run.parent  # the folder the workers of this run share
    wheel, output, venv = _build_and_install(run / "packaging")
    yield Installed(wheel, output, venv, tmp_path_factory.mktemp("home"))


def test_the_build_warns_of_nothing_deprecated(installed: Installed) -> None:
    assert "Warning" not in installed.build_output, installed.build_output


def test_the_wheel_carries_migrations_and_configuration(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for top, inside in MAPPED.items():
        files = [p for p in (ROOT / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        assert files
        for path in files:
            assert f"{inside}/{path.relative_to(ROOT / top).as_posix()}" in names
    for source in [*(ROOT / "verifier").rglob("*.py"), *(ROOT / "audit").rglob("*.py")]:
        assert source.relative_to(ROOT).as_posix() in names


def test_every_source_package_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"][
            "packages"
        ]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("verifier", "audit")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_installed_verifier_loads_nothing_from_the_checkout(installed: Installed) -> None:
    probe = (
        "import json, verifier, audit\n"
        "from verifier import resources\n"
        "print(json.dumps([verifier.__file__, audit.__file__, str(resources.migrations_dir()),"
        " str(resources.default_config_file()), str(resources.profiles_dir())]))\n"
    )
    done = installed.run(installed.venv / "bin" / "python", "-c", probe)
    assert done.returncode == 0, done.stderr
    paths = [Path(p) for p in json.loads(done.stdout)]
    for path in paths:
        assert path.exists(), path
        assert not path.resolve().is_relative_to(ROOT), path
        assert path.resolve().is_relative_to(installed.venv.resolve()), path
    assert (paths[2] / "env.py").is_file()
    assert (paths[4] / "default.toml").is_file()


def test_installed_verifier_migrates_runs_the_demo_and_verifies(installed: Installed) -> None:
    upgraded = installed.run(installed.verifier, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert (installed.home / "store.sqlite3").is_file()

    demo_dir = installed.home / "d"
    demo = installed.run(installed.verifier, "demo", "--dir", demo_dir)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "demo-01-delivered" in demo.stdout and "delivered rate" in demo.stdout
    config = demo_dir / "verifier.toml"
    assert str(ROOT) not in config.read_text("utf-8")

    verified = installed.run(
        installed.verifier,
        "verify",
        demo_dir / "reports" / "demo-01-delivered.json",
        "--config",
        config,
        "--format",
        "json",
    )
    verdict = json.loads(verified.stdout)["delivery_status"]
    assert verdict == "delivered", verified.stdout + verified.stderr
    assert verified.returncode == EXIT[verdict] == 0
