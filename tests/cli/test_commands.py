"""The command line's package: the registry `--help` lists without importing a command
module, the options every command shares, and the one catch at the edge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from audit.errors import RecorderError
from tests.support.paths import ROOT
from verifier import cli
from verifier.app import trail
from verifier.cli import COMMANDS, load_command
from verifier.cli.options import emit, exit_with
from verifier.config import Config
from verifier.errors import ConfigError, InvalidReport, NotFound, VerifierError

NOT_COMMANDS = {"__init__", "options"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_registered_summary_is_the_commands_own_short_help(name: str) -> None:
    command = load_command(name)
    assert command.name == name
    for limit in (45, 66, 86, 200):
        assert COMMANDS[name].short_help(limit) == command.get_short_help_str(limit)


def test_every_command_module_is_registered() -> None:
    modules = {p.stem for p in (ROOT / "verifier" / "cli").glob("*.py")} - NOT_COMMANDS
    assert {info.module.rsplit(".", 1)[1] for info in COMMANDS.values()} == modules


def test_help_imports_no_command_module() -> None:
    code = (
        "import sys\n"
        "from verifier import cli\n"
        "assert cli.run(['--help']) == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith('verifier.cli.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.splitlines()[-1] == "['verifier.cli.options']"


def test_a_misspelt_command_is_suggested_from_the_registry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.run(["verfy"]) == 2
    assert "No such command 'verfy'. Did you mean 'verify'?" in capsys.readouterr().err


def test_an_error_shows_its_code_when_its_message_does_not_say_it() -> None:
    assert cli.error_text(NotFound("session 's1' is gone")) == (
        "verifier: session 's1' is gone [not_found]\n"
    )
    assert cli.error_text(InvalidReport("repo.name", "missing")) == (
        "verifier: invalid report: repo.name: missing\n"
    )
    assert cli.error_text(VerifierError("something")) == "verifier: something\n"
    assert cli.error_text(ConfigError("--repo: not a folder")) == "verifier: --repo: not a folder\n"
    # What a report holds, quoted in a problem, is shown escaped and starts no command.
    quoted = InvalidReport("agent.name", 'got "a\n::add-mask::b\u2028##[error]c"')
    assert cli.error_text(quoted) == (
        'verifier: invalid report: agent.name: got "a\\x0a::add-mask::b\\u2028##\\[error]c"\n'
    )


def test_an_error_under_format_json_is_the_apis_error_object_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.run(["show", "nope", "--format", "json"]) == 2
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]  # the one document on stdout
    assert error["code"] == "not_found" and error["field"] is None
    assert "'nope' is not stored" in error["problem"]
    assert err.startswith("verifier: ") and "'nope' is not stored" in err  # for people
    assert json.loads(cli.error_json(InvalidReport("repo.name", "missing")))["error"] == {
        "code": "invalid_report",
        "field": "repo.name",
        "problem": "missing",
    }


def test_an_audit_error_is_caught_at_the_edge_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(*args: object, **kwargs: object) -> object:
        raise RecorderError("the trail cannot be written", field="trail")

    monkeypatch.setattr(trail, "check_file", refuse)
    assert cli.run(["trail", "verify", str(tmp_path / "t.jsonl")]) == cli.AUDIT_EXIT_CODE == 2
    err = capsys.readouterr().err
    assert err == "verifier: trail: the trail cannot be written [recorder]\n"


def test_config_is_loaded_once_as_the_command_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded: list[Path | None] = []
    real = Config.load

    def counting(path: Path | None = None, *args: object, **kwargs: object) -> Config:
        loaded.append(path)
        return real(path)

    monkeypatch.setattr(Config, "load", counting)
    path = tmp_path / "v.toml"
    path.write_text("[verifier]\n", encoding="utf-8")
    assert cli.run(["list", "--config", str(path)]) == 0
    assert loaded == [path]
    assert cli.run(["list", "--config", str(tmp_path / "absent.toml")]) == 2
    assert "config file" in capsys.readouterr().err


def test_a_gate_reading_a_server_never_reads_the_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VERIFIER_TOKEN", "t")
    args = ["gate", "--session", "s1", "--server", "http://127.0.0.1:1"]
    assert cli.run([*args, "--config", str(tmp_path / "absent.toml")]) == 3
    said = capsys.readouterr()
    assert "cannot be reached" in " ".join(said.out.split())
    assert "config file" not in said.out + said.err


def test_a_command_exits_with_the_code_it_chose_once_its_output_is_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    @click.command()
    def chooses() -> None:
        emit("written\n")
        exit_with(3)

    assert chooses.main([], standalone_mode=False) == 3
    assert capsys.readouterr().out == "written\n"
