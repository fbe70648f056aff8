"""Signed reports at ingest: an agent with keys signs, or its report is refused and kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.signing import Ed25519Signer, HmacSigner
from tests.support.report_factory import report_dict
from tests.support.trust import agents_config, public_b64, signed_bytes
from verifier.app.pipeline import submit
from verifier.contract.signatures import assess
from verifier.errors import ConfigError, InvalidReport
from verifier.store import Store

KEY = Ed25519PrivateKey.generate()


def ed_config(db_url: str) -> object:
    return agents_config(db_url, {"repo-fixer": {"public_keys": [f"ed25519:{public_b64(KEY)}"]}})


def test_an_unsigned_report_of_an_agent_with_keys_is_refused_kept_and_its_id_stays_free(
    db_url: str,
) -> None:
    config = ed_config(db_url)
    unsigned = json.dumps(report_dict("s-real")).encode()
    with Store.open(db_url) as store:
        with pytest.raises(InvalidReport) as refused:
            submit(store, unsigned, "test", config=config)  # type: ignore[arg-type]
        assert refused.value.field == "signature"
        assert "missing" in refused.value.problem and "repo-fixer" in refused.value.problem
        [kept] = store.rejected()
        assert (kept.field, kept.source) == ("signature", "test")
        assert store.rejected_bytes(kept.id) == unsigned
        # The id is still free: the real, signed report takes it.
        row, new = submit(
            store,
            signed_bytes(report_dict("s-real"), Ed25519Signer(KEY, key_id="k1")),
            "test",
            config=config,  # type: ignore[arg-type]
        )
        assert new and row.session_id == "s-real"


def test_a_report_signed_with_another_key_is_refused(db_url: str) -> None:
    config = ed_config(db_url)
    forged = signed_bytes(report_dict("s-1"), Ed25519Signer(Ed25519PrivateKey.generate()))
    with Store.open(db_url) as store:
        with pytest.raises(InvalidReport, match="not valid under any key of agent 'repo-fixer'"):
            submit(store, forged, "test", config=config)  # type: ignore[arg-type]
        assert [r.field for r in store.rejected()] == ["signature"]
        with pytest.raises(Exception, match="not stored"):
            store.get_session("s-1")


def test_a_garbage_signature_is_refused(db_url: str) -> None:
    config = ed_config(db_url)
    raw = json.dumps(
        report_dict("s-1", signature={"alg": "ed25519", "value": "not base64!"})
    ).encode()
    with Store.open(db_url) as store, pytest.raises(InvalidReport, match="base64"):
        submit(store, raw, "test", config=config)  # type: ignore[arg-type]


def test_hmac_signatures_use_the_secret_from_the_environment(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = agents_config(db_url, {"repo-fixer": {"hmac_secret_env": "FIXER_HMAC"}})
    good = signed_bytes(report_dict("s-1"), HmacSigner(b"s3cret", key_id="h1"))
    monkeypatch.delenv("FIXER_HMAC", raising=False)
    with Store.open(db_url) as store:
        with pytest.raises(ConfigError, match="FIXER_HMAC is not set"):
            submit(store, good, "test", config=config)
        monkeypatch.setenv("FIXER_HMAC", "another")
        with pytest.raises(InvalidReport, match="HMAC-SHA256"):
            submit(store, good, "test", config=config)
        monkeypatch.setenv("FIXER_HMAC", "s3cret")
        assert submit(store, good, "test", config=config)[1]
    check = assess(json.loads(good), config)
    assert check.to_dict() == {
        "state": "verified",
        "verified": True,
        "alg": "hmac-sha256",
        "key_id": "h1",
        "key": "hmac:FIXER_HMAC",
    }


def test_a_signature_of_an_agent_without_keys_is_stored_and_assessed_as_unverified(
    db_url: str,
) -> None:
    config = agents_config(db_url, {})
    raw = signed_bytes(report_dict("s-1"), Ed25519Signer(KEY, key_id="k1"))
    with Store.open(db_url) as store:
        assert submit(store, raw, "test", config=config)[1]
    check = assess(json.loads(raw), config)
    assert check.state == "unverified" and check.key_id == "k1"
    assert "squatted" in str(check.note())


def test_agent_keys_are_validated_naming_the_field(tmp_path: Path) -> None:
    bad = {
        "public_keys": (["rsa:abc"], "agents.a.public_keys"),
        "hmac_secret_env": ("not a name", "agents.a.hmac_secret_env"),
        "require_witness": ("yes", "agents.a.require_witness"),
    }
    for key, (value, field) in bad.items():
        with pytest.raises(ConfigError, match=field):
            agents_config("sqlite://", {"a": {key: value}})
    with pytest.raises(ConfigError, match="cannot read the key file"):
        agents_config("sqlite://", {"a": {"public_keys": [f"ed25519:{tmp_path}/none.pub"]}})


def test_a_public_key_may_be_a_pem_file_relative_to_the_config_file(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    from verifier.config import Config

    (tmp_path / "keys").mkdir()
    pem = KEY.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    (tmp_path / "keys" / "fixer.pub").write_bytes(pem)
    toml = tmp_path / "verifier.toml"
    toml.write_text(
        '[agents.repo-fixer]\npublic_keys = ["ed25519:keys/fixer.pub"]\nrequire_witness = true\n'
    )
    agent = Config.load(toml, environ={}).agents["repo-fixer"]
    assert agent.public_keys == (f"ed25519:{public_b64(KEY)}",) and agent.require_witness


def test_the_hmac_secret_never_reaches_the_code_under_test(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import subprocess
    import sys

    from verifier._internal.sandbox.runner import minimal_env

    monkeypatch.setenv("FIXER_HMAC", "s3cret-value")
    env = minimal_env(tmp_path, tmp_path)
    assert "FIXER_HMAC" not in env
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.environ.items()))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert "s3cret-value" not in child.stdout and "FIXER_HMAC" not in child.stdout


def test_verify_applies_the_signature_policy_when_it_stores(db_url: str) -> None:
    from verifier.app.pipeline import verify_report

    config = ed_config(db_url)
    unsigned = json.dumps(report_dict("s-1")).encode()
    with pytest.raises(InvalidReport) as refused:
        verify_report(unsigned, config)  # type: ignore[arg-type]
    assert refused.value.field == "signature"
    with Store.open(db_url) as store:
        assert [r.field for r in store.rejected()] == ["signature"]
        with pytest.raises(Exception, match="not stored"):
            store.get_session("s-1")
