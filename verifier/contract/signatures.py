"""Signed reports: which agents must sign, and what a report's signature proves.

Policy only; the cryptography is `audit.signing` (the same code the recorder
signs with). An agent configured with keys (``[agents.NAME] public_keys``, an
``hmac_secret_env``) signs every report: an unsigned or badly signed one is
refused at ingest (`require`, called by `verifier.app.pipeline.submit`), so nobody
else can take that agent's session ids. For an agent without keys, a
signature is checked against nothing: it is noted as unverified, never
silently taken as proof, and such session ids can be squatted
(docs/security.md).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from audit.errors import SignatureError
from audit.signing import verify_signature
from verifier.config import AgentConfig, Config
from verifier.errors import ConfigError, InvalidReport

State = Literal["verified", "unverified", "unsigned", "refused"]


@dataclass(frozen=True)
class SignatureCheck:
    """What a report's signature proves under the configured keys.

    ``verified``: it matches one of the agent's keys (`key` names which);
    ``unverified``: signed, but the agent has no keys to check it with;
    ``unsigned``: no signature, and none required; ``refused``: the agent has
    keys and the signature is missing or does not match (`problem`).
    """

    state: State
    alg: str | None = None
    key_id: str | None = None  # as the signature states it
    key: str | None = None  # the configured key that verified it
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "verified": self.state == "verified"}
        for name in ("alg", "key_id", "key", "problem"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def note(self) -> str | None:
        """What the verdict says of a signature that proves nothing."""
        if self.state == "unverified":
            return (
                f"signature ({self.alg}) not verified: {self.problem}; "
                "this agent's session ids can be squatted"
            )
        if self.state == "refused":  # stored before the agent's keys were configured
            return f"signature refused: {self.problem}"
        return None


def key_name(public_key: str) -> str:
    """A configured Ed25519 key's short name: ``ed25519:`` and 16 hex of its SHA-256."""
    raw = base64.b64decode(public_key.removeprefix("ed25519:"))
    return "ed25519:" + hashlib.sha256(raw).hexdigest()[:16]


def assess(
    document: Mapping[str, Any], config: Config, environ: Mapping[str, str] | None = None
) -> SignatureCheck:
    """The signature of `document` (the parsed report) under `config.agents`."""
    agent_name = _agent_name(document)
    agent = config.agents.get(agent_name) if agent_name is not None else None
    signature = document.get("signature")
    stated = signature if isinstance(signature, Mapping) else {}
    alg, key_id = _text(stated.get("alg")), _text(stated.get("key_id"))
    if agent is None or not agent.has_keys:
        if signature is None:
            return SignatureCheck("unsigned")
        why = f"agent {agent_name!r} has no configured keys"
        return SignatureCheck("unverified", alg, key_id, problem=why)
    if signature is None:
        return SignatureCheck(
            "refused",
            problem=f"missing: agent {agent_name!r} signs its reports "
            "(keys configured in [agents]); an unsigned report cannot take its session ids",
        )
    problems = []
    for name, key in _keys(agent, environ):
        try:
            verify_signature(document, key)
        except SignatureError as exc:
            problems.append(f"{name}: {exc}")
            continue
        return SignatureCheck("verified", alg, key_id, key=name)
    return SignatureCheck(
        "refused",
        alg,
        key_id,
        problem=f"not valid under any key of agent {agent_name!r} ({'; '.join(problems)})",
    )


def require(raw: bytes, config: Config, environ: Mapping[str, str] | None = None) -> None:
    """Refuse a report whose agent signs its reports and whose signature is missing or bad.

    Raises `InvalidReport` with field ``signature``; the caller keeps the bytes
    with the rejected reports, never as the session.
    """
    if not config.agents:
        return
    document = json.loads(raw)
    if not isinstance(document, Mapping):
        return
    check = assess(document, config, environ)
    if check.state == "refused":
        raise InvalidReport("signature", str(check.problem))


def _keys(
    agent: AgentConfig, environ: Mapping[str, str] | None
) -> list[tuple[str, Ed25519PublicKey | bytes]]:
    keys: list[tuple[str, Ed25519PublicKey | bytes]] = [
        (
            key_name(k),
            Ed25519PublicKey.from_public_bytes(base64.b64decode(k.removeprefix("ed25519:"))),
        )
        for k in agent.public_keys
    ]
    if agent.hmac_secret_env is not None:
        env = os.environ if environ is None else environ
        secret = env.get(agent.hmac_secret_env)
        if not secret:
            raise ConfigError(
                f"agents.{agent.name}.hmac_secret_env: the environment variable "
                f"{agent.hmac_secret_env} is not set, so this agent's HMAC signatures "
                "cannot be checked"
            )
        keys.append((f"hmac:{agent.hmac_secret_env}", secret.encode("utf-8")))
    return keys


def _agent_name(document: Mapping[str, Any]) -> str | None:
    agent = document.get("agent")
    return _text(agent.get("name")) if isinstance(agent, Mapping) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
