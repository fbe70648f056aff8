"""Signed reports: Ed25519 and HMAC-SHA256 values verify with the public key or the secret."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.errors import SignatureError
from audit.jcs import canonicalize
from audit.recorder import dumps
from audit.signing import Ed25519Signer, HmacSigner, payload, sign, verify_signature
from tests.support.gitrepo import GitRepo
from tests.support.paths import TURNS
from tests.support.scripted import ScriptedClient, load_turns, recorder, run_session
from verifier.contract.report import parse_report

FIX_CALC = TURNS / "fix_calc.json"


@pytest.fixture
def report(repo: GitRepo, tmp_path: Path) -> dict[str, Any]:
    rec = recorder(repo.path, tmp_path / "s-1.jsonl")
    return rec.finish(run_session(rec, ScriptedClient(load_turns(FIX_CALC))))


def test_an_ed25519_signature_verifies_with_the_public_key_and_the_contract_reads_it(
    report: dict[str, Any],
) -> None:
    key = Ed25519PrivateKey.generate()
    signed = sign(report, Ed25519Signer(key, key_id="harness-1"))
    assert signed["signature"]["alg"] == "ed25519" and signed["signature"]["key_id"] == "harness-1"
    raw = dumps(signed)
    back = json.loads(raw)
    verify_signature(back, key.public_key())
    # The value is over the JCS form of the report without `signature`.
    key.public_key().verify(base64.b64decode(back["signature"]["value"]), canonicalize(report))
    assert parse_report(raw).doc.signature is not None


def test_an_hmac_signature_verifies_with_the_secret(report: dict[str, Any]) -> None:
    signed = json.loads(dumps(sign(report, HmacSigner(b"s3cret", key_id="k1"))))
    verify_signature(signed, b"s3cret")
    with pytest.raises(SignatureError, match="does not match"):
        verify_signature(signed, b"another secret")


def test_a_report_changed_after_signing_fails(report: dict[str, Any]) -> None:
    key = Ed25519PrivateKey.generate()
    signed = sign(report, Ed25519Signer(key))
    signed["status"] = "turns_exhausted"
    with pytest.raises(SignatureError, match="does not match the report"):
        verify_signature(signed, key.public_key())
    with pytest.raises(SignatureError, match="does not match the report"):
        verify_signature(
            sign(report, Ed25519Signer(key)), Ed25519PrivateKey.generate().public_key()
        )


def test_a_missing_garbage_or_mismatched_signature_is_refused_saying_why(
    report: dict[str, Any],
) -> None:
    key = Ed25519PrivateKey.generate().public_key()
    with pytest.raises(SignatureError, match="signature: missing"):
        verify_signature(report, key)
    with pytest.raises(SignatureError, match="not standard base64"):
        verify_signature({**report, "signature": {"alg": "ed25519", "value": "@@@"}}, key)
    with pytest.raises(SignatureError, match="expected 'hmac-sha256'"):
        verify_signature({**report, "signature": {"alg": "ed25519", "value": "AAAA"}}, b"secret")


def test_the_payload_ignores_an_earlier_signature(report: dict[str, Any]) -> None:
    signed = sign(report, HmacSigner(b"x"))
    assert payload(signed) == payload(report) == canonicalize(report)
