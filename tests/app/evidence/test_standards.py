"""The bundle's statements as the standard tools read them: in-toto-attestation's Statement
validator and sigstore's Statement and DSSE envelope models accept every one, a session
that claimed no change included (its subject is the report itself), and `evidence verify`
refuses a statement with no subject, as they do."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf import json_format
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement as InTotoStatement
from sigstore.dsse import Envelope as SigstoreEnvelope
from sigstore.dsse import Statement as SigstoreStatement
from sigstore.errors import Error as SigstoreError
from sigstore_models.intoto import Envelope as SigstoreEnvelopeModel

from audit.bundle import BundleError, pack, verify_bundle
from audit.dsse import IN_TOTO_PAYLOAD_TYPE, envelope, pae
from tests.support.evidence import SESSIONS, Exported, build, jcs, resign, unpack
from tests.support.sessions import fixed_session, to_bytes
from verifier.agent.harness import model_turn
from verifier.app import evidence
from verifier.app.evidence import BundleSelection, key_fingerprint, load_key
from verifier.app.pipeline import verify_report
from verifier.store import Store

EMPTY = "s-empty"
EVERY = (*SESSIONS, EMPTY)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """The three sessions of `build`, and one whose agent changed nothing and said done."""
    ex = build(tmp_path_factory.mktemp("evidence"))
    nothing = [model_turn("Nothing needed changing.")]
    raw = to_bytes(fixed_session(ex.repo, EMPTY, turns=nothing).report())
    assert json.loads(raw)["changes"] == []
    verify_report(raw, ex.config)
    ex.reports[EMPTY] = raw
    return ex


@pytest.fixture(scope="module")
def files(exported: Exported) -> dict[str, bytes]:
    with Store.open(exported.config.database_url, read_only=True) as store:
        key = load_key(exported.key_path)
        data = evidence.export(store, exported.config, BundleSelection(EVERY), key).data
    return unpack(data)


@pytest.fixture(scope="module")
def key(exported: Exported) -> Ed25519PrivateKey:
    return load_key(exported.key_path)


def _payload(data: bytes) -> bytes:
    return base64.b64decode(json.loads(data)["payload"])


@pytest.mark.parametrize("sid", EVERY)
def test_in_toto_attestations_validator_accepts_every_statement(
    files: dict[str, bytes], sid: str
) -> None:
    payload = _payload(files[f"sessions/{sid}/statement.dsse.json"])
    proto = json_format.Parse(payload, statement_pb2.Statement())
    statement = InTotoStatement.copy_from_pb(proto)
    statement.validate()  # raises ValueError when it is not a valid Statement v1
    assert len(statement.pb.subject) >= 1
    assert statement.pb.predicate_type == "https://verifier.dev/delivery/v1"


@pytest.mark.parametrize("sid", EVERY)
def test_sigstores_models_accept_every_statement_and_envelope(
    files: dict[str, bytes], key: Ed25519PrivateKey, sid: str
) -> None:
    data = files[f"sessions/{sid}/statement.dsse.json"]
    payload = _payload(data)
    SigstoreStatement(payload)  # raises sigstore.errors.Error on a malformed statement
    outer = SigstoreEnvelope(SigstoreEnvelopeModel.from_json(data))
    # sigstore computes the same pre-authentication encoding our signature covers.
    assert outer.pae() == pae(IN_TOTO_PAYLOAD_TYPE, payload)
    key.public_key().verify(outer.signature, outer.pae())


def test_a_session_that_claimed_no_change_has_its_report_as_subject(
    files: dict[str, bytes], exported: Exported
) -> None:
    statement = json.loads(_payload(files[f"sessions/{EMPTY}/statement.dsse.json"]))
    digest = hashlib.sha256(exported.reports[EMPTY]).hexdigest()
    assert statement["subject"] == [{"name": "report.json", "digest": {"sha256": digest}}]
    assert statement["predicate"]["report"]["sha256"] == digest
    # A session with a delivered file keeps its files as subjects, not its report.
    s1 = json.loads(_payload(files["sessions/s-1/statement.dsse.json"]))
    assert [s["name"] for s in s1["subject"]] == ["calc.py"]


def test_the_bundle_with_a_session_that_claimed_no_change_verifies(
    files: dict[str, bytes],
) -> None:
    verified = verify_bundle(pack(files))
    by_id = {s["session_id"]: s for s in verified.sessions}
    assert set(by_id) == set(EVERY) and by_id[EMPTY]["subjects"] == 1


def _with_statement(
    files: dict[str, bytes], key: Ed25519PrivateKey, sid: str, statement: dict[str, object]
) -> bytes:
    """The bundle with `sid`'s statement replaced and signed by the bundle's own key."""
    payload = jcs(statement)
    signature = key.sign(pae(IN_TOTO_PAYLOAD_TYPE, payload))
    edited = dict(files)
    edited[f"sessions/{sid}/statement.dsse.json"] = jcs(
        envelope(payload, IN_TOTO_PAYLOAD_TYPE, key_fingerprint(key), signature)
    )
    return pack(resign(edited, key))


def test_evidence_verify_refuses_an_empty_subject_as_the_standard_tools_do(
    files: dict[str, bytes], key: Ed25519PrivateKey, tmp_path: Path
) -> None:
    statement = json.loads(_payload(files[f"sessions/{EMPTY}/statement.dsse.json"]))
    statement["subject"] = []
    data = _with_statement(files, key, EMPTY, statement)
    with pytest.raises(BundleError) as info:
        verify_bundle(data)
    assert info.value.reason == "statement_invalid"
    assert "subject is empty" in info.value.message
    # The two standard tools refuse the same statement.
    with pytest.raises(ValueError, match="At least one subject required"):
        proto = json_format.Parse(jcs(statement), statement_pb2.Statement())
        InTotoStatement.copy_from_pb(proto).validate()
    with pytest.raises(SigstoreError):
        SigstoreStatement(jcs(statement))
    bundle = tmp_path / "empty-subject.tgz"
    bundle.write_bytes(data)
    checked = evidence.verify_file(bundle)
    assert (checked.exit_code, checked.reason) == (1, "statement_invalid")


def test_a_report_subject_with_another_digest_is_refused(
    files: dict[str, bytes], key: Ed25519PrivateKey
) -> None:
    statement = json.loads(_payload(files[f"sessions/{EMPTY}/statement.dsse.json"]))
    statement["subject"] = [{"name": "report.json", "digest": {"sha256": "0" * 64}}]
    with pytest.raises(BundleError) as info:
        verify_bundle(_with_statement(files, key, EMPTY, statement))
    assert info.value.reason == "statement_mismatch" and "subjects" in info.value.message
