"""gemini-cli sessions witnessed, signed and posted by our hook, then verified on the server:
the real gemini-cli 0.61.0 (scripted model turns, its real tools), ``verifier gemini-cli
install --server URL --token-env VAR --key PATH`` as a user runs it, and a real
``verifier serve`` on SQLite whose agent ``gemini-cli`` has the key's public half and
requires a witnessed trail, the ingest token bound to that agent.

Without gemini-cli these skip with the way to install it; in CI (``CI`` set) they fail.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.chain import seal
from audit.geminicli.release import AGENT_NAME
from audit.jcs import canonicalize
from audit.signing import Ed25519Signer, sign, verify_signature
from audit.upload import post_report
from tests.support import geminicli
from tests.support.gitrepo import GitRepo
from tests.support.pg import migrated_sqlite_file
from tests.support.service import PYTHON, ROOT, environment, wait_for
from tests.support.trust import ed25519_pem, evidence_key, public_b64
from verifier.demo.geminicli import SCENARIOS

TOKEN_ENV = "GEMINI_CLI_VERIFIER_TOKEN"
# The demo's honest session: replace fixes subtract(), the tests run, done.
HONEST = SCENARIOS[0]


@dataclass
class Service:
    """A running ``verifier serve``: its URL, tokens, configuration and the harness key."""

    url: str
    ingest: str
    read: str
    config: Path
    database_url: str
    key_path: Path
    key: Ed25519PrivateKey
    log: Path

    def session(self, session_id: str) -> dict[str, Any]:
        answer = httpx.get(
            f"{self.url}/v1/sessions/{session_id}",
            headers={"Authorization": f"Bearer {self.read}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def verdict(self, session_id: str) -> dict[str, Any]:
        """The session once the server's background verification has given a verdict."""

        def done() -> dict[str, Any] | None:
            shown = self.session(session_id)
            return None if shown["delivery_status"] == "pending" else shown

        return dict(wait_for(f"a verdict of {session_id}", done))


@pytest.fixture
def gemini() -> Path:
    return geminicli.require()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(
    tmp_path: Path,
    repo: GitRepo,
    database_url: str,
    key: Ed25519PrivateKey,
    *,
    require_witness: bool = True,
    name: str = "verifier.toml",
) -> Path:
    python = sys.executable
    lines = [
        "[verifier]",
        f"database_url = {json.dumps(database_url)}",
        "test_timeout = 60",
        "",
        "[repositories.calc]",
        f"path = {json.dumps(str(repo.path))}",
        f"test_command = {json.dumps([python, '-m', 'pytest', '-q', '-p', 'no:cacheprovider'])}",
        "",
        "[evidence]",  # the key that signs the witness's receipts
        f"signing_key = {json.dumps(str(_evidence_key(tmp_path)))}",
        "",
        f"[agents.{AGENT_NAME}]",
        f"public_keys = [{json.dumps('ed25519:' + public_b64(key))}]",
        f"require_witness = {json.dumps(require_witness)}",
    ]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _evidence_key(tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "witness.pem"
    return path if path.exists() else evidence_key(tmp_path)


def _verifier(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [PYTHON, "-m", "verifier", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def service(repo: GitRepo, tmp_path: Path) -> Iterator[Service]:
    """``verifier serve`` on a SQLite file, with an ingest token bound to gemini-cli."""
    database_url = migrated_sqlite_file(tmp_path / "store.sqlite3", tmp_path / "template.sqlite3")
    key_path = tmp_path / "gemini-cli.pem"
    key = ed25519_pem(key_path)
    config = _config(tmp_path, repo, database_url, key)
    env = environment(config, database_url)
    create = ("token", "create", "--name", "e2e")
    ingest = _verifier(env, *create, "--scope", "ingest", "--agent", AGENT_NAME).strip()
    read = _verifier(env, *create, "--scope", "read").strip()
    port, log = _free_port(), tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [PYTHON, "-m", "verifier", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for("serve ready", ready)
        yield Service(url, ingest, read, config, database_url, key_path, key, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def install(repo: GitRepo, url: str, token: str, *options: str) -> subprocess.CompletedProcess[str]:
    """``verifier gemini-cli install --server --token-env``, the token in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env[TOKEN_ENV] = token
    done = subprocess.run(
        [
            *(PYTHON, "-m", "verifier", "gemini-cli", "install", "--repo", str(repo.path)),
            *("--server", url, "--token-env", TOKEN_ENV, *options),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


@dataclass
class Recorded:
    """One gemini-cli session: its folder under the git directory and its report."""

    folder: Path
    report: dict[str, Any]

    @property
    def session_id(self) -> str:
        return str(self.report["session_id"])

    def upload(self) -> dict[str, Any]:
        return dict(json.loads((self.folder / "upload.json").read_text()))


def record(gemini: Path, repo: GitRepo, home: Path, token: str) -> Recorded:
    """The honest session, run by the real gemini-cli with the token in its environment."""
    done = geminicli.run(gemini, repo.path, home, HONEST.turns(repo.path), env={TOKEN_ENV: token})
    assert done.returncode == 0, done.stderr[-2000:]
    (folder,) = [p for p in (repo.path / ".git" / "verifier").iterdir() if p.is_dir()]
    errors = folder / "hook-errors.log"
    assert not errors.exists(), errors.read_text()
    return Recorded(folder, json.loads((folder / "report.json").read_bytes()))


def test_a_session_is_delivered_on_the_server_witnessed_whole_and_its_signature_verified(
    gemini: Path, repo: GitRepo, tmp_path: Path, service: Service
) -> None:
    install(repo, service.url, service.ingest, "--key", str(service.key_path), "--key-id", "e2e")
    settings = (repo.path / ".git" / "verifier" / "hook.json").read_text()
    assert service.ingest not in settings  # the variable's name only
    assert service.ingest not in (repo.path / ".gemini" / "settings.json").read_text()
    rec = record(gemini, repo, tmp_path / "home", service.ingest)
    n = rec.report["audit"]["count"]
    assert rec.report["extensions"]["recorder"]["witness"] == {
        "failures": 0,
        "first_failure": None,
        "acknowledged": n,
    }
    verify_signature(rec.report, service.key.public_key())
    assert rec.upload() == {"url": service.url, "posted": True, "status": 202, "created": True}
    receipts = (rec.folder / "receipts.jsonl").read_text().splitlines()
    assert len(receipts) == n
    assert json.loads(receipts[-1])["receipt"]["head_hash"] == rec.report["audit"]["head"]

    shown = service.verdict(rec.session_id)
    assert shown["delivery_status"] == "delivered", shown["checks"]
    audit = shown["checks"]["audit"]
    assert audit["details"]["witness"]["entries"] == f"{n} of {n}"
    assert audit["details"]["signature"]["state"] == "verified"
    assert audit["details"]["signature"]["key_id"] == "e2e"


def _rewritten(report: dict[str, Any]) -> dict[str, Any]:
    """The session told afterwards as starting an hour later: every time moved, the trail
    resealed (`audit.seal`), count and head to match; self-consistent."""

    def later(ts: str) -> str:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00")) + timedelta(hours=1)
        return moment.isoformat().replace("+00:00", "Z")

    entries = seal(
        report["session_id"],
        [{**e, "ts": later(e["ts"])} for e in report["audit"]["entries"]],
    )
    return {
        **report,
        "started_at": later(report["started_at"]),
        "ended_at": later(report["ended_at"]),
        "audit": {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]},
    }


def test_a_trail_rewritten_after_it_was_witnessed_is_not_delivered(
    gemini: Path, repo: GitRepo, tmp_path: Path, service: Service
) -> None:
    # Installed without --key: the hook's own report, unsigned, is refused at ingest (the
    # agent signs its reports) and takes no session id; the witness saw the trail.
    install(repo, service.url, service.ingest)
    rec = record(gemini, repo, tmp_path / "home", service.ingest)
    n = rec.report["audit"]["count"]
    assert rec.report["extensions"]["recorder"]["witness"]["acknowledged"] == n
    upload = rec.upload()
    assert (upload["posted"], upload["status"]) == (False, 400), upload
    assert "signs its reports" in upload["problem"]

    # Whoever holds the key rewrites the trail, signs it, and posts it: accepted...
    fake = sign(_rewritten(rec.report), Ed25519Signer(service.key, key_id="e2e"))
    assert post_report(canonicalize(fake), service.url, service.ingest, attempts=1).created
    # ...and not delivered: its trail is not the one the witness saw.
    shown = service.verdict(rec.session_id)
    assert shown["delivery_status"] == "not_delivered", shown["checks"]
    audit = shown["checks"]["audit"]
    (mismatch,) = audit["findings"]
    assert mismatch["code"] == "audit.witness_mismatch"
    assert mismatch["path"] == "audit.entries[0]"
    assert mismatch["expected"] == rec.report["audit"]["entries"][0]["hash"]
    assert audit["details"]["signature"]["state"] == "verified"  # the signature proves nothing


def test_the_server_down_during_the_session_leaves_a_local_report_that_verifies(
    gemini: Path, repo: GitRepo, tmp_path: Path, service: Service
) -> None:
    down = f"http://127.0.0.1:{_free_port()}"
    install(repo, down, service.ingest, "--key", str(service.key_path))
    rec = record(gemini, repo, tmp_path / "home", service.ingest)
    n = rec.report["audit"]["count"]
    witness = rec.report["extensions"]["recorder"]["witness"]
    assert (witness["failures"], witness["acknowledged"]) == (n, 0)
    assert "cannot reach" in witness["first_failure"]
    upload = rec.upload()
    assert upload["posted"] is False and "cannot reach" in upload["problem"]
    verify_signature(rec.report, service.key.public_key())

    # Verified where it lies, against the service's store: the signature verified, nothing
    # witnessed; the agent requires a witnessed trail, so inconclusive, and says why.
    result = _verify_locally(rec, service.config, service.database_url)
    audit = result["checks"]["audit"]
    assert result["delivery_status"] == "inconclusive", result["checks"]
    assert [f["code"] for f in audit["findings"]] == ["audit.unwitnessed"]
    assert audit["details"]["witness"]["entries"] == f"0 of {n}"
    assert audit["details"]["signature"]["state"] == "verified"
    # An agent that does not require the witness: delivered, on the signature, as for a
    # recorder's report whose witness was out of reach.
    lenient = _config(
        tmp_path, repo, service.database_url, service.key, require_witness=False, name="l.toml"
    )
    result = _verify_locally(rec, lenient, service.database_url)
    assert result["delivery_status"] == "delivered", result["checks"]
    assert result["checks"]["audit"]["details"]["witness"]["entries"] == f"0 of {n}"


def _verify_locally(rec: Recorded, config: Path, database_url: str) -> dict[str, Any]:
    done = subprocess.run(
        [PYTHON, "-m", "verifier", "verify", str(rec.folder / "report.json"), "--format", "json"],
        env=environment(config, database_url),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    return dict(json.loads(done.stdout))
