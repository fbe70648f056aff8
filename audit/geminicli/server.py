"""What the gemini-cli hook hands the verifier service: each trail entry to the witness as
it is written, and at the end the report, signed, posted (``install --server URL
--token-env VAR [--key PATH]``, docs/gemini-cli.md).

The pieces are our recorder's own: `audit.witness.WitnessClient` posts an entry and
keeps the service's signed receipt, `audit.signing` signs the report,
`audit.upload.post_report` posts it. What differs is that the hook is a process per
event, so what one event learnt is kept in the session's state for the next:

* ``state["server"]``: the URL and the *name* of the environment variable holding the
  ingest token, as install wrote them (the token is read at run time, in the hook's
  process, and written nowhere);
* ``state["witness"]``: how many entries the witness acknowledged (its receipts'
  ``count``), how many entries were not witnessed when they were written
  (``failures``, as the recorder counts them) and the first failure's text; the
  receipts themselves go to ``receipts.jsonl`` beside the trail.

A failed post stops posting for the rest of that event (gemini-cli is held up by one
bounded attempt at most: `WITNESS_ATTEMPTS` of `WITNESS_TIMEOUT_S`), and the next
entry written posts the backlog first, in order: the witness takes only entries that
extend its chain, and an entry it holds already is acknowledged again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from audit.errors import SignatureError

__all__ = [
    "UPLOAD_ATTEMPTS",
    "UPLOAD_TIMEOUT_S",
    "WITNESS_ATTEMPTS",
    "WITNESS_TIMEOUT_S",
    "load_signer",
    "post_report",
    "sign_report",
    "start",
    "witness",
    "witness_extension",
]

#: Attempts and seconds per attempt of one witness post (the cost of an event when the
#: service is out of reach: about 2 x 5 s, then nothing more in that event).
WITNESS_ATTEMPTS = 2
WITNESS_TIMEOUT_S = 5.0
#: ...and of the report's post at the end (within gemini-cli's 60 s for a hook).
UPLOAD_ATTEMPTS = 3
UPLOAD_TIMEOUT_S = 10.0


def start(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The server and signing parts of a new session's state, from the hook's settings
    (``<git-dir>/verifier/hook.json``): none when install named no server or key."""
    server = settings.get("server")
    signing = settings.get("signing")
    out: dict[str, Any] = {"server": None, "witness": None, "signing": None}
    if isinstance(server, dict) and isinstance(server.get("url"), str):
        out["server"] = {"url": server["url"], "token_env": str(server.get("token_env", ""))}
        out["witness"] = {"count": 0, "failures": 0, "first_failure": None}
    if isinstance(signing, dict):
        key_id = signing.get("key_id") or None
        if isinstance(signing.get("key"), str):
            out["signing"] = {"key": signing["key"], "key_id": key_id}
        elif isinstance(signing.get("hmac_env"), str):
            out["signing"] = {"hmac_env": signing["hmac_env"], "key_id": key_id}
    return out


def witness(state: dict[str, Any], trail: Path, entry: Mapping[str, Any], *, down: bool) -> bool:
    """Post to the witness what it has not acknowledged of `trail`, through `entry` (just
    written and fsynced); whether it took them. `down`: a post failed earlier in this
    event, so `entry` is only counted as not witnessed."""
    server, seen = state.get("server"), state.get("witness")
    if server is None or seen is None:
        return True
    seq = int(entry["seq"])
    if down:
        return _failed(seen, f"entry {seq}: not posted, the witness failed earlier in this event")
    token = os.environ.get(server["token_env"])
    if not token:
        return _failed(
            seen,
            f"entry {seq}: ${server['token_env']} (the ingest token) is not set in the hook's "
            "environment",
        )
    from audit.jcs import canonicalize
    from audit.witness import WitnessClient

    backlog: list[Any] = [entry]
    if seen["count"] < seq:  # entries a failed event left: read back from the trail, in order
        lines = trail.read_bytes().splitlines()[seen["count"] : seq + 1]
        backlog = [json.loads(line) for line in lines]
    client = WitnessClient(
        server["url"], token, attempts=WITNESS_ATTEMPTS, timeout_s=WITNESS_TIMEOUT_S
    )
    for item in backlog:
        try:
            receipt = client(item)
            count = receipt["receipt"]["count"]
        except Exception as exc:  # out of reach, refused, an odd answer: keep going, say so
            return _failed(seen, f"entry {seq}: {exc}")
        seen["count"] = count if type(count) is int else seen["count"] + 1
        with open(trail.with_name("receipts.jsonl"), "ab") as fh:
            fh.write(canonicalize(receipt) + b"\n")
    return True


def _failed(seen: dict[str, Any], problem: str) -> bool:
    seen["failures"] += 1
    if seen["first_failure"] is None:
        seen["first_failure"] = problem
    return False


def witness_extension(state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The report's ``extensions.recorder`` (the recorder's shape, and how much the
    witness acknowledged), when a server is configured."""
    seen = state.get("witness")
    if state.get("server") is None or seen is None:
        return None
    return {
        "witness": {
            "failures": seen["failures"],
            "first_failure": seen["first_failure"],
            "acknowledged": seen["count"],
        }
    }


def load_signer(path: Path, key_id: str | None = None) -> Any:
    """The `audit.signing.Ed25519Signer` of the PEM private key at `path`; `SignatureError`
    saying why not (missing, readable by others, not an unencrypted Ed25519 key)."""
    from audit.signing import Ed25519Signer, load_private_key

    try:
        return Ed25519Signer(load_private_key(path), key_id=key_id)
    except OSError as exc:
        raise SignatureError(f"{path}: cannot be read ({exc.strerror})") from None
    except SignatureError as exc:
        raise SignatureError(f"{path}: {exc}") from None


def sign_report(report: dict[str, Any], signing: Mapping[str, Any] | None) -> dict[str, Any]:
    """`report` signed with the configured key (an Ed25519 key file, or an HMAC secret
    read from the variable named); unsigned, with the reason in
    ``extensions.gemini_cli.unsigned``, when the key cannot be used."""
    if signing is None:
        return report
    from audit.signing import HmacSigner, sign

    try:
        if "hmac_env" in signing:
            secret = os.environ.get(signing["hmac_env"])
            if not secret:
                raise SignatureError(
                    f"${signing['hmac_env']} (the HMAC secret) is not set in the hook's environment"
                )
            return sign(report, HmacSigner(secret.encode("utf-8"), key_id=signing.get("key_id")))
        return sign(report, load_signer(Path(signing["key"]), signing.get("key_id")))
    except SignatureError as exc:
        report["extensions"]["gemini_cli"]["unsigned"] = str(exc)
        return report


def post_report(state: Mapping[str, Any], raw: bytes, folder: Path) -> dict[str, Any] | None:
    """Post the report's bytes to the server; what happened, also written to
    ``upload.json`` (None when no server is configured)."""
    server = state.get("server")
    if server is None:
        return None
    from audit.errors import UploadError
    from audit.upload import post_report as post

    token = os.environ.get(server["token_env"])
    done: dict[str, Any] = {"url": server["url"], "posted": False, "status": None}
    if not token:
        done["problem"] = f"${server['token_env']} (the ingest token) is not set in the hook's "
        done["problem"] += "environment"
    else:
        try:
            posted = post(
                raw, server["url"], token, attempts=UPLOAD_ATTEMPTS, timeout_s=UPLOAD_TIMEOUT_S
            )
        except UploadError as exc:
            done |= {"status": exc.status, "problem": exc.problem}
        else:
            done |= {"posted": True, "status": posted.status, "created": posted.created}
    (folder / "upload.json").write_text(json.dumps(done) + "\n", encoding="utf-8")
    return done
