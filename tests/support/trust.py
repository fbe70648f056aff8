"""What the trust tests share: agent configurations, signed reports, a witness key."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from audit.chain import seal
from audit.signing import Signer, sign
from verifier.config import Config


def public_b64(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def agents_config(database_url: str, agents: dict[str, Any], **tables: Any) -> Config:
    return Config.from_mapping(
        {"verifier": {"database_url": database_url}, "agents": agents, **tables}
    )


def signed_bytes(report: dict[str, Any], signer: Signer) -> bytes:
    return json.dumps(sign(report, signer)).encode()


def evidence_key(tmp_path: Path) -> Path:
    from verifier.app.evidence import create_key

    path = tmp_path / "keys" / "witness.pem"
    create_key(path)
    return path


TS = "2026-11-29T10:00:0{}Z"


def trail(session_id: str = "s-1", n: int = 3) -> list[dict[str, Any]]:
    """A sealed trail of `n` entries: start, read_file calls, end (done)."""
    bodies: list[dict[str, Any]] = [{"kind": "session_start", "ts": TS.format(0)}]
    bodies += [
        {
            "kind": "tool_call",
            "ts": TS.format(i),
            "call_id": f"c{i}",
            "tool": "read_file",
            "args_sha256": "a" * 64,
            "decision": "allow",
            "checkpoint": None,
            "result_sha256": "b" * 64,
            "effects": [],
        }
        for i in range(1, n - 1)
    ]
    bodies.append({"kind": "session_end", "ts": TS.format(n - 1), "status": "done"})
    return seal(session_id, bodies)


def ed25519_pem(path: Path, mode: int = 0o600) -> Ed25519PrivateKey:
    """A new Ed25519 key written to `path` as an unencrypted PEM (as openssl genpkey does)."""
    from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

    key = Ed25519PrivateKey.generate()
    path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    path.chmod(mode)
    return key
