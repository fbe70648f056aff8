"""DSSE envelopes signed with Ed25519, and the key fingerprints that name the keys.

DSSE (https://github.com/secure-systems-lab/dsse, protocol v1) signs the
pre-authentication encoding of a payload, never the payload alone, so a
signature over one payload type cannot be replayed as another:

    PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body

with LEN the byte length as ASCII decimal. The envelope carries the payload and
its signatures base64-encoded (standard alphabet, padded). A key's `keyid` here
is its fingerprint: the lowercase hex SHA-256 of the raw 32-byte Ed25519 public
key. Signing needs the private key and lives with the exporter; verifying needs
only this module and `cryptography`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from audit.errors import AuditError

__all__ = [
    "IN_TOTO_PAYLOAD_TYPE",
    "EnvelopeError",
    "b64decode_strict",
    "envelope",
    "fingerprint",
    "is_fingerprint",
    "pae",
    "verify_envelope",
]

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
_HEX64 = re.compile(r"[0-9a-f]{64}")


class EnvelopeError(AuditError, ValueError):
    """An envelope that cannot be read (`malformed`) or whose signature fails (`signature`)."""

    code = "envelope"

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


def pae(payload_type: str, payload: bytes) -> bytes:
    """The DSSE v1 pre-authentication encoding: what is signed."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def fingerprint(public_key_raw: bytes) -> str:
    """A key's name: the lowercase hex SHA-256 of its raw 32 public bytes."""
    return hashlib.sha256(public_key_raw).hexdigest()


def is_fingerprint(value: object) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def envelope(payload: bytes, payload_type: str, keyid: str, signature: bytes) -> dict[str, Any]:
    """The envelope of `payload` with one signature (made over `pae(payload_type, payload)`)."""
    return {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": payload_type,
        "signatures": [{"keyid": keyid, "sig": base64.b64encode(signature).decode("ascii")}],
    }


def b64decode_strict(text: object, where: str) -> bytes:
    """Standard padded base64 in its one canonical spelling (no ignored bits, no
    whitespace): a flipped bit in the text is never decoded to the same bytes."""
    if not isinstance(text, str):
        raise EnvelopeError("malformed", f"{where}: expected a base64 string, got {text!r:.60}")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise EnvelopeError("malformed", f"{where}: not base64") from None
    if base64.b64encode(data).decode("ascii") != text:
        raise EnvelopeError("malformed", f"{where}: not the canonical base64 of its bytes")
    return data


def verify_envelope(
    value: Any, public_key: Ed25519PublicKey, keyid: str, payload_type: str
) -> bytes:
    """The payload of `value` once one signature by `keyid` verifies over its PAE.

    Raises `EnvelopeError`: `malformed` for a shape, payload type or encoding
    that is not DSSE's, `signature` when no signature of `keyid` verifies.
    """
    if not isinstance(value, Mapping) or set(value) != {"payload", "payloadType", "signatures"}:
        raise EnvelopeError(
            "malformed", "expected an object with payload, payloadType and signatures"
        )
    if value["payloadType"] != payload_type:
        raise EnvelopeError(
            "malformed", f"payloadType is {value['payloadType']!r}, expected {payload_type!r}"
        )
    payload = b64decode_strict(value["payload"], "payload")
    signatures = value["signatures"]
    if not isinstance(signatures, list) or not signatures:
        raise EnvelopeError("malformed", "signatures: expected a non-empty list")
    signed = pae(payload_type, payload)
    keyids = []
    for index, entry in enumerate(signatures):
        if not isinstance(entry, Mapping) or set(entry) != {"keyid", "sig"}:
            raise EnvelopeError("malformed", f"signatures.{index}: expected keyid and sig")
        keyids.append(entry["keyid"])
        if entry["keyid"] != keyid:
            continue
        signature = b64decode_strict(entry["sig"], f"signatures.{index}.sig")
        try:
            public_key.verify(signature, signed)
        except InvalidSignature:
            raise EnvelopeError(
                "signature", f"signatures.{index}: does not verify with key {keyid}"
            ) from None
        return payload
    raise EnvelopeError("signature", f"no signature by key {keyid} (got keyids {keyids!r:.200})")
