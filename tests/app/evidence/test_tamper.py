"""Every tamper case fails verification with its own reason, on a real exported bundle."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.bundle import MANIFEST, BundleError, pack, verify_bundle
from audit.dsse import IN_TOTO_PAYLOAD_TYPE, envelope, pae
from tests.support.evidence import SESSIONS, Exported, build, export, flip_bit, jcs, resign, unpack
from verifier.app.evidence import key_fingerprint, load_key

# Every file of the bundle: s-3's report was pruned, so it has no report nor actions.
FILES = ["manifest.json", "manifest.sig.json", "public-key.json"] + [
    f"sessions/{sid}/{name}"
    for sid in SESSIONS
    for name in (
        "actions.json",
        "report.json",
        "runs.json",
        "session.json",
        "statement.dsse.json",
        "test-logs.json",
    )
    if sid != "s-3" or name not in ("actions.json", "report.json")
]
# What a flipped bit in each file is refused for; every other file: its digest.
FLIP_REASONS = {
    "manifest.json": "manifest_modified",
    "manifest.sig.json": "manifest_signature_invalid",
    "public-key.json": "key_invalid",
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    return build(tmp_path_factory.mktemp("evidence"))


@pytest.fixture(scope="module")
def bundle(exported: Exported) -> bytes:
    return export(exported)


@pytest.fixture(scope="module")
def key(exported: Exported) -> Ed25519PrivateKey:
    return load_key(exported.key_path)


def reason(data: bytes, pin: str | None = None) -> str:
    with pytest.raises(BundleError) as info:
        verify_bundle(data, pin)
    return info.value.reason


def test_the_bundle_holds_exactly_the_expected_files(bundle: bytes) -> None:
    assert sorted(unpack(bundle)) == sorted(FILES)


def test_an_untouched_bundle_verifies_with_its_key_pinned(
    bundle: bytes, key: Ed25519PrivateKey
) -> None:
    verified = verify_bundle(bundle, key_fingerprint(key))
    assert [s["session_id"] for s in verified.sessions] == list(SESSIONS)


@pytest.mark.parametrize("name", FILES)
def test_a_flipped_bit_in_any_file_is_refused(bundle: bytes, name: str) -> None:
    files = unpack(bundle)
    files[name] = flip_bit(files[name])
    assert reason(pack(files)) == FLIP_REASONS.get(name, "digest_mismatch")


def test_a_removed_file_is_refused(bundle: bytes) -> None:
    files = unpack(bundle)
    del files["sessions/s-1/runs.json"]
    assert reason(pack(files)) == "file_missing"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("manifest.json", "manifest_missing"),
        ("manifest.sig.json", "manifest_missing"),
        ("public-key.json", "key_invalid"),
        ("sessions/s-1/report.json", "file_missing"),
    ],
)
def test_a_removed_signature_key_or_manifest_is_refused(
    bundle: bytes, name: str, expected: str
) -> None:
    files = unpack(bundle)
    del files[name]
    assert reason(pack(files)) == expected


def test_members_that_are_not_plain_files_or_named_twice_are_refused(bundle: bytes) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        link = tarfile.TarInfo("public-key.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    assert reason(raw.getvalue()) == "archive_unsafe"
    files = unpack(bundle)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in [*sorted(files), "public-key.json"]:
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            tar.addfile(info, io.BytesIO(files[name]))
    assert reason(raw.getvalue()) == "archive_unsafe"
    escaping = dict(files)
    escaping["sessions/../../evil.json"] = b"{}"
    assert reason(pack(escaping)) == "archive_unsafe"


def test_an_added_file_is_refused(bundle: bytes) -> None:
    files = unpack(bundle)
    files["sessions/s-1/extra.txt"] = b"not part of the evidence\n"
    assert reason(pack(files)) == "file_unlisted"


def test_an_edited_manifest_reserialized_is_refused(bundle: bytes) -> None:
    files = unpack(bundle)
    manifest = json.loads(files[MANIFEST])
    manifest["files"] = [f for f in manifest["files"] if f["path"] != "sessions/s-1/runs.json"]
    del files["sessions/s-1/runs.json"]
    files[MANIFEST] = jcs(manifest)
    assert reason(pack(files)) == "manifest_modified"


def test_a_bundle_resigned_by_another_key_is_refused_when_the_first_is_pinned(
    bundle: bytes, key: Ed25519PrivateKey
) -> None:
    other = Ed25519PrivateKey.generate()
    files = unpack(bundle)
    raw = other.public_key().public_bytes_raw()
    files["public-key.json"] = jcs(
        {"algorithm": "ed25519", "fingerprint": key_fingerprint(other), "public_key": raw.hex()}
    )
    manifest = json.loads(files[MANIFEST])
    manifest["key_fingerprint"] = key_fingerprint(other)
    files[MANIFEST] = jcs(manifest)
    for sid in SESSIONS:
        name = f"sessions/{sid}/statement.dsse.json"
        payload = _payload(files[name])
        signature = other.sign(pae(IN_TOTO_PAYLOAD_TYPE, payload))
        files[name] = jcs(
            envelope(payload, IN_TOTO_PAYLOAD_TYPE, key_fingerprint(other), signature)
        )
    forged = pack(resign(files, other))
    assert reason(forged, key_fingerprint(key)) == "key_mismatch"
    # Unpinned, it is a bundle of the other key's: the fingerprint is what an auditor pins.
    assert verify_bundle(forged).key_fingerprint == key_fingerprint(other)


def test_a_manifest_signed_by_another_key_is_refused(bundle: bytes) -> None:
    files = resign(unpack(bundle), Ed25519PrivateKey.generate())
    assert reason(pack(files)) == "signature_wrong_key"


def test_a_manifest_signature_that_does_not_verify_is_refused(
    bundle: bytes, key: Ed25519PrivateKey
) -> None:
    files = resign(unpack(bundle), Ed25519PrivateKey.generate(), claim_keyid=key_fingerprint(key))
    assert reason(pack(files)) == "manifest_signature_invalid"


def _swap_reports(files: dict[str, bytes]) -> dict[str, bytes]:
    files = dict(files)
    one, two = "sessions/s-1/report.json", "sessions/s-2/report.json"
    files[one], files[two] = files[two], files[one]
    return files


def test_a_swapped_report_with_the_manifest_recomputed_by_an_attacker_fails_its_signature(
    bundle: bytes, key: Ed25519PrivateKey
) -> None:
    attacker = Ed25519PrivateKey.generate()  # the attacker lacks our key, and claims it
    files = resign(_swap_reports(unpack(bundle)), attacker, claim_keyid=key_fingerprint(key))
    assert reason(pack(files)) == "manifest_signature_invalid"


def test_a_swapped_report_is_caught_by_the_report_hash_even_under_a_valid_manifest(
    bundle: bytes, key: Ed25519PrivateKey
) -> None:
    # The manifest re-signed with the real key (a signer fooled, or a bug in the
    # exporter): the statement's report_sha256 still binds each session to its report.
    files = resign(_swap_reports(unpack(bundle)), key)
    assert reason(pack(files)) == "report_hash_mismatch"


def test_a_statement_signed_by_another_key_is_refused(
    bundle: bytes, key: Ed25519PrivateKey
) -> None:
    files = unpack(bundle)
    name = "sessions/s-1/statement.dsse.json"
    payload = _payload(files[name])
    other = Ed25519PrivateKey.generate()
    signature = other.sign(pae(IN_TOTO_PAYLOAD_TYPE, payload))
    files[name] = jcs(envelope(payload, IN_TOTO_PAYLOAD_TYPE, key_fingerprint(key), signature))
    assert reason(pack(resign(files, key))) == "statement_signature_invalid"


def test_runs_that_disagree_with_the_statement_are_refused(
    bundle: bytes, key: Ed25519PrivateKey
) -> None:
    files = unpack(bundle)
    runs = json.loads(files["sessions/s-2/runs.json"])
    runs[0]["delivery_status"] = "delivered"
    files["sessions/s-2/runs.json"] = jcs(runs)
    assert reason(pack(resign(files, key))) == "statement_mismatch"


def test_a_test_log_that_is_not_the_runs_is_refused(bundle: bytes, key: Ed25519PrivateKey) -> None:
    files = unpack(bundle)
    logs = json.loads(files["sessions/s-1/test-logs.json"])
    logs[0]["output_excerpt"] = "1 passed\n"
    files["sessions/s-1/test-logs.json"] = jcs(logs)
    assert reason(pack(resign(files, key))) == "evidence_mismatch"


def test_a_truncated_archive_is_refused(bundle: bytes) -> None:
    assert reason(bundle[: len(bundle) // 2]) == "archive_truncated"


def test_a_plain_tar_cut_at_a_member_boundary_is_refused(bundle: bytes) -> None:
    tar = gzip.decompress(bundle)
    cut = 512 * 3  # the first member's header and content, no end marker
    assert reason(tar[:cut]) == "archive_truncated"


def test_bytes_that_are_no_archive_are_refused(tmp_path: Path) -> None:
    assert reason(b"not an archive at all" * 40) == "archive_unreadable"


def test_a_pinned_fingerprint_of_another_key_is_refused(bundle: bytes) -> None:
    assert reason(bundle, "0" * 64) == "key_mismatch"


def _payload(data: bytes) -> bytes:
    import base64

    return base64.b64decode(json.loads(data)["payload"])
