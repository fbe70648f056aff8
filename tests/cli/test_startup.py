"""What starting a command costs: the modules a `verifier` process imports to run it.

Each case runs the command in a process of its own, as the console script does
(`verifier.cli.run`), and reads `sys.modules` once it is done: a read of the store
never loads the verification stack (the checks, `verify`, the contract, the
google-genai SDK), an offline check never loads the store's SQLAlchemy or the
configuration's pydantic models. Every module named here costs a tenth of a second
or more of CPU per process (docs/benchmarks.md, "Process start-up"), and the suite
starts thousands of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sessions import calc_repo, config_toml, fixed_session, to_bytes

# Runs `verifier ARGV...` in this process and writes the modules it imported to the file
# named first, with the exit code.
PROBE = (
    "import json, sys\n"
    "from verifier import cli\n"
    "out, argv = sys.argv[1], sys.argv[2:]\n"
    "code = cli.run(argv)\n"
    "with open(out, 'w') as f:\n"
    "    json.dump({'code': code, 'modules': sorted(sys.modules)}, f)\n"
)

VERIFICATION = ("verifier.verify", "verifier.checks", "verifier.contract", "google.genai")
STORE = ("sqlalchemy", "alembic")
CONFIGURATION = ("verifier.config", "pydantic")


def imported(tmp_path: Path, *argv: str) -> tuple[int, set[str]]:
    """The exit code of `verifier ARGV` and every module its process had imported."""
    out = tmp_path / "modules.json"
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "VERIFIER_CONFIG": str(tmp_path / "verifier.toml"),
    }
    env.pop("VERIFIER_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.is_file(), done.stderr
    data = json.loads(out.read_text())
    return data["code"], set(data["modules"])


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The modules of `packages` (each a module and everything under it) that were imported."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A configuration whose store holds one session (ingested, not verified), and the
    session's report and audit trail beside it: built once, each command only reads it
    (but ``keys create``, and the bundle the evidence check exports)."""
    tmp_path = tmp_path_factory.mktemp("startup")
    repo = calc_repo(tmp_path / "calc")
    config = config_toml(tmp_path, repo)
    store = tmp_path / "store.sqlite3"
    config.write_text(
        config.read_text().replace(
            "[verifier]\n", f"[verifier]\ndatabase_url = {json.dumps(f'sqlite:///{store}')}\n"
        )
    )
    report = fixed_session(repo).report()
    (tmp_path / "report.json").write_bytes(to_bytes(report))
    (tmp_path / "trail.jsonl").write_text(
        "".join(json.dumps(entry) + "\n" for entry in report["audit"]["entries"])
    )
    code, _ = imported(tmp_path, "ingest", str(tmp_path / "report.json"))
    assert code == 0
    return tmp_path


def test_help_imports_no_command_no_configuration_and_no_store(tmp_path: Path) -> None:
    code, modules = imported(tmp_path, "--help")
    assert code == 0
    assert loaded(modules, (*CONFIGURATION, *STORE, *VERIFICATION)) == []
    assert [
        m for m in modules if m.startswith("verifier.cli.") and m != "verifier.cli.options"
    ] == []


@pytest.mark.parametrize("argv", [["list"], ["show", "s-1"], ["list", "--format", "json"]])
def test_reading_the_store_loads_no_verification(stored: Path, argv: list[str]) -> None:
    code, modules = imported(stored, *argv)
    assert code == 0
    assert "sqlalchemy" in modules  # the store was read
    assert loaded(modules, (*VERIFICATION, "verifier.app.pipeline", "croniter")) == []


def test_an_offline_trail_check_loads_neither_configuration_nor_store(stored: Path) -> None:
    code, modules = imported(stored, "trail", "verify", str(stored / "trail.jsonl"))
    assert code == 0
    assert loaded(modules, (*CONFIGURATION, *STORE, *VERIFICATION)) == []


def test_db_upgrade_loads_no_verification(stored: Path) -> None:
    code, modules = imported(stored, "db", "upgrade")
    assert code == 0
    assert "alembic" in modules
    assert loaded(modules, (*VERIFICATION, "verifier.app.pipeline")) == []


def test_an_offline_evidence_check_loads_neither_configuration_nor_store(stored: Path) -> None:
    bundle = stored / "bundle.tar.gz"
    assert imported(stored, "keys", "create")[0] == 0
    assert imported(stored, "evidence", "export", "--session", "s-1", "--out", str(bundle))[0] == 0
    code, modules = imported(stored, "evidence", "verify", str(bundle))
    assert code == 0
    assert loaded(modules, (*CONFIGURATION, *STORE, *VERIFICATION)) == []


def test_config_show_loads_no_store_and_no_verification(stored: Path) -> None:
    code, modules = imported(stored, "config", "show")
    assert code == 0
    assert "verifier.config" in modules
    assert loaded(modules, (*STORE, *VERIFICATION, "croniter")) == []


def test_the_probe_sees_what_a_command_does_import(stored: Path) -> None:
    """The oracle itself: a command that parses a report has the contract and the SDK."""
    code, modules = imported(stored, "report", "check", str(stored / "report.json"))
    assert code == 0
    assert {"verifier.contract.report", "google.genai"} <= modules
