"""The gemini-cli hook run as gemini-cli runs it, a process per event (JSON on stdin), on a
real repository, with a transcript in gemini-cli 0.61's format written beside it. The runs
with the real gemini-cli are in tests/e2e/test_geminicli_hooks.py."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.geminicli.release import AGENT_NAME
from audit.jcs import jcs_sha256
from audit.signing import verify_signature
from audit.trailfile import check_trail_file
from audit.witness import verify_receipt
from tests.support.api import serve
from tests.support.gitrepo import GitRepo
from tests.support.trust import ed25519_pem, evidence_key, public_b64
from verifier.app import geminicli_hooks as hooks
from verifier.app.evidence import load_key
from verifier.app.pipeline import verify_session
from verifier.config import AgentConfig, Config, EvidenceConfig, RepositoryConfig
from verifier.findings import DeliveryStatus
from verifier.service.api import create_app
from verifier.store import Store
from verifier.store.tokens import create_token

HOOK = [sys.executable, "-I", "-m", "audit.geminicli.hook"]
SID = "0b4a1c2e-5d6f-4a7b-8c9d-0e1f2a3b4c5d"


def hook(
    cwd: Path, event: dict[str, Any] | bytes, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    data = event if isinstance(event, bytes) else json.dumps(event).encode()
    return subprocess.run(
        HOOK, input=data, cwd=cwd, env=env, capture_output=True, timeout=60, check=False
    )


class Session:
    """One session's events and its transcript, written as gemini-cli would."""

    def __init__(
        self, repo: GitRepo, tmp: Path, env: dict[str, str] | None = None, sid: str = SID
    ) -> None:
        self.repo = repo
        self.env = env
        self.sid = sid
        self.transcript = tmp / "chats" / f"session-{sid}.jsonl"
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        header = {"sessionId": sid, "projectHash": "0" * 64, "startTime": "2026-12-03T10:00:00Z"}
        self.transcript.write_text(json.dumps(header) + "\n")
        self.folder = repo.path / ".git" / "verifier" / sid

    def event(self, name: str, **fields: Any) -> subprocess.CompletedProcess[bytes]:
        done = hook(
            self.repo.path,
            {
                "session_id": self.sid,
                "transcript_path": str(self.transcript),
                "cwd": str(self.repo.path),
                "hook_event_name": name,
                "timestamp": "2026-12-03T10:00:00.000Z",
                **fields,
            },
            self.env,
        )
        assert (done.returncode, done.stdout) == (0, b"{}\n"), done
        return done

    def record(self, **message: Any) -> None:
        with self.transcript.open("a") as fh:
            fh.write(json.dumps(message) + "\n")

    def model_calls(self, n: int, *calls: tuple[str, str, dict[str, Any], str]) -> None:
        """A model turn of `calls` (id, name, args, output), as recorded once they ran."""
        self.record(
            id=f"m{n}",
            type="gemini",
            content="",
            model="gemini-2.5-pro",
            tokens={"input": 100, "output": 10, "thoughts": 5, "cached": 20},
            toolCalls=[
                {
                    "id": cid,
                    "name": name,
                    "args": args,
                    "status": "success",
                    "result": [
                        {"functionResponse": {"id": cid, "name": name, "response": {"output": out}}}
                    ],
                }
                for cid, name, args, out in calls
            ],
        )

    def entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.folder / "trail.jsonl").read_text().splitlines()]

    def report(self) -> dict[str, Any]:
        return json.loads((self.folder / "report.json").read_bytes())


def test_what_is_not_an_event_is_answered_empty_and_never_fails_gemini_cli(
    repo: GitRepo, tmp_path: Path
) -> None:
    for data, problem in (
        (b"not json", b"Expecting value"),
        (b"[]", b"expected an object"),
        (
            json.dumps({"hook_event_name": "BeforeTool", "session_id": "a/b", "cwd": "."}).encode(),
            b"session_id",
        ),
    ):
        done = hook(repo.path, data)
        assert (done.returncode, done.stdout) == (0, b"{}\n")
        assert problem in done.stderr
    outside = hook(
        tmp_path,
        {"hook_event_name": "SessionStart", "session_id": "s1", "cwd": str(tmp_path)},
    )
    assert outside.returncode == 0 and b"in no git repository" in outside.stderr


def test_a_session_of_edits_and_a_refused_call_is_recorded_with_the_transcripts_ids(
    repo: GitRepo, tmp_path: Path
) -> None:
    s = Session(repo, tmp_path)
    s.event("SessionStart", source="startup")
    s.record(id="u1", type="user", content=[{"text": "Fix subtract."}])
    s.event("BeforeModel")
    args = {
        "file_path": str(repo.path / "calc.py"),
        "content": "def subtract(a, b):\n    return a - b\n",
    }
    s.event("BeforeTool", tool_name="write_file", tool_input=args)
    (repo.path / "calc.py").write_text(args["content"])
    s.event(
        "AfterTool", tool_name="write_file", tool_input=args, tool_response={"llmContent": "ok"}
    )
    outside = {"file_path": "/etc/passwd", "content": "x"}
    s.model_calls(1, ("w1", "write_file", args, "ok"), ("w2", "write_file", outside, "refused"))
    s.event("BeforeModel")
    s.record(
        id="m2",
        type="gemini",
        content="Done.",
        model="gemini-2.5-pro",
        tokens={"input": 50, "output": 3},
    )
    s.event("AfterAgent", prompt="Fix subtract.", prompt_response="Done.")
    s.event("SessionEnd", reason="exit")  # after AfterAgent: done, the session ends here

    entries = s.entries()
    assert [e["kind"] for e in entries] == [
        "session_start",
        "tool_call",
        "tool_call",
        "session_end",
    ]
    first, second = entries[1], entries[2]
    assert (first["call_id"], first["decision"]) == ("w1", "allow")
    assert first["args_sha256"] == jcs_sha256(args)
    assert first["result_sha256"] == jcs_sha256({"output": "ok"})
    assert [e["path"] for e in first["effects"]] == ["calc.py"]
    assert (
        first["effects"][0]["sha256_after"] == hashlib.sha256(args["content"].encode()).hexdigest()
    )
    assert (second["call_id"], second["decision"], second["effects"]) == ("w2", "refused", [])
    assert entries[-1]["status"] == "done"
    assert check_trail_file(s.folder / "trail.jsonl").status == "intact"

    report = s.report()
    assert report["status"] == "done" and report["final_text"] == "Done."
    assert report["agent"] == {
        "name": "gemini-cli",
        "model": "gemini-2.5-pro",
        "tool_profile": "gemini-cli-0.61-legacy",
    }
    assert report["repo"]["name"] == "calc" and report["repo"]["head_commit"] is None
    assert report["audit"]["entries"] == entries
    assert [c["path"] for c in report["changes"]] == ["calc.py"]
    assert report["usage"] == {
        "turns": 2,
        "tool_calls": 2,
        "prompt_tokens": 150,
        "output_tokens": 18,
        "thoughts_tokens": 5,
        "cached_tokens": 20,
    }
    assert (s.folder / "transcript.jsonl").read_bytes() == s.transcript.read_bytes()
    assert repo.git("status", "--porcelain") == "M calc.py"  # nothing of ours in the work tree


def test_a_shell_call_gets_the_whole_trees_changes_and_a_read_only_tool_none(
    repo: GitRepo, tmp_path: Path
) -> None:
    s = Session(repo, tmp_path)
    s.event("SessionStart", source="startup")
    shell = {"command": "touch new.txt && rm pytest.ini"}
    read = {"file_path": str(repo.path / "calc.py")}
    s.event("BeforeTool", tool_name="read_file", tool_input=read)
    s.event("BeforeTool", tool_name="run_shell_command", tool_input=shell)
    (repo.path / "new.txt").write_text("")
    (repo.path / "pytest.ini").unlink()
    # Out of order, as parallel calls finish.
    s.event("AfterTool", tool_name="run_shell_command", tool_input=shell, tool_response={})
    s.event("AfterTool", tool_name="read_file", tool_input=read, tool_response={})
    s.model_calls(1, ("r1", "read_file", read, "..."), ("c1", "run_shell_command", shell, "ok"))
    s.event("SessionEnd", reason="exit")  # no AfterAgent: the model never answered

    calls = {e["call_id"]: e for e in s.entries() if e["kind"] == "tool_call"}
    assert calls["r1"]["effects"] == []
    assert [(e["path"], e["sha256_after"] is None) for e in calls["c1"]["effects"]] == [
        ("new.txt", False),
        ("pytest.ini", True),
    ]
    report = s.report()
    assert report["status"] == "error"
    assert report["extensions"]["gemini_cli"]["end"] == "session_end:exit"


def test_the_reports_repository_name_is_the_one_install_wrote(
    repo: GitRepo, tmp_path: Path
) -> None:
    (repo.path / ".git" / "verifier").mkdir()
    (repo.path / ".git" / "verifier" / "hook.json").write_text('{"v": 1, "repo_name": "calc-main"}')
    s = Session(repo, tmp_path)
    s.event("SessionStart", source="startup")
    s.event("AfterAgent", prompt="x", prompt_response="")
    s.event("SessionEnd", reason="exit")
    assert s.report()["repo"]["name"] == "calc-main"


def test_an_audit_package_in_the_repository_cannot_stand_in_for_the_hook(
    repo: GitRepo, tmp_path: Path
) -> None:
    repo.write({"audit/__init__.py": "raise SystemExit('the repository ran instead')\n"})
    s = Session(repo, tmp_path)
    done = s.event("SessionStart", source="startup")
    assert b"the repository ran instead" not in done.stderr
    assert [e["kind"] for e in s.entries()] == ["session_start"]


# -- with a server: the witness, the signature, the post (install --server --key) --------

TOKEN_ENV = "GEMINI_CLI_VERIFIER_TOKEN"


def _harness_key(tmp_path: Path) -> tuple[Path, Ed25519PrivateKey]:
    path = tmp_path / "gemini-cli.pem"
    return path, ed25519_pem(path)


def _server_config(repo: GitRepo, db_url: str, tmp_path: Path, key: Ed25519PrivateKey) -> Config:
    quick = (sys.executable, "-c", "pass")
    calc = RepositoryConfig("calc", path=repo.path, test_command=quick, results="exit-code")
    agent = AgentConfig(
        AGENT_NAME, public_keys=(f"ed25519:{public_b64(key)}",), require_witness=True
    )
    return Config(
        database_url=db_url,
        repositories={"calc": calc},
        evidence=EvidenceConfig(signing_key=evidence_key(tmp_path)),
        agents={AGENT_NAME: agent},
    )


def _service(
    repo: GitRepo, db_url: str, tmp_path: Path
) -> tuple[Config, str, Path, Ed25519PrivateKey]:
    """The service's configuration (gemini-cli's key required, and a witnessed trail), an
    ingest token bound to the agent, and the harness's key (its file and itself)."""
    key_path, key = _harness_key(tmp_path)
    with Store.open(db_url) as store:
        token = create_token(store, name="gemini", scope="ingest", actor="t", agent=AGENT_NAME)[1]
    return _server_config(repo, db_url, tmp_path, key), token, key_path, key


def _edit_session(s: Session) -> None:
    """A session of one write_file call, then done, its events as gemini-cli sends them."""
    s.event("SessionStart", source="startup")
    s.record(id="u1", type="user", content=[{"text": "Fix subtract."}])
    s.event("BeforeModel")
    text = (s.repo.path / "calc.py").read_text().replace("return a + b\n", "return a - b\n")
    args = {"file_path": "calc.py", "content": text}
    s.event("BeforeTool", tool_name="write_file", tool_input=args)
    (s.repo.path / "calc.py").write_text(text)
    s.event("AfterTool", tool_name="write_file", tool_input=args, tool_response={})
    s.model_calls(1, ("w1", "write_file", args, "ok"))
    s.event("BeforeModel")
    s.record(id="m2", type="gemini", content="Done.", model="gemini-2.5-pro", tokens={})
    s.event("AfterAgent", prompt="Fix subtract.", prompt_response="Done.")
    s.event("SessionEnd", reason="exit")


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_with_a_server_each_entry_is_witnessed_and_the_signed_report_posted_and_delivered(
    repo: GitRepo, tmp_path: Path, db_url: str
) -> None:
    config, token, key_path, key = _service(repo, db_url, tmp_path)
    with serve(create_app(config)) as url:
        hooks.install(repo.path, server=url, token_env=TOKEN_ENV, signing_key=key_path)
        settings = (repo.path / ".git" / "verifier" / "hook.json").read_text()
        assert token not in settings and TOKEN_ENV in settings
        s = Session(repo, tmp_path, env={**os.environ, TOKEN_ENV: token})
        _edit_session(s)
    report = s.report()
    n = report["audit"]["count"]
    assert report["extensions"]["recorder"]["witness"] == {
        "failures": 0,
        "first_failure": None,
        "acknowledged": n,
    }
    verify_signature(report, key.public_key())
    # One receipt per entry, as the service signed it, the last naming the trail's head.
    public = load_key(config.evidence.signing_key).public_key()
    lines = (s.folder / "receipts.jsonl").read_text().splitlines()
    receipts = [verify_receipt(json.loads(line), public) for line in lines]
    assert [r.count for r in receipts] == list(range(1, n + 1))
    assert receipts[-1].head_hash == report["audit"]["head"]
    upload = json.loads((s.folder / "upload.json").read_text())
    assert upload == {"url": url, "posted": True, "status": 202, "created": True}
    with Store.open(db_url) as store:
        verdict = verify_session(store, SID, config, reason="ingest").verification
    assert verdict.delivery_status is DeliveryStatus.DELIVERED, [
        (c.name, c.status, c.findings) for c in verdict.checks.values()
    ]
    details = verdict.checks["audit"].details
    assert details["witness"]["entries"] == f"{n} of {n}"
    assert details["signature"]["state"] == "verified"


def test_the_server_out_of_reach_is_counted_and_the_signed_report_still_written(
    repo: GitRepo, tmp_path: Path
) -> None:
    key_path, key = _harness_key(tmp_path)
    down = _closed_port()
    env = {**os.environ, TOKEN_ENV: "vrf_" + "x" * 43}
    hooks.install(repo.path, server=down, token_env=TOKEN_ENV, signing_key=key_path)
    s = Session(repo, tmp_path, env=env)
    started = time.monotonic()
    _edit_session(s)
    report = s.report()
    n = report["audit"]["count"]
    witness = report["extensions"]["recorder"]["witness"]
    assert (witness["failures"], witness["acknowledged"]) == (n, 0)
    assert witness["first_failure"].startswith("entry 0: gave up after 2 attempt(s): cannot reach")
    verify_signature(report, key.public_key())
    upload = json.loads((s.folder / "upload.json").read_text())
    assert upload["posted"] is False and "cannot reach" in upload["problem"]
    assert not (s.folder / "receipts.jsonl").exists()
    assert time.monotonic() - started < 60  # refused at once: no event waits for long


def test_a_token_variable_unset_when_the_hook_runs_is_a_witness_failure_caught_up_later(
    repo: GitRepo, tmp_path: Path, db_url: str
) -> None:
    config, token, key_path, _ = _service(repo, db_url, tmp_path)
    unset = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    with serve(create_app(config)) as url:
        hooks.install(repo.path, server=url, token_env=TOKEN_ENV, signing_key=key_path)
        # Never set: nothing witnessed, nothing posted, the report written all the same.
        never = Session(repo, tmp_path, env=unset, sid="s-never")
        never.event("SessionStart", source="startup")
        never.event("SessionEnd", reason="exit")
        witness = never.report()["extensions"]["recorder"]["witness"]
        assert (witness["failures"], witness["acknowledged"]) == (2, 0)
        assert witness["first_failure"] == (
            f"entry 0: ${TOKEN_ENV} (the ingest token) is not set in the hook's environment"
        )
        upload = json.loads((never.folder / "upload.json").read_text())
        assert upload["posted"] is False and TOKEN_ENV in upload["problem"]

        # Unset at the start only: the next entry written posts the backlog first, in order.
        late = Session(repo, tmp_path, env=unset, sid="s-late")
        late.event("SessionStart", source="startup")
        late.env = {**unset, TOKEN_ENV: token}
        late.record(id="u1", type="user", content=[{"text": "Nothing to do."}])
        late.event("BeforeModel")
        late.record(id="m1", type="gemini", content="Done.", model="gemini-2.5-pro", tokens={})
        late.event("AfterAgent", prompt="Nothing to do.", prompt_response="Done.")
        late.event("SessionEnd", reason="exit")
        report = late.report()
    witness = report["extensions"]["recorder"]["witness"]
    assert (witness["failures"], witness["acknowledged"]) == (1, 2)
    upload = json.loads((late.folder / "upload.json").read_text())
    assert upload["posted"] is True, upload
    with Store.open(db_url) as store:
        verdict = verify_session(store, "s-late", config, reason="ingest").verification
    assert verdict.checks["audit"].details["witness"]["entries"] == "2 of 2"


def test_a_key_gone_when_the_session_ends_leaves_the_report_unsigned_saying_why(
    repo: GitRepo, tmp_path: Path
) -> None:
    key_path, _ = _harness_key(tmp_path)
    hooks.install(repo.path, signing_key=key_path)
    key_path.unlink()
    s = Session(repo, tmp_path)
    s.event("SessionStart", source="startup")
    s.event("AfterAgent", prompt="x", prompt_response="")
    s.event("SessionEnd", reason="exit")
    report = s.report()
    assert "signature" not in report
    assert report["extensions"]["gemini_cli"]["unsigned"].endswith(
        "gemini-cli.pem: cannot be read (No such file or directory)"
    )
    assert "recorder" not in report["extensions"]  # no server: nothing witnessed, nothing said
    assert not (s.folder / "upload.json").exists()


def test_a_session_of_two_prompts_is_recorded_through_to_its_end(
    repo: GitRepo, tmp_path: Path
) -> None:
    s = Session(repo, tmp_path)
    s.event("SessionStart", source="startup")
    for n, name in enumerate(("a.txt", "b.txt"), 1):
        s.event("BeforeAgent", prompt=f"write {name}")
        s.record(id=f"u{n}", type="user", content=[{"text": f"write {name}"}])
        s.event("BeforeModel")
        args = {"file_path": name, "content": f"{n}\n"}
        s.event("BeforeTool", tool_name="write_file", tool_input=args)
        (repo.path / name).write_text(f"{n}\n")
        s.event("AfterTool", tool_name="write_file", tool_input=args, tool_response={})
        s.model_calls(n * 10, (f"w{n}", "write_file", args, "ok"))
        s.event("BeforeModel")
        s.record(id=f"m{n}", type="gemini", content="Done.", model="gemini-2.5-pro", tokens={})
        s.event("AfterAgent", prompt=f"write {name}", prompt_response="Done.")
        assert not (s.folder / "report.json").exists()  # another prompt may come
    s.event("SessionEnd", reason="exit")
    entries = s.entries()
    assert [(e["kind"], e.get("call_id")) for e in entries] == [
        ("session_start", None),
        ("tool_call", "w1"),
        ("tool_call", "w2"),
        ("session_end", None),
    ]
    report = s.report()
    assert report["status"] == "done"
    assert [c["path"] for c in report["changes"]] == ["a.txt", "b.txt"]
    users = [c for c in report["trajectory"]["contents"] if c["role"] == "user"]
    assert [p["text"] for c in users for p in c["parts"] if "text" in p] == [
        "write a.txt",
        "write b.txt",
    ]
    assert check_trail_file(s.folder / "trail.jsonl").status == "intact"


def test_a_prompt_left_unanswered_when_the_session_ends_is_not_done(
    repo: GitRepo, tmp_path: Path
) -> None:
    s = Session(repo, tmp_path)
    s.event("SessionStart", source="startup")
    s.event("BeforeAgent", prompt="one")
    s.event("AfterAgent", prompt="one", prompt_response="Done.")
    s.event("BeforeAgent", prompt="two")  # cut: no AfterAgent
    s.event("SessionEnd", reason="prompt_input_exit")
    assert s.report()["status"] == "cancelled"


def test_one_session_end_of_the_process_ends_every_session_it_ran_as_in_acp_mode(
    repo: GitRepo, tmp_path: Path
) -> None:
    # Both sessions' events come from this process, as an ACP gemini-cli's would.
    answered, cut = Session(repo, tmp_path, sid="s-a"), Session(repo, tmp_path, sid="s-b")
    for s in (answered, cut):
        s.event("BeforeAgent", prompt="go")
    answered.event("AfterAgent", prompt="go", prompt_response="Done.")
    own = Session(repo, tmp_path, sid="s-process")  # never seen before its end
    own.event("SessionEnd", reason="exit")
    assert not own.folder.exists()
    assert answered.report()["status"] == "done"
    assert cut.report()["status"] == "error"
    for s in (answered, cut):
        assert s.report()["extensions"]["gemini_cli"]["end"] == "session_end:exit"
        assert check_trail_file(s.folder / "trail.jsonl").status == "intact"


def test_an_hmac_secret_from_the_hooks_environment_signs_the_report_and_its_absence_is_said(
    repo: GitRepo, tmp_path: Path
) -> None:
    hooks.install(repo.path, hmac_env="GEMINI_CLI_VERIFIER_HMAC", key_id="h-1")
    assert "s3cret" not in (repo.path / ".git" / "verifier" / "hook.json").read_text()
    signed = Session(repo, tmp_path, env={**os.environ, "GEMINI_CLI_VERIFIER_HMAC": "s3cret"})
    signed.event("SessionStart", source="startup")
    signed.event("SessionEnd", reason="exit")
    report = signed.report()
    verify_signature(report, b"s3cret")
    assert (report["signature"]["alg"], report["signature"]["key_id"]) == ("hmac-sha256", "h-1")
    unset = {k: v for k, v in os.environ.items() if k != "GEMINI_CLI_VERIFIER_HMAC"}
    bare = Session(repo, tmp_path, env=unset, sid="s-2")
    bare.event("SessionStart", source="startup")
    bare.event("SessionEnd", reason="exit")
    report = bare.report()
    assert "signature" not in report
    assert report["extensions"]["gemini_cli"]["unsigned"] == (
        "$GEMINI_CLI_VERIFIER_HMAC (the HMAC secret) is not set in the hook's environment"
    )
