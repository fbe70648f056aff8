"""What an exported bundle holds, that it is the same bytes each time, and the commands."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from audit.bundle import pack, verify_bundle
from audit.dsse import IN_TOTO_PAYLOAD_TYPE
from tests.support.evidence import DAY1, SESSIONS, Exported, build, export, flip_bit, unpack
from tests.support.paths import ROOT
from verifier import cli
from verifier.app import evidence
from verifier.app.evidence import BundleSelection, key_fingerprint, load_key
from verifier.config import EvidenceConfig
from verifier.contract.profiles import Profile
from verifier.errors import BadRequest, ConfigError, NotFound
from verifier.moments import parse_moment


@pytest.fixture(autouse=True)
def _store_from_the_config_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands read the store the configuration file names (the module's)."""
    monkeypatch.delenv("VERIFIER_DATABASE_URL", raising=False)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    return build(tmp_path_factory.mktemp("evidence"))


@pytest.fixture(scope="module")
def bundle(exported: Exported) -> bytes:
    return export(exported)


@pytest.fixture(scope="module")
def config_file(exported: Exported, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "verifier.toml"
    path.write_text(
        "[verifier]\n"
        f"database_url = {json.dumps(exported.config.database_url)}\n\n"
        "[repositories.calc]\n"
        f"path = {json.dumps(str(exported.repo.path))}\n\n"
        "[evidence]\n"
        f"signing_key = {json.dumps(str(exported.key_path))}\n",
        encoding="utf-8",
    )
    return path


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


# -- determinism -------------------------------------------------------------------------


def test_the_same_sessions_export_to_the_same_bytes(exported: Exported, bundle: bytes) -> None:
    assert export(exported) == bundle
    assert export(exported, compress=False) == export(exported, compress=False)


def test_the_archive_has_sorted_names_and_no_times_owners_or_pax_headers(bundle: bytes) -> None:
    assert bundle[4:8] == b"\0\0\0\0"  # gzip's mtime
    raw = gzip.decompress(bundle)
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {
        (0, 0, 0, "", "", 0o644)
    }
    assert all(m.type == tarfile.REGTYPE and not m.pax_headers for m in members)
    assert raw[257:265] == b"ustar\x0000"


# -- contents ----------------------------------------------------------------------------


def test_reports_travel_exactly_as_received_and_a_pruned_one_is_said_to_be_missing(
    exported: Exported, bundle: bytes
) -> None:
    files = unpack(bundle)
    for sid in ("s-1", "s-2"):
        assert files[f"sessions/{sid}/report.json"] == exported.reports[sid]
    assert "sessions/s-3/report.json" not in files
    statement = _statement(files["sessions/s-3/statement.dsse.json"])
    report = statement["predicate"]["report"]
    assert report["included"] is False and report["pruned_at"] is not None
    assert report["sha256"] == hashlib.sha256(exported.reports["s-3"]).hexdigest()
    manifest = json.loads(files["manifest.json"])
    assert [s["report_included"] for s in manifest["sessions"]] == [True, True, False]


def test_the_statement_names_the_delivered_files_with_their_digests_at_the_head(
    exported: Exported, bundle: bytes
) -> None:
    files = unpack(bundle)
    envelope = json.loads(files["sessions/s-1/statement.dsse.json"])
    assert envelope["payloadType"] == IN_TOTO_PAYLOAD_TYPE
    statement = _statement(files["sessions/s-1/statement.dsse.json"])
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://verifier.dev/delivery/v1"
    predicate = statement["predicate"]
    head = predicate["repo"]["head_commit"]
    at_head = git(exported.repo.path, "show", f"{head}:calc.py")
    assert statement["subject"] == [
        {"name": "calc.py", "digest": {"sha256": hashlib.sha256(at_head).hexdigest()}}
    ]
    runs = json.loads(files["sessions/s-1/runs.json"])
    assert predicate["verdict"] == {
        "computed": "delivered",
        "override": None,
        "effective": "delivered",
    }
    assert predicate["run"]["id"] == runs[-1]["id"]
    assert (
        predicate["checks"]
        == runs[-1]["checks"]
        == {
            "changes": "pass",
            "tests": "pass",
            "audit": "pass",
            "replay": "pass",
        }
    )
    assert predicate["agent"]["name"] and predicate["repo"]["name"] == "calc"


def test_the_dsse_signature_is_over_the_pre_authentication_encoding(
    exported: Exported, bundle: bytes
) -> None:
    envelope = json.loads(unpack(bundle)["sessions/s-1/statement.dsse.json"])
    payload = base64.b64decode(envelope["payload"])
    # Built by hand from the DSSE v1 spec, not with audit.dsse.pae.
    pae = b"DSSEv1 28 application/vnd.in-toto+json " + str(len(payload)).encode() + b" " + payload
    key = load_key(exported.key_path)
    [signature] = envelope["signatures"]
    assert signature["keyid"] == key_fingerprint(key)
    key.public_key().verify(base64.b64decode(signature["sig"]), pae)


def test_an_override_is_exported_beside_the_computed_verdict(bundle: bytes) -> None:
    session = json.loads(unpack(bundle)["sessions/s-2/session.json"])
    assert session["verdict"] == {
        "computed": "not_delivered",
        "override": "delivered",
        "effective": "delivered",
    }
    [override] = session["overrides"]
    assert (override["author"], override["status"], override["reason"]) == (
        "alice",
        "delivered",
        "a flaky test",
    )


def test_each_run_has_its_findings_and_its_test_log_with_the_full_logs_hash(
    bundle: bytes,
) -> None:
    files = unpack(bundle)
    runs = json.loads(files["sessions/s-2/runs.json"])
    assert runs[0]["delivery_status"] == "not_delivered"
    assert "tests.failed" in {f["code"] for f in runs[0]["findings"]}
    [log] = json.loads(files["sessions/s-2/test-logs.json"])
    details = runs[0]["result"]["checks"]["tests"]["details"]
    assert log["run_id"] == runs[0]["id"] and log["status"] == "fail"
    assert log["output_sha256"] == details["output_sha256"]
    assert len(log["output_sha256"]) == 64 and log["output_bytes"] > 0
    assert "failed" in log["output_excerpt"]


def test_the_actions_are_the_calls_normalised_by_the_tool_profile(bundle: bytes) -> None:
    actions = json.loads(unpack(bundle)["sessions/s-1/actions.json"])
    assert actions["profile"] == "default"
    read, replace = actions["actions"]
    assert (read["name"], read["action"]["kind"], read["succeeded"]) == ("read_file", "read", True)
    assert replace["action"]["kind"] == "replace"
    assert replace["action"]["params"]["start_line"] == 6
    assert replace["action"]["permission"] == "write"
    assert replace["location"] == "trajectory.contents.3.parts.0"
    assert replace["args"]["replacement"] == "    return a - b\n"


def test_each_tool_profile_is_read_once_per_export_and_its_refusal_kept(
    exported: Exported,
) -> None:
    profiles: dict[str | None, tuple[Profile, str | None]] = {}
    first = evidence.normalised_actions(exported.reports["s-1"], exported.config, profiles)
    again = evidence.normalised_actions(exported.reports["s-2"], exported.config, profiles)
    assert (first["profile"], again["profile"]) == ("default", "default")
    assert list(profiles) == ["default"] and first["profile_note"] is None
    assert first == evidence.normalised_actions(exported.reports["s-1"], exported.config)
    doc = json.loads(exported.reports["s-1"])
    doc["agent"]["tool_profile"] = "no-such-profile"
    unknown = json.dumps(doc).encode()
    for _ in range(2):
        actions = evidence.normalised_actions(unknown, exported.config, profiles)
        assert actions["profile"] == "no-such-profile"
        assert actions["profile_note"].endswith(": every call is unknown")
        assert {a["action"]["kind"] for a in actions["actions"]} == {"unknown"}
    assert sorted(profiles, key=str) == ["default", "no-such-profile"]


def test_the_audit_package_alone_verifies_a_bundle(bundle: bytes, tmp_path: Path) -> None:
    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(bundle)
    code = (
        "import sys; sys.modules['verifier'] = None\n"  # any import of the verifier fails
        "from audit.bundle import verify_bundle\n"
        f"print(len(verify_bundle(open({str(path)!r}, 'rb').read()).sessions))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "3"


def test_python_m_audit_bundle_verifies_without_the_verifier(
    bundle: bytes, exported: Exported, tmp_path: Path
) -> None:
    good, bad = tmp_path / "good.tgz", tmp_path / "bad.tgz"
    good.write_bytes(bundle)
    bad.write_bytes(bundle[:-100])
    fp = key_fingerprint(load_key(exported.key_path))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        code = (
            "import runpy, sys; sys.modules['verifier'] = None; "
            f"sys.argv = ['audit.bundle', *{list(args)!r}]; "
            "runpy.run_module('audit.bundle', run_name='__main__')"
        )
        return subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
        )

    ok = run(str(good), "--key-fingerprint", fp)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["key_fingerprint"] == fp
    refused = run(str(bad))
    assert refused.returncode == 1 and refused.stdout.startswith("reason: archive_truncated")


def test_a_session_never_verified_is_exported_as_pending(
    exported: Exported, tmp_path: Path
) -> None:
    from verifier.app.evidence import bundle_files
    from verifier.app.pipeline import submit
    from verifier.config import Config
    from verifier.store import Store

    config = Config(database_url=f"sqlite:///{tmp_path / 'pending.sqlite3'}")
    with Store.open(config.database_url) as store:
        submit(store, exported.reports["s-1"], "test")
        files = bundle_files(
            store, config, ["s-1"], load_key(exported.key_path), BundleSelection(("s-1",))
        )
    verified = verify_bundle(pack(files))
    [session] = verified.sessions
    assert session["verdict"]["computed"] == "pending" and session["runs"] == 0
    statement = _statement(files["sessions/s-1/statement.dsse.json"])
    predicate = statement["predicate"]
    assert isinstance(predicate, dict)
    assert (predicate["run"], predicate["checks"]) == (None, {})


# -- times -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("yesterday", "is not a date or an ISO 8601 date and time"),
        ("2026-11-29T10:00:00", "has no UTC offset"),
        ("2026-13-01T00:00:00Z", "is not a date or an ISO 8601 date and time"),
    ],
)
def test_a_bad_time_is_refused_naming_the_option(value: str, problem: str) -> None:
    with pytest.raises(BadRequest) as info:
        parse_moment(value, "--until")
    assert str(info.value).startswith("--until: ") and problem in str(info.value)


def test_an_offset_time_is_read_in_utc() -> None:
    assert parse_moment("2026-11-29T12:00:00+02:00", "--since") == DAY1


def test_until_before_since_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^--until: .* is not after --since"):
        BundleSelection(since=DAY1, until=DAY1)


# -- commands ----------------------------------------------------------------------------


def test_export_since_until_takes_the_sessions_that_ended_in_the_window(
    config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "day1.tar.gz"
    code = cli.run(
        [
            "evidence", "export", "--since", "2026-11-29T00:00:00+00:00",
            "--until", "2026-11-30T00:00:00Z", "--out", str(out),
            "--config", str(config_file), "--format", "json",
        ]
    )  # fmt: skip
    assert code == 0
    assert json.loads(capsys.readouterr().out)["sessions"] == ["s-1"]
    verified = verify_bundle(out.read_bytes())
    assert [s["session_id"] for s in verified.sessions] == ["s-1"]
    manifest = json.loads(unpack(out.read_bytes())["manifest.json"])
    assert manifest["selection"] == {
        "since": "2026-11-29T00:00:00Z",
        "until": "2026-11-30T00:00:00Z",
    }


def test_export_since_until_take_plain_dates_as_midnight_utc(
    config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "day1.tar.gz"
    code = cli.run(
        [
            "evidence", "export", "--since", "2026-11-29", "--until", "2026-11-30",
            "--out", str(out), "--config", str(config_file), "--format", "json",
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["sessions"] == ["s-1"]
    manifest = json.loads(unpack(out.read_bytes())["manifest.json"])
    assert manifest["selection"] == {
        "since": "2026-11-29T00:00:00Z",
        "until": "2026-11-30T00:00:00Z",
    }


def test_export_twice_from_the_command_line_gives_the_same_bytes(
    config_file: Path, tmp_path: Path
) -> None:
    args = ["evidence", "export", "--session", "s-2", "--session", "s-1", "--config"]
    assert cli.run([*args, str(config_file), "--out", str(tmp_path / "a.tar")]) == 0
    assert cli.run([*args, str(config_file), "--out", str(tmp_path / "b.tar")]) == 0
    first = (tmp_path / "a.tar").read_bytes()
    assert first == (tmp_path / "b.tar").read_bytes()
    assert first[:2] != b"\x1f\x8b"  # .tar: a plain tar
    assert len(verify_bundle(first).sessions) == 2


def test_export_with_a_bad_since_names_the_option(
    config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.run(
        ["evidence", "export", "--since", "last week", "--out", str(tmp_path / "x.tgz"),
         "--config", str(config_file)]
    )  # fmt: skip
    assert code == 2
    assert "--since: 'last week' is not a date or an ISO 8601" in capsys.readouterr().err
    assert not (tmp_path / "x.tgz").exists()


def test_export_of_an_empty_window_or_an_unknown_session_is_refused(
    config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["evidence", "export", "--config", str(config_file), "--out", str(tmp_path / "x")]
    assert cli.run([*base, "--since", "2030-01-01T00:00:00Z"]) == 2
    assert "no session ended between 2030-01-01T00:00:00Z" in capsys.readouterr().err
    assert cli.run([*base, "--session", "nope"]) == 2
    assert "'nope' is not stored" in capsys.readouterr().err
    assert cli.run([*base, "--session", "s-1", "--since", "2026-11-29T00:00:00Z"]) == 2
    assert "not both" in capsys.readouterr().err
    assert cli.run(base) == 2
    assert "--session" in capsys.readouterr().err


def test_verify_prints_the_reason_and_exits_non_zero(
    bundle: bytes, exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = tmp_path / "good.tgz", tmp_path / "bad.tgz"
    good.write_bytes(bundle)
    files = unpack(bundle)
    files["sessions/s-1/runs.json"] = flip_bit(files["sessions/s-1/runs.json"])
    bad.write_bytes(pack(files))
    fp = key_fingerprint(load_key(exported.key_path))
    assert cli.run(["evidence", "verify", str(good), "--key-fingerprint", fp.upper()]) == 0
    assert f"signed by key {fp}" in capsys.readouterr().out
    assert cli.run(["evidence", "verify", str(bad)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("reason: digest_mismatch\n") and "sessions/s-1/runs.json" in out
    assert cli.run(["evidence", "verify", str(bad), "--format", "json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert (result["ok"], result["reason"]) == (False, "digest_mismatch")
    assert cli.run(["evidence", "verify", str(good), "--key-fingerprint", "abc"]) == 2
    assert "--key-fingerprint: expected 64 hex digits" in capsys.readouterr().err


def test_keys_create_writes_a_private_key_and_refuses_to_overwrite_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_path = tmp_path / "keys" / "evidence.pem"
    config = tmp_path / "verifier.toml"
    config.write_text('[evidence]\nsigning_key = "keys/evidence.pem"\n', encoding="utf-8")
    assert cli.run(["keys", "create", "--config", str(config), "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["path"] == str(key_path)  # relative to the configuration's folder
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600
    key = load_key(key_path)
    raw = key.public_key().public_bytes_raw()
    assert printed["fingerprint"] == hashlib.sha256(raw).hexdigest() == key_fingerprint(key)
    before = key_path.read_bytes()
    assert cli.run(["keys", "create", "--config", str(config)]) == 2
    assert "exists already; pass --force" in capsys.readouterr().err
    assert key_path.read_bytes() == before
    assert cli.run(["keys", "create", "--config", str(config), "--force"]) == 0
    assert key_path.read_bytes() != before
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600
    assert key_fingerprint(load_key(key_path)) in capsys.readouterr().out


def test_keys_create_makes_its_folders_0700_whatever_the_umask(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "verifier.toml"
    config.write_text('[evidence]\nsigning_key = "a/b/keys/evidence.pem"\n', encoding="utf-8")
    old = os.umask(0o022)
    try:
        assert cli.run(["keys", "create", "--config", str(config)]) == 0
    finally:
        os.umask(old)
    for made in ("a", "a/b", "a/b/keys"):
        assert stat.S_IMODE(os.stat(tmp_path / made).st_mode) == 0o700, made
    assert stat.S_IMODE(os.stat(tmp_path / "a/b/keys/evidence.pem").st_mode) == 0o600


def test_keys_create_leaves_an_existing_folder_alone(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o755)
    evidence.create_key(folder / "evidence.pem")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(folder / "evidence.pem").st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o1777])
def test_keys_create_refuses_a_folder_others_may_write_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: int
) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(mode)
    config = tmp_path / "verifier.toml"
    config.write_text('[evidence]\nsigning_key = "open/evidence.pem"\n', encoding="utf-8")
    assert cli.run(["keys", "create", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "evidence.signing_key: the folder" in err and f"(mode {mode:04o})" in err
    assert "writable by its group or others" in err
    assert list(folder.iterdir()) == []


def test_export_without_a_key_says_how_to_make_one(
    config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "verifier.toml"
    text = config_file.read_text(encoding="utf-8").split("[evidence]")[0]
    config.write_text(text + f'[evidence]\nsigning_key = "{tmp_path / "none.pem"}"\n')
    code = cli.run(
        ["evidence", "export", "--session", "s-1", "--out", str(tmp_path / "x"),
         "--config", str(config)]
    )  # fmt: skip
    assert code == 2
    assert "does not exist; create it with `verifier keys create`" in capsys.readouterr().err


def test_a_key_readable_by_others_is_refused(exported: Exported, tmp_path: Path) -> None:
    open_key = tmp_path / "open.pem"
    open_key.write_bytes(exported.key_path.read_bytes())
    open_key.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        load_key(open_key)


# -- the command layer ---------------------------------------------------------------------


def test_export_file_writes_the_bundle_signed_with_the_configured_key(
    exported: Exported, tmp_path: Path
) -> None:
    written = evidence.export_file(exported.config, BundleSelection(("s-1",)), tmp_path / "b.tar")
    data = (tmp_path / "b.tar").read_bytes()
    assert written.to_dict() == {
        "out": str(tmp_path / "b.tar"),
        "sessions": ["s-1"],
        "files": written.files,
        "bytes": len(data),
        "key_fingerprint": key_fingerprint(load_key(exported.key_path)),
    }
    assert data[:2] != b"\x1f\x8b" and len(verify_bundle(data).sessions) == 1


def test_export_file_of_no_store_is_not_found(exported: Exported, tmp_path: Path) -> None:
    config = dataclasses.replace(
        exported.config, database_url=f"sqlite:///{tmp_path / 'none.sqlite3'}"
    )
    with pytest.raises(NotFound, match="nothing to export: no store at"):
        evidence.export_file(config, BundleSelection(("s-1",)), tmp_path / "b.tgz")
    assert not (tmp_path / "b.tgz").exists()


def test_verify_file_answers_with_what_verified_or_the_first_reason(
    bundle: bytes, exported: Exported, tmp_path: Path
) -> None:
    good, bad = tmp_path / "good.tgz", tmp_path / "bad.tgz"
    good.write_bytes(bundle)
    bad.write_bytes(b"not an archive")
    fp = key_fingerprint(load_key(exported.key_path))
    checked = evidence.verify_file(good, fp)
    assert checked.exit_code == 0 and checked.verified is not None
    assert checked.verified.key_fingerprint == fp
    refused = evidence.verify_file(bad)
    assert (refused.exit_code, refused.verified, refused.reason) == (1, None, "archive_truncated")
    assert evidence.verify_file(good, "0" * 64).reason == "key_mismatch"
    with pytest.raises(ConfigError, match="64 hex digits"):
        evidence.verify_file(good, "abc")
    with pytest.raises(ConfigError, match="cannot read"):
        evidence.verify_file(tmp_path / "absent.tgz")


def test_create_signing_key_writes_the_configured_key(exported: Exported, tmp_path: Path) -> None:
    key_path = tmp_path / "k" / "signing.pem"
    config = dataclasses.replace(exported.config, evidence=EvidenceConfig(signing_key=key_path))
    path, fingerprint = evidence.create_signing_key(config)
    assert path == key_path and fingerprint == key_fingerprint(load_key(key_path))
    with pytest.raises(ConfigError, match="exists already"):
        evidence.create_signing_key(config)
    assert evidence.create_signing_key(config, force=True)[1] != fingerprint


def _statement(data: bytes) -> dict[str, object]:
    payload = base64.b64decode(json.loads(data)["payload"])
    result: dict[str, object] = json.loads(payload)
    return result


assert SESSIONS == ("s-1", "s-2", "s-3")
