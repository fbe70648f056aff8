"""The witness's receipts, and the client a recorder hands each flushed entry to.

A harness that fabricates a session can recompute the whole trail and sign it
with its own key; what it cannot do afterwards is change what the service saw
while the session ran. `WitnessClient` posts every entry, as the recorder
writes it, to ``POST /v1/sessions/{id}/trail`` and keeps the service's signed
receipts: ``{session_id, count, head_hash, time}`` signed with the service's
Ed25519 key over its JCS form. `verify_receipt` checks one with the
service's public key. Standard library only for the HTTP side (`audit` stays
light); the recorder catches what the client raises and keeps going
(``extensions.recorder.witness`` in the report says so).
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from time import sleep as _sleep
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from audit.errors import SignatureError
from audit.jcs import canonicalize
from audit.upload import post

__all__ = ["Receipt", "WitnessClient", "receipt_payload", "sign_receipt", "verify_receipt"]

RECEIPT_FIELDS = ("session_id", "count", "head_hash", "time")


@dataclass(frozen=True, slots=True)
class Receipt:
    """What the witness had seen of a session's trail, and when (RFC 3339 UTC)."""

    session_id: str
    count: int
    head_hash: str
    time: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "count": self.count,
            "head_hash": self.head_hash,
            "time": self.time,
        }


def receipt_payload(receipt: Receipt) -> bytes:
    """The signed bytes: the JCS form of the receipt's four fields."""
    return canonicalize(receipt.to_dict())


def sign_receipt(receipt: Receipt, key: Ed25519PrivateKey, key_id: str) -> dict[str, Any]:
    """``{"receipt": {...}, "signature": {"alg": "ed25519", "key_id", "value"}}``."""
    value = base64.b64encode(key.sign(receipt_payload(receipt))).decode("ascii")
    return {
        "receipt": receipt.to_dict(),
        "signature": {"alg": "ed25519", "key_id": key_id, "value": value},
    }


def verify_receipt(signed: Mapping[str, Any], key: Ed25519PublicKey) -> Receipt:
    """The receipt of `signed` once its signature verifies with `key`; `SignatureError` if not."""
    body, signature = signed.get("receipt"), signed.get("signature")
    if not isinstance(body, Mapping) or set(body) != set(RECEIPT_FIELDS):
        raise SignatureError(f"receipt: expected an object with {', '.join(RECEIPT_FIELDS)}")
    if not isinstance(signature, Mapping) or signature.get("alg") != "ed25519":
        raise SignatureError("signature: expected an object with alg 'ed25519'")
    sid, count, head, time = (body[k] for k in RECEIPT_FIELDS)
    if not (
        isinstance(sid, str)
        and type(count) is int
        and isinstance(head, str)
        and isinstance(time, str)
    ):
        raise SignatureError("receipt: a field is of the wrong type")
    receipt = Receipt(sid, count, head, time)
    try:
        raw = base64.b64decode(str(signature.get("value")), validate=True)
        key.verify(raw, receipt_payload(receipt))
    except (binascii.Error, ValueError):
        raise SignatureError("signature.value: not standard base64") from None
    except InvalidSignature:
        raise SignatureError("signature.value: does not match the receipt (Ed25519)") from None
    return receipt


@dataclass
class WitnessClient:
    """The recorder's `witness` hook: posts each entry, keeps each signed receipt.

    Raises `UploadError` when the service refuses the entry or cannot be
    reached after `attempts`; the recorder records that and goes on.
    """

    base_url: str
    token: str
    attempts: int = 3
    backoff_s: float = 0.2
    timeout_s: float = 10.0
    sleep: Callable[[float], None] = _sleep
    receipts: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        session_id = str(entry.get("session_id", ""))
        url = (
            self.base_url.rstrip("/")
            + "/v1/sessions/"
            + urllib.parse.quote(session_id, safe="")
            + "/trail"
        )
        _, answer, _ = post(
            url,
            canonicalize(dict(entry)) + b"\n",
            token=self.token,
            content_type="application/x-ndjson",
            attempts=self.attempts,
            backoff_s=self.backoff_s,
            timeout_s=self.timeout_s,
            sleep=self.sleep,
        )
        receipt: dict[str, Any] = json.loads(answer)
        self.receipts.append(receipt)
        return receipt
