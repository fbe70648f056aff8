"""Benchmark: verifying an evidence bundle of 200 sessions, against reading and hashing it raw.

The data: 200 reports of about 17 KB each (the store_ingest benchmark's: 8
claimed changes, 12 tool calls with their responses, a sealed audit trail),
parsed and stored with `Store.ingest` in a SQLite store, each with one
verification run recorded with `Store.record_run` (a real `Verification` of
three checks: 70 % delivered, 20 % not delivered with a finding, 10 %
inconclusive). Running the real checks 200 times would take minutes and change
nothing in the bundle's shape. The bundle is exported with
`verifier.app.evidence.export` (all 200 sessions by id, an Ed25519 key made by
`create_key`), gzipped: 1,203 files (six per session, the manifest, its signature, the key).

The subject is `audit.bundle.verify_bundle(data)` on the bundle's bytes (what
`verifier evidence verify` and ``python -m audit.bundle`` run). The raw
operation is what no verifier can skip: gunzip, read every tar member, SHA-256
of each member with hashlib, and one Ed25519 verify (`cryptography`) per
signature in the bundle (the manifest's and the 200 statements'), over the
signed bytes extracted beforehand. Target: <= 2x.

Informs: the export (`evidence.export` with the store opened read-only, as
``verifier evidence export`` does) against reading the same rows with sqlite3
(sessions with their reports, claimed changes, runs, check results, findings)
and hashing each report and run with hashlib.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import random
import sqlite3
import tarfile
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from tests.benchmarks.store_ingest import build
from tests.benchmarks.timing import Result, Row, measure
from tests.support.api import make_config, verification

SESSIONS = 200
TARGET = 2.0


def _store(tmp: Path) -> tuple[str, Path, list[str]]:
    from verifier.app.evidence import create_key
    from verifier.contract.report import parse_report
    from verifier.store import Store

    db = tmp / "evidence.sqlite3"
    url = f"sqlite:///{db}"
    rng = random.Random(9)
    ids = [f"ev-{i:04d}" for i in range(SESSIONS)]
    with Store.open(url) as store:
        for i, sid in enumerate(ids):
            store.ingest(parse_report(build(sid, rng)))
            store.record_run(
                verification(sid, failed=i % 10 in (1, 2), error=i % 10 == 3), reason="ingest"
            )
    key = tmp / "keys" / "signing.pem"
    create_key(key)
    return url, key, ids


def _signed(data: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The bundle's public key, and each (signature, signed bytes) it holds."""
    from audit.dsse import pae

    files = {}
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data)), mode="r:") as tar:
        for member in tar:
            extracted = tar.extractfile(member)
            assert extracted is not None
            files[member.name] = extracted.read()
    public = bytes.fromhex(json.loads(files["public-key.json"])["public_key"])
    sig = json.loads(files["manifest.sig.json"])
    pairs = [(bytes.fromhex(sig["signature"]), files["manifest.json"])]
    for name, content in sorted(files.items()):
        if name.endswith("statement.dsse.json"):
            env = json.loads(content)
            payload = base64.b64decode(env["payload"])
            for s in env["signatures"]:
                pairs.append((base64.b64decode(s["sig"]), pae(env["payloadType"], payload)))
    return public, pairs


def raw_verify(data: bytes, public: bytes, pairs: list[tuple[bytes, bytes]]) -> int:
    key = Ed25519PublicKey.from_public_bytes(public)
    members = 0
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data)), mode="r:") as tar:
        for member in tar:
            extracted = tar.extractfile(member)
            assert extracted is not None
            hashlib.sha256(extracted.read()).digest()
            members += 1
    for signature, message in pairs:
        key.verify(signature, message)
    return members


def raw_rows(db: Path, ids: list[str]) -> int:
    """The rows the export reads, read with sqlite3, each report and run hashed."""
    marks = ", ".join("?" * len(ids))
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        n = 0
        for (report,) in connection.execute(
            f"SELECT report FROM sessions WHERE session_id IN ({marks})", ids
        ):
            hashlib.sha256(report).digest()
            n += 1
        for (result,) in connection.execute(
            f"SELECT result FROM verification_runs WHERE session_id IN ({marks})", ids
        ):
            hashlib.sha256(result.encode()).digest()
        runs = f"SELECT id FROM verification_runs WHERE session_id IN ({marks})"
        connection.execute(f"SELECT * FROM check_results WHERE run_id IN ({runs})", ids).fetchall()
        connection.execute(f"SELECT * FROM findings WHERE run_id IN ({runs})", ids).fetchall()
        connection.execute(
            f"SELECT * FROM claimed_changes WHERE session_id IN ({marks})", ids
        ).fetchall()
        connection.execute(
            f"SELECT * FROM verdict_overrides WHERE session_id IN ({marks})", ids
        ).fetchall()
        return n
    finally:
        connection.close()


def run(tmp: Path, repeat: int) -> Result:
    from audit.bundle import verify_bundle
    from verifier.app import evidence
    from verifier.store import Store

    url, key_path, ids = _store(tmp)
    config = make_config(url)
    key = evidence.load_key(key_path)

    def export() -> bytes:
        with Store.open(url, read_only=True) as store:
            return evidence.export(store, config, evidence.BundleSelection(tuple(ids)), key).data

    data = export()
    assert export() == data, "the export is not deterministic"
    public, pairs = _signed(data)
    verified = verify_bundle(data, evidence.key_fingerprint(key))
    members = raw_verify(data, public, pairs)
    assert len(verified.sessions) == SESSIONS and verified.files == members
    assert len(pairs) == SESSIONS + 1
    db = Path(url.removeprefix("sqlite:///"))
    t = measure(
        {
            "verify": lambda: verify_bundle(data),
            "raw verify": lambda: raw_verify(data, public, pairs),
            "export": export,
            "raw export": lambda: raw_rows(db, ids),
        },
        repeat,
    )
    rows = [
        Row(
            "evidence",
            f"verify_bundle, {SESSIONS} sessions ({len(data) / 1024:.0f} KiB gzipped)",
            t["verify"],
            f"gunzip + tar + hashlib of {members:,} members + {len(pairs)} Ed25519 verifies",
            t["raw verify"],
            f"<= {TARGET:g}x",
            t["raw verify"] * TARGET,
        ),
        Row(
            "evidence",
            f"evidence.export, the same {SESSIONS} sessions (SQLite)",
            t["export"],
            "sqlite3 reads of the same rows + hashlib of each report and run",
            t["raw export"],
        ),
    ]
    unpacked = sum(len(c) for c in _unpacked(data))
    facts = {
        "bundle": f"{SESSIONS} sessions, {members:,} files, {unpacked / 1e6:.1f} MB unpacked, "
        f"{len(data) / 1e6:.2f} MB gzipped (level 9); reports of about 17 KB, one run each",
    }
    return Result(rows, facts)


def _unpacked(data: bytes) -> list[bytes]:
    out = []
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data)), mode="r:") as tar:
        for member in tar:
            extracted = tar.extractfile(member)
            assert extracted is not None
            out.append(extracted.read())
    return out
