"""`verifier.app.gate.judge`: the gate's steps from the options to a `Decision`, as a
function of the configuration (loaded only to read the store)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.api import make_config
from tests.support.gate import Project
from verifier.app import gate
from verifier.config import Config
from verifier.errors import ConfigError


def unused() -> Config:
    raise AssertionError("a gate that reads a server loaded the configuration")


def test_the_store_of_the_configuration_is_judged(project: Project) -> None:
    project.ingest("s1")
    project.record("s1", "delivered")
    project.ingest("s2")
    project.record("s2", "not_delivered")
    config = make_config(project.database_url)
    passed = gate.judge(lambda: config, session_ids=("s1",))
    assert passed.exit_code == gate.PASSED and passed.source.startswith("store sqlite:///")
    blocked = gate.judge(lambda: config, commits=(project.head,), repo=project.repo.path)
    assert blocked.exit_code == gate.BLOCKED and blocked.count("not_delivered") == 1


def test_a_store_not_there_yet_is_looked_for_while_waiting_then_is_undecided(
    tmp_path: Path,
) -> None:
    config = make_config(f"sqlite:///{tmp_path / 'none.sqlite3'}")
    said: list[str] = []
    waited: list[str] = []
    decision = gate.judge(
        lambda: config, session_ids=("s1",), wait_s=0.3, progress=waited.append, notice=said.append
    )
    assert decision.exit_code == gate.UNDECIDED and decision.sessions == ()
    assert decision.unavailable is not None and "no store at" in decision.unavailable
    assert len(said) == 1 and "looking again while waiting" in said[0]
    assert waited  # it looked again while waiting


def test_a_server_needs_its_token_and_never_the_configuration() -> None:
    with pytest.raises(ConfigError, match=r"\$VERIFIER_TOKEN is not set"):
        gate.judge(unused, session_ids=("s1",), server="http://127.0.0.1:1")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once it is closed
    decision = gate.judge(unused, session_ids=("s1",), server=f"http://127.0.0.1:{port}", token="t")
    assert decision.exit_code == gate.UNDECIDED
    assert decision.unavailable is not None and "cannot be reached" in decision.unavailable


def test_the_selection_is_resolved_before_anything_is_read(project: Project) -> None:
    with pytest.raises(ConfigError, match="--commit"):
        gate.judge(unused, commits=("no-such-ref",), repo=project.repo.path, server="http://x")
