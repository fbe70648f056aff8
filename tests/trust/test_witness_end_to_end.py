"""The witness end to end: a recorder-driven session whose client posts each entry to a
real uvicorn server; a report fabricated afterwards (its trail recomputed with
`audit.seal`) verifies on its own, and is not delivered once the witness is consulted."""

from __future__ import annotations

import socket
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.chain import seal
from audit.recorder import dumps
from audit.signing import Ed25519Signer, sign
from audit.upload import post_report
from audit.witness import WitnessClient, verify_receipt
from tests.support.api import make_tokens, serve
from tests.support.gitrepo import GitRepo
from tests.support.recording import FIX_CALC, commit, findings
from tests.support.scripted import ScriptedClient, load_turns, recorder, run_session
from tests.support.sessions import PYTEST
from tests.support.trust import evidence_key, public_b64
from verifier.app.evidence import load_key
from verifier.app.pipeline import verify_report, verify_session
from verifier.config import AgentConfig, Config, EvidenceConfig, RepositoryConfig
from verifier.contract.signatures import key_name
from verifier.findings import DeliveryStatus
from verifier.service.api import create_app
from verifier.store import Store

AGENT = "rec-agent"  # the agent of recorder.scripted.recorder


def make_config(repo: GitRepo, db_url: str, key: Path, agent: AgentConfig | None = None) -> Config:
    calc = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60)
    return Config(
        database_url=db_url,
        repositories={"calc": calc},
        evidence=EvidenceConfig(signing_key=key),
        agents={} if agent is None else {AGENT: agent},
    )


def witnessed_session(
    repo: GitRepo, tmp_path: Path, base_url: str, token: str
) -> tuple[dict[str, Any], WitnessClient]:
    client = WitnessClient(base_url, token)
    rec = recorder(repo.path, tmp_path / "s-1.jsonl", witness=client)
    status = run_session(rec, ScriptedClient(load_turns(FIX_CALC)))
    return rec.finish(status, head_commit=commit(repo)), client


def fabricate(report: dict[str, Any]) -> dict[str, Any]:
    """The same session recomputed afterwards: every time moved an hour, the trail
    resealed with `audit.seal`, count and head to match; self-consistent."""

    def later(ts: str) -> str:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00")) + timedelta(hours=1)
        return moment.isoformat().replace("+00:00", "Z")

    bodies = [{**e, "ts": later(e["ts"])} for e in report["audit"]["entries"]]
    entries = seal(report["session_id"], bodies)
    fake = {
        **report,
        "started_at": later(report["started_at"]),
        "ended_at": later(report["ended_at"]),
        "audit": {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]},
    }
    fake.pop("extensions", None)  # no trace of a witness
    return fake


def test_a_fabricated_report_is_not_delivered_when_the_witness_saw_the_real_trail(
    repo: GitRepo, tmp_path: Path, db_url: str
) -> None:
    key_path = evidence_key(tmp_path)
    harness_key = Ed25519PrivateKey.generate()
    agent = AgentConfig(AGENT, public_keys=(f"ed25519:{public_b64(harness_key)}",))
    config = make_config(repo, db_url, key_path, agent)
    tokens = make_tokens(db_url)
    with serve(create_app(config)) as base_url:
        real, client = witnessed_session(repo, tmp_path, base_url, tokens["ingest"])
        assert real["extensions"]["recorder"]["witness"]["failures"] == 0
        # Each receipt verifies with the service's public key; the last names the head.
        public = load_key(key_path).public_key()
        receipts = [verify_receipt(r, public) for r in client.receipts]
        assert [r.count for r in receipts] == list(range(1, real["audit"]["count"] + 1))
        assert receipts[-1].head_hash == real["audit"]["head"]

        # The harness fabricates, and signs with its own (configured) key: on its own,
        # with no witness consulted, the fabricated report is delivered.
        fake = dumps(sign(fabricate(real), Ed25519Signer(harness_key, key_id="h")))
        alone = verify_report(fake, config, store=False).verification
        assert alone.delivery_status is DeliveryStatus.DELIVERED, findings(alone)
        assert alone.checks["audit"].details["witness"] is None

        # It is posted first, under the real session's id, and signed: accepted.
        assert post_report(fake, base_url, tokens["ingest"], attempts=1).created

    with Store.open(db_url) as store:
        outcome = verify_session(store, "s-1", config, reason="ingest")
    verdict = outcome.verification
    assert verdict.delivery_status is DeliveryStatus.NOT_DELIVERED
    [mismatch] = [f for f in verdict.checks["audit"].findings]
    assert mismatch.code == "audit.witness_mismatch"
    assert mismatch.path == "audit.entries[0]"
    assert mismatch.expected == real["audit"]["entries"][0]["hash"]
    details = verdict.checks["audit"].details
    n = real["audit"]["count"]
    assert details["witness"]["entries"] == f"{n} of {n}"
    assert details["signature"]["state"] == "verified"  # the signature alone proves nothing


def test_the_real_report_is_delivered_with_its_trail_witnessed_whole_and_signature_recorded(
    repo: GitRepo, tmp_path: Path, db_url: str
) -> None:
    key_path = evidence_key(tmp_path)
    harness_key = Ed25519PrivateKey.generate()
    agent = AgentConfig(
        AGENT, public_keys=(f"ed25519:{public_b64(harness_key)}",), require_witness=True
    )
    config = make_config(repo, db_url, key_path, agent)
    tokens = make_tokens(db_url)
    with serve(create_app(config)) as base_url:
        real, _ = witnessed_session(repo, tmp_path, base_url, tokens["ingest"])
        raw = dumps(sign(real, Ed25519Signer(harness_key, key_id="harness-1")))
        assert post_report(raw, base_url, tokens["ingest"], attempts=1).created
    with Store.open(db_url) as store:
        verdict = verify_session(store, "s-1", config, reason="ingest").verification
    assert verdict.delivery_status is DeliveryStatus.DELIVERED, findings(verdict)
    details = verdict.checks["audit"].details
    n = real["audit"]["count"]
    assert details["witness"]["entries"] == f"{n} of {n}"
    assert details["witness"]["first_seen"] <= details["witness"]["last_seen"]
    assert details["signature"] == {
        "state": "verified",
        "verified": True,
        "alg": "ed25519",
        "key_id": "harness-1",
        "key": key_name(f"ed25519:{public_b64(harness_key)}"),
    }


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("required", [True, False])
def test_an_unwitnessed_trail_is_inconclusive_only_when_the_agent_requires_a_witness(
    repo: GitRepo, tmp_path: Path, db_url: str, required: bool
) -> None:
    client = WitnessClient(_closed_port(), "vrf_" + "x" * 43, attempts=1)
    rec = recorder(repo.path, tmp_path / "s-1.jsonl", witness=client)
    report = rec.finish(
        run_session(rec, ScriptedClient(load_turns(FIX_CALC))), head_commit=commit(repo)
    )
    n = report["audit"]["count"]
    # The recorder kept going, and says so.
    assert report["extensions"]["recorder"]["witness"]["failures"] == n
    agent = AgentConfig(AGENT, require_witness=required)
    config = make_config(repo, db_url, tmp_path / "unused.pem", agent)
    verdict = verify_report(dumps(report), config).verification
    audit = verdict.checks["audit"]
    assert audit.details["witness"]["entries"] == f"0 of {n}"
    if required:
        assert verdict.delivery_status is DeliveryStatus.INCONCLUSIVE
        assert [f.code for f in audit.findings] == ["audit.unwitnessed"]
    else:
        assert verdict.delivery_status is DeliveryStatus.DELIVERED, findings(verdict)
        assert audit.details["signature"] == {"state": "unsigned", "verified": False}


def test_a_signature_of_an_agent_without_keys_is_noted_as_unverified_in_the_verdict(
    repo: GitRepo, tmp_path: Path, db_url: str
) -> None:
    rec = recorder(repo.path, tmp_path / "s-1.jsonl")
    report = rec.finish(
        run_session(rec, ScriptedClient(load_turns(FIX_CALC))), head_commit=commit(repo)
    )
    raw = dumps(sign(report, Ed25519Signer(Ed25519PrivateKey.generate(), key_id="k")))
    config = make_config(repo, db_url, tmp_path / "unused.pem")
    verdict = verify_report(raw, config).verification
    audit = verdict.checks["audit"]
    assert audit.details["signature"]["state"] == "unverified"
    assert any("not verified" in n and "squatted" in n for n in audit.notes)
