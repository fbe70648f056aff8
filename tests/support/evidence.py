"""A real store with real verified sessions, exported; and what an attacker does to a bundle."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.bundle import MANIFEST, MANIFEST_SIG
from audit.jcs import canonicalize
from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, calc_repo, fixed_session, to_bytes
from verifier.agent.harness import call, model_turn
from verifier.app import evidence
from verifier.app.evidence import BundleSelection, create_key, load_key
from verifier.app.pipeline import verify_report
from verifier.config import Config, EvidenceConfig, RepositoryConfig
from verifier.store import Store
from verifier.store.maintenance import prune
from verifier.store.overrides import record_override

DAY1 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
DAY2 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
OLD = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
SESSIONS = ("s-1", "s-2", "s-3")


@dataclass
class Exported:
    config: Config
    repo: GitRepo
    key_path: Path
    reports: dict[str, bytes]


def build(tmp: Path) -> Exported:
    """Three sessions verified through the pipeline into a real SQLite store:

    s-1 delivered (fixes subtract); s-2 not delivered (breaks add: the tests fail),
    with a person's override to delivered; s-3 (a note, on top of s-2's broken add:
    not delivered), ended long ago, its report pruned.
    """
    repo = calc_repo(tmp / "calc")
    key_path = tmp / "keys" / "signing.pem"
    create_key(key_path)
    repo_cfg = RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST))
    config = Config(
        database_url=f"sqlite:///{tmp / 'evidence.sqlite3'}",
        repositories={"calc": repo_cfg},
        evidence=EvidenceConfig(signing_key=key_path),
        test_timeout_s=60,
    )
    reports = {}
    reports["s-1"] = to_bytes(fixed_session(repo, "s-1", start=DAY1).report())
    breaks_add = [
        model_turn(
            call(
                "replace_lines",
                "c1",
                path="calc.py",
                start_line=2,
                end_line=2,
                expected="    return a + b\n",
                replacement="    return a * b\n",
            )
        ),
        model_turn("Done."),
    ]
    reports["s-2"] = to_bytes(fixed_session(repo, "s-2", start=DAY2, turns=breaks_add).report())
    notes = [
        model_turn(call("write_file", "c1", path="NOTES.md", content="notes\n")),
        model_turn("Done."),
    ]
    reports["s-3"] = to_bytes(fixed_session(repo, "s-3", start=OLD, turns=notes).report())
    for sid in SESSIONS:
        verify_report(reports[sid], config)
    with Store.open(config.database_url) as store:
        record_override(store, "s-2", status="delivered", reason="a flaky test", author="alice")
        prune(store, datetime(2026, 11, 25, tzinfo=UTC), actor="test")
    return Exported(config, repo, key_path, reports)


def export(
    ex: Exported, selection: BundleSelection | None = None, *, compress: bool = True
) -> bytes:
    """The bundle `verifier evidence export` writes for `selection` (every session)."""
    with Store.open(ex.config.database_url, read_only=True) as store:
        key = load_key(ex.key_path)
        return evidence.export(
            store, ex.config, selection or BundleSelection(SESSIONS), key, compress=compress
        ).data


def unpack(data: bytes) -> dict[str, bytes]:
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        out = {}
        for member in tar:
            extracted = tar.extractfile(member)
            assert extracted is not None
            out[member.name] = extracted.read()
        return out


def flip_bit(data: bytes, at: int | None = None) -> bytes:
    at = len(data) // 2 if at is None else at
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def resign(
    files: dict[str, bytes], key: Ed25519PrivateKey, *, claim_keyid: str | None = None
) -> dict[str, bytes]:
    """What someone holding `key` does after editing files: the manifest's file list
    computed again, signed again (claiming `claim_keyid` when given)."""
    import hashlib

    from verifier.app.evidence import key_fingerprint

    manifest = json.loads(files[MANIFEST])
    listed = sorted(set(files) - {MANIFEST, MANIFEST_SIG})
    manifest["files"] = [
        {"path": p, "size": len(files[p]), "sha256": hashlib.sha256(files[p]).hexdigest()}
        for p in listed
    ]
    body = canonicalize(manifest)
    files = dict(files)
    files[MANIFEST] = body
    files[MANIFEST_SIG] = canonicalize(
        {
            "algorithm": "ed25519",
            "keyid": claim_keyid or key_fingerprint(key),
            "manifest_sha256": hashlib.sha256(body).hexdigest(),
            "signature": key.sign(body).hex(),
        }
    )
    return files


def jcs(value: Any) -> bytes:
    return canonicalize(value)
