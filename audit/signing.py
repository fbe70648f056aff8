"""Signing a session report, and checking a signature (the recorder signs; ingest checks).

The contract's ``signature`` field: ``{"alg": "ed25519" | "hmac-sha256",
"key_id": ..., "value": base64}``, over the JCS form of the report without
``signature``. Ed25519 (via `cryptography`) proves which key signed; HMAC-SHA256
only that someone holding the shared secret did.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from audit.errors import SignatureError
from audit.jcs import CanonicalizationError, canonicalize

__all__ = [
    "Ed25519Signer",
    "HmacSigner",
    "Signer",
    "load_private_key",
    "payload",
    "sign",
    "verify_signature",
]


@dataclass(frozen=True, slots=True)
class Ed25519Signer:
    """Signs with an Ed25519 private key; `key_id` names its public key to the verifier."""

    key: Ed25519PrivateKey
    key_id: str | None = None
    alg = "ed25519"

    def sign(self, data: bytes) -> bytes:
        return self.key.sign(data)


@dataclass(frozen=True, slots=True)
class HmacSigner:
    """Signs with HMAC-SHA256 under a secret shared with the verifier."""

    secret: bytes
    key_id: str | None = None
    alg = "hmac-sha256"

    def sign(self, data: bytes) -> bytes:
        return hmac.new(self.secret, data, hashlib.sha256).digest()


Signer = Ed25519Signer | HmacSigner


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key of the PEM file at `path`, which only its owner may read.

    `OSError` when the file cannot be read; `SignatureError` when it is readable by
    others, not an unencrypted PEM private key, or not Ed25519, its message the reason
    alone (``readable by others (mode 0644, expected 0600)``), for the caller to put
    after the name it gives the file."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    mode = stat.S_IMODE(path.stat().st_mode)
    data = path.read_bytes()
    if mode & 0o077:
        raise SignatureError(f"readable by others (mode {mode:04o}, expected 0600)")
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"a {type(key).__name__}, expected an Ed25519 key")
    return key


def payload(report: Mapping[str, Any]) -> bytes:
    """The signed bytes: the JCS form of `report` without ``signature``."""
    body = {k: v for k, v in report.items() if k != "signature"}
    try:
        return canonicalize(body)
    except CanonicalizationError as exc:
        raise SignatureError(f"the report has no JCS form, so it cannot be signed: {exc}") from None


def sign(report: Mapping[str, Any], signer: Signer) -> dict[str, Any]:
    """A copy of `report` with its ``signature`` (any earlier one replaced)."""
    value = base64.b64encode(signer.sign(payload(report))).decode("ascii")
    signature: dict[str, Any] = {"alg": signer.alg, "key_id": signer.key_id, "value": value}
    if signer.key_id is None:
        del signature["key_id"]
    return {**{k: v for k, v in report.items() if k != "signature"}, "signature": signature}


def verify_signature(report: Mapping[str, Any], key: Ed25519PublicKey | bytes) -> None:
    """Check `report`'s signature with an Ed25519 public key, or an HMAC secret (bytes).

    Raises `SignatureError` saying what is wrong: no signature, another
    algorithm than the key's, a value that is not base64, or a mismatch.
    """
    signature = report.get("signature")
    if not isinstance(signature, Mapping):
        raise SignatureError("signature: missing, expected an object {alg, key_id, value}")
    alg, value = signature.get("alg"), signature.get("value")
    want = "hmac-sha256" if isinstance(key, bytes) else "ed25519"
    if alg != want:
        raise SignatureError(f"signature.alg: got {alg!r}, expected {want!r} for this key")
    if not isinstance(value, str):
        raise SignatureError("signature.value: missing or not a string, expected base64")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError("signature.value: not standard base64") from None
    data = payload(report)
    if isinstance(key, bytes):
        expected = hmac.new(key, data, hashlib.sha256).digest()
        if not hmac.compare_digest(raw, expected):
            raise SignatureError("signature.value: does not match the report (HMAC-SHA256)")
        return
    try:
        key.verify(raw, data)
    except InvalidSignature:
        raise SignatureError("signature.value: does not match the report (Ed25519)") from None
